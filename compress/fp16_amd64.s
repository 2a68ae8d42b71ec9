//go:build !purego

#include "textflag.h"

// The kernels of fp16_amd64.go. Each takes slices whose length is a
// multiple of 32 elements and does, bit for bit, what its Go loop does:
// the binary16 ones with F16C (VCVTPS2PH with imm8 0 rounds to nearest
// even, as ToF16; VCVTPH2PS widens exactly and quiets a NaN, as
// FromF16), the bfloat16 ones with AVX2 integer arithmetic (ToBF16's
// rounding: u + 0x7fff + (u>>16)&1, a NaN kept as (u>>16)|0x40). The
// sums are VADDPS with dst's element as the first operand, as the Go
// loops' float32 addition.

// func encF16x(dst []F16, src []float32)
TEXT ·encF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ   done
loop:
	VMOVUPS   0(SI), Y0
	VMOVUPS   32(SI), Y1
	VMOVUPS   64(SI), Y2
	VMOVUPS   96(SI), Y3
	VCVTPS2PH $0, Y0, 0(DI)
	VCVTPS2PH $0, Y1, 16(DI)
	VCVTPS2PH $0, Y2, 32(DI)
	VCVTPS2PH $0, Y3, 48(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
done:
	RET

// func decF16x(dst []float32, src []F16)
TEXT ·decF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ   done
loop:
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	DECQ      CX
	JNZ       loop
	VZEROUPPER
done:
	RET

// ADDF16(off): dst's 8 binary16 at off += src's, rounded.
#define ADDF16(off) \
	VCVTPH2PS off(DI), Y0 \
	VCVTPH2PS off(SI), Y1 \
	VADDPS    Y1, Y0, Y0 \
	VCVTPS2PH $0, Y0, off(DI)

// func addF16x(dst, src []F16)
TEXT ·addF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	JZ   done
loop:
	ADDF16(0)
	ADDF16(16)
	ADDF16(32)
	ADDF16(48)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET

// ACCF16(off, soff): dst's 8 binary16 at off += src's float32 at soff.
#define ACCF16(off, soff) \
	VCVTPH2PS off(DI), Y0 \
	VADDPS    soff(SI), Y0, Y0 \
	VCVTPS2PH $0, Y0, off(DI)

// func accF16x(dst []F16, src []float32)
TEXT ·accF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	JZ   done
loop:
	ACCF16(0, 0)
	ACCF16(16, 32)
	ACCF16(32, 64)
	ACCF16(48, 96)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET

// BF16CONSTS loads the constants of BF16RND: Y15 = 0x7fff, Y14 = 1,
// Y13 = 0x7fffffff, Y12 = 0x7f800000 (+Inf), Y11 = 0x40 (the quiet bit),
// in every 32-bit lane.
#define BF16CONSTS \
	MOVL         $0x7fff, AX \
	VMOVD        AX, X15 \
	VPBROADCASTD X15, Y15 \
	MOVL         $1, AX \
	VMOVD        AX, X14 \
	VPBROADCASTD X14, Y14 \
	MOVL         $0x7fffffff, AX \
	VMOVD        AX, X13 \
	VPBROADCASTD X13, Y13 \
	MOVL         $0x7f800000, AX \
	VMOVD        AX, X12 \
	VPBROADCASTD X12, Y12 \
	MOVL         $0x40, AX \
	VMOVD        AX, X11 \
	VPBROADCASTD X11, Y11

// BF16RND(X, T, R) rounds the 8 float32 of X to bfloat16, one in the low
// half of each 32-bit lane of R, as ToBF16 does; it clobbers X and T.
#define BF16RND(X, T, R) \
	VPSRLD    $16, X, T \
	VPAND     Y14, T, R \
	VPADDD    R, X, R \
	VPADDD    Y15, R, R \
	VPSRLD    $16, R, R \
	VPOR      Y11, T, T \
	VPAND     Y13, X, X \
	VPCMPGTD  Y12, X, X \
	VPBLENDVB X, T, R, R

// BF16PACK(A, B, off) stores the 16 bfloat16 of A (elements 0-7) and B
// (8-15) at off(DI). VPACKUSDW packs each 128-bit lane apart (0-3, 8-11,
// 4-7, 12-15); VPERMQ puts the quarters in order.
#define BF16PACK(A, B, off) \
	VPACKUSDW B, A, A \
	VPERMQ    $0xd8, A, A \
	VMOVDQU   A, off(DI)

// BF16WIDEN(off, REG, R) widens the 8 bfloat16 at off(REG) into R.
#define BF16WIDEN(off, REG, R) \
	VPMOVZXWD off(REG), R \
	VPSLLD    $16, R, R

// func encBF16x(dst []BF16, src []float32)
TEXT ·encBF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ   done
	BF16CONSTS
loop:
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	BF16RND(Y0, Y4, Y5)
	BF16RND(Y1, Y6, Y7)
	BF16RND(Y2, Y8, Y9)
	BF16RND(Y3, Y10, Y0)
	BF16PACK(Y5, Y7, 0)
	BF16PACK(Y9, Y0, 32)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET

// func decBF16x(dst []float32, src []BF16)
TEXT ·decBF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $5, CX
	JZ   done
loop:
	BF16WIDEN(0, SI, Y0)
	BF16WIDEN(16, SI, Y1)
	BF16WIDEN(32, SI, Y2)
	BF16WIDEN(48, SI, Y3)
	VMOVDQU Y0, 0(DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ    $64, SI
	ADDQ    $128, DI
	DECQ    CX
	JNZ     loop
	VZEROUPPER
done:
	RET

// ADDBF16(off): dst's 16 bfloat16 at off += src's, rounded.
#define ADDBF16(off) \
	BF16WIDEN(off, DI, Y0) \
	BF16WIDEN(off, SI, Y1) \
	BF16WIDEN(off+16, DI, Y2) \
	BF16WIDEN(off+16, SI, Y3) \
	VADDPS Y1, Y0, Y0 \
	VADDPS Y3, Y2, Y2 \
	BF16RND(Y0, Y4, Y5) \
	BF16RND(Y2, Y6, Y7) \
	BF16PACK(Y5, Y7, off)

// func addBF16x(dst, src []BF16)
TEXT ·addBF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	JZ   done
	BF16CONSTS
loop:
	ADDBF16(0)
	ADDBF16(32)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET

// ACCBF16(off, soff): dst's 16 bfloat16 at off += src's float32 at soff.
#define ACCBF16(off, soff) \
	BF16WIDEN(off, DI, Y0) \
	BF16WIDEN(off+16, DI, Y2) \
	VADDPS soff(SI), Y0, Y0 \
	VADDPS soff+32(SI), Y2, Y2 \
	BF16RND(Y0, Y4, Y5) \
	BF16RND(Y2, Y6, Y7) \
	BF16PACK(Y5, Y7, off)

// func accBF16x(dst []BF16, src []float32)
TEXT ·accBF16x(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ dst_len+8(FP), CX
	MOVQ src_base+24(FP), SI
	SHRQ $5, CX
	JZ   done
	BF16CONSTS
loop:
	ACCBF16(0, 0)
	ACCBF16(32, 64)
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	RET
