// Package vmath computes float32 transcendental functions over slices with
// vector instructions: AVX-512 or AVX2 on amd64, chosen at run time from
// internal/cpufeat, and plain Go in a purego build or on other
// architectures.
//
// Every path computes each element with the same float32 operations in the
// same order (no fused multiply-add), so AVX-512, AVX2 and the scalar Go
// give bitwise the same result for every input, NaN included; the elements
// a vector loop leaves over go through the scalar code. A row's results
// therefore do not depend on its length, on where it is split, or on the
// machine: a kernel that splits rows among workers is deterministic, and a
// constant folded at compile time equals the kernel's result.
//
// Each function states its maximum error in ulps (units in the last place
// of the float32 result) against float32(math.F(float64(x))): the maximum
// over all 2^32 float32 inputs, measured by go test ./internal/vmath -run
// TestULP -args -exhaustive [-funcs REGEXP]. The tests check the same
// bounds on a sample (4.2 million inputs spread evenly over the bit
// patterns, every 1031st, and the specials).
// Special values (NaN, ±Inf, ±0, overflow, underflow, subnormal arguments
// and results) give what the float64 functions give.
//
// Table gives, for each unary float element-wise op of ir, the f32 and f64
// row functions that the CPU kernels, the fused element-wise interpreter
// and constant folding all use.
package vmath

// impl names a code path.
type impl int

const (
	implScalar impl = iota
	implAVX2
	implAVX512
)

// exp32Row sets dst = exp(src) with path p: whole vectors by its loops,
// the rest by the scalar code.
func exp32Row(p impl, dst, src []float32) {
	src = src[:len(dst)]
	for i := vecExp32(p, dst, src); i < len(dst); i++ {
		dst[i] = exp32(src[i])
	}
}

// log32Row is exp32Row for log.
func log32Row(p impl, dst, src []float32) {
	src = src[:len(dst)]
	for i := vecLog32(p, dst, src); i < len(dst); i++ {
		dst[i] = log32(src[i])
	}
}

// Exp32 sets dst[i] = e^src[i] for every i < len(dst); src must be at
// least as long, and may be dst itself but must not otherwise overlap it
// (as for every row function of the package). Maximum error: 1 ulp.
func Exp32(dst, src []float32) { exp32Row(best, dst, src) }

// Log32 sets dst[i] = log(src[i]) (natural). log(±0) = -Inf, log(x < 0)
// = NaN. Maximum error: 1 ulp.
func Log32(dst, src []float32) { log32Row(best, dst, src) }

// Exp32Scalar returns e^x: one element of Exp32, bitwise the same, for
// code that computes elements one at a time.
func Exp32Scalar(x float32) float32 { return exp32(x) }

// Log32Scalar returns log(x): one element of Log32, bitwise the same.
func Log32Scalar(x float32) float32 { return log32(x) }
