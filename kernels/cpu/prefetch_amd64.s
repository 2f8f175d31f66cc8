//go:build !purego

#include "textflag.h"

// func prefetchLines(p unsafe.Pointer, n int)
//
// PREFETCHT0 of the n cache lines from p on, 64 bytes apart.
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE done

loop:
	PREFETCHT0 (AX)
	ADDQ $64, AX
	DECQ CX
	JNZ loop

done:
	RET

// func prefetchLinesW(p unsafe.Pointer, n int)
//
// PREFETCHW of the n cache lines from p on, 64 bytes apart: each is
// brought into the cache in a state it can be written in. The assembler
// has no mnemonic for it: 0F 0D /1 with ModRM 08h is PREFETCHW (AX).
TEXT ·prefetchLinesW(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), AX
	MOVQ n+8(FP), CX
	TESTQ CX, CX
	JLE wdone

wloop:
	BYTE $0x0F; BYTE $0x0D; BYTE $0x08
	ADDQ $64, AX
	DECQ CX
	JNZ wloop

wdone:
	RET
