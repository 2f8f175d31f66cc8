package vmath

import "math"

// The constants of the f32 functions. The scalar code uses them as float32
// constants; the assembly reads the same values from tab, where each
// occupies one 64-byte row (16 copies, one ZMM register or two YMM), so the
// two can never disagree. The row order is fixed: vmath_amd64.s names the
// rows by offset (index*64).
const (
	expHi = float32(89)   // exp clamps x to [expLo, expHi]: e^89 overflows,
	expLo = float32(-104) // e^-104 < 2^-150 rounds to 0
	log2e = float32(1.44269504088896341)
	magic = float32(0x1.8p23)    // x + magic - magic rounds x to an integer (|x| < 2^22)
	ln2Hi = float32(0.693359375) // ln 2 = ln2Hi + ln2Lo; n*ln2Hi is exact for |n| < 2^15
	ln2Lo = float32(-2.12194440e-4)
	ep0   = float32(1.9875691500e-4) // exp(r) = 1 + r + r^2*(ep5 + ... + ep0*r^5) on |r| <= ln2/2 (Cephes expf)
	ep1   = float32(1.3981999507e-3)
	ep2   = float32(8.3334519073e-3)
	ep3   = float32(4.1665795894e-2)
	ep4   = float32(1.6666665459e-1)
	ep5   = float32(5.0000001201e-1)
	one   = float32(1)

	minNormal = float32(0x1p-126)
	two23     = float32(0x1p23)
	sqrtHalf  = float32(0.707106781186547524)
	lp0       = float32(7.0376836292e-2) // log(1+f) = f - f^2/2 + f^3*P(f) on [sqrt(1/2)-1, sqrt(2)-1] (Cephes logf)
	lp1       = float32(-1.1514610310e-1)
	lp2       = float32(1.1676998740e-1)
	lp3       = float32(-1.2420140846e-1)
	lp4       = float32(1.4249322787e-1)
	lp5       = float32(-1.6668057665e-1)
	lp6       = float32(2.0000714765e-1)
	lp7       = float32(-2.4999993993e-1)
	lp8       = float32(3.3333331174e-1)
	mhalf     = float32(-0.5)
)

// Integer bit patterns.
const (
	mantMask = 0x007fffff // the significand bits of a float32
	halfBits = 0x3f000000 // the exponent bits of 0.5
	nanBits  = 0x7fc00000 // the quiet NaN every invalid argument gives
)

var (
	inf  = float32(math.Inf(1))
	ninf = float32(math.Inf(-1))
	qnan = math.Float32frombits(nanBits)
)

// Row indices of tab (vmath_amd64.s uses index*64 as the offset).
const (
	kExpHi = iota
	kExpLo
	kLog2e
	kMagic
	kLn2Hi
	kLn2Lo
	kEP0
	kEP1
	kEP2
	kEP3
	kEP4
	kEP5
	kOne
	kMinNormal
	kTwo23
	kSqrtHalf
	kLP0
	kLP1
	kLP2
	kLP3
	kLP4
	kLP5
	kLP6
	kLP7
	kLP8
	kMHalf
	kInf
	kNInf
	kNaN
	kI127     // int32 127
	kI126     // int32 126
	kI23      // int32 23
	kMantMask // mantMask
	kHalfBits // halfBits
	kRows
)

// tab holds the constants for the assembly, 16 copies of each, aligned to
// 64 bytes by the row size (Go aligns the array to 8; the assembly uses
// unaligned loads).
var tab = func() *[kRows][16]uint32 {
	var t [kRows][16]uint32
	set := func(k int, bits uint32) {
		for i := range t[k] {
			t[k][i] = bits
		}
	}
	f := math.Float32bits
	for k, v := range map[int]float32{
		kExpHi: expHi, kExpLo: expLo, kLog2e: log2e, kMagic: magic, kLn2Hi: ln2Hi, kLn2Lo: ln2Lo,
		kEP0: ep0, kEP1: ep1, kEP2: ep2, kEP3: ep3, kEP4: ep4, kEP5: ep5, kOne: one,
		kMinNormal: minNormal, kTwo23: two23, kSqrtHalf: sqrtHalf,
		kLP0: lp0, kLP1: lp1, kLP2: lp2, kLP3: lp3, kLP4: lp4, kLP5: lp5, kLP6: lp6, kLP7: lp7, kLP8: lp8,
		kMHalf: mhalf, kInf: inf, kNInf: ninf, kNaN: qnan,
	} {
		set(k, f(v))
	}
	set(kI127, 127)
	set(kI126, 126)
	set(kI23, 23)
	set(kMantMask, mantMask)
	set(kHalfBits, halfBits)
	return &t
}()
