//go:build !purego

#include "textflag.h"

// Rows of tab used here (consts.go, index*64).
#define LOG2E 128
#define MAGIC 192
#define LN2HI 256
#define LN2LO 320
#define EP0 384
#define EP1 448
#define EP2 512
#define EP3 576
#define EP4 640
#define EP5 704

// Rows of etab (erf_amd64.go, index*64).
#define E64 0
#define EINVN 64
#define ESPLIT 128
#define ETWOTHIRDS 192
#define EABS 256
#define ESIGN 320
#define ETWOSQRTPI 384
#define ETWOM64 448
#define ETWOM65 512
#define ESMALL 576
#define ERP0 640
#define ERP1 704
#define ERP2 768
#define ERP3 832
#define ERP4 896
#define ERP5 960
#define ERP6 1024
#define EBIAS 1088
#define EONE 1152
#define EINF 1216

// Rows of emode[mode].
#define MK 0
#define MKHI 64
#define MKLO 128
#define MM 192
#define MCLAMP 256

// Offsets of rows 1 and 2 of erfTable (erfTabLen*4 each).
#define R1OFF 2752
#define R2OFF 5504

// The loops follow erfTail, erf1, gelu1 and geluGrad1 (erf32.go)
// operation by operation.

// func erf32AVX512(mode int, dst, x, dy *float32, n int, k *[kRows][16]uint32, e *[eRows][16]uint32, m *[mRows][16]uint32, r *[2][erfTabLen]uint32)
TEXT ·erf32AVX512(SB), NOSPLIT, $0-72
	MOVQ mode+0(FP), R9
	MOVQ dst+8(FP), DI
	MOVQ x+16(FP), SI
	MOVQ dy+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	MOVQ e+48(FP), BX
	MOVQ m+56(FP), R10
	MOVQ r+64(FP), R8
	VMOVUPS MAGIC(AX), Z16
	VMOVUPS LOG2E(AX), Z17
	VMOVUPS LN2HI(AX), Z18
	VMOVUPS LN2LO(AX), Z19
	VMOVUPS EP0(AX), Z20
	VMOVUPS EP1(AX), Z21
	VMOVUPS EP2(AX), Z22
	VMOVUPS EP3(AX), Z23
	VMOVUPS EP4(AX), Z24
	VMOVUPS EP5(AX), Z25
	VMOVUPS EONE(BX), Z26
	VMOVUPS EABS(BX), Z27
	VMOVUPS E64(BX), Z28
	VMOVUPS EINVN(BX), Z29
	VMOVUPS ESPLIT(BX), Z30
	VMOVUPS MK(R10), Z11
	VMOVUPS MKHI(R10), Z12
	VMOVUPS MKLO(R10), Z13
	VMOVUPS MM(R10), Z14
	VMOVUPS MCLAMP(R10), Z15

erf16:
	CMPQ CX, $0
	JLE  erf16done
	VMOVUPS (SI), Z0
	VPANDD  Z27, Z0, Z1         // |x|
	VCMPPS  $2, Z15, Z1, K2     // in = |x| <= clamp
	VMINPS  Z15, Z1, Z1         // v (NaN: clamp)
	VMULPS  Z11, Z1, Z2         // a = v k
	VMULPS  Z30, Z1, Z3         // c = v split
	VSUBPS  Z1, Z3, Z4
	VSUBPS  Z4, Z3, Z3          // vh = c - (c - v)
	VSUBPS  Z3, Z1, Z4          // vl = v - vh
	VMULPS  Z28, Z2, Z5
	VADDPS  Z16, Z5, Z5         // z = a 64 + magic
	VPSUBD  Z16, Z5, Z6         // i
	VSUBPS  Z16, Z5, Z5
	VMULPS  Z29, Z5, Z5         // r
	VMULPS  Z12, Z3, Z7
	VSUBPS  Z5, Z7, Z7          // vh kh - r
	VMULPS  Z12, Z4, Z8
	VMULPS  Z13, Z1, Z9
	VADDPS  Z9, Z8, Z8          // vl kh + v kl
	VADDPS  Z8, Z7, Z7          // d
	KXNORW  K0, K0, K1
	VGATHERDPS (R8)(Z6*4), K1, Z8       // r0
	KXNORW  K0, K0, K1
	VGATHERDPS R1OFF(R8)(Z6*4), K1, Z9  // r1
	KXNORW  K0, K0, K1
	VGATHERDPS R2OFF(R8)(Z6*4), K1, Z31 // lo
	VMULPS  Z9, Z5, Z10
	VADDPS  Z10, Z8, Z10        // r2 = r0 + r r1
	VMULPS  Z10, Z5, Z5
	VADDPS  Z5, Z9, Z5
	VMULPS  ETWOTHIRDS(BX), Z5, Z5 // r3 = (r1 + r r2) 2/3
	VMULPS  Z5, Z7, Z5
	VADDPS  Z10, Z5, Z5
	VMULPS  Z7, Z5, Z5
	VADDPS  Z9, Z5, Z5
	VMULPS  Z7, Z5, Z5
	VADDPS  Z31, Z5, Z5         // pd = p d + lo
	VMULPS  Z1, Z1, Z6          // pp
	VMULPS  Z3, Z3, Z7
	VSUBPS  Z6, Z7, Z7
	VMULPS  Z4, Z3, Z9
	VADDPS  Z9, Z9, Z9
	VADDPS  Z9, Z7, Z7
	VMULPS  Z4, Z4, Z9
	VADDPS  Z9, Z7, Z7          // qq
	VMULPS  Z14, Z6, Z6         // h
	VMULPS  Z14, Z7, Z7         // l
	VMULPS  Z17, Z6, Z10
	VADDPS  Z16, Z10, Z10
	VSUBPS  Z16, Z10, Z10       // n
	VMULPS  Z18, Z10, Z9
	VSUBPS  Z9, Z6, Z6
	VMULPS  Z19, Z10, Z9
	VSUBPS  Z9, Z6, Z6
	VADDPS  Z7, Z6, Z6          // reduced argument
	VMULPS  Z6, Z6, Z7
	VMULPS  Z20, Z6, Z9
	VADDPS  Z21, Z9, Z9
	VMULPS  Z6, Z9, Z9
	VADDPS  Z22, Z9, Z9
	VMULPS  Z6, Z9, Z9
	VADDPS  Z23, Z9, Z9
	VMULPS  Z6, Z9, Z9
	VADDPS  Z24, Z9, Z9
	VMULPS  Z6, Z9, Z9
	VADDPS  Z25, Z9, Z9
	VMULPS  Z7, Z9, Z9
	VADDPS  Z6, Z9, Z9          // s: exp = 1 + s
	VCVTTPS2DQ Z10, Z10
	VPADDD  EBIAS(BX), Z10, Z10
	VPSLLD  $23, Z10, Z10       // sc = 2^(n+64)
	VADDPS  Z5, Z8, Z7          // rv = r0 + pd
	VPXORD  Z6, Z6, Z6
	CMPQ    R9, $1
	JEQ     gelu16
	JGT     grad16
	VMULPS  Z9, Z7, Z9          // erf: q = r0 + (pd + rv s)
	VADDPS  Z9, Z5, Z9
	VADDPS  Z9, Z8, Z9
	VMULPS  Z10, Z9, Z9         // q sc
	VMULPS  ETWOM64(BX), Z9, Z9
	VSUBPS  Z9, Z26, Z9         // 1 - q sc 2^-64
	VPANDD  ESIGN(BX), Z0, Z8
	VPORD   Z8, Z9, Z9
	VMULPS  Z0, Z0, Z8          // z = x x
	VMULPS  ERP6(BX), Z8, Z7
	VADDPS  ERP5(BX), Z7, Z7
	VMULPS  Z8, Z7, Z7
	VADDPS  ERP4(BX), Z7, Z7
	VMULPS  Z8, Z7, Z7
	VADDPS  ERP3(BX), Z7, Z7
	VMULPS  Z8, Z7, Z7
	VADDPS  ERP2(BX), Z7, Z7
	VMULPS  Z8, Z7, Z7
	VADDPS  ERP1(BX), Z7, Z7
	VMULPS  Z8, Z7, Z7
	VADDPS  ERP0(BX), Z7, Z7
	VMULPS  Z7, Z0, Z7
	VADDPS  Z7, Z0, Z7          // x + x P
	VCMPPS  $1, ESMALL(BX), Z1, K3
	VMOVAPS Z7, K3, Z9
	JMP     store16

gelu16:
	VMOVAPS Z10, K2, Z6         // sc, 0 where |x| > 15
	VMULPS  Z9, Z7, Z9          // q = r0 + (pd + rv s)
	VADDPS  Z9, Z5, Z9
	VADDPS  Z9, Z8, Z9
	VMULPS  Z6, Z9, Z9          // q sc
	VMULPS  Z9, Z0, Z7
	VMULPS  ETWOM65(BX), Z7, Z7 // x < 0: (x q) 2^-65
	VMULPS  ETWOM65(BX), Z9, Z9
	VSUBPS  Z9, Z26, Z9
	VMULPS  Z9, Z0, Z9          // else x (1 - q 2^-65)
	VPXORD  Z6, Z6, Z6
	VCMPPS  $1, Z6, Z0, K3
	VMOVAPS Z7, K3, Z9
	JMP     store16

grad16:
	VMOVAPS Z10, K2, Z6         // sc, 0 where |x| > 15
	VMULPS  ETWOSQRTPI(BX), Z2, Z8
	VSUBPS  Z8, Z7, Z7          // w = rv - a 2/sqrt(pi)
	VMULPS  Z9, Z7, Z9
	VADDPS  Z9, Z7, Z9          // w + w s
	VMULPS  Z6, Z9, Z9
	VMULPS  ETWOM65(BX), Z9, Z7 // g
	VSUBPS  Z7, Z26, Z9         // x >= 0: 1 - g
	VPXORD  Z6, Z6, Z6
	VCMPPS  $1, Z6, Z0, K3
	VMOVAPS Z7, K3, Z9
	VMULPS  (DX), Z9, Z9        // dy gelu'
	VPANDD  Z27, Z0, Z6
	VCMPPS  $5, EINF(BX), Z6, K1 // ±Inf, NaN: x - x
	VSUBPS  Z0, Z0, K1, Z9
	JMP     put16

store16:
	VCMPPS  $3, Z0, Z0, K1      // NaN: x + x
	VADDPS  Z0, Z0, K1, Z9

put16:
	VMOVUPS Z9, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $16, CX
	JMP  erf16

erf16done:
	VZEROUPPER
	RET

// func erf32AVX2(mode int, dst, x, dy *float32, n int, k *[kRows][16]uint32, e *[eRows][16]uint32, m *[mRows][16]uint32, r *[2][erfTabLen]uint32)
TEXT ·erf32AVX2(SB), NOSPLIT, $0-72
	MOVQ mode+0(FP), R9
	MOVQ dst+8(FP), DI
	MOVQ x+16(FP), SI
	MOVQ dy+24(FP), DX
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), AX
	MOVQ e+48(FP), BX
	MOVQ m+56(FP), R10
	MOVQ r+64(FP), R8

erf8:
	CMPQ CX, $0
	JLE  erf8done
	VMOVUPS (SI), Y0
	VANDPS  EABS(BX), Y0, Y1    // |x|
	VCMPPS  $2, MCLAMP(R10), Y1, Y15 // in = |x| <= clamp
	VMINPS  MCLAMP(R10), Y1, Y1 // v (NaN: clamp)
	VMULPS  MK(R10), Y1, Y2     // a = v k
	VMULPS  ESPLIT(BX), Y1, Y3  // c = v split
	VSUBPS  Y1, Y3, Y4
	VSUBPS  Y4, Y3, Y3          // vh
	VSUBPS  Y3, Y1, Y4          // vl
	VMULPS  E64(BX), Y2, Y5
	VADDPS  MAGIC(AX), Y5, Y5   // z
	VPSUBD  MAGIC(AX), Y5, Y6   // i
	VSUBPS  MAGIC(AX), Y5, Y5
	VMULPS  EINVN(BX), Y5, Y5   // r
	VMULPS  MKHI(R10), Y3, Y7
	VSUBPS  Y5, Y7, Y7          // vh kh - r
	VMULPS  MKHI(R10), Y4, Y8
	VMULPS  MKLO(R10), Y1, Y9
	VADDPS  Y9, Y8, Y8
	VADDPS  Y8, Y7, Y7          // d
	VPCMPEQD Y13, Y13, Y13
	VGATHERDPS Y13, (R8)(Y6*4), Y8      // r0
	VPCMPEQD Y13, Y13, Y13
	VGATHERDPS Y13, R1OFF(R8)(Y6*4), Y9 // r1
	VPCMPEQD Y13, Y13, Y13
	VGATHERDPS Y13, R2OFF(R8)(Y6*4), Y11 // lo
	VMULPS  Y9, Y5, Y10
	VADDPS  Y10, Y8, Y10        // r2
	VMULPS  Y10, Y5, Y5
	VADDPS  Y5, Y9, Y5
	VMULPS  ETWOTHIRDS(BX), Y5, Y5 // r3
	VMULPS  Y5, Y7, Y5
	VADDPS  Y10, Y5, Y5
	VMULPS  Y7, Y5, Y5
	VADDPS  Y9, Y5, Y5
	VMULPS  Y7, Y5, Y5
	VADDPS  Y11, Y5, Y5         // pd = p d + lo
	VMULPS  Y1, Y1, Y6          // pp
	VMULPS  Y3, Y3, Y7
	VSUBPS  Y6, Y7, Y7
	VMULPS  Y4, Y3, Y9
	VADDPS  Y9, Y9, Y9
	VADDPS  Y9, Y7, Y7
	VMULPS  Y4, Y4, Y9
	VADDPS  Y9, Y7, Y7          // qq
	VMULPS  MM(R10), Y6, Y6     // h
	VMULPS  MM(R10), Y7, Y7     // l
	VMULPS  LOG2E(AX), Y6, Y10
	VADDPS  MAGIC(AX), Y10, Y10
	VSUBPS  MAGIC(AX), Y10, Y10 // n
	VMULPS  LN2HI(AX), Y10, Y9
	VSUBPS  Y9, Y6, Y6
	VMULPS  LN2LO(AX), Y10, Y9
	VSUBPS  Y9, Y6, Y6
	VADDPS  Y7, Y6, Y6          // reduced argument
	VMULPS  Y6, Y6, Y7
	VMULPS  EP0(AX), Y6, Y9
	VADDPS  EP1(AX), Y9, Y9
	VMULPS  Y6, Y9, Y9
	VADDPS  EP2(AX), Y9, Y9
	VMULPS  Y6, Y9, Y9
	VADDPS  EP3(AX), Y9, Y9
	VMULPS  Y6, Y9, Y9
	VADDPS  EP4(AX), Y9, Y9
	VMULPS  Y6, Y9, Y9
	VADDPS  EP5(AX), Y9, Y9
	VMULPS  Y7, Y9, Y9
	VADDPS  Y6, Y9, Y9          // s: exp = 1 + s
	VCVTTPS2DQ Y10, Y10
	VPADDD  EBIAS(BX), Y10, Y10
	VPSLLD  $23, Y10, Y10       // sc = 2^(n+64)
	VADDPS  Y5, Y8, Y7          // rv = r0 + pd
	VMOVUPS EONE(BX), Y11
	VXORPS  Y12, Y12, Y12
	VCMPPS  $1, Y12, Y0, Y12    // x < 0
	CMPQ    R9, $1
	JEQ     gelu8
	JGT     grad8
	VMULPS  Y9, Y7, Y9          // erf: q = r0 + (pd + rv s)
	VADDPS  Y9, Y5, Y9
	VADDPS  Y9, Y8, Y9
	VMULPS  Y10, Y9, Y9         // q sc
	VMULPS  ETWOM64(BX), Y9, Y9
	VSUBPS  Y9, Y11, Y9         // 1 - q sc 2^-64
	VANDPS  ESIGN(BX), Y0, Y8
	VORPS   Y8, Y9, Y9
	VMULPS  Y0, Y0, Y8          // z = x x
	VMULPS  ERP6(BX), Y8, Y7
	VADDPS  ERP5(BX), Y7, Y7
	VMULPS  Y8, Y7, Y7
	VADDPS  ERP4(BX), Y7, Y7
	VMULPS  Y8, Y7, Y7
	VADDPS  ERP3(BX), Y7, Y7
	VMULPS  Y8, Y7, Y7
	VADDPS  ERP2(BX), Y7, Y7
	VMULPS  Y8, Y7, Y7
	VADDPS  ERP1(BX), Y7, Y7
	VMULPS  Y8, Y7, Y7
	VADDPS  ERP0(BX), Y7, Y7
	VMULPS  Y7, Y0, Y7
	VADDPS  Y7, Y0, Y7          // x + x P
	VCMPPS  $1, ESMALL(BX), Y1, Y8
	VBLENDVPS Y8, Y7, Y9, Y9
	JMP     store8

gelu8:
	VANDPS  Y15, Y10, Y6        // sc, 0 where |x| > 15
	VMULPS  Y9, Y7, Y9          // q = r0 + (pd + rv s)
	VADDPS  Y9, Y5, Y9
	VADDPS  Y9, Y8, Y9
	VMULPS  Y6, Y9, Y9          // q sc
	VMULPS  Y9, Y0, Y7
	VMULPS  ETWOM65(BX), Y7, Y7 // x < 0: (x q) 2^-65
	VMULPS  ETWOM65(BX), Y9, Y9
	VSUBPS  Y9, Y11, Y9
	VMULPS  Y9, Y0, Y9          // else x (1 - q 2^-65)
	VBLENDVPS Y12, Y7, Y9, Y9
	JMP     store8

grad8:
	VANDPS  Y15, Y10, Y6        // sc, 0 where |x| > 15
	VMULPS  ETWOSQRTPI(BX), Y2, Y8
	VSUBPS  Y8, Y7, Y7          // w = rv - a 2/sqrt(pi)
	VMULPS  Y9, Y7, Y9
	VADDPS  Y9, Y7, Y9          // w + w s
	VMULPS  Y6, Y9, Y9
	VMULPS  ETWOM65(BX), Y9, Y7 // g
	VSUBPS  Y7, Y11, Y9         // x >= 0: 1 - g
	VBLENDVPS Y12, Y7, Y9, Y9
	VMULPS  (DX), Y9, Y9        // dy gelu'
	VANDPS  EABS(BX), Y0, Y6
	VCMPPS  $5, EINF(BX), Y6, Y8 // ±Inf, NaN: x - x
	VSUBPS  Y0, Y0, Y7
	VBLENDVPS Y8, Y7, Y9, Y9
	JMP     put8

store8:
	VCMPPS  $3, Y0, Y0, Y8      // NaN: x + x
	VADDPS  Y0, Y0, Y7
	VBLENDVPS Y8, Y7, Y9, Y9

put8:
	VMOVUPS Y9, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $8, CX
	JMP  erf8

erf8done:
	VZEROUPPER
	RET
