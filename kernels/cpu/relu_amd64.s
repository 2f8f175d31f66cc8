//go:build !purego

#include "textflag.h"

// func reluGradF32(o, dy, x []float32) int
//
// reluGradF32 is reluGradRow's f32 loop over the first len(o)&^7 elements
// (it returns how many): o[i] = dy[i] where the bits of x[i], as an int32,
// are positive (x > 0, +Inf, a NaN without the sign bit) or, without the
// sign bit, lie above +Inf's (a NaN), else +0. Each lane compares integers
// and masks the bits of dy, as the Go loop does.
TEXT ·reluGradF32(SB), NOSPLIT, $0-80
	MOVQ o_base+0(FP), DI
	MOVQ o_len+8(FP), CX
	MOVQ dy_base+24(FP), SI
	MOVQ x_base+48(FP), DX
	ANDQ $-8, CX
	MOVQ CX, ret+72(FP)
	JZ   done
	PXOR X6, X6           // 0
	MOVL $0x7f800000, AX
	MOVQ AX, X7
	PSHUFL $0, X7, X7     // +Inf's bits
	MOVL $0x7fffffff, AX
	MOVQ AX, X8
	PSHUFL $0, X8, X8     // all but the sign bit
	XORQ AX, AX
loop:
	MOVOU (DX)(AX*4), X0
	MOVOU 16(DX)(AX*4), X1
	MOVO  X0, X2
	MOVO  X1, X3
	PCMPGTL X6, X0        // bits > 0 as int32
	PCMPGTL X6, X1
	PAND  X8, X2          // |x|
	PAND  X8, X3
	PCMPGTL X7, X2        // |x| > +Inf's bits: NaN
	PCMPGTL X7, X3
	POR   X0, X2          // bits > 0 or NaN
	POR   X1, X3
	MOVOU (SI)(AX*4), X4
	MOVOU 16(SI)(AX*4), X5
	PAND  X4, X2
	PAND  X5, X3
	MOVOU X2, (DI)(AX*4)
	MOVOU X3, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  loop
done:
	RET
