#include "textflag.h"

// The AVX2 sum kernels: dst[i] += src[i] over n bytes, n a multiple of
// 128, four 32-byte vectors per round (SUMLOOP serves any element-wise
// op of one instruction). Each is one element-wise add per
// element, as the Go loop does, so results are bit for bit the same.
//
// func addF32x(dst, src *byte, n int) (and the others alike)

#define SUMLOOP(ADD) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $7, CX \
	JZ   done \
loop: \
	VMOVDQU 0(DI), Y0 \
	VMOVDQU 32(DI), Y1 \
	VMOVDQU 64(DI), Y2 \
	VMOVDQU 96(DI), Y3 \
	ADD 0(SI), Y0, Y0 \
	ADD 32(SI), Y1, Y1 \
	ADD 64(SI), Y2, Y2 \
	ADD 96(SI), Y3, Y3 \
	VMOVDQU Y0, 0(DI) \
	VMOVDQU Y1, 32(DI) \
	VMOVDQU Y2, 64(DI) \
	VMOVDQU Y3, 96(DI) \
	ADDQ $128, DI \
	ADDQ $128, SI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

TEXT ·addF32x(SB), NOSPLIT, $0-24
	SUMLOOP(VADDPS)

TEXT ·addF64x(SB), NOSPLIT, $0-24
	SUMLOOP(VADDPD)

TEXT ·addI32x(SB), NOSPLIT, $0-24
	SUMLOOP(VPADDD)

TEXT ·addI64x(SB), NOSPLIT, $0-24
	SUMLOOP(VPADDQ)

TEXT ·addU8x(SB), NOSPLIT, $0-24
	SUMLOOP(VPADDB)

// Products, and the integer max and min, are one instruction per element
// as well: dst's element is the first operand, as in the Go loop's
// MULSS, so a product of two NaNs keeps dst's.

TEXT ·mulF32x(SB), NOSPLIT, $0-24
	SUMLOOP(VMULPS)

TEXT ·mulF64x(SB), NOSPLIT, $0-24
	SUMLOOP(VMULPD)

TEXT ·mulI32x(SB), NOSPLIT, $0-24
	SUMLOOP(VPMULLD)

TEXT ·maxI32x(SB), NOSPLIT, $0-24
	SUMLOOP(VPMAXSD)

TEXT ·minI32x(SB), NOSPLIT, $0-24
	SUMLOOP(VPMINSD)

// The AVX2 max and min kernels over n bytes, n a multiple of 128. Per
// element, as the Go loops: src wins if it is larger (smaller), or if it
// is a NaN; otherwise dst stays, a NaN in dst included. VMAXPS Yd, Ys, Yr
// is Intel's MAX(s, d): s if s > d, else d (d for NaNs and equal zeros);
// the blend then puts s wherever s is a NaN.
//
// func maxF32x(dst, src *byte, n int) (and the others alike)

#define PICKSTEP(OP, CMP, BLEND, off, D, S, M) \
	VMOVDQU off(DI), D \
	VMOVDQU off(SI), S \
	OP D, S, D \
	CMP $3, S, S, M \
	BLEND M, S, D, D \
	VMOVDQU D, off(DI)

#define PICKLOOP(OP, CMP, BLEND) \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ n+16(FP), CX \
	SHRQ $7, CX \
	JZ   done \
loop: \
	PICKSTEP(OP, CMP, BLEND, 0, Y0, Y1, Y2) \
	PICKSTEP(OP, CMP, BLEND, 32, Y3, Y4, Y5) \
	PICKSTEP(OP, CMP, BLEND, 64, Y6, Y7, Y8) \
	PICKSTEP(OP, CMP, BLEND, 96, Y9, Y10, Y11) \
	ADDQ $128, DI \
	ADDQ $128, SI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
done: \
	RET

TEXT ·maxF32x(SB), NOSPLIT, $0-24
	PICKLOOP(VMAXPS, VCMPPS, VBLENDVPS)

TEXT ·minF32x(SB), NOSPLIT, $0-24
	PICKLOOP(VMINPS, VCMPPS, VBLENDVPS)

TEXT ·maxF64x(SB), NOSPLIT, $0-24
	PICKLOOP(VMAXPD, VCMPPD, VBLENDVPD)

TEXT ·minF64x(SB), NOSPLIT, $0-24
	PICKLOOP(VMINPD, VCMPPD, VBLENDVPD)
