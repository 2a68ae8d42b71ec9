#include "textflag.h"

// func storeRelease(word *atomic.Uint32, v uint32)
// On amd64 every store is a release store.
TEXT ·storeRelease(SB), NOSPLIT, $0-12
	MOVQ word+0(FP), AX
	MOVL v+8(FP), BX
	MOVL BX, (AX)
	RET
