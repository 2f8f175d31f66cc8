//go:build !purego

#include "textflag.h"

// func rowMaxF32(x unsafe.Pointer, n int) float32 returns the maximum of
// the n float32 at x, n a positive multiple of 8, as rowMax's lanes take
// it: every lane of four vector accumulators starts at x[0] and takes an
// element v where v > acc (VMAXPS with v first returns acc when v is NaN
// or equal), so a NaN x[0] stays and later NaNs are passed over; then the
// accumulators and their lanes are reduced the same way.
TEXT ·rowMaxF32(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS (SI), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-32, BX
rm_loop32:
	CMPQ AX, BX
	JGE  rm_loop8
	VMOVUPS (SI)(AX*4), Y4
	VMOVUPS 32(SI)(AX*4), Y5
	VMOVUPS 64(SI)(AX*4), Y6
	VMOVUPS 96(SI)(AX*4), Y7
	VMAXPS Y0, Y4, Y0
	VMAXPS Y1, Y5, Y1
	VMAXPS Y2, Y6, Y2
	VMAXPS Y3, Y7, Y3
	ADDQ $32, AX
	JMP  rm_loop32
rm_loop8:
	CMPQ AX, CX
	JGE  rm_reduce
	VMOVUPS (SI)(AX*4), Y4
	VMAXPS Y0, Y4, Y0
	ADDQ $8, AX
	JMP  rm_loop8
rm_reduce:
	VMAXPS Y0, Y1, Y0
	VMAXPS Y0, Y2, Y0
	VMAXPS Y0, Y3, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X0, X1, X0
	VPERMILPS $0x4E, X0, X1
	VMAXPS X0, X1, X0
	VPERMILPS $0xB1, X0, X1
	VMAXPS X0, X1, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET
