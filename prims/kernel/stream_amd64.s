#include "textflag.h"

// func streamx(dst, src *byte, n int)
//
// Copies n bytes, n a multiple of 128, from src to dst with non-temporal
// stores (VMOVNTDQ: dst must be 32-byte aligned), and fences them
// (SFENCE), so that a store that follows, such as the word that tells a
// reader the data is there, is seen after them.
TEXT ·streamx(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $7, CX
	JZ   done
loop:
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVNTDQ Y0, 0(DI)
	VMOVNTDQ Y1, 32(DI)
	VMOVNTDQ Y2, 64(DI)
	VMOVNTDQ Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
done:
	SFENCE
	RET
