//go:build !purego

package vmath

import "math"

// Vector loops of erf_amd64.s: each computes n elements (a multiple of 8
// for AVX2, of 16 for AVX-512) of erf (mode modeErf), the exact gelu
// (modeGelu) or dy times its derivative (modeGeluGrad, dy non-nil), with
// the constants of exp from k, those of the erf family from e, the mode's
// own from m and R, R' from r.
//
//go:noescape
func erf32AVX2(mode int, dst, x, dy *float32, n int, k *[kRows][16]uint32, e *[eRows][16]uint32, m *[mRows][16]uint32, r *[3][erfTabLen]uint32)

//go:noescape
func erf32AVX512(mode int, dst, x, dy *float32, n int, k *[kRows][16]uint32, e *[eRows][16]uint32, m *[mRows][16]uint32, r *[3][erfTabLen]uint32)

// vecErf32 computes the leading elements of the erf-family function mode
// that fill whole vectors of path p and returns how many.
func vecErf32(p impl, mode int, dst, x, dy []float32) int {
	n := len(dst)
	if n == 0 || p == implScalar {
		return 0
	}
	var d *float32
	if dy != nil {
		d = &dy[0]
	}
	switch {
	case p == implAVX512 && n >= 16:
		erf32AVX512(mode, &dst[0], &x[0], d, n&^15, tab, etab, &emode[mode], &erfTable)
		return n &^ 15
	case p >= implAVX2 && n >= 8:
		erf32AVX2(mode, &dst[0], &x[0], d, n&^7, tab, etab, &emode[mode], &erfTable)
		return n &^ 7
	}
	return 0
}

// Rows of etab, the constants of the erf family for the assembly (16
// copies each, as tab; erf_amd64.s names them by offset, index*64).
const (
	eSixtyFour = iota
	eInvN
	eSplit
	eTwoThirds
	eAbs
	eSign
	eTwoSqrtPi
	eTwoM64
	eTwoM65
	eSmall
	eRP0
	eRP1
	eRP2
	eRP3
	eRP4
	eRP5
	eRP6
	eBias
	eOne
	eInf
	eRows
)

// Rows of emode, the constants that differ between erf (v = min(|x|, 4),
// a = v, exp(-v^2)) and gelu (v = min(|x|, 15), a = v/sqrt 2,
// exp(-v^2/2)): see erfTail.
const (
	mK = iota
	mKHi
	mKLo
	mM
	mClamp
	mRows
)

// fill sets each row k of t to 16 copies of vals[k].
func fill(t [][16]uint32, vals map[int]uint32) {
	for k, b := range vals {
		for i := range t[k] {
			t[k][i] = b
		}
	}
}

var (
	etab = func() *[eRows][16]uint32 {
		f := math.Float32bits
		var t [eRows][16]uint32
		fill(t[:], map[int]uint32{
			eSixtyFour: f(erfTabN), eInvN: f(erfInvN), eSplit: f(split), eTwoThirds: f(twoThirds),
			eAbs: signBit - 1, eSign: signBit, eTwoSqrtPi: f(twoSqrtPi), eTwoM64: f(twoM64), eTwoM65: f(twoM65),
			eSmall: f(erfSmall), eRP0: f(erp0), eRP1: f(erp1), eRP2: f(erp2), eRP3: f(erp3), eRP4: f(erp4),
			eRP5: f(erp5), eRP6: f(erp6), eBias: expBias64, eOne: f(one), eInf: f(inf),
		})
		return &t
	}()
	emode = func() [3][mRows][16]uint32 {
		f := math.Float32bits
		var t [3][mRows][16]uint32
		fill(t[modeErf][:], map[int]uint32{mK: f(one), mKHi: f(one), mKLo: 0, mM: f(mone), mClamp: f(erfAMax)})
		gelu := map[int]uint32{mK: f(sqrt1_2), mKHi: f(sqrt1_2Hi), mKLo: f(sqrt1_2Lo), mM: f(mhalf), mClamp: f(geluVMax)}
		fill(t[modeGelu][:], gelu)
		fill(t[modeGeluGrad][:], gelu)
		return t
	}()
)
