package passes

import (
	"math"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
)

// Constant folding replaces an op whose arguments are all consts by the
// const it computes, where that const is exactly what the kernel would
// write. passes imports only ir, so folding cannot call the kernels; it
// folds what it can compute bit for bit in plain Go:
//
//   - add, sub, mul, div and neg in the element type: float32 arithmetic for
//     f32 (one rounding per op, as the kernel's loops), float64 for f64,
//     wrapping int32/int64 arithmetic for integers (div is floats only);
//   - sqrt of floats: the kernel computes T(math.Sqrt(float64(x))), and so
//     does the fold;
//   - the unary float ops of vmath's table (exp, log, tanh, sigmoid, gelu,
//     erf, sin, ...): the fold runs the table's row code, which the
//     kernels and the fused element-wise interpreter run too, so the
//     result is the kernel's bit for bit;
//   - reshape, squeeze, unsqueeze, broadcast_to and transpose, which move
//     elements without arithmetic.
//
// A filled const (one value for every element) folds whatever its size; a
// const that lists its elements folds when the result has at most
// foldMaxElems of them, so folding never writes a large list into the
// graph. A result that is NaN is not folded: the text format has one NaN,
// and the kernel's NaN may carry another sign or payload. An i64 result
// beyond ±2^53 is not folded, since const values pass through float64.
//
// The rest is not folded: reductions and matmul depend on the kernel's
// summation order, which is the kernel's to choose. Folding them would tie
// the compiler to one kernel.
const foldMaxElems = 1024

// foldConst is a const value's elements as the kernel stores them, widened
// to float64: f32 elements rounded to float32, integers exact, bool 0 or 1.
// A filled const has one element.
type foldConst struct {
	dt     ir.DType
	shape  ir.Shape
	vals   []float64
	raw    []float64 // the attribute's numbers as written, for folds that only move them
	filled bool
}

// at returns element k (of the whole tensor).
func (c *foldConst) at(k int) float64 {
	if c.filled {
		return c.vals[0]
	}
	return c.vals[k]
}

// foldElem returns f as an element of dt stores it, widened to float64.
func foldElem(dt ir.DType, f float64) float64 {
	switch dt {
	case ir.F32:
		return float64(float32(f))
	case ir.Bool:
		if f != 0 {
			return 1
		}
		return 0
	}
	return f
}

// constOf returns the elements of value id when it is a const.
func (s *simplifier) constOf(id ir.ID) (foldConst, bool) {
	v := &s.g.Values[id]
	if v.Op != ir.OpConst {
		return foldConst{}, false
	}
	a, _ := v.Attrs.Get("value")
	fs, ok := a.AsFloats()
	if !ok || len(fs) == 0 {
		return foldConst{}, false
	}
	c := foldConst{dt: v.Type.DType, shape: v.Type.Shape, raw: fs, filled: len(fs) == 1}
	c.vals = make([]float64, len(fs))
	for i, f := range fs {
		c.vals[i] = foldElem(c.dt, f)
	}
	return c, true
}

// constAll reports whether id is a const whose every element satisfies
// pred. It reads the attribute without copying it.
func (s *simplifier) constAll(id ir.ID, pred func(dt ir.DType, x float64) bool) bool {
	v := &s.g.Values[id]
	if v.Op != ir.OpConst {
		return false
	}
	a, _ := v.Attrs.Get("value")
	dt := v.Type.DType
	if f, ok := a.AsFloat(); ok {
		return pred(dt, foldElem(dt, f))
	}
	if a.Kind != ir.AttrList || len(a.L) == 0 {
		return false
	}
	for _, e := range a.L {
		f, ok := e.AsFloat()
		if !ok || !pred(dt, foldElem(dt, f)) {
			return false
		}
	}
	return true
}

// sameBits reports whether two elements are the same bit for bit (so +0
// and -0 differ, and NaN equals NaN).
func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// foldAttrs returns the canonical attributes of a const of type (dt, shape)
// with the given elements: one value when they are all the same, the shape
// left out for a scalar (as Emitter.Scalar writes it).
func foldAttrs(dt ir.DType, shape ir.Shape, vals []float64) ir.Attrs {
	filled := true
	for _, x := range vals[1:] {
		if !sameBits(x, vals[0]) {
			filled = false
			break
		}
	}
	num := func(x float64) ir.AttrValue {
		if dt.IsInt() || dt == ir.Bool {
			return ir.Int(int(x))
		}
		return ir.Float(x)
	}
	var value ir.AttrValue
	if filled {
		value = num(vals[0])
	} else {
		value = ir.AttrValue{Kind: ir.AttrList, L: make([]ir.AttrValue, len(vals))}
		for i, x := range vals {
			value.L[i] = num(x)
		}
	}
	attrs := ir.Attrs{{Key: "dtype", Value: ir.String(dt.String())}}
	if !filled || len(shape) > 0 {
		attrs = append(attrs, ir.Attr{Key: "shape", Value: ir.Ints(shape...)})
	}
	return append(attrs, ir.Attr{Key: "value", Value: value})
}

// foldArith computes x op y (or -x, sqrt x) in the element type dt, widened
// back to float64; ok is false where the fold must not happen (a NaN
// result, an i64 beyond ±2^53, an op the type does not have).
func foldArith(op ir.Op, dt ir.DType, x, y float64) (float64, bool) {
	var r float64
	var ok bool
	switch dt {
	case ir.F32:
		var c float32
		c, ok = ir.Arith(op, float32(x), float32(y))
		r = float64(c)
	case ir.F64:
		r, ok = ir.Arith(op, x, y)
	case ir.I32:
		var c int32
		c, ok = ir.Arith(op, int32(x), int32(y))
		r = float64(c)
	case ir.I64:
		var c int64
		c, ok = ir.Arith(op, int64(x), int64(y))
		ok = ok && c <= 1<<53 && c >= -(1<<53)
		r = float64(c)
	}
	if !ok || math.IsNaN(r) {
		return 0, false
	}
	return r, true
}

// foldSource returns, for each element of a tensor of shape out, the flat
// index of the element of a tensor of shape in that NumPy broadcasting
// (in right-aligned against out, size-1 axes repeated) puts there.
func foldSource(out, in ir.Shape) []int {
	n := out.NumElements()
	src := make([]int, n)
	lead := len(out) - len(in)
	strides := make([]int, len(out))
	inStrides := in.Strides()
	for i := range out {
		if j := i - lead; j >= 0 && in[j] != 1 {
			strides[i] = inStrides[j]
		}
	}
	idx := make([]int, len(out))
	off := 0
	for k := 0; k < n; k++ {
		src[k] = off
		for i := len(out) - 1; i >= 0; i-- {
			idx[i]++
			off += strides[i]
			if idx[i] < out[i] {
				break
			}
			off -= strides[i] * idx[i]
			idx[i] = 0
		}
	}
	return src
}

// ruleFold folds value id when its arguments are consts (see above), and
// puts a const in its canonical form: one value when every element is the
// same, no shape for a scalar.
func ruleFold(s *simplifier, id ir.ID) bool {
	g := s.g
	v := &g.Values[id]
	t := v.Type
	// Every fold but the reshape family computes the result's elements;
	// a listed result over the limit is not folded.
	limit := func(n int) bool { return n <= foldMaxElems }
	// Most values have an argument that is not a const: settle that
	// before reading any const.
	for _, a := range v.Args {
		if g.Values[a].Op != ir.OpConst {
			return false
		}
	}
	var vals []float64
	switch v.Op {
	case ir.OpConst:
		if value, _ := v.Attrs.Get("value"); value.Kind != ir.AttrList {
			// Already filled: canonical unless a scalar writes its shape.
			if _, ok := v.Attrs.Get("shape"); !ok || len(t.Shape) > 0 {
				return false
			}
		}
		c, ok := s.constOf(id)
		if !ok {
			return false
		}
		vals = c.raw
		for _, x := range c.vals[1:] {
			if !sameBits(x, c.vals[0]) {
				return s.rewrite(id, ir.OpConst, foldAttrs(t.DType, t.Shape, vals))
			}
		}
		vals = vals[:1] // every element the same: one value fills
	case ir.OpAdd, ir.OpSub, ir.OpMul, ir.OpDiv:
		a, ok1 := s.constOf(v.Args[0])
		b, ok2 := s.constOf(v.Args[1])
		if !ok1 || !ok2 {
			return false
		}
		if a.filled && b.filled {
			r, ok := foldArith(v.Op, t.DType, a.vals[0], b.vals[0])
			if !ok {
				return false
			}
			vals = []float64{r}
			break
		}
		n := t.Shape.NumElements()
		if !limit(n) {
			return false
		}
		sa, sb := foldSource(t.Shape, a.shape), foldSource(t.Shape, b.shape)
		vals = make([]float64, n)
		for k := range vals {
			r, ok := foldArith(v.Op, t.DType, a.at(sa[k]), b.at(sb[k]))
			if !ok {
				return false
			}
			vals[k] = r
		}
	case ir.OpNeg, ir.OpSqrt:
		a, ok := s.constOf(v.Args[0])
		if !ok {
			return false
		}
		vals = make([]float64, len(a.vals))
		for k, x := range a.vals {
			r, ok := foldArith(v.Op, t.DType, x, 0)
			if !ok {
				return false
			}
			vals[k] = r
		}
	case ir.OpReshape, ir.OpSqueeze, ir.OpUnsqueeze:
		a, ok := s.constOf(v.Args[0])
		if !ok {
			return false
		}
		vals = a.raw
	case ir.OpBroadcastTo:
		a, ok := s.constOf(v.Args[0])
		if !ok {
			return false
		}
		if a.filled {
			vals = a.raw
			break
		}
		n := t.Shape.NumElements()
		if !limit(n) {
			return false
		}
		vals = make([]float64, n)
		for k, j := range foldSource(t.Shape, a.shape) {
			vals[k] = a.raw[j]
		}
	case ir.OpTranspose:
		a, ok := s.constOf(v.Args[0])
		if !ok {
			return false
		}
		if a.filled {
			vals = a.raw
			break
		}
		if !limit(len(a.vals)) {
			return false
		}
		perm, err := ir.Perm(v.Attrs, len(a.shape))
		if err != nil {
			return false
		}
		// Walk the result in order; its axis i is the input's axis perm[i].
		in := a.shape.Strides()
		strides := make(ir.Shape, len(perm))
		for i, p := range perm {
			strides[i] = in[p]
		}
		vals = make([]float64, len(a.vals))
		idx := make([]int, len(t.Shape))
		off := 0
		for k := range vals {
			vals[k] = a.raw[off]
			for i := len(idx) - 1; i >= 0; i-- {
				idx[i]++
				off += strides[i]
				if idx[i] < t.Shape[i] {
					break
				}
				off -= strides[i] * idx[i]
				idx[i] = 0
			}
		}
	default:
		u, ok, err := vmath.Lookup(v.Op, v.Attrs)
		if !ok || err != nil || len(v.Args) != 1 {
			return false
		}
		a, ok := s.constOf(v.Args[0])
		if !ok {
			return false
		}
		if vals, ok = foldUnary(u, t.DType, a.vals); !ok {
			return false
		}
	}
	if len(vals) == 0 {
		return false
	}
	return s.rewrite(id, ir.OpConst, foldAttrs(t.DType, t.Shape, vals))
}

// foldUnary computes a unary op of vmath's table over the elements of a
// const of dtype dt with the table's row code; ok is false for another
// dtype or where an element is NaN (see above).
func foldUnary(u vmath.Unary, dt ir.DType, x []float64) ([]float64, bool) {
	r := make([]float64, len(x))
	switch dt {
	case ir.F32:
		x32 := make([]float32, len(x))
		for i, v := range x {
			x32[i] = float32(v)
		}
		u.F32(x32, x32)
		for i, v := range x32 {
			r[i] = float64(v)
		}
	case ir.F64:
		u.F64(r, x)
	default:
		return nil, false
	}
	for _, v := range r {
		if math.IsNaN(v) {
			return nil, false
		}
	}
	return r, true
}
