#include "textflag.h"

// func Line(p unsafe.Pointer)
TEXT ·Line(SB), NOSPLIT|NOFRAME, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

// func Lines(a, b, c, d unsafe.Pointer)
TEXT ·Lines(SB), NOSPLIT|NOFRAME, $0-32
	MOVD a+0(FP), R0
	CBZ R0, b
	PRFM (R0), PLDL1KEEP
b:
	MOVD b+8(FP), R0
	CBZ R0, c
	PRFM (R0), PLDL1KEEP
c:
	MOVD c+16(FP), R0
	CBZ R0, d
	PRFM (R0), PLDL1KEEP
d:
	MOVD d+24(FP), R0
	CBZ R0, done
	PRFM (R0), PLDL1KEEP
done:
	RET
