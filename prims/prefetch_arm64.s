#include "textflag.h"

// func prefetchWrite(p unsafe.Pointer)
TEXT ·prefetchWrite(SB), NOSPLIT, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PSTL1KEEP
	RET
