//go:build amd64

package gemm

import "golang.org/x/sys/cpu"

// vectorArchs are the vector archs that this CPU runs, fastest first:
// AVX-512 where the CPU and OS have AVX-512F as well as AVX2 and FMA
// (the packers are AVX), AVX2 where the CPU has AVX2 and FMA.
var vectorArchs = pickVector(cpu.X86.HasAVX2 && cpu.X86.HasFMA, cpu.X86.HasAVX512F)

// pickVector returns the vector archs that a CPU with the given features
// runs, fastest first.
func pickVector(avx2, avx512 bool) []*arch {
	var as []*arch
	if avx512 && avx2 {
		as = append(as, &avx512Arch)
	}
	if avx2 {
		as = append(as, &avx2Arch)
	}
	return as
}

// avx2Arch runs kernel6x16 (kernel_amd64.s): a 6×16 tile of C in twelve
// YMM sums, two YMM loads of B and six broadcasts of A per step, so 12
// FMAs per step hide FMA latency on two pipes. A kc×16 B micro-panel
// (24 KiB at kc 384) stays in L1 while the mc×kc A block (216 KiB) streams
// from L2; B panels of kc×nc sit in L3.
var avx2Arch = arch{
	name: "avx2", mr: 6, nr: 16, mc: 144, kc: 384, nc: 4096,
	kernel: kernelAVX2,
	packA:  packAGo,
	packB:  packBVec,
}

// kernelAVX2 runs kernel6x16 on a whole tile.
func kernelAVX2(k int, a, b, c []float32, ldc int, alpha, beta float32) {
	_, _, _ = a[6*k-1], b[16*k-1], c[5*ldc+15]
	kernel6x16(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
}

// kernel6x16 sets the 6×16 tile at c (row stride ldc elements) to
// alpha*A*B + beta*c, for A packed as k steps of 6 and B as k steps of 16,
// k > 0; a zero beta writes c without reading it.
//
//go:noescape
func kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32)

// avx512Arch runs kernel8x32 (kernel512_amd64.s): an 8×32 tile of C in
// sixteen ZMM sums, two ZMM loads of B and eight broadcasts of A per step.
// Where the CPU has two full-width 512-bit FMA pipes (AMD Zen 5 here,
// Intel's server cores) it runs twice the AVX2 kernel's flops per cycle;
// on one that splits 512-bit FMAs in two (Zen 4) it should do no worse
// than AVX2 (not measured). Eight rows divide the MLP's batch (64) and
// widths (784, 1024) exactly, and let A be packed with the 8×8
// transposes of pack_amd64.s. The kc×32 B micro-panel (32 KiB at kc 256)
// and an 8×kc A micro-panel (8 KiB) share the 48 KiB L1; the mc×kc A
// block (128 KiB) sits in L2.
var avx512Arch = arch{
	name: "avx512", mr: 8, nr: 32, mc: 128, kc: 256, nc: 4096,
	kernel: kernelAVX512,
	packA:  packAVec,
	packB:  packBVec,
}

// kernelAVX512 runs kernel8x32 on a whole tile.
func kernelAVX512(k int, a, b, c []float32, ldc int, alpha, beta float32) {
	_, _, _ = a[8*k-1], b[32*k-1], c[7*ldc+31]
	kernel8x32(k, &a[0], &b[0], &c[0], ldc, alpha, beta)
}

// kernel8x32 sets the 8×32 tile at c (row stride ldc elements) to
// alpha*A*B + beta*c, for A packed as k steps of 8 and B as k steps of 32,
// k > 0; a zero beta writes c without reading it.
//
//go:noescape
func kernel8x32(k int, a, b, c *float32, ldc int, alpha, beta float32)

// The vector packers of pack_amd64.s. A micro-panel that is whole (rows
// or cols equal to the tile) goes through them; an edge one, and any step
// past a multiple of eight in a transpose, through the Go packers.

// packBVec packs B micro-panels of nr 16 or 32 columns.
func packBVec(dst, b []float32, ldb int, trans bool, p0, j0, kc, cols, nr int) {
	if cols != nr {
		packBGo(dst, b, ldb, trans, p0, j0, kc, cols, nr)
		return
	}
	dst = dst[:nr*kc]
	if !trans {
		src := b[p0*ldb+j0:][:(kc-1)*ldb+nr]
		copyRows(nr, &dst[0], &src[0], ldb, kc)
		return
	}
	kc8 := kc / 8
	if kc8 > 0 {
		src := b[j0*ldb+p0:][:(nr-1)*ldb+8*kc8]
		transpose8(&dst[0], &src[0], ldb, nr, nr/8, kc8)
	}
	if rest := kc - 8*kc8; rest > 0 {
		packBGo(dst[nr*8*kc8:], b, ldb, true, p0+8*kc8, j0, rest, cols, nr)
	}
}

// packAVec packs A micro-panels of mr 8 rows; other heights go to
// packAGo.
func packAVec(dst, a []float32, lda int, trans bool, i0, p0, rows, kc, mr int) {
	if rows != mr || mr != 8 {
		packAGo(dst, a, lda, trans, i0, p0, rows, kc, mr)
		return
	}
	dst = dst[:mr*kc]
	if trans {
		src := a[p0*lda+i0:][:(kc-1)*lda+mr]
		copy8(&dst[0], &src[0], lda, kc)
		return
	}
	kc8 := kc / 8
	if kc8 > 0 {
		src := a[i0*lda+p0:][:(mr-1)*lda+8*kc8]
		transpose8(&dst[0], &src[0], lda, mr, 1, kc8)
	}
	if rest := kc - 8*kc8; rest > 0 {
		packAGo(dst[mr*8*kc8:], a, lda, false, i0, p0+8*kc8, rows, rest, mr)
	}
}

// copyRows copies rows rows of width floats (16 or 32), ld apart in src,
// to dst.
func copyRows(width int, dst, src *float32, ld, rows int) {
	if width == 16 {
		copy16(dst, src, ld, rows)
		return
	}
	copy32(dst, src, ld, rows)
}

// copy8, copy16 and copy32 copy rows rows of 8, 16 or 32 floats, ld floats
// apart in src, to dst's rows one after another.
//
//go:noescape
func copy8(dst, src *float32, ld, rows int)

//go:noescape
func copy16(dst, src *float32, ld, rows int)

//go:noescape
func copy32(dst, src *float32, ld, rows int)

// transpose8 transposes 8*groups rows of src (ld floats apart), 8*kc8
// floats of each, into 8*kc8 rows of dst (dstLd floats apart) of
// 8*groups floats.
//
//go:noescape
func transpose8(dst, src *float32, ld, dstLd, groups, kc8 int)
