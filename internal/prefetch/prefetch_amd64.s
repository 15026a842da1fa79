#include "textflag.h"

// func Line(p unsafe.Pointer)
TEXT ·Line(SB), NOSPLIT|NOFRAME, $0-8
	MOVQ p+0(FP), AX
	PREFETCHT0 (AX)
	RET

// func Lines(a, b, c, d unsafe.Pointer)
TEXT ·Lines(SB), NOSPLIT|NOFRAME, $0-32
	MOVQ a+0(FP), AX
	TESTQ AX, AX
	JZ b
	PREFETCHT0 (AX)
b:
	MOVQ b+8(FP), AX
	TESTQ AX, AX
	JZ c
	PREFETCHT0 (AX)
c:
	MOVQ c+16(FP), AX
	TESTQ AX, AX
	JZ d
	PREFETCHT0 (AX)
d:
	MOVQ d+24(FP), AX
	TESTQ AX, AX
	JZ done
	PREFETCHT0 (AX)
done:
	RET
