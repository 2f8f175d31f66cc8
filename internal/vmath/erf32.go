package vmath

import "math"

// The float32 erf and exact gelu family. For a = |t|, erfc(t) = e^-t^2
// R(t) with R smooth and slowly varying (R(0) = 1, R(t) ~ 1/(t sqrt pi)):
//
//   - R(a) comes from a table of R and R' at r = i/64 (erfTable) and the
//     cubic Taylor polynomial in d = a - r, its higher coefficients
//     R''/2 = R + r R' and R'''/6 = 2(R' + r R''/2)/3 computed from the
//     two table values;
//   - e^-t^2 is exp of an argument given exactly as h + l: v^2 is split
//     into its rounded value and its rounding error (Dekker's product,
//     without fused multiply-add), v being the exact input (t for erf, x
//     for gelu, whose argument is -x^2/2), and l is added to the reduced
//     argument of exp. The result is scaled by 2^64 (in its exponent, so
//     exactly) and the callers scale back last, so a subnormal result is
//     rounded once.
//
// erf(t) = t + t P(t^2) for |t| < erfSmall, else sign(t) (1 - erfc(|t|)).
// gelu(x) = x Phi(x) with Phi(x) = erfc(|x|/sqrt 2)/2 for x < 0 and
// 1 - erfc(x/sqrt 2)/2 for x >= 0, and gelu'(x) = Phi(x) + x phi(x), which
// is s or 1 - s with s = e^(-x^2/2) (R(a) - 2a/sqrt pi)/2, a = |x|/sqrt 2:
// no branch subtracts nearly equal values except near the zero of gelu'
// (x = -0.7518), where the error is small in absolute terms.

// Constants of the erf family.
const (
	erfSmall  = float32(0.875) // erf switches from its polynomial to 1 - erfc
	erfAMax   = float32(4)     // erf(t) rounds to ±1 for |t| >= 3.92
	geluVMax  = float32(15)    // gelu(x) = x or ∓0 beyond; gelu' = 1 or 0
	erfTabN   = 64             // table entries per unit of a
	erfInvN   = float32(1.0 / erfTabN)
	erfTabLen = 688           // a <= geluVMax/sqrt 2 = 10.61: i <= 679
	split     = float32(4097) // 2^12 + 1: Dekker's split of a float32
	twoThirds = float32(2.0 / 3)
	mone      = float32(-1)
	sqrt1_2   = float32(0.7071067811865476)
	sqrt1_2Hi = float32(0.70703125)                      // 1/sqrt 2 to 12 bits
	sqrt1_2Lo = float32(0.7071067811865476 - 0.70703125) // the rest
	twoSqrtPi = float32(1.1283791670955126)              // 2/sqrt(pi)
	twoM64    = float32(0x1p-64)
	twoM65    = float32(0x1p-65)
	expBias64 = 127 + 64 // the exponent bias of 2^(n+64)

	// P(z) = erf(sqrt z)/sqrt z - 1 on [0, erfSmall^2], fitted for least
	// maximum absolute error (1.2e-8 with these float32 coefficients).
	erp0 = float32(1.2837916613e-01)
	erp1 = float32(-3.7612634897e-01)
	erp2 = float32(1.1283736676e-01)
	erp3 = float32(-2.6861771941e-02)
	erp4 = float32(5.2072168328e-03)
	erp5 = float32(-8.2165171625e-04)
	erp6 = float32(8.6988271505e-05)
)

// erfTail returns the pieces of R(a) e^(m v^2) 2^64 for 0 <= v <= 15, a =
// v k rounded (k = 1 or 1/sqrt 2 = kh + kl, kh of 12 bits) and m = -1 or
// -1/2: R(a) = r0 + pd, e^(m v^2) = (1 + s) 2^n and sc = 2^(n+64). The
// callers form r0 + (pd + (r0 + pd) s), times sc, rounding the sum once.
//
// v is split into vh + vl (Dekker's split, 12 bits each), so that v^2 =
// pp + qq exactly, the argument of exp is h + l = m pp + m qq (both
// exact) and d = vk - r is (vh kh - r) + (vl kh + v kl), the first two
// products exact: R does not see the rounding of a.
func erfTail(v, a, kh, kl, m float32) (r0, pd, s, sc float32) {
	c := float32(v * split)
	vh := c - float32(c-v)
	vl := v - vh

	z := float32(a*erfTabN) + magic
	i := math.Float32bits(z) - math.Float32bits(magic)
	r := float32(z-magic) * erfInvN
	d := float32(float32(vh*kh)-r) + float32(float32(vl*kh)+float32(v*kl))
	r0, r1 := math.Float32frombits(erfTable[0][i]), math.Float32frombits(erfTable[1][i])
	r2 := r0 + float32(r*r1)
	r3 := float32(r1+float32(r*r2)) * twoThirds
	p := float32(d*r3) + r2
	p = float32(p*d) + r1
	pd = float32(p*d) + math.Float32frombits(erfTable[2][i])

	pp := float32(v * v)
	qq := float32(float32(vh*vh)-pp) + float32(float32(vh*vl)*2)
	qq += float32(vl * vl)
	h := float32(pp * m)
	l := float32(qq * m)
	n := float32(h*log2e) + magic
	n -= magic
	x := h - float32(n*ln2Hi)
	x -= float32(n * ln2Lo)
	x += l
	x2 := float32(x * x)
	q := float32(ep0*x) + ep1
	q = float32(q*x) + ep2
	q = float32(q*x) + ep3
	q = float32(q*x) + ep4
	q = float32(q*x) + ep5
	s = float32(q*x2) + x
	return r0, pd, s, math.Float32frombits(uint32(int32(n)+expBias64) << 23)
}

// tailProduct returns (r0 + pd)(1 + s) as r0 + (pd + (r0 + pd) s).
func tailProduct(r0, pd, s float32) float32 {
	return r0 + float32(pd+float32(float32(r0+pd)*s))
}

// erf1 returns erf(x): one element of Erf32.
func erf1(x float32) float32 {
	if x != x {
		return x + x
	}
	a := abs32(x)
	if a < erfSmall {
		z := float32(x * x)
		p := float32(erp6*z) + erp5
		p = float32(p*z) + erp4
		p = float32(p*z) + erp3
		p = float32(p*z) + erp2
		p = float32(p*z) + erp1
		p = float32(p*z) + erp0
		return x + float32(x*p)
	}
	if a > erfAMax {
		a = erfAMax
	}
	r0, pd, s, sc := erfTail(a, a, one, 0, mone)
	q := float32(tailProduct(r0, pd, s) * sc)
	y := one - float32(q*twoM64)
	return math.Float32frombits(math.Float32bits(y) | math.Float32bits(x)&signBit)
}

// geluParts returns, for x not NaN, erfTail's pieces for gelu (v =
// min(|x|, 15), a = v/sqrt 2), with sc = 0 where |x| > 15.
func geluParts(x float32) (r0, pd, s, sc, a float32) {
	v := abs32(x)
	in := v <= geluVMax
	if !in {
		v = geluVMax
	}
	a = float32(v * sqrt1_2)
	r0, pd, s, sc = erfTail(v, a, sqrt1_2Hi, sqrt1_2Lo, mhalf)
	if !in {
		sc = 0
	}
	return r0, pd, s, sc, a
}

// gelu1 returns gelu(x) = x Phi(x): one element of GeluExact32.
func gelu1(x float32) float32 {
	if x != x {
		return x + x
	}
	r0, pd, s, sc, _ := geluParts(x)
	q := float32(tailProduct(r0, pd, s) * sc)
	if x < 0 {
		return float32(x*q) * twoM65
	}
	return x * (one - float32(q*twoM65))
}

// geluGrad1 returns dy gelu'(x): one element of GeluExactGrad32.
func geluGrad1(dy, x float32) float32 {
	if !(abs32(x) < inf) {
		return x - x // NaN for ±Inf too
	}
	r0, pd, s, sc, a := geluParts(x)
	w := float32(r0+pd) - float32(twoSqrtPi*a)
	g := float32(float32(w+float32(w*s))*sc) * twoM65
	if x >= 0 {
		g = one - g
	}
	return dy * g
}

// The row functions: whole vectors by the loops of erf_amd64.s, the rest
// by the scalar code above.

func erfRow(p impl, dst, src []float32) {
	src = src[:len(dst)]
	for i := vecErf32(p, modeErf, dst, src, nil); i < len(dst); i++ {
		dst[i] = erf1(src[i])
	}
}

func geluRow(p impl, dst, src []float32) {
	src = src[:len(dst)]
	for i := vecErf32(p, modeGelu, dst, src, nil); i < len(dst); i++ {
		dst[i] = gelu1(src[i])
	}
}

func geluGradRow(p impl, dst, dy, x []float32) {
	dy, x = dy[:len(dst)], x[:len(dst)]
	for i := vecErf32(p, modeGeluGrad, dst, x, dy); i < len(dst); i++ {
		dst[i] = geluGrad1(dy[i], x[i])
	}
}

// Modes of the vector loop of the erf family.
const (
	modeErf = iota
	modeGelu
	modeGeluGrad
)

// Erf32 sets dst[i] = erf(src[i]). Maximum error: 1 ulp.
func Erf32(dst, src []float32) { erfRow(best, dst, src) }

// GeluExact32 sets dst[i] = x Phi(x), x = src[i], PyTorch's gelu
// {approximate="none"}, 0.5 x (1 + erf(x/sqrt 2)), computed as x/2
// erfc(|x|/sqrt 2) for x < 0 without the cancellation (PyTorch rounds the
// tiny results to 0 there). Maximum error: 2 ulp.
func GeluExact32(dst, src []float32) { geluRow(best, dst, src) }

// GeluExactGrad32 sets dst[i] = dy[i] gelu'(x[i]) for the exact gelu,
// gelu'(x) = Phi(x) + x phi(x) (the gradient of GeluExact32); dy and x are
// at least as long as dst. gelu'(±Inf) is NaN, as PyTorch's Phi(x) +
// x phi(x) (the tanh form's gradient takes its limits there). Maximum
// error: 2 ulp of max(|gelu'(x)|, 1/4) (near the zero of gelu', at x =
// -0.7518, the terms that cancel are about 0.3), 4 ulp for x < -1.5.
func GeluExactGrad32(dst, dy, x []float32) { geluGradRow(best, dst, dy, x) }
