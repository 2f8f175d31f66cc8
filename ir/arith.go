package ir

import "math"

// Number is an element type kiln computes with.
type Number interface {
	float32 | float64 | int32 | int64
}

// Arith computes op on a and b (on a alone for neg and sqrt) in the element
// type T, as the CPU kernels do: Go's arithmetic on T is IEEE for floats and
// wraps for integers. It covers add, sub, mul, neg, and div and sqrt for
// floats; it reports false for anything else, integer division included
// (whose rounding is the caller's to choose). Constant folding in passes
// and in the ONNX importer computes through it, so a folded constant has
// the bits the kernel would have given.
func Arith[T Number](op Op, a, b T) (T, bool) {
	float := T(1)/2 != 0 // 1/2 truncates to 0 in an integer type
	switch op {
	case OpAdd:
		return a + b, true
	case OpSub:
		return a - b, true
	case OpMul:
		return a * b, true
	case OpNeg:
		return -a, true
	case OpDiv:
		if float {
			return a / b, true
		}
	case OpSqrt:
		if float {
			return T(math.Sqrt(float64(a))), true
		}
	}
	return 0, false
}
