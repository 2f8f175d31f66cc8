//go:build !purego

#include "textflag.h"

// func cpuLSL() (cpu uint32, ok bool)
TEXT ·cpuLSL(SB), NOSPLIT, $0-5
	MOVL $0x7b, BX
	LSLL BX, AX
	JNE  fail
	ANDL $0xfff, AX // the low 12 bits: the CPU (the node above them)
	MOVL AX, cpu+0(FP)
	MOVB $1, ok+4(FP)
	RET

fail:
	MOVL $0, cpu+0(FP)
	MOVB $0, ok+4(FP)
	RET
