package vmath

import "math"

// sin and cos: x = n pi/2 + r with n = round(x 2/pi) and r reduced in
// float64 in two steps (Cody and Waite: n pio2a is exact for |n| < 2^20,
// and so is x - n pio2a), rounded to float32, |r| <= pi/4, then the polynomial of sin or cos of r (Cephes sinf
// and cosf) chosen by the quadrant n mod 4 (n + 1 for cos), negated in
// quadrants 2 and 3. Beyond sinCosMax, where the reduction loses accuracy,
// and for ±Inf and NaN, an element is float32(math.Sin(float64(x))) (or
// Cos), on every path.

const (
	twoOverPi = float32(0.636619772367581343)
	pio2a     = 1.5707963267341256    // pi/2 = pio2a + pio2b, pio2a of 33 bits
	pio2b     = 6.077100506506192e-11 // (float64 constants)
	sinCosMax = float32(0x1p20)

	sp0 = float32(-1.9515295891e-4) // sin(r) = r + r^3 (sp2 + sp1 r^2 + sp0 r^4)
	sp1 = float32(8.3321608736e-3)
	sp2 = float32(-1.6666654611e-1)
	cp0 = float32(2.443315711809948e-5) // cos(r) = 1 - r^2/2 + r^4 (cp2 + cp1 r^2 + cp0 r^4)
	cp1 = float32(-1.388731625493765e-3)
	cp2 = float32(4.166664568298827e-2)
)

// sinCos1 returns sin(x), or cos(x) when quarter is 1, for |x| <=
// sinCosMax: one element of the vector loop.
func sinCos1(x float32, quarter int32) float32 {
	n := float32(x*twoOverPi) + magic
	n -= magic
	nd := float64(n)
	r := float32(float64(float64(x)-float64(nd*pio2a)) - float64(nd*pio2b))
	q := int32(n) + quarter
	z := float32(r * r)
	var y float32
	if q&1 == 0 {
		y = float32(sp0*z) + sp1
		y = float32(y*z) + sp2
		y = float32(float32(y*z)*r) + r
	} else {
		y = float32(cp0*z) + cp1
		y = float32(y*z) + cp2
		y = float32(float32(y*z)*z) - float32(z*-mhalf)
		y += one
	}
	return math.Float32frombits(math.Float32bits(y) ^ uint32(q)<<30&signBit)
}

// sinCosRow computes sin (quarter 0) or cos (quarter 1) of src into dst:
// whole vectors by the loops of sincos_amd64.s, the rest by sinCos1, and
// the elements beyond sinCosMax (or NaN) in float64. A block holding such
// an element is first copied, so that dst may be src.
func sinCosRow(p impl, quarter int32, dst, src []float32) {
	src = src[:len(dst)]
	f := math.Sin
	if quarter == 1 {
		f = math.Cos
	}
	var buf [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:min(lo+blockLen, len(dst))]
		wide := false
		for _, v := range s {
			if !(abs32(v) <= sinCosMax) {
				wide = true
				break
			}
		}
		if wide {
			s = buf[:copy(buf[:], s)]
		}
		for i := vecSinCos32(p, quarter, d, s); i < len(d); i++ {
			if abs32(s[i]) <= sinCosMax {
				d[i] = sinCos1(s[i], quarter)
			}
		}
		if wide {
			for i, v := range s {
				if !(abs32(v) <= sinCosMax) {
					d[i] = float32(f(float64(v)))
				}
			}
		}
	}
}

// Sin32 sets dst[i] = sin(src[i]). Maximum error: 2 ulp.
func Sin32(dst, src []float32) { sinCosRow(best, 0, dst, src) }

// Cos32 sets dst[i] = cos(src[i]). Maximum error: 2 ulp.
func Cos32(dst, src []float32) { sinCosRow(best, 1, dst, src) }
