package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// benchShapes are the products of a 784-1024-1024-10 MLP at batch 64 (W
// stored in×out, so the forward pass is NN), its backward pass, the
// forward pass with W stored out×in, and small attention shapes.
var benchShapes = []struct {
	name    string
	tA, tB  blas.Transpose
	m, n, k int
}{
	{"fwd_64x1024x784_NN", blas.NoTrans, blas.NoTrans, 64, 1024, 784},
	{"fwd_64x1024x1024_NN", blas.NoTrans, blas.NoTrans, 64, 1024, 1024},
	{"fwd_64x10x1024_NN", blas.NoTrans, blas.NoTrans, 64, 10, 1024},
	{"dW_784x1024x64_TN", blas.Trans, blas.NoTrans, 784, 1024, 64},
	{"dW_1024x1024x64_TN", blas.Trans, blas.NoTrans, 1024, 1024, 64},
	{"dX_64x784x1024_NT", blas.NoTrans, blas.Trans, 64, 784, 1024},
	{"dX_64x1024x1024_NT", blas.NoTrans, blas.Trans, 64, 1024, 1024},
	{"fwdWout_64x1024x784_NT", blas.NoTrans, blas.Trans, 64, 1024, 784},
	{"gpt_256x64x64_NN", blas.NoTrans, blas.NoTrans, 256, 64, 64},
	{"gpt_256x256x64_NT", blas.NoTrans, blas.Trans, 256, 256, 64},
	{"gpt_256x64x256_NN", blas.NoTrans, blas.NoTrans, 256, 64, 256},
	{"gpt_64x64x256_TN", blas.Trans, blas.NoTrans, 64, 64, 256},
}

// BenchmarkSgemm times this package's Sgemm (gemm), its pure-Go kernels
// (gemm-go) and gonum's Sgemm (gonum) at benchShapes,
// in GFLOP/s of wall-clock time and of the process's CPU time
// (cpuGFLOP/s, steadier on a shared machine). gonum's runs blocks on
// several goroutines when GOMAXPROCS allows: compare them on one core
// with -cpu 1, where the two rates agree on an idle machine.
func BenchmarkSgemm(b *testing.B) {
	type impl struct {
		name string
		f    gemmFunc
	}
	on := func(r *arch) impl {
		return impl{"gemm-" + r.name, func(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
			sgemm(r, tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		}}
	}
	// Sgemm itself, then the slower vector archs and the Go kernels.
	impls := []impl{{"gemm", Sgemm}}
	for _, r := range vectorArchs[min(1, len(vectorArchs)):] {
		impls = append(impls, on(r))
	}
	impls = append(impls, on(&goArch), impl{"gonum", gonum.Implementation{}.Sgemm})
	for _, s := range benchShapes {
		for _, impl := range impls {
			b.Run(fmt.Sprintf("%s/%s", s.name, impl.name), func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				x, y, c := random(rng, s.m*s.k), random(rng, s.k*s.n), make([]float32, s.m*s.n)
				lda, ldb := s.k, s.n
				if s.tA != blas.NoTrans {
					lda = s.m
				}
				if s.tB != blas.NoTrans {
					ldb = s.k
				}
				cpu := cpuSeconds()
				for b.Loop() {
					impl.f(s.tA, s.tB, s.m, s.n, s.k, 1, x, lda, y, ldb, 0, c, s.n)
				}
				cpu = cpuSeconds() - cpu
				flops := 2 * float64(s.m) * float64(s.n) * float64(s.k) * float64(b.N)
				b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				if cpu > 0 {
					b.ReportMetric(flops/cpu/1e9, "cpuGFLOP/s")
				}
			})
		}
	}
}
