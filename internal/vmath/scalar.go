package vmath

import "math"

// The scalar functions below are the vector code of vmath_amd64.s written
// one element at a time: the same operations, each rounded to float32, in
// the same order. Explicit float32 conversions keep the compiler from
// fusing a product and a sum, so every path gives the same bits. They
// compute the elements the vector loops leave over and every element in a
// purego build or on other architectures.

// exp32 returns e^x: x is clamped to [expLo, expHi], n = round(x/ln2),
// r = x - n ln2 in two steps (Cody and Waite), e^r by the polynomial and
// the product with 2^n in two factors, so that a result in the subnormal
// range is rounded once and 2^128 needs no special exponent.
func exp32(x float32) float32 {
	if x != x {
		return x + x
	}
	c := x
	if expHi < c {
		c = expHi
	}
	if expLo > c {
		c = expLo
	}
	n := float32(c*log2e) + magic
	n -= magic
	r := c - float32(n*ln2Hi)
	r -= float32(n * ln2Lo)
	z := float32(r * r)
	p := float32(ep0*r) + ep1
	p = float32(p*r) + ep2
	p = float32(p*r) + ep3
	p = float32(p*r) + ep4
	p = float32(p*r) + ep5
	p = float32(p*z) + r
	p += one
	ni := int32(n)
	n1 := ni >> 1
	n2 := ni - n1
	p = float32(p * math.Float32frombits(uint32(n1+127)<<23))
	return p * math.Float32frombits(uint32(n2+127)<<23)
}

// log32 returns the natural logarithm of x: x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) (a subnormal x scaled by 2^23 first), log(m) by the
// polynomial in f = m-1, plus e ln2 in two steps. log(±0) = -Inf, log of a
// negative x is NaN.
func log32(x float32) float32 {
	switch {
	case x != x:
		return x + x
	case x < 0:
		return qnan
	case x == 0:
		return ninf
	case x == inf:
		return inf
	}
	var sub int32
	if x < minNormal {
		x *= two23
		sub = 23
	}
	b := math.Float32bits(x)
	e := int32(b>>23) - 126 - sub
	m := math.Float32frombits(b&mantMask | halfBits)
	f := m - one
	fe := float32(e)
	if m < sqrtHalf {
		f += m
		fe -= one
	}
	z := float32(f * f)
	p := float32(lp0*f) + lp1
	p = float32(p*f) + lp2
	p = float32(p*f) + lp3
	p = float32(p*f) + lp4
	p = float32(p*f) + lp5
	p = float32(p*f) + lp6
	p = float32(p*f) + lp7
	p = float32(p*f) + lp8
	p = float32(p * f)
	p = float32(p * z)
	p += float32(fe * ln2Lo)
	p += float32(z * mhalf)
	r := f + p
	return r + float32(fe*ln2Hi)
}
