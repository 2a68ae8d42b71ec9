package prims_test

import (
	"math/rand/v2"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// TestKernels compares the fast sums with a plain loop on random data of
// awkward lengths; integers must wrap the same way.
func TestKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	t.Run("uint8", func(t *testing.T) { kernelCase(t, rng, func() uint8 { return uint8(rng.Uint32()) }) })
	t.Run("float32", func(t *testing.T) { kernelCase(t, rng, func() float32 { return float32(rng.IntN(2000) - 1000) }) })
	t.Run("float64", func(t *testing.T) { kernelCase(t, rng, func() float64 { return rng.NormFloat64() }) })
	t.Run("int64", func(t *testing.T) { kernelCase(t, rng, func() int64 { return int64(rng.Uint64()) }) })
}

func kernelCase[T spmd.Number](t *testing.T, rng *rand.Rand, gen func() T) {
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 1001} {
		dst, src := make([]T, n), make([]T, n+3) // src may be longer
		for i := range dst {
			dst[i] = gen()
		}
		for i := range src {
			src[i] = gen()
		}
		want := append([]T(nil), dst...)
		loopSum[T]().Reduce(want, src)
		prims.Sum[T]().Reduce(dst, src)
		if err := expect("sum", dst, n, func(i int) T { return want[i] }); err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
	}
}
