//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/kilnml/kiln/internal/cpufeat"
)

// rowMaxF32 returns the maximum of the n float32 at x, n a positive
// multiple of 8, in vector lanes (rowmax_amd64.s): each lane keeps the
// first largest of its elements, passing NaNs over unless x[0] is NaN.
//
//go:noescape
func rowMaxF32(x unsafe.Pointer, n int) float32

// rowMaxAsm is whether rowMaxF32 runs (AVX2).
var rowMaxAsm = cpufeat.AVX2
