package gemm

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// Implementation is gonum's pure-Go BLAS with this package's Sgemm in place
// of gonum's; every other routine is gonum's own. Pass it to blas32.Use to
// route gonum's float32 matrix products (blas32.Gemm, mat's float32 users)
// through the packed kernels. It has no state and is safe for concurrent
// use.
type Implementation struct{ gonum.Implementation }

var _ blas.Float32 = Implementation{}

// Sgemm is the package function Sgemm, so that Implementation satisfies
// blas.Float32 with this package's product.
func (Implementation) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Sgemm computes C = alpha * op(A) * op(B) + beta * C for row-major
// matrices, with gonum's blas.Float32 semantics: op(X) is X for
// blas.NoTrans and Xᵀ for blas.Trans or blas.ConjTrans; op(A) is m×k (A
// is stored m×k, or k×m when transposed, with leading dimension lda),
// op(B) is k×n (stored k×n, or n×k when transposed), and C is m×n.
//
// When beta is zero C is overwritten and never read, so NaNs and
// infinities in it do not propagate; when alpha is zero or k is zero A and
// B are not read and C is only scaled by beta.
//
// Sgemm panics, with gonum's messages and in the same cases as gonum's
// Sgemm, for an illegal transpose, a negative dimension, a leading
// dimension below its minimum or a slice too short for its matrix: that is
// the blas.Float32 contract, which this package keeps rather than the
// house rule of returning errors.
//
// Sgemm is safe for concurrent use; calls that write disjoint parts of C
// may run at the same time. It runs on the calling goroutine only.
func Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	sgemm(current(), tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// sgemm is Sgemm on arch r.
func sgemm(r *arch, tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	aT, bT := checkArgs(tA, tB, m, n, k, a, lda, b, ldb, c, ldc)
	if m == 0 || n == 0 {
		return
	}
	if alpha == 0 || k == 0 {
		Scale(m, n, beta, c, ldc)
		return
	}
	multiply(r, aT, bT, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Panic messages, the same strings as gonum's.
const (
	badTranspose = "blas: illegal transpose"
	mLT0         = "blas: m < 0"
	nLT0         = "blas: n < 0"
	kLT0         = "blas: k < 0"
	badLdA       = "blas: bad leading dimension of A"
	badLdB       = "blas: bad leading dimension of B"
	badLdC       = "blas: bad leading dimension of C"
	shortA       = "blas: insufficient length of a"
	shortB       = "blas: insufficient length of b"
	shortC       = "blas: insufficient length of c"
)

// checkArgs panics where gonum's Sgemm panics, with its messages and in its
// order, and says whether A and B are transposed.
func checkArgs(tA, tB blas.Transpose, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) (aT, bT bool) {
	aT, okA := trans(tA)
	bT, okB := trans(tB)
	switch {
	case !okA || !okB:
		panic(badTranspose)
	case m < 0:
		panic(mLT0)
	case n < 0:
		panic(nLT0)
	case k < 0:
		panic(kLT0)
	case aT && lda < max(1, m), !aT && lda < max(1, k):
		panic(badLdA)
	case bT && ldb < max(1, k), !bT && ldb < max(1, n):
		panic(badLdB)
	case ldc < max(1, n):
		panic(badLdC)
	}
	if m == 0 || n == 0 {
		return aT, bT
	}
	// As gonum's, these hold trivially when k is zero.
	switch {
	case aT && len(a) < (k-1)*lda+m, !aT && len(a) < (m-1)*lda+k:
		panic(shortA)
	case bT && len(b) < (n-1)*ldb+k, !bT && len(b) < (k-1)*ldb+n:
		panic(shortB)
	case len(c) < (m-1)*ldc+n:
		panic(shortC)
	}
	return aT, bT
}

// trans says whether t transposes its operand, and whether t is legal.
func trans(t blas.Transpose) (transposed, ok bool) {
	switch t {
	case blas.NoTrans:
		return false, true
	case blas.Trans, blas.ConjTrans:
		return true, true
	}
	return false, false
}

// Scale sets the m×n matrix C (row stride ldc) to beta·C, which is all a
// product with k = 0 or alpha = 0 does; a zero beta writes zeros without
// reading C. Unlike Sgemm it checks nothing of A and B, which such a
// product need not have: nn calls it for an empty k, whose operands BLAS's
// checks refuse.
func Scale(m, n int, beta float32, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}
