#include "textflag.h"

// func callers(pcs []uintptr) int
//
// A frameless leaf: BP is still the caller's frame pointer. Each frame
// holds its caller's frame pointer at 0(BP) and the return address at
// 8(BP); the chain ends with a zero frame pointer.
TEXT ·callers(SB), NOSPLIT, $0-32
	MOVQ pcs_base+0(FP), DI
	MOVQ pcs_len+8(FP), CX
	MOVQ BP, SI
	XORQ AX, AX
loop:
	CMPQ AX, CX
	JGE  done
	TESTQ SI, SI
	JZ   done
	MOVQ 8(SI), DX
	TESTQ DX, DX
	JZ   done
	MOVQ DX, (DI)(AX*8)
	MOVQ 0(SI), SI
	INCQ AX
	JMP  loop
done:
	MOVQ AX, ret+24(FP)
	RET
