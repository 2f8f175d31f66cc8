//go:build !purego

package vmath

import "github.com/kilnml/kiln/internal/cpufeat"

// Vector loops of vmath_amd64.s: each computes n elements (a multiple of 8
// for AVX2, of 16 for AVX-512) reading the constants from k.
//
//go:noescape
func exp32AVX2(dst, src *float32, n int, k *[kRows][16]uint32)

//go:noescape
func exp32AVX512(dst, src *float32, n int, k *[kRows][16]uint32)

//go:noescape
func log32AVX2(dst, src *float32, n int, k *[kRows][16]uint32)

//go:noescape
func log32AVX512(dst, src *float32, n int, k *[kRows][16]uint32)

// vecExp32 computes the leading elements of dst = exp(src) that fill whole
// vectors of path p and returns how many.
func vecExp32(p impl, dst, src []float32) int {
	switch n := len(dst); {
	case p == implAVX512 && n >= 16:
		exp32AVX512(&dst[0], &src[0], n&^15, tab)
		return n &^ 15
	case p >= implAVX2 && n >= 8:
		exp32AVX2(&dst[0], &src[0], n&^7, tab)
		return n &^ 7
	}
	return 0
}

// vecLog32 is vecExp32 for log.
func vecLog32(p impl, dst, src []float32) int {
	switch n := len(dst); {
	case p == implAVX512 && n >= 16:
		log32AVX512(&dst[0], &src[0], n&^15, tab)
		return n &^ 15
	case p >= implAVX2 && n >= 8:
		log32AVX2(&dst[0], &src[0], n&^7, tab)
		return n &^ 7
	}
	return 0
}

// best is the widest vector code the CPU runs.
var best = func() impl {
	switch {
	case cpufeat.AVX512:
		return implAVX512
	case cpufeat.AVX2:
		return implAVX2
	}
	return implScalar
}()
