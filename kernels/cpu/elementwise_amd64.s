//go:build !purego

#include "textflag.h"

// SSE2 loops of add, sub, mul and div over contiguous f32 and f64 rows,
// declared in elementwise_amd64.go: out[i] = a[i] op b[i] (ewVV), a[i] op s
// (ewVS) and s op b[i] (ewSV). Each lane computes the same IEEE 754 operation,
// with the same rounding, as the scalar instruction Go emits for the loop in
// vecVec, so results are bitwise those of the Go code; two 16-byte vectors
// per iteration, then one element at a time.

// func ewVVAddF32(out, a, b []float32)
TEXT ·ewVVAddF32(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	ADDPS X2, X0
	ADDPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	ADDSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSAddF32(out, a []float32, s float32)
TEXT ·ewVSAddF32(SB), NOSPLIT, $0-52
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSS s+48(FP), X4
	SHUFPS $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	ADDPS X4, X0
	ADDPS X4, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	ADDSS X4, X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVAddF32(out []float32, s float32, b []float32)
TEXT ·ewSVAddF32(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSS s+24(FP), X4
	SHUFPS $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	ADDPS X2, X0
	ADDPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	ADDSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVSubF32(out, a, b []float32)
TEXT ·ewVVSubF32(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	SUBPS X2, X0
	SUBPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	SUBSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSSubF32(out, a []float32, s float32)
TEXT ·ewVSSubF32(SB), NOSPLIT, $0-52
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSS s+48(FP), X4
	SHUFPS $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	SUBPS X4, X0
	SUBPS X4, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	SUBSS X4, X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVSubF32(out []float32, s float32, b []float32)
TEXT ·ewSVSubF32(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSS s+24(FP), X4
	SHUFPS $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	SUBPS X2, X0
	SUBPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	SUBSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVMulF32(out, a, b []float32)
TEXT ·ewVVMulF32(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	MULPS X2, X0
	MULPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	MULSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSMulF32(out, a []float32, s float32)
TEXT ·ewVSMulF32(SB), NOSPLIT, $0-52
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSS s+48(FP), X4
	SHUFPS $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MULPS X4, X0
	MULPS X4, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	MULSS X4, X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVMulF32(out []float32, s float32, b []float32)
TEXT ·ewSVMulF32(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSS s+24(FP), X4
	SHUFPS $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	MULPS X2, X0
	MULPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	MULSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVDivF32(out, a, b []float32)
TEXT ·ewVVDivF32(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	DIVPS X2, X0
	DIVPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	DIVSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSDivF32(out, a []float32, s float32)
TEXT ·ewVSDivF32(SB), NOSPLIT, $0-52
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSS s+48(FP), X4
	SHUFPS $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (SI)(AX*4), X0
	MOVUPS 16(SI)(AX*4), X1
	DIVPS X4, X0
	DIVPS X4, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSS (SI)(AX*4), X0
	DIVSS X4, X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVDivF32(out []float32, s float32, b []float32)
TEXT ·ewSVDivF32(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSS s+24(FP), X4
	SHUFPS $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-8, BX
	JZ   tail
loop:
	MOVUPS (DX)(AX*4), X2
	MOVUPS 16(DX)(AX*4), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	DIVPS X2, X0
	DIVPS X3, X1
	MOVUPS X0, (DI)(AX*4)
	MOVUPS X1, 16(DI)(AX*4)
	ADDQ $8, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	DIVSS (DX)(AX*4), X0
	MOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVAddF64(out, a, b []float64)
TEXT ·ewVVAddF64(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	ADDPD X2, X0
	ADDPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	ADDSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSAddF64(out, a []float64, s float64)
TEXT ·ewVSAddF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSD s+48(FP), X4
	SHUFPD $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	ADDPD X4, X0
	ADDPD X4, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	ADDSD X4, X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVAddF64(out []float64, s float64, b []float64)
TEXT ·ewSVAddF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSD s+24(FP), X4
	SHUFPD $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	ADDPD X2, X0
	ADDPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	ADDSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVSubF64(out, a, b []float64)
TEXT ·ewVVSubF64(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	SUBPD X2, X0
	SUBPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	SUBSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSSubF64(out, a []float64, s float64)
TEXT ·ewVSSubF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSD s+48(FP), X4
	SHUFPD $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	SUBPD X4, X0
	SUBPD X4, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	SUBSD X4, X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVSubF64(out []float64, s float64, b []float64)
TEXT ·ewSVSubF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSD s+24(FP), X4
	SHUFPD $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	SUBPD X2, X0
	SUBPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	SUBSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVMulF64(out, a, b []float64)
TEXT ·ewVVMulF64(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	MULPD X2, X0
	MULPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	MULSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSMulF64(out, a []float64, s float64)
TEXT ·ewVSMulF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSD s+48(FP), X4
	SHUFPD $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	MULPD X4, X0
	MULPD X4, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	MULSD X4, X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVMulF64(out []float64, s float64, b []float64)
TEXT ·ewSVMulF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSD s+24(FP), X4
	SHUFPD $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	MULPD X2, X0
	MULPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	MULSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVVDivF64(out, a, b []float64)
TEXT ·ewVVDivF64(SB), NOSPLIT, $0-72
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	DIVPD X2, X0
	DIVPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	DIVSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewVSDivF64(out, a []float64, s float64)
TEXT ·ewVSDivF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVQ a_base+24(FP), SI
	MOVSD s+48(FP), X4
	SHUFPD $0, X4, X4
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (SI)(AX*8), X0
	MOVUPD 16(SI)(AX*8), X1
	DIVPD X4, X0
	DIVPD X4, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVSD (SI)(AX*8), X0
	DIVSD X4, X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func ewSVDivF64(out []float64, s float64, b []float64)
TEXT ·ewSVDivF64(SB), NOSPLIT, $0-56
	MOVQ out_base+0(FP), DI
	MOVQ out_len+8(FP), CX
	MOVSD s+24(FP), X4
	SHUFPD $0, X4, X4
	MOVQ b_base+32(FP), DX
	XORQ AX, AX
	MOVQ CX, BX
	ANDQ $-4, BX
	JZ   tail
loop:
	MOVUPD (DX)(AX*8), X2
	MOVUPD 16(DX)(AX*8), X3
	MOVAPS X4, X0
	MOVAPS X4, X1
	DIVPD X2, X0
	DIVPD X3, X1
	MOVUPD X0, (DI)(AX*8)
	MOVUPD X1, 16(DI)(AX*8)
	ADDQ $4, AX
	CMPQ AX, BX
	JLT  loop
tail:
	CMPQ AX, CX
	JGE  done
	MOVAPS X4, X0
	DIVSD (DX)(AX*8), X0
	MOVSD X0, (DI)(AX*8)
	INCQ AX
	JMP  tail
done:
	RET

// func reluGradF32(o, dy, x []float32) int
//
// reluGradF32 is reluGradRow's f32 loop over the first len(o)&^7 elements
// (it returns how many): o[i] = dy[i] where the bits of x[i], as an int32,
// lie in [1, 0x7f800000] (x > 0, +Inf included, NaN not), else +0. Each
// lane compares integers and masks the bits of dy, as the Go loop does.
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
	XORQ AX, AX
loop:
	MOVOU (DX)(AX*4), X0
	MOVOU 16(DX)(AX*4), X1
	MOVO  X0, X2
	MOVO  X1, X3
	PCMPGTL X6, X0        // x > 0 as int32
	PCMPGTL X6, X1
	PCMPGTL X7, X2        // x > +Inf's bits: NaN
	PCMPGTL X7, X3
	PANDN X0, X2          // x > 0 and not NaN
	PANDN X1, X3
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
