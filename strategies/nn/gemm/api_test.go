package gemm

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/gonum"
)

// TestBlas32 runs a product through blas32.Gemm with Implementation in
// use, and checks it against gonum's own.
func TestBlas32(t *testing.T) {
	prev := blas32.Implementation()
	blas32.Use(Implementation{})
	defer blas32.Use(prev)

	rng := rand.New(rand.NewPCG(3, 4))
	m, n, k := 37, 50, 29
	a := blas32.General{Rows: k, Cols: m, Stride: m + 2, Data: random(rng, k*(m+2))}
	b := blas32.General{Rows: k, Cols: n, Stride: n, Data: random(rng, k*n)}
	c := blas32.General{Rows: m, Cols: n, Stride: n + 1, Data: random(rng, m*(n+1))}
	want := append([]float32(nil), c.Data...)
	blas32.Gemm(blas.Trans, blas.NoTrans, 1.5, a, b, 0.5, c)
	gonum.Implementation{}.Sgemm(blas.Trans, blas.NoTrans, m, n, k, 1.5, a.Data, a.Stride, b.Data, b.Stride, 0.5, want, c.Stride)
	for i, v := range c.Data {
		if d := v - want[i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("blas32.Gemm: C's element %d = %g, gonum's %g", i, v, want[i])
		}
	}
}

// TestConcurrent runs products from many goroutines at once, each into
// its own C, as the race detector watches the shared scratch pool.
func TestConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 4 {
				tr := []blas.Transpose{blas.NoTrans, blas.Trans}
				check(t, product{tA: tr[g%2], tB: tr[i%2], m: 20 + g, n: 30 + 7*i, k: 50 + g*i, alpha: 1, beta: 0.5}, Sgemm)
			}
		})
	}
	wg.Wait()
}

// TestAllocateNothing checks that steady calls take their scratch from
// the pool. make test runs it again without the race detector.
func TestAllocateNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop scratches; make test runs this without it")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	m, n, k := 64, 100, 300
	a, b, c := random(rng, m*k), random(rng, k*n), make([]float32, m*n)
	Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n)
	allocs := testing.AllocsPerRun(20, func() {
		Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n)
	})
	if allocs != 0 {
		t.Errorf("Sgemm allocates %.1f times a call, want 0", allocs)
	}
}

// TestPanics checks that bad arguments panic as gonum's Sgemm does: the
// same message, or no panic where gonum has none.
func TestPanics(t *testing.T) {
	s := make([]float32, 100)
	tests := []struct {
		name          string
		tA, tB        blas.Transpose
		m, n, k       int
		lda, ldb, ldc int
		la, lb, lc    int
	}{
		{"ok", 'N', 'N', 3, 4, 5, 5, 4, 4, 15, 20, 12},
		{"bad tA", 'X', 'N', 3, 4, 5, 5, 4, 4, 15, 20, 12},
		{"bad tB", 'N', 0, 3, 4, 5, 5, 4, 4, 15, 20, 12},
		{"m<0", 'N', 'N', -1, 4, 5, 5, 4, 4, 15, 20, 12},
		{"n<0", 'N', 'N', 3, -1, 5, 5, 4, 4, 15, 20, 12},
		{"k<0", 'N', 'N', 3, 4, -1, 5, 4, 4, 15, 20, 12},
		{"lda", 'N', 'N', 3, 4, 5, 4, 4, 4, 15, 20, 12},
		{"lda trans", 'T', 'N', 3, 4, 5, 2, 4, 4, 15, 20, 12},
		{"ldb", 'N', 'N', 3, 4, 5, 5, 3, 4, 15, 20, 12},
		{"ldb trans", 'N', 'T', 3, 4, 5, 5, 4, 4, 15, 20, 12},
		{"ldc", 'N', 'N', 3, 4, 5, 5, 4, 3, 15, 20, 12},
		{"short a", 'N', 'N', 3, 4, 5, 5, 4, 4, 14, 20, 12},
		{"short a trans", 'T', 'N', 3, 4, 5, 3, 4, 4, 14, 20, 12},
		{"short b", 'N', 'N', 3, 4, 5, 5, 4, 4, 15, 19, 12},
		{"short b trans", 'N', 'C', 3, 4, 5, 5, 5, 4, 15, 19, 12},
		{"short c", 'N', 'N', 3, 4, 5, 5, 4, 4, 15, 20, 11},
		{"short c, m 0", 'N', 'N', 0, 4, 5, 5, 4, 4, 15, 20, 0},
		{"k 0, empty a", 'N', 'N', 3, 4, 0, 1, 4, 4, 0, 0, 12},
		{"k 0, trans", 'T', 'T', 3, 4, 0, 3, 1, 4, 0, 0, 12},
		{"ld too big for a", 'N', 'N', 2, 2, 2, 50, 2, 2, 51, 4, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := func(f func(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)) (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				f(tt.tA, tt.tB, tt.m, tt.n, tt.k, 1, s[:tt.la], tt.lda, s[:tt.lb], tt.ldb, 0, make([]float32, tt.lc), tt.ldc)
				return ""
			}
			if got, want := call(Sgemm), call(gonum.Implementation{}.Sgemm); got != want {
				t.Errorf("Sgemm panics with %q, gonum's with %q", got, want)
			}
		})
	}
}
