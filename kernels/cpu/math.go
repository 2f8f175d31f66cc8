package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels of the elementwise math family (ir/ops_math.go): abs, sign,
// square, clip, pow, maximum, minimum, floor_div and mod (the unary
// functions are unary_table.go's).

func init() {
	for _, op := range []ir.Op{ir.OpAbs, ir.OpSign, ir.OpSquare} {
		register(op, ir.F32, buildNumericUnary[float32])
		register(op, ir.F64, buildNumericUnary[float64])
		register(op, ir.I32, buildNumericUnary[int32])
		register(op, ir.I64, buildNumericUnary[int64])
	}
	register(ir.OpClip, ir.F32, buildClip[float32])
	register(ir.OpClip, ir.F64, buildClip[float64])
	register(ir.OpClip, ir.I32, buildClip[int32])
	register(ir.OpClip, ir.I64, buildClip[int64])
	register(ir.OpPow, ir.F32, buildPow[float32])
	register(ir.OpPow, ir.F64, buildPow[float64])
	for _, op := range []ir.Op{ir.OpMaximum, ir.OpMinimum} {
		register(op, ir.F32, buildMaxMin[float32])
		register(op, ir.F64, buildMaxMin[float64])
		register(op, ir.I32, buildMaxMin[int32])
		register(op, ir.I64, buildMaxMin[int64])
	}
	register(ir.OpFloorDiv, ir.F32, buildBinaryMath(ir.OpFloorDiv, floorDivFloat[float32]))
	register(ir.OpFloorDiv, ir.F64, buildBinaryMath(ir.OpFloorDiv, floorDivFloat[float64]))
	register(ir.OpFloorDiv, ir.I32, buildBinaryMathChecked(ir.OpFloorDiv, floorDivInt[int32]))
	register(ir.OpFloorDiv, ir.I64, buildBinaryMathChecked(ir.OpFloorDiv, floorDivInt[int64]))
	register(ir.OpMod, ir.F32, buildBinaryMath(ir.OpMod, modFloat[float32]))
	register(ir.OpMod, ir.F64, buildBinaryMath(ir.OpMod, modFloat[float64]))
	register(ir.OpMod, ir.I32, buildBinaryMathChecked(ir.OpMod, modInt[int32]))
	register(ir.OpMod, ir.I64, buildBinaryMathChecked(ir.OpMod, modInt[int64]))
}

// buildNumericUnary builds abs, sign or square for any numeric type.
func buildNumericUnary[T number](n *kernels.Node) (kernels.Func, error) {
	f := numericUnaryRow[T](n.Op, n.Out.DType.IsFloat())
	if f == nil {
		return nil, fmt.Errorf("%s is not abs, sign or square", n.Op)
	}
	return parUnary(n.Par, n.Out.Shape.NumElements(), 1, f), nil
}

// numericUnaryRow returns the code of abs, sign or square (nil for another
// op), shared by their kernels and the fused elementwise interpreter.
// Integer abs and square wrap like Go arithmetic (abs(MinInt32) = MinInt32);
// sign of a float NaN is NaN and sign of ±0 is 0.
func numericUnaryRow[T number](op ir.Op, isFloat bool) func(o, x []T) {
	switch op {
	case ir.OpAbs:
		if isFloat {
			return func(o, x []T) {
				for i, v := range x[:len(o)] {
					o[i] = T(math.Abs(float64(v))) // clears the sign bit: no branch
				}
			}
		}
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				if v < 0 {
					o[i] = -v
				} else {
					o[i] = v
				}
			}
		}
	case ir.OpSign:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				switch {
				case v > 0:
					o[i] = 1
				case v < 0:
					o[i] = -1
				case v == 0:
					o[i] = 0
				default: // NaN
					o[i] = v
				}
			}
		}
	case ir.OpSquare:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				o[i] = v * v
			}
		}
	}
	return nil
}

// buildClip builds clip {min, max}.
func buildClip[T number](n *kernels.Node) (kernels.Func, error) {
	return parUnary(n.Par, n.Out.Shape.NumElements(), 1, clipRow[T](n.Attrs)), nil
}

// clipRow returns the code of clip {min, max}, shared by its kernel and the
// fused elementwise interpreter: each bound, converted to T (exactly, for
// integers, which ir requires to be whole and in range), limits x with the
// builtin max and min, which keep a NaN x NaN.
func clipRow[T number](attrs ir.Attrs) func(o, x []T) {
	lo, hasLo := attrs.Get("min")
	hi, hasHi := attrs.Get("max")
	lf, _ := lo.AsFloat()
	hf, _ := hi.AsFloat()
	l, h := T(lf), T(hf)
	switch {
	case hasLo && hasHi:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				o[i] = min(max(v, l), h)
			}
		}
	case hasLo:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				o[i] = max(v, l)
			}
		}
	}
	return func(o, x []T) {
		for i, v := range x[:len(o)] {
			o[i] = min(v, h)
		}
	}
}

// buildPow builds pow: a^b with NumPy broadcasting, or a^exponent. Both use
// math.Pow in float64, rounded once for f32: a negative base with a whole
// exponent has the sign of its parity, with any other exponent it is NaN;
// pow(x, 0) is 1 for every x, NaN included.
func buildPow[T float](n *kernels.Node) (kernels.Func, error) {
	if len(n.Args) == 1 {
		f := powExpRow[T](n.Attrs.Float("exponent", math.NaN()))
		return parUnary(n.Par, n.Out.Shape.NumElements(), parCostExp, f), nil
	}
	return buildBinaryMath(ir.OpPow, powElem[T])(n)
}

// powElem is pow(a, b) for one pair of elements.
func powElem[T float](x, y T) T { return T(powF64(float64(x), float64(y))) }

// powExpRow returns the code of pow {exponent}, o[i] = x[i]^ex, shared by its
// kernel and the fused elementwise interpreter. The exponents PyTorch
// computes by multiplication or sqrt (pow_tensor_scalar_optimized_kernel)
// are computed the same way.
func powExpRow[T float](ex float64) func(o, x []T) {
	switch ex {
	case 2:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				f := float64(v)
				o[i] = T(f * f) // exact in float64 for f32 values
			}
		}
	case 3:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				f := float64(v)
				o[i] = T(f * f * f)
			}
		}
	case 0.5:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				o[i] = T(math.Sqrt(float64(v)))
			}
		}
	case -0.5:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				o[i] = T(1 / math.Sqrt(float64(v)))
			}
		}
	case -1:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				o[i] = T(1 / float64(v))
			}
		}
	case -2:
		return func(o, x []T) {
			for i, v := range x[:len(o)] {
				f := float64(v)
				o[i] = T(1 / (f * f))
			}
		}
	}
	return func(o, x []T) {
		for i, v := range x[:len(o)] {
			o[i] = T(powF64(float64(v), ex))
		}
	}
}

// Go's math.Log on amd64 (and s390x) is wrong for subnormal arguments
// (golang/go#56600), and Pow with a fractional exponent goes through it
// (vmath.Log64 is the same fix for log). powF64 scales a subnormal base
// into the normal range first, exactly, by 2^54. f32 values are never
// subnormal in float64, so only f64 kernels need this.

const (
	minNormal = 0x1p-1022 // the smallest normal float64
	subScale  = 0x1p54    // brings every positive subnormal to a normal value
)

// powF64 is math.Pow, correct for a positive subnormal base with a
// fractional exponent: x^y = (x 2^54)^y 2^(-54y). Where one factor
// overflows or underflows, so does the true result.
func powF64(x, y float64) float64 {
	if x > 0 && x < minNormal && y != math.Trunc(y) && !math.IsInf(y, 0) {
		return math.Pow(x*subScale, y) * math.Exp2(-54*y)
	}
	return math.Pow(x, y)
}

// buildBinaryMath returns a builder of op with NumPy broadcasting of both
// arguments, computing out[i] = f(a, b) element by element.
func buildBinaryMath[T number](op ir.Op, f func(x, y T) T) kernels.Builder {
	return func(n *kernels.Node) (kernels.Func, error) {
		w, err := binaryWalk(op, n)
		if err != nil {
			return nil, err
		}
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			o, a, b := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
			w.each(func(oo, ao, bo int) {
				binaryMathRow(f, o[oo:oo+w.inner], a, b, ao, bo, w.ia, w.ib)
			})
			return nil
		}, nil
	}
}

// binaryMathRow computes one row, o[j] = f(a[ao+j*ia], b[bo+j*ib]): the code
// of the ops built by buildBinaryMath (pow, float floor_div and mod), shared
// by their kernels and the fused elementwise interpreter.
func binaryMathRow[T number](f func(x, y T) T, o, a, b []T, ao, bo, ia, ib int) {
	for j := range o {
		o[j] = f(a[ao], b[bo])
		ao += ia
		bo += ib
	}
}

// buildBinaryMathChecked is buildBinaryMath for an f that reports ok = false
// for an element it cannot compute (integer division by zero): the kernel
// then stops with an error naming the op and the element's index in the
// result.
func buildBinaryMathChecked[T number](op ir.Op, f func(x, y T) (T, bool)) kernels.Builder {
	return func(n *kernels.Node) (kernels.Func, error) {
		w, err := binaryWalk(op, n)
		if err != nil {
			return nil, err
		}
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			o, a, b := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
			bad := -1
			w.each(func(oo, ao, bo int) {
				if bad >= 0 {
					return
				}
				row := o[oo : oo+w.inner]
				for j := range row {
					v, ok := f(a[ao], b[bo])
					if !ok {
						bad = oo + j
						return
					}
					row[j] = v
					ao += w.ia
					bo += w.ib
				}
			})
			if bad >= 0 {
				return fmt.Errorf("division by zero in %s at element %d", op, bad)
			}
			return nil
		}, nil
	}
}

// binaryWalk plans the broadcast traversal of a two-argument node of op.
func binaryWalk(op ir.Op, n *kernels.Node) (*walk, error) {
	if n.Op != op || len(n.Args) != 2 {
		return nil, fmt.Errorf("kernel for %s with two arguments given a %s node with %d", op, n.Op, len(n.Args))
	}
	return newWalk(n.Out.Shape, broadcastStrides(n.Args[0].Shape, n.Out.Shape), broadcastStrides(n.Args[1].Shape, n.Out.Shape)), nil
}

// buildMaxMin builds maximum or minimum with NumPy broadcasting.
func buildMaxMin[T number](n *kernels.Node) (kernels.Func, error) {
	f := maxMinRow[T](n.Op)
	if f == nil {
		return nil, fmt.Errorf("%s is not maximum or minimum", n.Op)
	}
	w, err := binaryWalk(n.Op, n)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		w.each(func(oo, ao, bo int) {
			f(o[oo:oo+w.inner], a, b, ao, bo, w.ia, w.ib)
		})
		return nil
	}, nil
}

// maxMinRow returns the row code of maximum or minimum (nil for another
// op), o[j] = max(a[ao+j*ia], b[bo+j*ib]), shared by their kernels and the
// fused elementwise interpreter. The builtin max and min give NaN if either
// element is NaN (as torch.maximum), and max(-0, +0) = +0.
func maxMinRow[T number](op ir.Op) func(o, a, b []T, ao, bo, ia, ib int) {
	switch op {
	case ir.OpMaximum:
		return func(o, a, b []T, ao, bo, ia, ib int) {
			if ia == 1 && ib == 1 {
				a, b := a[ao:ao+len(o)], b[bo:bo+len(o)]
				for j := range o {
					o[j] = max(a[j], b[j])
				}
				return
			}
			for j := range o {
				o[j] = max(a[ao], b[bo])
				ao += ia
				bo += ib
			}
		}
	case ir.OpMinimum:
		return func(o, a, b []T, ao, bo, ia, ib int) {
			if ia == 1 && ib == 1 {
				a, b := a[ao:ao+len(o)], b[bo:bo+len(o)]
				for j := range o {
					o[j] = min(a[j], b[j])
				}
				return
			}
			for j := range o {
				o[j] = min(a[ao], b[bo])
				ao += ia
				bo += ib
			}
		}
	}
	return nil
}

// floorDivFloat is torch.floor_divide (and Python's float //) computed in
// T: the quotient of a - fmod(a, b), corrected toward -Inf and to the
// nearest integer. Division by zero gives a/b (±Inf or NaN).
func floorDivFloat[T float](a, b T) T {
	if b == 0 {
		return a / b
	}
	mod := T(math.Mod(float64(a), float64(b))) // exact
	div := (a - mod) / b
	if mod != 0 && (b < 0) != (mod < 0) {
		div--
	}
	if div == 0 {
		return T(math.Copysign(0, float64(a/b)))
	}
	fl := T(math.Floor(float64(div)))
	if div-fl > 0.5 {
		fl++
	}
	return fl
}

// modFloat is torch.remainder (and Python's float %) computed in T: fmod,
// moved into the sign of b. Division by zero gives NaN.
func modFloat[T float](a, b T) T {
	mod := T(math.Mod(float64(a), float64(b))) // exact
	if mod != 0 && (b < 0) != (mod < 0) {
		mod += b
	}
	return mod
}

// floorDivInt is Python's integer //: the truncated quotient, one less when
// the remainder is nonzero and the signs differ. MinInt / -1 wraps to MinInt
// as in Go.
func floorDivInt[T integer](a, b T) (T, bool) {
	if b == 0 {
		return 0, false
	}
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q, true
}

// modInt is Python's integer %: the remainder with the sign of b.
func modInt[T integer](a, b T) (T, bool) {
	if b == 0 {
		return 0, false
	}
	r := a % b
	if r != 0 && (r < 0) != (b < 0) {
		r += b
	}
	return r, true
}
