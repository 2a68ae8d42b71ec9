package nn

import (
	"gonum.org/v1/gonum/blas/blas32"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/gorun-hpc/gorun/strategies/nn/gemm"
)

// installFast puts gemm's Sgemm (AVX-512 or AVX2/FMA kernels, a Go one
// elsewhere) behind blas32, unless the program has already chosen an
// implementation other than gonum's own: blas32.Use before the first
// product wins.
func installFast() {
	if _, plain := blas32.Implementation().(gonum.Implementation); plain {
		blas32.Use(gemm.Implementation{})
	}
}
