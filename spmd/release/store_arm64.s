//go:build !race

#include "textflag.h"

// func Store32(word *atomic.Uint32, v uint32)
TEXT ·Store32(SB), NOSPLIT, $0-12
	MOVD word+0(FP), R0
	MOVW v+8(FP), R1
	STLRW R1, (R0)
	RET

// func Store64(word *atomic.Uint64, v uint64)
TEXT ·Store64(SB), NOSPLIT, $0-16
	MOVD word+0(FP), R0
	MOVD v+8(FP), R1
	STLR R1, (R0)
	RET
