package vmath

import "math"

// The functions below are built on the vector exp and log: each works on
// blocks of blockLen elements, computing the argument of exp (or log) for a
// block into a buffer, the vector function over the buffer, and the rest
// per element. Every element goes through the same operations whatever the
// block boundaries, so these too are independent of how a row is split.

const blockLen = 256

// signBit is the sign bit of a float32.
const signBit = 0x80000000

// abs32 returns |x| and negAbs32 -|x|, by the sign bit (NaN keeps its
// payload).
func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ signBit) }

func negAbs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) | signBit) }

// sigmoidOf returns sigmoid(x) from e = e^-|x|.
func sigmoidOf(x, e float32) float32 {
	if x >= 0 {
		return one / (one + e)
	}
	return e / (one + e)
}

func sigmoid32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var buf [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		b := buf[:len(d)]
		for i := range b {
			b[i] = negAbs32(s[i])
		}
		exp32Row(p, b, b)
		for i := range d {
			d[i] = sigmoidOf(s[i], b[i])
		}
	}
}

// Sigmoid32 sets dst[i] = 1/(1 + e^-src[i]), computed from e^-|x| (which
// cannot overflow) as 1/(1 + e) or e/(1 + e). Maximum error: 2 ulp.
func Sigmoid32(dst, src []float32) { sigmoid32(best, dst, src) }

// siluShift: for x < siluShift, silu(x) is computed as x*e^(x-siluShift)
// times e^siluShift, so that the product is rounded once where it is
// subnormal.
const siluShift = -64

var expSiluShift = float32(math.Exp(siluShift))

func silu32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var buf [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		b := buf[:len(d)]
		for i := range b {
			if x := s[i]; x < siluShift {
				b[i] = x - siluShift // exact
			} else {
				b[i] = negAbs32(x)
			}
		}
		exp32Row(p, b, b)
		for i := range d {
			x, e := s[i], b[i]
			switch {
			case x >= 0:
				d[i] = x / (one + e)
			case x < siluShift:
				d[i] = float32(x*e) * expSiluShift
			default:
				d[i] = float32(x*e) / (one + e)
			}
		}
	}
}

// Silu32 sets dst[i] = x*sigmoid(x), x = src[i]: x/(1 + e^-x) or
// x e^x/(1 + e^x). silu(-Inf) is NaN, as -Inf*0. Maximum error: 3 ulp.
func Silu32(dst, src []float32) { silu32(best, dst, src) }

// tanhSmall is where tanh switches from its odd polynomial (Cephes tanhf)
// to 1 - 2/(e^2|x| + 1).
const tanhSmall = float32(0.625)

const (
	tp0 = float32(-5.70498872745e-3)
	tp1 = float32(2.06390887954e-2)
	tp2 = float32(-5.37397155531e-2)
	tp3 = float32(1.33314422036e-1)
	tp4 = float32(-3.33332819422e-1)
)

func tanh32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var buf [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		b := buf[:len(d)]
		for i := range b {
			a := abs32(s[i])
			b[i] = a + a
		}
		exp32Row(p, b, b)
		for i := range d {
			x := s[i]
			a := abs32(x)
			if a < tanhSmall {
				z := float32(x * x)
				q := float32(tp0*z) + tp1
				q = float32(q*z) + tp2
				q = float32(q*z) + tp3
				q = float32(q*z) + tp4
				d[i] = float32(float32(q*z)*x) + x
				continue
			}
			t := one - 2/(b[i]+one)
			d[i] = math.Float32frombits(math.Float32bits(t) | math.Float32bits(x)&signBit)
		}
	}
}

// Tanh32 sets dst[i] = tanh(src[i]): an odd polynomial for |x| < 0.625,
// else 1 - 2/(e^2|x| + 1) with the sign of x. Maximum error: 1 ulp.
func Tanh32(dst, src []float32) { tanh32(best, dst, src) }

// log1pOf returns log(1 + x) from u = 1 + x (rounded) and l = log(u): the
// rounding error of u, x - (u - 1), is added back as its first-order term,
// which is x itself where u = 1.
func log1pOf(x, u, l float32) float32 {
	switch {
	case x == inf:
		return inf
	case u == 0:
		return ninf
	}
	return l + (x-(u-one))/u
}

func log1p32(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var buf [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		b := buf[:len(d)]
		for i := range b {
			b[i] = one + s[i]
		}
		log32Row(p, b, b)
		for i := range d {
			x := s[i]
			d[i] = log1pOf(x, one+x, b[i])
		}
	}
}

// Log1p32 sets dst[i] = log(1 + src[i]), accurate for small arguments:
// log(u) + (x - (u-1))/u with u = 1 + x rounded. Maximum error: 1 ulp.
func Log1p32(dst, src []float32) { log1p32(best, dst, src) }

// expm1Kahan is where expm1 uses Kahan's (u - 1) x / log(u), u = e^x
// rounded, whose errors in u cancel; beyond it u - 1 loses nothing.
const expm1Kahan = float32(2)

func expm132(p impl, dst, src []float32) {
	src = src[:len(dst)]
	var ub, lb [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		u, l := ub[:len(d)], lb[:len(d)]
		exp32Row(p, u, s)
		log32Row(p, l, u)
		for i := range d {
			x, e := s[i], u[i]
			switch {
			case abs32(x) >= expm1Kahan || x != x:
				d[i] = e - one
			case e == one:
				d[i] = x
			default:
				d[i] = float32(float32(e-one)*x) / l[i]
			}
		}
	}
}

// Expm1_32 sets dst[i] = e^src[i] - 1, accurate for small arguments.
// Maximum error: 3 ulp.
func Expm1_32(dst, src []float32) { expm132(best, dst, src) }

// softplus32 computes softplus with beta and threshold as PyTorch: z =
// beta*x in float32; x where z > threshold, else log(1 + e^z)/beta, as
// (max(z, 0) + log1p(e^-|z|))/beta.
func softplus32(p impl, beta, threshold float32, dst, src []float32) {
	src = src[:len(dst)]
	var eb, lb [blockLen]float32
	for lo := 0; lo < len(dst); lo += blockLen {
		d, s := dst[lo:min(lo+blockLen, len(dst))], src[lo:]
		e, l := eb[:len(d)], lb[:len(d)]
		for i := range e {
			e[i] = negAbs32(s[i] * beta)
		}
		exp32Row(p, e, e)
		for i := range l {
			l[i] = one + e[i]
		}
		log32Row(p, l, l)
		for i := range d {
			x := s[i]
			z := x * beta
			if z > threshold {
				d[i] = x
				continue
			}
			v := log1pOf(e[i], one+e[i], l[i])
			d[i] = (max(z, 0) + v) / beta
		}
	}
}

// Softplus32 sets dst[i] = log(1 + e^(beta x))/beta, or x where beta x >
// threshold, x = src[i] (PyTorch's softplus; beta = 1 and threshold = 20
// by default there). Maximum error: 2 ulp (beta = 1; another beta adds
// the rounding of the division).
func Softplus32(beta, threshold float32, dst, src []float32) {
	softplus32(best, beta, threshold, dst, src)
}
