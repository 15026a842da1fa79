#include "textflag.h"

// func Line(p unsafe.Pointer)
TEXT ·Line(SB), NOSPLIT|NOFRAME, $0-8
	MOVD p+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET

// PREFETCH_ARG loads the line at argument arg unless it is nil, then
// goes on at label next.
#define PREFETCH_ARG(arg, next) MOVD arg(FP), R0; CBZ R0, next; PRFM (R0), PLDL1KEEP

// func Lines(a, b, c, d unsafe.Pointer)
TEXT ·Lines(SB), NOSPLIT|NOFRAME, $0-32
	PREFETCH_ARG(a+0, b)
b:
	PREFETCH_ARG(b+8, c)
c:
	PREFETCH_ARG(c+16, d)
d:
	PREFETCH_ARG(d+24, done)
done:
	RET
