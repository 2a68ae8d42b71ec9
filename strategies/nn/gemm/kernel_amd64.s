#include "textflag.h"

// The AVX2 micro-kernel: a 6×16 tile of C in Y0-Y11 (row r in Y(2r) and
// Y(2r+1)), B's step in Y12-Y13, A's broadcasts alternating Y14 and Y15.

// STEP6x16 runs one step of the inner dimension: A's six values at ao(AX),
// B's sixteen at bo(BX).
#define STEP6x16(ao, bo) \
	VMOVUPS bo(BX), Y12 \
	VMOVUPS bo+32(BX), Y13 \
	VBROADCASTSS ao(AX), Y14 \
	VFMADD231PS Y12, Y14, Y0 \
	VFMADD231PS Y13, Y14, Y1 \
	VBROADCASTSS ao+4(AX), Y15 \
	VFMADD231PS Y12, Y15, Y2 \
	VFMADD231PS Y13, Y15, Y3 \
	VBROADCASTSS ao+8(AX), Y14 \
	VFMADD231PS Y12, Y14, Y4 \
	VFMADD231PS Y13, Y14, Y5 \
	VBROADCASTSS ao+12(AX), Y15 \
	VFMADD231PS Y12, Y15, Y6 \
	VFMADD231PS Y13, Y15, Y7 \
	VBROADCASTSS ao+16(AX), Y14 \
	VFMADD231PS Y12, Y14, Y8 \
	VFMADD231PS Y13, Y14, Y9 \
	VBROADCASTSS ao+20(AX), Y15 \
	VFMADD231PS Y12, Y15, Y10 \
	VFMADD231PS Y13, Y15, Y11

// STORE16 writes row sums Ya, Yb to the 16 floats at DI.
#define STORE16(Ya, Yb) \
	VMOVUPS Ya, (DI) \
	VMOVUPS Yb, 32(DI) \
	ADDQ    R8, DI

// UPDATE16 writes Ya, Yb plus beta (Y15) times the 16 floats at DI.
#define UPDATE16(Ya, Yb) \
	VFMADD231PS (DI), Y15, Ya \
	VFMADD231PS 32(DI), Y15, Yb \
	VMOVUPS     Ya, (DI) \
	VMOVUPS     Yb, 32(DI) \
	ADDQ        R8, DI

// func kernel6x16(k int, a, b, c *float32, ldc int, alpha, beta float32)
TEXT ·kernel6x16(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DI
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8

	// Fetch C's rows while the sums run.
	MOVQ       DI, SI
	PREFETCHT0 (SI)
	PREFETCHT0 63(SI)
	ADDQ       R8, SI
	PREFETCHT0 (SI)
	PREFETCHT0 63(SI)
	ADDQ       R8, SI
	PREFETCHT0 (SI)
	PREFETCHT0 63(SI)
	ADDQ       R8, SI
	PREFETCHT0 (SI)
	PREFETCHT0 63(SI)
	ADDQ       R8, SI
	PREFETCHT0 (SI)
	PREFETCHT0 63(SI)
	ADDQ       R8, SI
	PREFETCHT0 (SI)
	PREFETCHT0 63(SI)

	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11

	MOVQ CX, DX
	SHRQ $2, CX
	JZ   tail

loop4:
	STEP6x16(0, 0)
	STEP6x16(24, 64)
	STEP6x16(48, 128)
	STEP6x16(72, 192)
	ADDQ $96, AX
	ADDQ $256, BX
	DECQ CX
	JNZ  loop4

tail:
	ANDQ $3, DX
	JZ   sums

loop1:
	STEP6x16(0, 0)
	ADDQ $24, AX
	ADDQ $64, BX
	DECQ DX
	JNZ  loop1

sums:
	VBROADCASTSS alpha+40(FP), Y14
	VMULPS       Y14, Y0, Y0
	VMULPS       Y14, Y1, Y1
	VMULPS       Y14, Y2, Y2
	VMULPS       Y14, Y3, Y3
	VMULPS       Y14, Y4, Y4
	VMULPS       Y14, Y5, Y5
	VMULPS       Y14, Y6, Y6
	VMULPS       Y14, Y7, Y7
	VMULPS       Y14, Y8, Y8
	VMULPS       Y14, Y9, Y9
	VMULPS       Y14, Y10, Y10
	VMULPS       Y14, Y11, Y11

	// A zero beta (either sign) writes C without reading it.
	MOVL  beta+44(FP), SI
	TESTL $0x7fffffff, SI
	JNZ   update

	STORE16(Y0, Y1)
	STORE16(Y2, Y3)
	STORE16(Y4, Y5)
	STORE16(Y6, Y7)
	STORE16(Y8, Y9)
	STORE16(Y10, Y11)
	VZEROUPPER
	RET

update:
	VBROADCASTSS beta+44(FP), Y15
	UPDATE16(Y0, Y1)
	UPDATE16(Y2, Y3)
	UPDATE16(Y4, Y5)
	UPDATE16(Y6, Y7)
	UPDATE16(Y8, Y9)
	UPDATE16(Y10, Y11)
	VZEROUPPER
	RET
