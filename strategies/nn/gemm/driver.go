package gemm

import (
	"sync"
	"unsafe"
)

// arch is one way to run the product: a micro-kernel over mr×nr tiles of
// C, the packers that feed it, and the cache blocking that suits it.
type arch struct {
	name   string
	mr, nr int // the register tile: kernel updates mr rows × nr columns of C
	mc     int // rows of op(A) packed at a time (a multiple of mr), for L2
	kc     int // most of the inner dimension per packed panel, for L1
	nc     int // columns of op(B) packed at a time (a multiple of nr), for L3

	// kernel sets the mr×nr tile at c (row stride ldc) to
	// alpha*Ap*Bp + beta*c, where Ap is a packed A micro-panel (k steps of
	// mr values) and Bp a packed B micro-panel (k steps of nr values). A
	// zero beta overwrites c without reading it.
	kernel func(k int, a, b, c []float32, ldc int, alpha, beta float32)

	// packB packs op(B)[p0:p0+kc, j0:j0+cols] as kc steps of nr values,
	// zero past cols. packA packs op(A)[i0:i0+rows, p0:p0+kc] as kc steps
	// of mr values, zero past rows.
	packB func(dst, b []float32, ldb int, trans bool, p0, j0, kc, cols, nr int)
	packA func(dst, a []float32, lda int, trans bool, i0, p0, rows, kc, mr int)
}

// useVector says whether products run on the fastest of vectorArchs, the
// CPU's vector kernels, when it has any; tests turn it off to check the Go
// kernels.
var useVector = true

// current is the arch that products run on.
func current() *arch {
	if useVector && len(vectorArchs) > 0 {
		return vectorArchs[0]
	}
	return &goArch
}

// Arch names the kernels that Sgemm runs on this CPU: "avx512" (AVX-512F
// on amd64), "avx2" (AVX2 and FMA on amd64) or "go" (the pure-Go kernels,
// on other CPUs and architectures).
func Arch() string { return current().name }

// scratch is one call's packing buffers; scratches are pooled so that a
// steady stream of calls does not allocate.
type scratch struct {
	buf  []float32
	a, b []float32 // the packed A block and B panel, within buf
	tile []float32 // an edge tile's product, within buf
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

// align is the byte alignment of the packed panels: a cache line, so
// that a packed row of B never straddles two.
const align = 64

// carve fits a, b and tile of the given lengths into s.buf, each starting
// on an align boundary, growing buf when it is too small.
func (s *scratch) carve(na, nb, nt int) {
	const pad = align / 4
	na, nb, nt = roundUp(na, pad), roundUp(nb, pad), roundUp(nt, pad)
	need := na + nb + nt + pad
	if cap(s.buf) < need {
		s.buf = make([]float32, need)
	}
	buf := s.buf[:need]
	off := int(uintptr(unsafe.Pointer(&buf[0])) % align / 4)
	if off != 0 {
		off = pad - off
	}
	buf = buf[off:]
	s.a, buf = buf[:na:na], buf[na:]
	s.b, buf = buf[:nb:nb], buf[nb:]
	s.tile = buf[:nt:nt]
}

// roundUp rounds x up to a multiple of q.
func roundUp(x, q int) int { return (x + q - 1) / q * q }

// multiply runs C = alpha*op(A)*op(B) + beta*C with arch r, for m, n, k
// above zero and a nonzero alpha. Loops go as BLIS's: columns of C by nc,
// the inner dimension by kc (packing a kc×nc panel of B), rows by mc
// (packing an mc×kc block of A), then tiles. Each micro-panel is packed
// just before its first use, while it is hot for the kernel; when all of
// A fits one block the B micro-panels share one buffer that stays in L1.
func multiply(r *arch, aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	kSteps := (k + r.kc - 1) / r.kc
	kc := (k + kSteps - 1) / kSteps // even steps: 784 is 3×262, not 384+384+16
	mc := min(r.mc, roundUp(m, r.mr))
	nc := min(r.nc, roundUp(n, r.nr))
	oneBlock := m <= mc
	panelLen := nc * kc
	if oneBlock {
		panelLen = r.nr * kc
	}
	s := scratches.Get().(*scratch)
	defer scratches.Put(s)
	s.carve(mc*kc, panelLen, r.mr*r.nr)

	for jc := 0; jc < n; jc += nc {
		ncur := min(nc, n-jc)
		for pc := 0; pc < k; pc += kc {
			kcur := min(kc, k-pc)
			bet := beta
			if pc > 0 {
				bet = 1
			}
			for ic := 0; ic < m; ic += mc {
				mcur := min(mc, m-ic)
				blk := block{ic: ic, jc: jc, pc: pc, m: mcur, n: ncur, k: kcur, packB: ic == 0, shareB: oneBlock}
				blk.run(r, s, aT, bT, alpha, a, lda, b, ldb, bet, c, ldc)
			}
		}
	}
}

// block is one macro-kernel call: the mc×nc block of C at (ic, jc) takes
// the product over the inner dimension's steps pc to pc+k.
type block struct {
	ic, jc, pc int
	m, n, k    int
	packB      bool // the B panel is not packed yet: pack it on the way
	shareB     bool // B micro-panels share one buffer (one block of A)
}

// run walks the block's tiles, column strips outside and row strips
// inside, so that a B micro-panel stays in L1 while the A block streams
// from L2. A micro-panels are packed on the first column strip.
func (blk block) run(r *arch, s *scratch, aT, bT bool, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	mr, nr, kc := r.mr, r.nr, blk.k
	for jr := 0; jr < blk.n; jr += nr {
		cols := min(nr, blk.n-jr)
		bp := s.b[:kc*nr]
		if !blk.shareB {
			bp = s.b[jr*kc : (jr+nr)*kc]
		}
		if blk.packB || blk.shareB {
			r.packB(bp, b, ldb, bT, blk.pc, blk.jc+jr, kc, cols, nr)
		}
		for ir := 0; ir < blk.m; ir += mr {
			rows := min(mr, blk.m-ir)
			ap := s.a[ir*kc : (ir+mr)*kc]
			if jr == 0 {
				r.packA(ap, a, lda, aT, blk.ic+ir, blk.pc, rows, kc, mr)
			}
			at := (blk.ic+ir)*ldc + blk.jc + jr
			if rows == mr && cols == nr {
				r.kernel(kc, ap, bp, c[at:], ldc, alpha, beta)
				continue
			}
			r.kernel(kc, ap, bp, s.tile, nr, 1, 0)
			edge(s.tile, nr, rows, cols, alpha, beta, c[at:], ldc)
		}
	}
}

// edge sets the rows×cols corner of C at c to alpha*t + beta*c, t being a
// whole tile's product with row stride nr.
func edge(t []float32, nr, rows, cols int, alpha, beta float32, c []float32, ldc int) {
	for i := range rows {
		src := t[i*nr : i*nr+cols]
		dst := c[i*ldc : i*ldc+cols]
		if beta == 0 {
			for j, v := range src {
				dst[j] = alpha * v
			}
			continue
		}
		for j, v := range src {
			dst[j] = alpha*v + beta*dst[j]
		}
	}
}
