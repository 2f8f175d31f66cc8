//go:build !purego

package vmath

import "math"

// Vector loops of sincos_amd64.s: n elements (a multiple of 8 for AVX2, of
// 16 for AVX-512) of sin (quarter 0) or cos (quarter 1), with the
// constants of k and s.
//
//go:noescape
func sinCos32AVX2(quarter int, dst, src *float32, n int, k *[kRows][16]uint32, s *[sRows][16]uint32)

//go:noescape
func sinCos32AVX512(quarter int, dst, src *float32, n int, k *[kRows][16]uint32, s *[sRows][16]uint32)

// vecSinCos32 computes the leading elements of sin or cos that fill whole
// vectors of path p and returns how many.
func vecSinCos32(p impl, quarter int32, dst, src []float32) int {
	switch n := len(dst); {
	case p == implAVX512 && n >= 16:
		sinCos32AVX512(int(quarter), &dst[0], &src[0], n&^15, tab, stab)
		return n &^ 15
	case p >= implAVX2 && n >= 8:
		sinCos32AVX2(int(quarter), &dst[0], &src[0], n&^7, tab, stab)
		return n &^ 7
	}
	return 0
}

// Rows of stab (sincos_amd64.s names them by offset, index*64); pio2a and
// pio2b hold 8 float64 copies.
const (
	sTwoOverPi = iota
	sPio2a
	sPio2b
	sSP0
	sSP1
	sSP2
	sCP0
	sCP1
	sCP2
	sHalf
	sI1
	sSign
	sRows
)

var stab = func() *[sRows][16]uint32 {
	var t [sRows][16]uint32
	f := math.Float32bits
	fill(t[:], map[int]uint32{
		sTwoOverPi: f(twoOverPi), sSP0: f(sp0), sSP1: f(sp1), sSP2: f(sp2),
		sCP0: f(cp0), sCP1: f(cp1), sCP2: f(cp2), sHalf: f(-mhalf), sI1: 1, sSign: signBit,
	})
	for k, v := range map[int]float64{sPio2a: pio2a, sPio2b: pio2b} {
		b := math.Float64bits(v)
		for i := 0; i < 16; i += 2 {
			t[k][i], t[k][i+1] = uint32(b), uint32(b>>32)
		}
	}
	return &t
}()
