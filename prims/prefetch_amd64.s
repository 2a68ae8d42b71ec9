#include "textflag.h"

// func prefetchWrite(p unsafe.Pointer)
TEXT ·prefetchWrite(SB), NOSPLIT, $0-8
	MOVQ p+0(FP), AX
	// PREFETCHW (AX), which the Go assembler does not know.
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	RET
