//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/kilnml/kiln/internal/cpufeat"
)

// maxPool22F32 writes into at the arg maxes of n 2×2 windows at stride 2
// along one output row (n a multiple of 4; pool_amd64.s): window k reads
// x[2k], x[2k+1], x[w+2k] and x[w+2k+1], and its arg max is written as the
// index base+(that offset).
//
//go:noescape
func maxPool22F32(at, x unsafe.Pointer, base, w, n int)

// maxPoolAsm is whether maxPool22F32 runs (AVX2).
var maxPoolAsm = cpufeat.AVX2
