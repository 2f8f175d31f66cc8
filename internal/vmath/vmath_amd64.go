//go:build !purego

package vmath

import "github.com/kilnml/kiln/internal/cpufeat"

// Vector loops of vmath_amd64.s: each computes n elements (a multiple of 8
// for AVX2, of 16 for AVX-512) reading the constants from k.
func exp32AVX2(dst, src *float32, n int, k *[kRows][16]uint32)
func exp32AVX512(dst, src *float32, n int, k *[kRows][16]uint32)
func log32AVX2(dst, src *float32, n int, k *[kRows][16]uint32)
func log32AVX512(dst, src *float32, n int, k *[kRows][16]uint32)

var (
	exp32Vec = vec{exp32AVX2, exp32AVX512}
	log32Vec = vec{log32AVX2, log32AVX512}
)

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
