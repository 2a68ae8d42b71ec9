#include "textflag.h"

// func storeRelease(word *atomic.Uint32, v uint32)
TEXT ·storeRelease(SB), NOSPLIT, $0-12
	MOVD word+0(FP), R0
	MOVW v+8(FP), R1
	STLRW R1, (R0)
	RET
