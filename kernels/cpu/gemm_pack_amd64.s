//go:build !purego

#include "textflag.h"

// The packing loops of the blocked gemm (gemm.go, gemm_amd64.go); its
// micro-kernels are generated into gemm_kernels_amd64.s by gen_gemm.go.

// func gemmCopyRows64(dst, src unsafe.Pointer, stride, rows int)
// copies rows 64-byte rows, stride bytes apart at src, to dst one after
// another: a packed B panel of 16 f32 or 8 f64 columns.
TEXT ·gemmCopyRows64(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ rows+24(FP), CX
	TESTQ CX, CX
	JLE  c_done
c_loop:
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	ADDQ DX, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  c_loop
	VZEROUPPER
c_done:
	RET

// func gemmPackTB16(dst, src unsafe.Pointer, stride, steps int)
// packs a 16-column f32 panel of op(B) = Bᵀ: column j of the panel is row
// j of B (16 rows, stride bytes apart at src), and the panel holds steps
// rows of 16 values (dst, 64 bytes each). steps is a multiple of 8: each
// 8×8 block is loaded, transposed in registers and stored.
TEXT ·gemmPackTB16(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ steps+24(FP), CX
	SHRQ $3, CX
	JZ   t_done
	LEAQ (DX)(DX*2), R9        // 3·stride
	LEAQ (SI)(DX*4), R10       // rows 4..7
t_loop:
	MOVQ SI, R11
	MOVQ R10, R12
	MOVQ $2, BX                // columns 0..7, then 8..15
t_half:
	VMOVUPS (R11), Y0
	VMOVUPS (R11)(DX*1), Y1
	VMOVUPS (R11)(DX*2), Y2
	VMOVUPS (R11)(R9*1), Y3
	VMOVUPS (R12), Y4
	VMOVUPS (R12)(DX*1), Y5
	VMOVUPS (R12)(DX*2), Y6
	VMOVUPS (R12)(R9*1), Y7
	VUNPCKLPS Y1, Y0, Y8
	VUNPCKHPS Y1, Y0, Y9
	VUNPCKLPS Y3, Y2, Y10
	VUNPCKHPS Y3, Y2, Y11
	VUNPCKLPS Y5, Y4, Y12
	VUNPCKHPS Y5, Y4, Y13
	VUNPCKLPS Y7, Y6, Y14
	VUNPCKHPS Y7, Y6, Y15
	VSHUFPS $0x44, Y10, Y8, Y0
	VSHUFPS $0xEE, Y10, Y8, Y1
	VSHUFPS $0x44, Y11, Y9, Y2
	VSHUFPS $0xEE, Y11, Y9, Y3
	VSHUFPS $0x44, Y14, Y12, Y4
	VSHUFPS $0xEE, Y14, Y12, Y5
	VSHUFPS $0x44, Y15, Y13, Y6
	VSHUFPS $0xEE, Y15, Y13, Y7
	VPERM2F128 $0x20, Y4, Y0, Y8
	VPERM2F128 $0x20, Y5, Y1, Y9
	VPERM2F128 $0x20, Y6, Y2, Y10
	VPERM2F128 $0x20, Y7, Y3, Y11
	VPERM2F128 $0x31, Y4, Y0, Y12
	VPERM2F128 $0x31, Y5, Y1, Y13
	VPERM2F128 $0x31, Y6, Y2, Y14
	VPERM2F128 $0x31, Y7, Y3, Y15
	VMOVUPS Y8, 0(DI)
	VMOVUPS Y9, 64(DI)
	VMOVUPS Y10, 128(DI)
	VMOVUPS Y11, 192(DI)
	VMOVUPS Y12, 256(DI)
	VMOVUPS Y13, 320(DI)
	VMOVUPS Y14, 384(DI)
	VMOVUPS Y15, 448(DI)
	LEAQ (R11)(DX*8), R11      // rows 8..15
	LEAQ (R12)(DX*8), R12
	ADDQ $32, DI               // their 8 columns
	DECQ BX
	JNZ  t_half
	ADDQ $448, DI              // 8 steps of 64 bytes in all
	ADDQ $32, SI               // the next 8 steps of each row
	ADDQ $32, R10
	DECQ CX
	JNZ  t_loop
	VZEROUPPER
t_done:
	RET

// func gemmPackA6(dst, src unsafe.Pointer, stride, steps int)
// packs steps (a multiple of 4) steps of a 6-row f32 panel of A: row r of
// the panel is at src + r*stride bytes, and the panel holds steps groups
// of 6 values (dst, 24 bytes each), one per row. Each 4×4 block of rows 0-3
// is transposed in registers, rows 4-5 are interleaved.
TEXT ·gemmPackA6(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ steps+24(FP), CX
	SHRQ $2, CX
	JZ   pa_done
	LEAQ (SI)(DX*1), R9
	LEAQ (SI)(DX*2), R10
	LEAQ (R9)(DX*2), R11
	LEAQ (R10)(DX*2), R12
	LEAQ (R11)(DX*2), R13
	XORQ AX, AX
pa_loop:
	MOVUPS (SI)(AX*1), X0  // a0 a1 a2 a3
	MOVUPS (R9)(AX*1), X1  // b0 b1 b2 b3
	MOVUPS (R10)(AX*1), X2 // c0 c1 c2 c3
	MOVUPS (R11)(AX*1), X3 // d0 d1 d2 d3
	MOVUPS (R12)(AX*1), X8 // e0 e1 e2 e3
	MOVUPS (R13)(AX*1), X9 // f0 f1 f2 f3
	MOVAPS X0, X4
	UNPCKLPS X1, X4        // a0 b0 a1 b1
	UNPCKHPS X1, X0        // a2 b2 a3 b3
	MOVAPS X2, X5
	UNPCKLPS X3, X5        // c0 d0 c1 d1
	UNPCKHPS X3, X2        // c2 d2 c3 d3
	MOVAPS X4, X6
	MOVLHPS X5, X6         // a0 b0 c0 d0
	MOVHLPS X4, X5         // a1 b1 c1 d1
	MOVAPS X0, X7
	MOVLHPS X2, X7         // a2 b2 c2 d2
	MOVHLPS X0, X2         // a3 b3 c3 d3
	MOVAPS X8, X10
	UNPCKLPS X9, X10       // e0 f0 e1 f1
	UNPCKHPS X9, X8        // e2 f2 e3 f3
	MOVUPS X6, 0(DI)
	MOVSD X10, 16(DI)
	MOVUPS X5, 24(DI)
	MOVHPS X10, 40(DI)
	MOVUPS X7, 48(DI)
	MOVSD X8, 64(DI)
	MOVUPS X2, 72(DI)
	MOVHPS X8, 88(DI)
	ADDQ $16, AX
	ADDQ $96, DI
	DECQ CX
	JNZ  pa_loop
pa_done:
	RET

// func gemmPackAT6(dst, src unsafe.Pointer, stride, steps int)
// packs steps steps of a 6-row f32 panel of op(A) = Aᵀ: step p's 6 values
// are contiguous at src + p*stride bytes and go to dst + 24*p.
TEXT ·gemmPackAT6(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ steps+24(FP), CX
	TESTQ CX, CX
	JLE  pt_done
pt_loop:
	MOVUPS (SI), X0
	MOVSD 16(SI), X1
	MOVUPS X0, 0(DI)
	MOVSD X1, 16(DI)
	ADDQ DX, SI
	ADDQ $24, DI
	DECQ CX
	JNZ  pt_loop
pt_done:
	RET
