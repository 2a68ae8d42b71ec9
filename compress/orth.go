package compress

import "math"

// orthTol is how far, relative to its length before, a vector may shrink
// when its components along the earlier vectors are removed and still
// count as independent of them. float32 data that is dependent in exact
// arithmetic keeps about 1e-7 of its length (its rounding), which is
// kept and orthonormalised like any other direction; only vectors
// dependent to float64 precision, a vector of zeros included, fall below.
const orthTol = 1e-10

// orthonormalize makes the r rows of a (each n long, row-major: the
// columns of a tall n x r matrix) orthonormal in place, by modified
// Gram-Schmidt run twice ("twice is enough") in float64, so that the
// result is orthonormal to float32 rounding even when the rows are
// nearly dependent. w is scratch of at least r·n. A row that is
// dependent on the earlier ones (below orthTol, zero or not finite)
// is passed to refill, if not nil, for fresh values and orthonormalised
// again; a row still dependent, or with no refill, becomes zero. This is
// what PyTorch's epsilon does for a zero column (0/(0+ε) = 0) without
// the epsilon's bias on the other columns. Zero rows are then skipped,
// so the nonzero rows span what the input's rows spanned.
func orthonormalize(a []float32, r, n int, w []float64, refill func(i int, row []float64)) {
	w = w[:r*n]
	for i, v := range a[:r*n] {
		w[i] = float64(v)
	}
	for i := 0; i < r; i++ {
		row := w[i*n : (i+1)*n]
		ok := orthogonalize(w, row, i, n)
		if !ok && refill != nil {
			refill(i, row)
			ok = orthogonalize(w, row, i, n)
		}
		if !ok {
			clear(row)
		}
	}
	for i, v := range w {
		a[i] = float32(v)
	}
}

// orthogonalize removes from row its components along the first i rows
// of w, twice, and scales it to unit length; false (row unspecified) if
// it was dependent on them.
func orthogonalize(w, row []float64, i, n int) bool {
	before := math.Sqrt(dot(row, row))
	for pass := 0; pass < 2; pass++ {
		for j := 0; j < i; j++ {
			prev := w[j*n : (j+1)*n]
			if d := dot(prev, row); d != 0 {
				for k, p := range prev {
					row[k] -= d * p
				}
			}
		}
	}
	after := math.Sqrt(dot(row, row))
	if !(after > orthTol*before) || math.IsInf(after, 0) {
		return false
	}
	for k := range row {
		row[k] /= after
	}
	return true
}

func dot(a, b []float64) float64 {
	var s0, s1 float64
	b = b[:len(a)]
	k := 0
	for ; k+1 < len(a); k += 2 {
		s0 += a[k] * b[k]
		s1 += a[k+1] * b[k+1]
	}
	if k < len(a) {
		s0 += a[k] * b[k]
	}
	return s0 + s1
}
