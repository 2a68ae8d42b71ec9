#include "textflag.h"

// The AVX2 packers: copies of rows 8, 16 or 32 floats wide, and 8×8
// transposes of groups of eight rows. Both the AVX2 and the AVX-512 archs
// use them.

// COPYROWS(name, LOADS, STORES) is a func name(dst, src *float32, ld, rows
// int) that copies rows rows of src, ld floats apart, to dst's rows, one
// after another.
#define COPYROWS(name, LOADS, STORES, width) \
TEXT name(SB), NOSPLIT, $0-32 \
	MOVQ dst+0(FP), DI \
	MOVQ src+8(FP), SI \
	MOVQ ld+16(FP), R8 \
	MOVQ rows+24(FP), CX \
	SHLQ $2, R8 \
loop: \
	PREFETCHT0 width(SI) \
	LOADS \
	STORES \
	ADDQ R8, SI \
	ADDQ $width, DI \
	DECQ CX \
	JNZ  loop \
	VZEROUPPER \
	RET

#define LOAD1 VMOVUPS (SI), Y0
#define STORE1 VMOVUPS Y0, (DI)
#define LOAD2 VMOVUPS (SI), Y0; VMOVUPS 32(SI), Y1
#define STORE2 VMOVUPS Y0, (DI); VMOVUPS Y1, 32(DI)
#define LOAD4 VMOVUPS (SI), Y0; VMOVUPS 32(SI), Y1; VMOVUPS 64(SI), Y2; VMOVUPS 96(SI), Y3
#define STORE4 VMOVUPS Y0, (DI); VMOVUPS Y1, 32(DI); VMOVUPS Y2, 64(DI); VMOVUPS Y3, 96(DI)

// func copy8(dst, src *float32, ld, rows int)
COPYROWS(·copy8, LOAD1, STORE1, 32)

// func copy16(dst, src *float32, ld, rows int)
COPYROWS(·copy16, LOAD2, STORE2, 64)

// func copy32(dst, src *float32, ld, rows int)
COPYROWS(·copy32, LOAD4, STORE4, 128)

// TRANSPOSE8 loads eight rows of eight floats at SI, SI+R8, ... SI+7*R8
// (R9 = 3*R8, R10 = SI+4*R8) and stores the rows of their transpose at
// DI, DI+R12, ... DI+7*R12 (R13 = 3*R12, R11 = DI+4*R12).
#define TRANSPOSE8 \
	VMOVUPS    (SI), Y0 \
	VMOVUPS    (SI)(R8*1), Y1 \
	VMOVUPS    (SI)(R8*2), Y2 \
	VMOVUPS    (SI)(R9*1), Y3 \
	VMOVUPS    (R10), Y4 \
	VMOVUPS    (R10)(R8*1), Y5 \
	VMOVUPS    (R10)(R8*2), Y6 \
	VMOVUPS    (R10)(R9*1), Y7 \
	VUNPCKLPS  Y1, Y0, Y8 \
	VUNPCKHPS  Y1, Y0, Y9 \
	VUNPCKLPS  Y3, Y2, Y10 \
	VUNPCKHPS  Y3, Y2, Y11 \
	VUNPCKLPS  Y5, Y4, Y12 \
	VUNPCKHPS  Y5, Y4, Y13 \
	VUNPCKLPS  Y7, Y6, Y14 \
	VUNPCKHPS  Y7, Y6, Y15 \
	VSHUFPS    $0x44, Y10, Y8, Y0 \
	VSHUFPS    $0xEE, Y10, Y8, Y1 \
	VSHUFPS    $0x44, Y11, Y9, Y2 \
	VSHUFPS    $0xEE, Y11, Y9, Y3 \
	VSHUFPS    $0x44, Y14, Y12, Y4 \
	VSHUFPS    $0xEE, Y14, Y12, Y5 \
	VSHUFPS    $0x44, Y15, Y13, Y6 \
	VSHUFPS    $0xEE, Y15, Y13, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y9 \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y12 \
	VPERM2F128 $0x31, Y5, Y1, Y13 \
	VPERM2F128 $0x31, Y6, Y2, Y14 \
	VPERM2F128 $0x31, Y7, Y3, Y15 \
	VMOVUPS    Y8, (DI) \
	VMOVUPS    Y9, (DI)(R12*1) \
	VMOVUPS    Y10, (DI)(R12*2) \
	VMOVUPS    Y11, (DI)(R13*1) \
	VMOVUPS    Y12, (R11) \
	VMOVUPS    Y13, (R11)(R12*1) \
	VMOVUPS    Y14, (R11)(R12*2) \
	VMOVUPS    Y15, (R11)(R13*1)

// PREFETCH8 fetches the cache lines off bytes on in the eight rows at SI
// and R10 (as TRANSPOSE8 reads them).
#define PREFETCH8(off) \
	PREFETCHT0 off(SI) \
	PREFETCHT0 off(SI)(R8*1) \
	PREFETCHT0 off(SI)(R8*2) \
	PREFETCHT0 off(SI)(R9*1) \
	PREFETCHT0 off(R10) \
	PREFETCHT0 off(R10)(R8*1) \
	PREFETCHT0 off(R10)(R8*2) \
	PREFETCHT0 off(R10)(R9*1)

// func transpose8(dst, src *float32, ld, dstLd, groups, kc8 int)
//
// Transposes 8*groups rows of src (ld floats apart), 8*kc8 floats of
// each, into 8*kc8 rows of dst (dstLd floats apart) of 8*groups floats.
// Each group's rows go sixteen floats at a time where they can, two 8×8
// transposes that use up the cache line of each row that the first
// loads: with rows a page apart, all in one set of L1, the line would be
// gone by the time the next group came back for its second half.
TEXT ·transpose8(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ ld+16(FP), R8
	MOVQ dstLd+24(FP), R12
	MOVQ kc8+40(FP), CX
	SHLQ $2, R8
	SHLQ $2, R12
	LEAQ (R8)(R8*2), R9
	LEAQ (R12)(R12*2), R13
	CMPQ CX, $2
	JLT  single

pair:
	MOVQ groups+32(FP), DX
	MOVQ SI, AX             // the block's first row in src
	MOVQ DI, BX             // and its first row in dst

pairgroup:
	LEAQ (SI)(R8*4), R10
	LEAQ (DI)(R12*4), R11
	PREFETCH8(64)
	TRANSPOSE8
	ADDQ $32, SI            // the group's next eight columns
	ADDQ $32, R10
	LEAQ (DI)(R12*8), DI    // to dst's next eight rows
	LEAQ (DI)(R12*4), R11
	TRANSPOSE8
	LEAQ -32(R10)(R8*4), SI // the next eight rows of src
	MOVQ R12, R11
	SHLQ $3, R11
	SUBQ R11, DI
	ADDQ $32, DI            // the next eight columns of dst
	DECQ DX
	JNZ  pairgroup

	LEAQ 64(AX), SI         // sixteen columns on in src
	MOVQ R12, R11
	SHLQ $4, R11
	LEAQ (BX)(R11*1), DI    // sixteen rows on in dst
	SUBQ $2, CX
	CMPQ CX, $2
	JGE  pair
	TESTQ CX, CX
	JZ   done

single:
	MOVQ groups+32(FP), DX
	MOVQ SI, AX
	MOVQ DI, BX

group:
	LEAQ (SI)(R8*4), R10
	LEAQ (DI)(R12*4), R11
	TRANSPOSE8
	LEAQ (R10)(R8*4), SI    // the next eight rows of src
	ADDQ $32, DI            // the next eight columns of dst
	DECQ DX
	JNZ  group

	LEAQ 32(AX), SI         // eight columns on in src
	LEAQ (BX)(R12*8), DI    // eight rows on in dst
	DECQ CX
	JNZ  single

done:
	VZEROUPPER
	RET
