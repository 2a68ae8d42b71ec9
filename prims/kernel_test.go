package prims_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// TestKernels compares the fast sums, products, maxima and minima with
// plain loops on random data of awkward lengths (around the vector
// kernels' 128-byte rounds) and alignments; integers must wrap the same
// way, and float results must be the same bits, infinities, NaNs and
// signed zeros included.
func TestKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	special32 := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), float32(math.Copysign(0, -1)), 0, math.MaxFloat32}
	special64 := []float64{math.Inf(1), math.Inf(-1), math.NaN(), math.Copysign(0, -1), 0, math.MaxFloat64}
	t.Run("uint8", func(t *testing.T) { kernelCase(t, rng, func() uint8 { return uint8(rng.Uint32()) }) })
	t.Run("int32", func(t *testing.T) { kernelCase(t, rng, func() int32 { return int32(rng.Uint32()) }) })
	t.Run("int64", func(t *testing.T) { kernelCase(t, rng, func() int64 { return int64(rng.Uint64()) }) })
	t.Run("float32", func(t *testing.T) {
		kernelCase(t, rng, func() float32 {
			if rng.IntN(50) == 0 {
				return special32[rng.IntN(len(special32))]
			}
			return float32(rng.NormFloat64() * 1000)
		})
	})
	t.Run("float64", func(t *testing.T) {
		kernelCase(t, rng, func() float64 {
			if rng.IntN(50) == 0 {
				return special64[rng.IntN(len(special64))]
			}
			return rng.NormFloat64()
		})
	})
}

func kernelCase[T spmd.Number](t *testing.T, rng *rand.Rand, gen func() T) {
	lengths := []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1001, 4099}
	for _, c := range []struct {
		op   prims.Op[T]
		want func(d, s T) T
	}{
		{prims.Sum[T](), func(d, s T) T { return d + s }},
		{prims.Prod[T](), func(d, s T) T { return d * s }},
		{prims.Max[T](), func(d, s T) T {
			if s > d || s != s { // NaN wins, from either side
				return s
			}
			return d
		}},
		{prims.Min[T](), func(d, s T) T {
			if s < d || s != s {
				return s
			}
			return d
		}},
	} {
		for _, n := range lengths {
			for _, off := range [][2]int{{0, 0}, {1, 0}, {0, 3}, {5, 2}} {
				dst := make([]T, n+off[0])[off[0]:]
				src := make([]T, n+off[1]+3)[off[1]:] // src may be longer
				for i := range dst {
					dst[i] = gen()
				}
				for i := range src {
					src[i] = gen()
				}
				want := make([]T, n)
				for i := range want {
					want[i] = c.want(dst[i], src[i])
				}
				c.op.Reduce(dst, src)
				for i := range dst {
					if !sameBits(dst[i], want[i]) {
						t.Fatalf("%s, n=%d, offsets %v: element %d is %v, want %v", c.op.Name(), n, off, i, dst[i], want[i])
					}
				}
			}
		}
	}
}

// sameBits compares numbers by their bits: NaN equals the same NaN, and
// -0 differs from 0.
func sameBits[T spmd.Number](a, b T) bool {
	switch x := any(a).(type) {
	case float32:
		return math.Float32bits(x) == math.Float32bits(any(b).(float32))
	case float64:
		return math.Float64bits(x) == math.Float64bits(any(b).(float64))
	}
	return a == b
}
