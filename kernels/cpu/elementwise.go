package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildBinary builds add, sub, mul or div with NumPy broadcasting of both
// arguments. The traversal is planned by newWalk, so equal shapes and a
// scalar operand run as one vector loop and a trailing-row broadcast as one
// vector loop per row; anything else walks the rows with an odometer.
func buildBinary[T number](n *kernels.Node) (kernels.Func, error) {
	op := n.Op
	switch op {
	case ir.OpAdd, ir.OpSub, ir.OpMul:
	case ir.OpDiv:
		if !n.Out.DType.IsFloat() {
			return nil, fmt.Errorf("div is defined for floats only, found %s", n.Out.DType)
		}
	default:
		return nil, fmt.Errorf("%s is not a binary elementwise op", op)
	}
	w := newWalk(n.Out.Shape, broadcastStrides(n.Args[0].Shape, n.Out.Shape), broadcastStrides(n.Args[1].Shape, n.Out.Shape))
	if f := binaryStream[T](n, w); f != nil {
		return f, nil
	}
	if f := parWalk(n.Par, w, 1, func(o, a, b []T, ao, bo, ia, ib int) { binaryRow(op, o, a, b, ao, bo, ia, ib) }); f != nil {
		return f, nil // split across the workers (par.go)
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		inner, ia, ib := w.inner, w.ia, w.ib
		w.each(func(oo, ao, bo int) {
			binaryRow(op, o[oo:oo+inner], a, b, ao, bo, ia, ib)
		})
		return nil
	}, nil
}

// binaryStream returns the Func of a binary op of two operands of the
// output's shape whose output is large (fuseewStreamBytes or more, as
// fused_elementwise's: its reader finds it in memory, not in the cache):
// the op's row code with streaming stores, so that no line of the output
// is read before it is written, split like parWalk's; nil otherwise or
// without the streaming loops (no AVX2).
func binaryStream[T number](n *kernels.Node, w *walk) kernels.Func {
	if n.Out.Bytes() < fuseewStreamBytes || len(w.dims) != 0 || w.ia != 1 || w.ib != 1 {
		return nil
	}
	vv := ewVecVecFunc[T](n.Op, true)
	if vv == nil {
		return nil
	}
	return parRows(n.Par, parParts(n.Par, w.n, 1), w.n, parAlign, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		if lo < hi {
			vv(kernels.View[T](out)[lo:hi], kernels.View[T](args[0])[lo:hi], kernels.View[T](args[1])[lo:hi])
			storeFence()
		}
		return nil
	})
}

// binaryRow computes one row: out[j] = a[ao+j*ia] op b[bo+j*ib].
func binaryRow[T number](op ir.Op, out, a, b []T, ao, bo, ia, ib int) {
	n := len(out)
	switch {
	case ia == 1 && ib == 1:
		vecVec(op, out, a[ao:ao+n], b[bo:bo+n])
	case ia == 1 && ib == 0:
		vecScalar(op, out, a[ao:ao+n], b[bo])
	case ia == 0 && ib == 1:
		scalarVec(op, out, a[ao], b[bo:bo+n])
	case ia == 0 && ib == 0:
		v := apply(op, a[ao], b[bo])
		for i := range out {
			out[i] = v
		}
	default:
		for i := range out {
			out[i] = apply(op, a[ao], b[bo])
			ao += ia
			bo += ib
		}
	}
}

// ewOpIndex returns the index of add, sub, mul and div in the tables of the
// assembly loops (elementwise_amd64.go) and the fused elementwise block
// runner's step codes, -1 for any other op.
func ewOpIndex(op ir.Op) int {
	switch op {
	case ir.OpAdd:
		return 0
	case ir.OpSub:
		return 1
	case ir.OpMul:
		return 2
	case ir.OpDiv:
		return 3
	}
	return -1
}

// apply returns x op y for one pair of elements.
func apply[T number](op ir.Op, x, y T) T {
	switch op {
	case ir.OpAdd:
		return x + y
	case ir.OpSub:
		return x - y
	case ir.OpMul:
		return x * y
	default: // ir.OpDiv; floats only, checked by buildBinary
		return x / y
	}
}

// vecVec computes out[i] = a[i] op b[i].
func vecVec[T number](op ir.Op, out, a, b []T) {
	a, b = a[:len(out)], b[:len(out)]
	if ewVecVecAsm(op, out, a, b) {
		return
	}
	switch op {
	case ir.OpAdd:
		for i := range out {
			out[i] = a[i] + b[i]
		}
	case ir.OpSub:
		for i := range out {
			out[i] = a[i] - b[i]
		}
	case ir.OpMul:
		for i := range out {
			out[i] = a[i] * b[i]
		}
	default:
		for i := range out {
			out[i] = a[i] / b[i]
		}
	}
}

// vecScalar computes out[i] = a[i] op s.
func vecScalar[T number](op ir.Op, out, a []T, s T) {
	a = a[:len(out)]
	if ewVecScalarAsm(op, out, a, s) {
		return
	}
	switch op {
	case ir.OpAdd:
		for i := range out {
			out[i] = a[i] + s
		}
	case ir.OpSub:
		for i := range out {
			out[i] = a[i] - s
		}
	case ir.OpMul:
		for i := range out {
			out[i] = a[i] * s
		}
	default:
		for i := range out {
			out[i] = a[i] / s
		}
	}
}

// scalarVec computes out[i] = s op b[i].
func scalarVec[T number](op ir.Op, out []T, s T, b []T) {
	b = b[:len(out)]
	if ewScalarVecAsm(op, out, s, b) {
		return
	}
	switch op {
	case ir.OpAdd:
		for i := range out {
			out[i] = s + b[i]
		}
	case ir.OpSub:
		for i := range out {
			out[i] = s - b[i]
		}
	case ir.OpMul:
		for i := range out {
			out[i] = s * b[i]
		}
	default:
		for i := range out {
			out[i] = s / b[i]
		}
	}
}

// buildNeg builds neg. Integer negation wraps (-MinInt32 is MinInt32).
func buildNeg[T number](n *kernels.Node) (kernels.Func, error) {
	return parUnary(n.Par, n.Out.Shape.NumElements(), 1, negRow[T]), nil
}

// negRow computes o[i] = -x[i]: neg's code, shared by its kernel and the
// fused elementwise interpreter.
func negRow[T number](o, x []T) {
	x = x[:len(o)]
	for i := range o {
		o[i] = -x[i]
	}
}

// buildUnaryFloat builds sqrt or relu.
func buildUnaryFloat[T float](n *kernels.Node) (kernels.Func, error) {
	f := unaryFloatRow[T](n.Op)
	if f == nil {
		return nil, fmt.Errorf("%s is not a unary float op", n.Op)
	}
	cost := parCostExp
	if n.Op == ir.OpRelu {
		cost = 1
	}
	return parUnary(n.Par, n.Out.Shape.NumElements(), cost, f), nil
}

// sqrtRow sets o[i] to the square root of x[i], correctly rounded (an f32
// root through float64 rounds once more, which gives the same value): in
// vector registers where rowsum_amd64.s runs (rowsumAsm: VSQRTPS, VSQRTPD),
// the rest in Go.
func sqrtRow[T float](o, x []T) {
	x = x[:len(o)]
	done := 0
	if rowsumAsm && len(o) > 0 {
		switch o := any(o).(type) {
		case []float32:
			done = len(o) &^ 7
			if done > 0 {
				sqrtF32(unsafe.Pointer(&o[0]), unsafe.Pointer(&any(x).([]float32)[0]), done)
			}
		case []float64:
			done = len(o) &^ 3
			if done > 0 {
				sqrtF64(unsafe.Pointer(&o[0]), unsafe.Pointer(&any(x).([]float64)[0]), done)
			}
		}
	}
	for i, v := range x[done:] {
		o[done+i] = T(math.Sqrt(float64(v)))
	}
}

// unaryFloatRow returns the code of sqrt or relu, o[i] = f(x[i]), shared
// by their kernels and the fused elementwise interpreter; nil for any
// other op. relu is x <= 0 ? 0 : x, so it keeps NaN (as PyTorch) and maps
// -0 to 0.
func unaryFloatRow[T float](op ir.Op) func(o, x []T) {
	switch op {
	case ir.OpSqrt:
		return sqrtRow[T]
	case ir.OpRelu:
		return func(o, x []T) { reluGradRow(o, x, x) }
	}
	return nil
}

// buildReluGrad builds relu_grad(dy, x): 0 where x <= 0, else dy.
func buildReluGrad[T float](n *kernels.Node) (kernels.Func, error) {
	return parBinary(n.Par, n.Out.Shape.NumElements(), 1, reluGradRow[T]), nil
}

// reluGradRow computes o[i] = x[i] <= 0 ? 0 : dy[i]: relu_grad's code, and
// relu's (relu(x) = relu_grad(x, x)), shared by their kernels and the fused
// elementwise interpreter. As PyTorch's threshold_backward and relu, a NaN
// x passes dy (so relu(NaN) is that NaN). The test and the choice are done
// on the bits, without a branch, which random signs would mispredict half
// the time: x passes when its bits, read as a signed integer, are positive
// (x > 0, +Inf, a NaN without the sign bit), or when the bits without the
// sign lie above +Inf's (a NaN of either sign).
func reluGradRow[T float](o, dy, x []T) {
	switch o := any(o).(type) {
	case []float32:
		dy, x := any(dy).([]float32)[:len(o)], any(x).([]float32)[:len(o)]
		for i := reluGradF32(o, dy, x); i < len(o); i++ {
			b := math.Float32bits(x[i])
			keep := b2u32(int32(b) > 0) | b2u32(b<<1 > 0xff000000)
			o[i] = math.Float32frombits(math.Float32bits(dy[i]) & -keep)
		}
	case []float64:
		dy, x := any(dy).([]float64)[:len(o)], any(x).([]float64)[:len(o)]
		for i := range o {
			b := math.Float64bits(x[i])
			keep := uint64(b2u32(int64(b) > 0) | b2u32(b<<1 > 0xffe0000000000000))
			o[i] = math.Float64frombits(math.Float64bits(dy[i]) & -keep)
		}
	}
}

// b2u32 returns 1 for true and 0 for false (a SETcc, no branch).
func b2u32(b bool) uint32 {
	var u uint32
	if b {
		u = 1
	}
	return u
}
