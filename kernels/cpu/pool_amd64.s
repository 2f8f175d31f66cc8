//go:build !purego

#include "textflag.h"

// func maxPool22F32(at unsafe.Pointer, x unsafe.Pointer, base, w, n int)
// writes at[k] (int32) = the arg max of the 2×2 window k at stride 2, for
// k in [0, n), n a multiple of 4: the window's taps are x[2k], x[2k+1]
// (its top row) and x[w+2k], x[w+2k+1], their indices base+2k, and so on.
// As maxPoolArgmaxes: the first tap, then each later tap replaces the
// maximum when it is greater or NaN (VCMPPS GT_OQ or UNORD_Q, blended).
// Eight windows at a time: two rows of 16 values, their even and odd
// columns split by VSHUFPS and put back in window order by VPERMPD; then
// four at a time in the low halves (where VSHUFPS leaves window order).
// The scalars reach the vector registers by the VEX-encoded VMOVD: the
// legacy MOVD made this kernel slower than the Go loop on an EPYC.
TEXT ·maxPool22F32(SB), NOSPLIT, $0-40
	MOVQ at+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ base+16(FP), AX
	MOVQ w+24(FP), DX
	MOVQ n+32(FP), R9
	LEAQ (SI)(DX*4), R8 // the bottom row
	// Y10: the index of window k's first tap, base + 2k, k = 0..7.
	VMOVD AX, X10
	VPBROADCASTD X10, Y10
	VMOVDQU mp_steps<>(SB), Y11
	VPADDD Y11, Y10, Y10
	// Y12: 1; Y13: w; Y14: w+1; Y15: 16 (the step to the next 8 windows).
	MOVL $1, BX
	VMOVD BX, X12
	VPBROADCASTD X12, Y12
	VMOVD DX, X13
	VPBROADCASTD X13, Y13
	VPADDD Y12, Y13, Y14
	MOVL $16, BX
	VMOVD BX, X15
	VPBROADCASTD X15, Y15
	MOVQ R9, CX
	SHRQ $3, CX
	JZ   mp_four
mp_loop:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 0(R8), Y2
	VMOVUPS 32(R8), Y3
	VSHUFPS $0x88, Y1, Y0, Y4 // top left, in lane order
	VSHUFPS $0xDD, Y1, Y0, Y5 // top right
	VSHUFPS $0x88, Y3, Y2, Y6 // bottom left
	VSHUFPS $0xDD, Y3, Y2, Y7 // bottom right
	VPERMPD $0xD8, Y4, Y4     // window order
	VPERMPD $0xD8, Y5, Y5
	VPERMPD $0xD8, Y6, Y6
	VPERMPD $0xD8, Y7, Y7
	VMOVDQU Y10, Y8           // the arg max: the first tap
	// The top right tap.
	VCMPPS $0x1E, Y4, Y5, Y9  // greater
	VCMPPS $0x03, Y5, Y5, Y1  // NaN
	VORPS Y1, Y9, Y9
	VBLENDVPS Y9, Y5, Y4, Y4
	VPADDD Y12, Y10, Y0
	VBLENDVPS Y9, Y0, Y8, Y8
	// The bottom left tap.
	VCMPPS $0x1E, Y4, Y6, Y9
	VCMPPS $0x03, Y6, Y6, Y1
	VORPS Y1, Y9, Y9
	VBLENDVPS Y9, Y6, Y4, Y4
	VPADDD Y13, Y10, Y0
	VBLENDVPS Y9, Y0, Y8, Y8
	// The bottom right tap.
	VCMPPS $0x1E, Y4, Y7, Y9
	VCMPPS $0x03, Y7, Y7, Y1
	VORPS Y1, Y9, Y9
	VPADDD Y14, Y10, Y0
	VBLENDVPS Y9, Y0, Y8, Y8
	VMOVDQU Y8, 0(DI)
	VPADDD Y15, Y10, Y10
	ADDQ $64, SI
	ADDQ $64, R8
	ADDQ $32, DI
	DECQ CX
	JNZ  mp_loop
mp_four:
	TESTQ $4, R9
	JZ   mp_done
	VMOVUPS 0(SI), X0
	VMOVUPS 16(SI), X1
	VMOVUPS 0(R8), X2
	VMOVUPS 16(R8), X3
	VSHUFPS $0x88, X1, X0, X4 // top left, in window order
	VSHUFPS $0xDD, X1, X0, X5
	VSHUFPS $0x88, X3, X2, X6
	VSHUFPS $0xDD, X3, X2, X7
	VMOVDQU X10, X8
	VCMPPS $0x1E, X4, X5, X9
	VCMPPS $0x03, X5, X5, X1
	VORPS X1, X9, X9
	VBLENDVPS X9, X5, X4, X4
	VPADDD X12, X10, X0
	VBLENDVPS X9, X0, X8, X8
	VCMPPS $0x1E, X4, X6, X9
	VCMPPS $0x03, X6, X6, X1
	VORPS X1, X9, X9
	VBLENDVPS X9, X6, X4, X4
	VPADDD X13, X10, X0
	VBLENDVPS X9, X0, X8, X8
	VCMPPS $0x1E, X4, X7, X9
	VCMPPS $0x03, X7, X7, X1
	VORPS X1, X9, X9
	VPADDD X14, X10, X0
	VBLENDVPS X9, X0, X8, X8
	VMOVDQU X8, 0(DI)
mp_done:
	VZEROUPPER
	RET

// 0, 2, ..., 14: the offsets of eight windows' first taps.
DATA mp_steps<>+0(SB)/4, $0
DATA mp_steps<>+4(SB)/4, $2
DATA mp_steps<>+8(SB)/4, $4
DATA mp_steps<>+12(SB)/4, $6
DATA mp_steps<>+16(SB)/4, $8
DATA mp_steps<>+20(SB)/4, $10
DATA mp_steps<>+24(SB)/4, $12
DATA mp_steps<>+28(SB)/4, $14
GLOBL mp_steps<>(SB), RODATA|NOPTR, $32
