package vmath

import "math"

// Constants of gelu: sqrt(2/pi) and 0.044715 of the tanh form (PyTorch's
// kBeta and kKappa) and 1/sqrt(2).
const (
	geluK       = 0.7978845608028654
	geluC       = 0.044715
	geluSqrt1_2 = 0.7071067811865476
)

// Sigmoid64 returns 1/(1+e^-x) in a form that never overflows: e^-|x| is
// at most 1, so neither branch computes e^t for a large t.
func Sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// GeluExact64 returns x*Phi(x). Phi(x) = erfc(-x/sqrt 2)/2 is PyTorch's
// (1 + erf(x/sqrt 2))/2 without its cancellation for negative x, where
// PyTorch rounds the tiny result to 0.
func GeluExact64(x float64) float64 {
	return 0.5 * x * math.Erfc(-x*geluSqrt1_2)
}

// GeluTanh64 returns 0.5*x*(1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3),
// as x*sigmoid(2u), the same function without cancellation for negative x.
func GeluTanh64(x float64) float64 {
	u := geluK * (x + geluC*x*x*x)
	return x * Sigmoid64(2*u)
}

// expShift: an argument a < expShift of exp goes in as a - expShift and
// the result is scaled by e^expShift after the product with x, so that
// where the product is subnormal it is rounded once.
const expShift = -64

var (
	expOfShift   = float32(math.Exp(expShift))
	expOfShift64 = math.Exp(expShift)
)

func geluTanh32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var ab, lb [blockLen]float32
	var sb [blockLen]bool
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		a, l, shifted := ab[:len(d)], lb[:len(d)], sb[:len(d)]
		// The argument of exp, -|2u|, in float64, given to exp as
		// float32 a plus a correction l: e^(a+l) = e^a (1 + l).
		for i := range a {
			x := float64(s[i])
			t := -math.Abs(2 * geluK * (x + geluC*x*x*x))
			if t < -200 {
				t = -200 // e^t*x is 0 in float32; keeps l finite
			}
			shifted[i] = t < expShift && x < 0
			if shifted[i] {
				t -= expShift
			}
			a[i] = float32(t)
			l[i] = float32(t - float64(a[i]))
		}
		exp32Row(p, a, a)
		for i := range d {
			x := s[i]
			e := a[i] + float32(a[i]*l[i])
			switch {
			case x >= 0:
				d[i] = x / (one + e)
			case shifted[i]:
				d[i] = float32(x*e) * expOfShift
			default:
				d[i] = float32(x*e) / (one + e)
			}
		}
	}
}

// GeluTanh32 sets dst[i] = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))),
// x = src[i], PyTorch's gelu {approximate="tanh"}, as x sigmoid(2u) with
// the argument of exp computed in float64. Maximum error: 4 ulp.
func GeluTanh32(dst, src []float32) { geluTanh32(best, dst, src) }

func geluTanhGrad32(p impl, dst, dy, x []float32) {
	dy, x = dy[:len(dst)], x[:len(dst)]
	var ab, lb [blockLen]float32
	var sb [blockLen]bool
	for lo := 0; lo < len(dst); lo += blockLen {
		d, g, s := dst[lo:min(lo+blockLen, len(dst))], dy[lo:], x[lo:]
		a, l, shifted := ab[:len(d)], lb[:len(d)], sb[:len(d)]
		// e^-|2u| from float32 a plus a correction l, as in geluTanh32,
		// and shifted by expShift where it would be subnormal in float32.
		for i := range a {
			v := float64(s[i])
			// The conversions keep the compiler from fusing products
			// and sums (as on arm64): the same bits on every machine.
			t := -math.Abs(2 * geluK * (v + float64(float64(geluC*v)*v)*v))
			if t < -200 {
				t = -200 // e^t is 0 in float32; keeps l finite
			}
			shifted[i] = t < expShift
			if shifted[i] {
				t -= expShift
			}
			a[i] = float32(t)
			l[i] = float32(t - float64(a[i]))
		}
		exp32Row(p, a, a)
		for i := range d {
			v := float64(s[i])
			e := float64(a[i]) * (1 + float64(l[i]))
			if shifted[i] {
				e *= expOfShift64
			}
			q := 1 + e
			sg := 1 / q // sigmoid(2u): u has the sign of x
			if v < 0 {
				sg = e / q
			}
			r := sg
			if ss := e / (q * q); ss != 0 { // sigmoid(2u) sigmoid(-2u)
				r += float64(float64(2*v*ss*geluK) * (1 + float64(float64(3*geluC*v)*v)))
			}
			d[i] = float32(float64(g[i]) * r)
		}
	}
}

// GeluTanhGrad32 sets dst[i] = dy[i] gelu'(x[i]) for the tanh form of
// gelu (the gradient of GeluTanh32): sigmoid(2u) + x sigmoid(2u)
// sigmoid(-2u) 2u', with e^-|2u| from the vector exp and the rest in
// float64; dy and x are at least as long as dst. gelu'(-Inf) = 0 and
// gelu'(+Inf) = 1. Maximum error: 2 ulp of max(|gelu'(x)|, 1/4).
func GeluTanhGrad32(dst, dy, x []float32) { geluTanhGrad32(best, dst, dy, x) }
