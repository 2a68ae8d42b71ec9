package nn

import (
	"sync"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/gorun-hpc/gorun/strategies/nn/gemm"
)

// installGEMM puts gemm's fast Sgemm behind blas32 once, unless the
// program has already chosen an implementation other than gonum's own.
var installGEMM sync.Once

// matmul computes C = op(A)·op(B) + beta·C through blas32, where op
// transposes when its flag is set; A's rows and columns are m×k after
// op, B's k×n, C's m×n, all row-major and dense.
func matmul(transA, transB bool, m, n, k int, a, b []float32, beta float32, c []float32) {
	lda, ldb := k, n
	if transA {
		lda = m
	}
	if transB {
		ldb = k
	}
	matmulStrided(transA, transB, m, n, k, a, lda, b, ldb, beta, c, n)
}

// matmulStrided is matmul on row-major blocks with leading dimensions
// (row strides) lda, ldb and ldc: parts of larger matrices.
func matmulStrided(transA, transB bool, m, n, k int, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	installGEMM.Do(installFast)
	// A tensor-parallel rank left with none of a layer's columns or rows
	// multiplies empty matrices: an empty product, or (k = 0) a sum of
	// nothing, which BLAS's checks of the operands' lengths refuse.
	switch {
	case m == 0 || n == 0:
		return
	case k == 0:
		gemm.Scale(m, n, beta, c, ldc)
		return
	}
	ga := blas32.General{Rows: m, Cols: k, Stride: lda, Data: a}
	tA := blas.NoTrans
	if transA {
		ga = blas32.General{Rows: k, Cols: m, Stride: lda, Data: a}
		tA = blas.Trans
	}
	gb := blas32.General{Rows: k, Cols: n, Stride: ldb, Data: b}
	tB := blas.NoTrans
	if transB {
		gb = blas32.General{Rows: n, Cols: k, Stride: ldb, Data: b}
		tB = blas.Trans
	}
	blas32.Gemm(tA, tB, 1, ga, gb, beta, blas32.General{Rows: m, Cols: n, Stride: ldc, Data: c})
}
