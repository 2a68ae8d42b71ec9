package gemm

// goArch is the pure-Go way, for CPUs without the vector kernels: a 2×4
// tile, whose eight sums, two values of A and four of B about fit the
// fifteen float registers that Go's compiler allocates on amd64 (a 4×4
// tile spills and runs at half the speed), with blocks sized for the
// packed panels to sit in L1 and L2 as they do for the vector kernels.
var goArch = arch{
	name: "go", mr: 2, nr: 4, mc: 128, kc: 256, nc: 2048,
	kernel: kernelGo,
	packA:  packAGo,
	packB:  packBGo,
}

// kernelGo sets the 2×4 tile at c to alpha*Ap*Bp + beta*c (c not read for
// a zero beta).
func kernelGo(k int, a, b, c []float32, ldc int, alpha, beta float32) {
	a, b = a[:2*k], b[:4*k]
	var c00, c01, c02, c03, c10, c11, c12, c13 float32
	for len(a) >= 2 && len(b) >= 4 {
		a0, a1 := a[0], a[1]
		b0, b1, b2, b3 := b[0], b[1], b[2], b[3]
		c00 += a0 * b0
		c01 += a0 * b1
		c02 += a0 * b2
		c03 += a0 * b3
		c10 += a1 * b0
		c11 += a1 * b1
		c12 += a1 * b2
		c13 += a1 * b3
		a, b = a[2:], b[4:]
	}
	r0, r1 := c[0:4:4], c[ldc:ldc+4:ldc+4]
	if beta == 0 {
		r0[0], r0[1], r0[2], r0[3] = alpha*c00, alpha*c01, alpha*c02, alpha*c03
		r1[0], r1[1], r1[2], r1[3] = alpha*c10, alpha*c11, alpha*c12, alpha*c13
		return
	}
	r0[0] = alpha*c00 + beta*r0[0]
	r0[1] = alpha*c01 + beta*r0[1]
	r0[2] = alpha*c02 + beta*r0[2]
	r0[3] = alpha*c03 + beta*r0[3]
	r1[0] = alpha*c10 + beta*r1[0]
	r1[1] = alpha*c11 + beta*r1[1]
	r1[2] = alpha*c12 + beta*r1[2]
	r1[3] = alpha*c13 + beta*r1[3]
}

// The Go packers. A packed A micro-panel holds, for each step p of the
// inner dimension, mr values of a column of op(A); a packed B micro-panel
// holds, for each p, nr values of a row of op(B). Rows or columns past the
// matrix's edge are zeros, so that the kernels always run whole tiles.

// packAGo packs op(A)[i0:i0+rows, p0:p0+kc] into dst as kc steps of mr.
func packAGo(dst, a []float32, lda int, trans bool, i0, p0, rows, kc, mr int) {
	dst = dst[:kc*mr]
	if trans {
		// op(A)[i][p] = a[p*lda+i]: each step is a contiguous run of A.
		for p := range kc {
			d := dst[p*mr : (p+1)*mr]
			copy(d, a[(p0+p)*lda+i0:][:rows])
			clear(d[rows:])
		}
		return
	}
	// op(A)[i][p] = a[i*lda+p]: each row of A is spread over the steps.
	for r := range rows {
		src := a[(i0+r)*lda+p0:][:kc]
		d := dst[r:]
		for p, v := range src {
			d[p*mr] = v
		}
	}
	for r := rows; r < mr; r++ {
		for p := range kc {
			dst[p*mr+r] = 0
		}
	}
}

// packBGo packs op(B)[p0:p0+kc, j0:j0+cols] into dst as kc steps of nr.
func packBGo(dst, b []float32, ldb int, trans bool, p0, j0, kc, cols, nr int) {
	dst = dst[:kc*nr]
	if !trans {
		// op(B)[p][j] = b[p*ldb+j]: each step is a contiguous run of B.
		for p := range kc {
			d := dst[p*nr : (p+1)*nr]
			copy(d, b[(p0+p)*ldb+j0:][:cols])
			clear(d[cols:])
		}
		return
	}
	// op(B)[p][j] = b[j*ldb+p]: each row of B is spread over the steps.
	for j := range cols {
		src := b[(j0+j)*ldb+p0:][:kc]
		d := dst[j:]
		for p, v := range src {
			d[p*nr] = v
		}
	}
	for j := cols; j < nr; j++ {
		for p := range kc {
			dst[p*nr+j] = 0
		}
	}
}
