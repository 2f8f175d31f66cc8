package vmath

import "math"

// erf and the exact gelu evaluate in float64 around the vector exp:
// erf(t) = t P(2t^2 - 1) for |t| < 1, and erfc(t) = e^-t^2 Q(s) / t for
// t >= 1, s = (1/t - erfcMid)/erfcHalf, where P and Q are Chebyshev
// interpolants (relative error 4e-11 and 2e-9 on their ranges). e^-t^2
// comes from exp32 with the float64 argument split into a float32 a and
// a correction l, e^(a+l) = e^a (1 + l), so that the rounding of t^2 to
// float32 costs nothing.

// erfP: erf(t)/t = P(2t^2 - 1) for |t| < 1.
var erfP = [...]float64{
	0.96546873863756943,
	-0.14053608902111828,
	0.019852497722449763,
	-0.002285485612227578,
	0.00021751199063557713,
	-1.7536914159621553e-05,
	1.2316395880951347e-06,
	-7.5523793885423629e-08,
}

// erfcQ: erfc(t) e^(t^2) t = Q((1/t - erfcMid)/erfcHalf) for 1 <= t <= 11
// (1/t in [0.09, 1]); beyond 11, erfc(t) < 1e-54.
var erfcQ = [...]float64{
	0.50320307740536074,
	-0.077269950755236183,
	-0.0045242899588411149,
	0.0094490078426788197,
	-0.004211330145198376,
	0.00096407724595952546,
	0.00012444218198153905,
	-0.0002568837677947919,
	0.00016334635218019964,
	-8.2982449566333568e-05,
	1.4646521523130876e-05,
	2.26036779360164e-05,
	-1.2188861686669183e-05,
}

const erfcMid, erfcHalf = 0.545, 0.455

var expOfShift64 = math.Exp(expShift)

// erfPoly and erfcPoly evaluate P and Q by Estrin's scheme (pairs, then
// pairs of pairs), a chain of a few dependent steps instead of Horner's
// one per coefficient.
func erfPoly(s float64) float64 {
	c := &erfP
	s2 := s * s
	s4 := s2 * s2
	return (c[0] + c[1]*s + s2*(c[2]+c[3]*s)) + s4*(c[4]+c[5]*s+s2*(c[6]+c[7]*s))
}

func erfcPoly(s float64) float64 {
	c := &erfcQ
	s2 := s * s
	s4 := s2 * s2
	s8 := s4 * s4
	lo := (c[0] + c[1]*s + s2*(c[2]+c[3]*s)) + s4*(c[4]+c[5]*s+s2*(c[6]+c[7]*s))
	hi := (c[8] + c[9]*s + s2*(c[10]+c[11]*s)) + s4*c[12]
	return lo + s8*hi
}

// erfSmall returns erf(t) for |t| < 1.
func erfSmall(t float64) float64 { return t * erfPoly(2*t*t-1) }

// erfcBlock computes, for each t[i] with |t[i]| >= 1 (or NaN), erfc(|t[i]|)
// into c[i] (NaN stays NaN); a and l are scratch of the same length. When
// scaled is true, an erfc below e^expShift is returned divided by
// e^expShift (sc[i] is set), so that the caller can multiply first and
// scale last; else sc is unused.
func erfcBlock(p impl, t, c []float64, a, l []float32, sc []bool) {
	for i, v := range t {
		if math.Abs(v) < 1 {
			a[i], l[i] = 0, 0
			continue
		}
		x := -v * v
		if x < -200 {
			x = -200 // e^x is 0 in float32; keeps l finite
		}
		if sc != nil {
			sc[i] = x < expShift
			if sc[i] {
				x -= expShift
			}
		}
		a[i] = float32(x)
		l[i] = float32(x - float64(a[i]))
	}
	exp32Row(p, a, a)
	for i, v := range t {
		if math.Abs(v) < 1 {
			continue
		}
		w := 1 / math.Abs(v)
		e := float64(a[i]) * (1 + float64(l[i]))
		c[i] = e * erfcPoly((w-erfcMid)/erfcHalf) * w
	}
}

func erf32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var tb, cb [blockLen]float64
	var ab, lb [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		t, c := tb[:len(d)], cb[:len(d)]
		for i := range t {
			t[i] = float64(s[i])
		}
		erfcBlock(p, t, c, ab[:len(d)], lb[:len(d)], nil)
		for i, v := range t {
			if math.Abs(v) < 1 {
				d[i] = float32(erfSmall(v))
			} else {
				d[i] = float32(math.Copysign(1-c[i], v))
			}
		}
	}
}

// Erf32 sets dst[i] = erf(src[i]). Maximum error: 1 ulp.
func Erf32(dst, src []float32) { erf32(best, dst, src) }

func geluExact32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var tb, cb [blockLen]float64
	var ab, lb [blockLen]float32
	var sb [blockLen]bool
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		t, c, sc := tb[:len(d)], cb[:len(d)], sb[:len(d)]
		for i := range t {
			t[i] = -float64(s[i]) * geluSqrt1_2
		}
		erfcBlock(p, t, c, ab[:len(d)], lb[:len(d)], sc)
		for i, v := range t {
			x := float64(s[i])
			switch {
			case math.Abs(v) < 1:
				d[i] = float32(0.5 * x * (1 - erfSmall(v)))
			case v < 0: // erfc(v) = 2 - erfc(-v)
				if sc[i] {
					c[i] *= expOfShift64
				}
				d[i] = float32(0.5 * x * (2 - c[i]))
			case sc[i]:
				d[i] = float32(0.5 * x * c[i] * expOfShift64)
			default:
				d[i] = float32(0.5 * x * c[i])
			}
		}
	}
}

// GeluExact32 sets dst[i] = x Phi(x), x = src[i], PyTorch's gelu
// {approximate="none"}, 0.5 x (1 + erf(x/sqrt 2)), as 0.5 x erfc(-x/sqrt 2)
// without the cancellation for negative x. Maximum error: 2 ulp.
func GeluExact32(dst, src []float32) { geluExact32(best, dst, src) }
