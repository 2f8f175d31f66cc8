//go:build !purego

#include "textflag.h"

// The lane sums of rowsum.go: lane j of the 16 in acc adds elements j,
// j+16, j+32, ... in order, each lane one vector lane (float32: Y0 holds
// lanes 0-7, Y1 lanes 8-15; float64: Y0-Y3 lanes 0-3, 4-7, 8-11, 12-15).
// n is a positive multiple of 16. The dot forms round each product (VMULPS,
// then VADDPS: no fused multiply-add), as the Go loops do.

// func laneSumF32(acc *[16]float32, x unsafe.Pointer, n int)
TEXT ·laneSumF32(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	XORQ AX, AX
ls32_loop:
	VADDPS (SI)(AX*4), Y0, Y0
	VADDPS 32(SI)(AX*4), Y1, Y1
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  ls32_loop
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// func laneSumF64(acc *[16]float64, x unsafe.Pointer, n int)
TEXT ·laneSumF64(SB), NOSPLIT, $0-24
	MOVQ acc+0(FP), DX
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VMOVUPD (DX), Y0
	VMOVUPD 32(DX), Y1
	VMOVUPD 64(DX), Y2
	VMOVUPD 96(DX), Y3
	XORQ AX, AX
ls64_loop:
	VADDPD (SI)(AX*8), Y0, Y0
	VADDPD 32(SI)(AX*8), Y1, Y1
	VADDPD 64(SI)(AX*8), Y2, Y2
	VADDPD 96(SI)(AX*8), Y3, Y3
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  ls64_loop
	VMOVUPD Y0, (DX)
	VMOVUPD Y1, 32(DX)
	VMOVUPD Y2, 64(DX)
	VMOVUPD Y3, 96(DX)
	VZEROUPPER
	RET

// func laneDotF32(acc *[16]float32, a, b unsafe.Pointer, n int)
TEXT ·laneDotF32(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ n+24(FP), CX
	VMOVUPS (DX), Y0
	VMOVUPS 32(DX), Y1
	XORQ AX, AX
ld32_loop:
	VMOVUPS (SI)(AX*4), Y2
	VMOVUPS 32(SI)(AX*4), Y3
	VMULPS (DI)(AX*4), Y2, Y2
	VMULPS 32(DI)(AX*4), Y3, Y3
	VADDPS Y2, Y0, Y0
	VADDPS Y3, Y1, Y1
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  ld32_loop
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	VZEROUPPER
	RET

// func laneDotF64(acc *[16]float64, a, b unsafe.Pointer, n int)
TEXT ·laneDotF64(SB), NOSPLIT, $0-32
	MOVQ acc+0(FP), DX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ n+24(FP), CX
	VMOVUPD (DX), Y0
	VMOVUPD 32(DX), Y1
	VMOVUPD 64(DX), Y2
	VMOVUPD 96(DX), Y3
	XORQ AX, AX
ld64_loop:
	VMOVUPD (SI)(AX*8), Y4
	VMOVUPD 32(SI)(AX*8), Y5
	VMOVUPD 64(SI)(AX*8), Y6
	VMOVUPD 96(SI)(AX*8), Y7
	VMULPD (DI)(AX*8), Y4, Y4
	VMULPD 32(DI)(AX*8), Y5, Y5
	VMULPD 64(DI)(AX*8), Y6, Y6
	VMULPD 96(DI)(AX*8), Y7, Y7
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	ADDQ $16, AX
	CMPQ AX, CX
	JLT  ld64_loop
	VMOVUPD Y0, (DX)
	VMOVUPD Y1, 32(DX)
	VMOVUPD Y2, 64(DX)
	VMOVUPD Y3, 96(DX)
	VZEROUPPER
	RET

// func sqrtF32(dst, src unsafe.Pointer, n int): dst[i] = sqrt(src[i]) for
// n a multiple of 8 (VSQRTPS: the correctly rounded square root, as
// float32(math.Sqrt(float64(x))) is).
TEXT ·sqrtF32(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
sq32_loop:
	CMPQ AX, CX
	JGE  sq32_done
	VSQRTPS (SI)(AX*4), Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP  sq32_loop
sq32_done:
	VZEROUPPER
	RET

// func sqrtF64(dst, src unsafe.Pointer, n int): the same for float64, n a
// multiple of 4 (VSQRTPD, as math.Sqrt).
TEXT ·sqrtF64(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX
sq64_loop:
	CMPQ AX, CX
	JGE  sq64_done
	VSQRTPD (SI)(AX*8), Y0
	VMOVUPD Y0, (DI)(AX*8)
	ADDQ $4, AX
	JMP  sq64_loop
sq64_done:
	VZEROUPPER
	RET
