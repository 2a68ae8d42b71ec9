package prims_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/spmdtest"
	"github.com/gorun-hpc/gorun/spmd/trace"
	"github.com/gorun-hpc/gorun/topo"
)

// BenchmarkAllReduce all-reduces float32 vectors of 8 B, 1 MiB and 16 MiB
// over 4 ranks of net/mem with each algorithm. Bytes per second count one
// rank's vector.
//
//	go test -run '^$' -bench AllReduce -benchmem ./prims
func BenchmarkAllReduce(b *testing.B) {
	for _, algo := range prims.Algos(topo.AllReduce) {
		for _, size := range []int{8, 1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%s", algo, byteSize(size)), func(b *testing.B) {
				benchAllReduce(b, 4, size/4, algo)
			})
		}
	}
}

func byteSize(n int) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// benchAllReduce runs b.N all-reduces of n float32 on p ranks: rank 0
// under the benchmark's clock, the others in step with it.
func benchAllReduce(b *testing.B, p, n int, algo topo.Algo, opts ...func(int) []spmd.Option) {
	ws, _ := spmdtest.Worlds(b, p, opts...)
	defer func() {
		for _, w := range ws {
			w.Close()
		}
	}()
	ctx := context.Background()
	bufs := make([][]float32, p)
	for i := range bufs {
		bufs[i] = make([]float32, n)
	}
	op, opt := prims.Sum[float32](), prims.WithAlgo(algo)
	step := func(r int) error { return prims.AllReduce(ctx, ws[r].Comm, bufs[r], op, opt) }
	all := func(iters int) error {
		var wg sync.WaitGroup
		errs := make([]error, p)
		for r := 1; r < p; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < iters && errs[r] == nil; i++ {
					errs[r] = step(r)
				}
			}()
		}
		for i := 0; i < iters && errs[0] == nil; i++ {
			errs[0] = step(0)
		}
		wg.Wait()
		for r, err := range errs {
			if err != nil {
				return fmt.Errorf("rank %d: %w", r, err)
			}
		}
		return nil
	}
	if err := all(2); err != nil { // warm up: scratch, connections
		b.Fatal(err)
	}
	b.SetBytes(int64(n * 4))
	b.ReportAllocs()
	b.ResetTimer()
	if err := all(b.N); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTraced is the cost of gorun --profile on an 8-byte all-reduce
// over 2 ranks of net/mem, off and on (each call's clock read twice, its
// stack walked, its event encoded and streamed to a file), with topo's
// choice and with an algorithm forced, as collbench does.
//
//	go test -run '^$' -bench Traced -benchmem ./prims
func BenchmarkTraced(b *testing.B) {
	for _, algo := range []topo.Algo{"", topo.Linear} {
		for _, on := range []bool{false, true} {
			name := "auto"
			if algo != "" {
				name = string(algo)
			}
			name += map[bool]string{false: "/off", true: "/on"}[on]
			b.Run(name, func(b *testing.B) {
				var opts []func(int) []spmd.Option
				if on {
					dir := b.TempDir()
					opts = append(opts, func(r int) []spmd.Option {
						rec, err := trace.New(dir, trace.Header{Rank: r, Size: 2})
						if err != nil {
							b.Fatal(err)
						}
						return []spmd.Option{spmd.WithTrace(rec)}
					})
				}
				benchAllReduce(b, 2, 2, algo, opts...)
			})
		}
	}
}

// BenchmarkKernel measures the reduction kernels alone on 1 MiB vectors
// (in cache on most machines) and 64 MiB ones (memory-bound).
//
//	go test -run '^$' -bench Kernel ./prims
func BenchmarkKernel(b *testing.B) {
	for _, size := range []int{1 << 20, 64 << 20} {
		name := byteSize(size)
		b.Run("sum/float32/"+name, func(b *testing.B) { benchKernel(b, prims.Sum[float32](), size) })
		b.Run("sum/float64/"+name, func(b *testing.B) { benchKernel(b, prims.Sum[float64](), size) })
		b.Run("sum/int32/"+name, func(b *testing.B) { benchKernel(b, prims.Sum[int32](), size) })
		b.Run("sum/uint8/"+name, func(b *testing.B) { benchKernel(b, prims.Sum[uint8](), size) })
		b.Run("max/float32/"+name, func(b *testing.B) { benchKernel(b, prims.Max[float32](), size) })
		b.Run("max/int32/"+name, func(b *testing.B) { benchKernel(b, prims.Max[int32](), size) })
		b.Run("prod/float32/"+name, func(b *testing.B) { benchKernel(b, prims.Prod[float32](), size) })
		b.Run("loop/float32/"+name, func(b *testing.B) { benchKernel(b, loopSum[float32](), size) })
	}
}

// loopSum is a plain Go loop, to compare the assembly kernels with.
func loopSum[T spmd.Number]() prims.Op[T] {
	return prims.OpFunc(func(dst, src []T) {
		src = src[:len(dst)]
		for i := range dst {
			dst[i] += src[i]
		}
	})
}

func benchKernel[T spmd.Number](b *testing.B, op prims.Op[T], bytes int) {
	var z T
	n := bytes / int(sizeOfT(z))
	dst, src := make([]T, n), make([]T, n)
	b.SetBytes(int64(bytes))
	b.ReportAllocs()
	for b.Loop() {
		op.Reduce(dst, src)
	}
}

func sizeOfT[T spmd.Number](T) int {
	var z T
	switch any(z).(type) {
	case float64, int64, uint64, int, uint:
		return 8
	case float32, int32, uint32:
		return 4
	case int16, uint16:
		return 2
	}
	return 1
}
