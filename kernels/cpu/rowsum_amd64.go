//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/kilnml/kiln/internal/cpufeat"
)

// rowsumAsm is whether the loops of rowsum_amd64.s run (AVX2): the lane sums
// and the square root.
var rowsumAsm = cpufeat.AVX2

// laneSumF32 adds the n float32 at x (n a positive multiple of 16) into
// the lanes acc, as laneSums' Go loop does.
//
//go:noescape
func laneSumF32(acc *[laneCount]float32, x unsafe.Pointer, n int)

// laneSumF64 is laneSumF32 for float64.
//
//go:noescape
func laneSumF64(acc *[laneCount]float64, x unsafe.Pointer, n int)

// laneDotF32 adds the n products a[i]*b[i], each rounded, into the lanes
// acc, as laneDots' Go loop does.
//
//go:noescape
func laneDotF32(acc *[laneCount]float32, a, b unsafe.Pointer, n int)

// laneDotF64 is laneDotF32 for float64.
//
//go:noescape
func laneDotF64(acc *[laneCount]float64, a, b unsafe.Pointer, n int)

// sqrtF32 sets dst[i] to the square root of src[i] for n float32 (n a
// multiple of 8), correctly rounded, as sqrtRow's Go loop does.
//
//go:noescape
func sqrtF32(dst, src unsafe.Pointer, n int)

// sqrtF64 is sqrtF32 for float64 (n a multiple of 4).
//
//go:noescape
func sqrtF64(dst, src unsafe.Pointer, n int)
