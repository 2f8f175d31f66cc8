//go:build !purego

#include "textflag.h"

// Rows of tab used here (consts.go, index*64).
#define MAGIC 192
#define ONE 768

// Rows of stab (sincos_amd64.go, index*64).
#define STWOOVERPI 0
#define SPIO2A 64
#define SPIO2B 128
#define SSP0 192
#define SSP1 256
#define SSP2 320
#define SCP0 384
#define SCP1 448
#define SCP2 512
#define SHALF 576
#define SI1 640
#define SSIGN 704

// The loops follow sinCos1 (sincos.go) operation by operation.

// func sinCos32AVX512(quarter int, dst, src *float32, n int, k *[kRows][16]uint32, s *[sRows][16]uint32)
TEXT ·sinCos32AVX512(SB), NOSPLIT, $0-48
	MOVQ quarter+0(FP), R9
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), AX
	MOVQ s+40(FP), BX
	VPXORD  Z15, Z15, Z15
	CMPQ    R9, $0
	JEQ     sc16
	VMOVUPS SI1(BX), Z15        // quarter

sc16:
	CMPQ CX, $0
	JLE  sc16done
	VMOVUPS (SI), Z0
	VMULPS  STWOOVERPI(BX), Z0, Z1
	VADDPS  MAGIC(AX), Z1, Z1
	VSUBPS  MAGIC(AX), Z1, Z1   // n
	VCVTTPS2DQ Z1, Z2
	VPADDD  Z15, Z2, Z2         // q
	VCVTPS2PD Y0, Z3
	VCVTPS2PD Y1, Z4
	VMULPD  SPIO2A(BX), Z4, Z5
	VSUBPD  Z5, Z3, Z3
	VMULPD  SPIO2B(BX), Z4, Z5
	VSUBPD  Z5, Z3, Z3
	VCVTPD2PS Z3, Y3            // r, low half
	VEXTRACTF64X4 $1, Z0, Y6
	VEXTRACTF64X4 $1, Z1, Y7
	VCVTPS2PD Y6, Z6
	VCVTPS2PD Y7, Z7
	VMULPD  SPIO2A(BX), Z7, Z5
	VSUBPD  Z5, Z6, Z6
	VMULPD  SPIO2B(BX), Z7, Z5
	VSUBPD  Z5, Z6, Z6
	VCVTPD2PS Z6, Y6            // r, high half
	VINSERTF64X4 $1, Y6, Z3, Z3 // r
	VMULPS  Z3, Z3, Z4          // z
	VMULPS  SSP0(BX), Z4, Z5    // sin
	VADDPS  SSP1(BX), Z5, Z5
	VMULPS  Z4, Z5, Z5
	VADDPS  SSP2(BX), Z5, Z5
	VMULPS  Z4, Z5, Z5
	VMULPS  Z3, Z5, Z5
	VADDPS  Z3, Z5, Z5
	VMULPS  SCP0(BX), Z4, Z6    // cos
	VADDPS  SCP1(BX), Z6, Z6
	VMULPS  Z4, Z6, Z6
	VADDPS  SCP2(BX), Z6, Z6
	VMULPS  Z4, Z6, Z6
	VMULPS  Z4, Z6, Z6
	VMULPS  SHALF(BX), Z4, Z7
	VSUBPS  Z7, Z6, Z6
	VADDPS  ONE(AX), Z6, Z6
	VPTESTMD SI1(BX), Z2, K1    // q odd: cos
	VMOVAPS Z6, K1, Z5
	VPSLLD  $30, Z2, Z2
	VPANDD  SSIGN(BX), Z2, Z2
	VPXORD  Z2, Z5, Z5
	VMOVUPS Z5, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  sc16

sc16done:
	VZEROUPPER
	RET

// func sinCos32AVX2(quarter int, dst, src *float32, n int, k *[kRows][16]uint32, s *[sRows][16]uint32)
TEXT ·sinCos32AVX2(SB), NOSPLIT, $0-48
	MOVQ quarter+0(FP), R9
	MOVQ dst+8(FP), DI
	MOVQ src+16(FP), SI
	MOVQ n+24(FP), CX
	MOVQ k+32(FP), AX
	MOVQ s+40(FP), BX
	VPXOR   Y15, Y15, Y15
	CMPQ    R9, $0
	JEQ     sc8
	VMOVUPS SI1(BX), Y15        // quarter

sc8:
	CMPQ CX, $0
	JLE  sc8done
	VMOVUPS (SI), Y0
	VMULPS  STWOOVERPI(BX), Y0, Y1
	VADDPS  MAGIC(AX), Y1, Y1
	VSUBPS  MAGIC(AX), Y1, Y1   // n
	VCVTTPS2DQ Y1, Y2
	VPADDD  Y15, Y2, Y2         // q
	VCVTPS2PD X0, Y3
	VCVTPS2PD X1, Y4
	VMULPD  SPIO2A(BX), Y4, Y5
	VSUBPD  Y5, Y3, Y3
	VMULPD  SPIO2B(BX), Y4, Y5
	VSUBPD  Y5, Y3, Y3
	VCVTPD2PSY Y3, X3           // r, low half
	VEXTRACTF128 $1, Y0, X6
	VEXTRACTF128 $1, Y1, X7
	VCVTPS2PD X6, Y6
	VCVTPS2PD X7, Y7
	VMULPD  SPIO2A(BX), Y7, Y5
	VSUBPD  Y5, Y6, Y6
	VMULPD  SPIO2B(BX), Y7, Y5
	VSUBPD  Y5, Y6, Y6
	VCVTPD2PSY Y6, X6           // r, high half
	VINSERTF128 $1, X6, Y3, Y3  // r
	VMULPS  Y3, Y3, Y4          // z
	VMULPS  SSP0(BX), Y4, Y5    // sin
	VADDPS  SSP1(BX), Y5, Y5
	VMULPS  Y4, Y5, Y5
	VADDPS  SSP2(BX), Y5, Y5
	VMULPS  Y4, Y5, Y5
	VMULPS  Y3, Y5, Y5
	VADDPS  Y3, Y5, Y5
	VMULPS  SCP0(BX), Y4, Y6    // cos
	VADDPS  SCP1(BX), Y6, Y6
	VMULPS  Y4, Y6, Y6
	VADDPS  SCP2(BX), Y6, Y6
	VMULPS  Y4, Y6, Y6
	VMULPS  Y4, Y6, Y6
	VMULPS  SHALF(BX), Y4, Y7
	VSUBPS  Y7, Y6, Y6
	VADDPS  ONE(AX), Y6, Y6
	VPAND   SI1(BX), Y2, Y8
	VPCMPEQD SI1(BX), Y8, Y8    // q odd: cos
	VBLENDVPS Y8, Y6, Y5, Y5
	VPSLLD  $30, Y2, Y2
	VPAND   SSIGN(BX), Y2, Y2
	VXORPS  Y2, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  sc8

sc8done:
	VZEROUPPER
	RET
