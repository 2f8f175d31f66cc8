//go:build !purego

#include "textflag.h"

// The fence after the AVX2 loops' streaming stores (elementwise_amd64.go).

// func storeFence()
TEXT ·storeFence(SB), NOSPLIT, $0-0
	SFENCE
	RET
