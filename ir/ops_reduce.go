package ir

import (
	"fmt"
	"math"
)

// Reductions beyond sum and mean, and the elementwise comparisons, where
// and logical ops (whose enum constants sit with the math ops).
//
// The reductions take {axes, keepdims} exactly like sum and mean: absent
// axes reduce every axis, an explicit empty list reduces none.

func reduceOps() []opRow {
	reduceAttrs := axesAttrs
	varAttrs := append(append([]AttrSpec{}, axesAttrs...),
		AttrSpec{Name: "correction", Kind: AttrFloat, Default: defFloat(1), Doc: "the divisor is max(0, N - correction) for N reduced elements: 1 is Bessel's correction, 0 the population variance"})
	exclusiveAttrs := []AttrSpec{{Name: "axes", Kind: attrInts, Doc: "axes whose slices are multiplied (negative counts from the end); absent means all axes"}}
	return []opRow{
		{OpMax, OpInfo{Name: "max", Args: []string{"x"}, Class: ClassReduction, Attrs: reduceAttrs, Infer: reduceInferExtreme, Grad: reduceGradExtreme,
			Doc: "largest element over axes (torch.amax); NaN where the slice holds a NaN; the gradient is split equally among the elements equal to the result; reducing an axis of size 0 is an error"}},
		{OpMin, OpInfo{Name: "min", Args: []string{"x"}, Class: ClassReduction, Attrs: reduceAttrs, Infer: reduceInferExtreme, Grad: reduceGradExtreme,
			Doc: "smallest element over axes (torch.amin); NaN where the slice holds a NaN; the gradient is split equally among the elements equal to the result; reducing an axis of size 0 is an error"}},
		{OpProd, OpInfo{Name: "prod", Args: []string{"x"}, Class: ClassReduction, Attrs: reduceAttrs, Infer: inferReduce, Grad: reduceGradProd,
			Doc: "product over axes in index order (torch.prod, but the result keeps the dtype: integer products wrap); 1 over no elements; exact gradient at zeros (the product of the other elements)"}},
		{OpLogSumExp, OpInfo{Name: "logsumexp", Args: []string{"x"}, Class: ClassReduction, Attrs: reduceAttrs, Infer: inferReduceFloat, Grad: reduceGradLogSumExp, Cost: costPerElement(4),
			Doc: "log(sum(exp(x))) over axes, computed as m + log(sum(exp(x - m))) with m the max (0 where m is infinite), so it never overflows (torch.logsumexp); -inf over no elements"}},
		{OpVar, OpInfo{Name: "var", Args: []string{"x"}, Class: ClassReduction, Attrs: varAttrs, Infer: inferReduceFloat, Grad: reduceGradVar,
			Doc: "variance over axes, sum((x - mean)^2) / max(0, N - correction), two passes in index order (torch.var); a divisor of 0 gives inf, or NaN where the sum is 0"}},
		{OpStd, OpInfo{Name: "std", Args: []string{"x"}, Class: ClassReduction, Attrs: varAttrs, Infer: inferReduceFloat, Grad: reduceGradStd,
			Doc: "standard deviation over axes, sqrt(var) with var's correction (torch.std); the gradient is 0 where the result is 0, as in PyTorch"}},
		{OpArgmax, OpInfo{Name: "argmax", Args: []string{"x"}, Class: ClassReduction, Attrs: reduceAttrs, Infer: reduceInferArg,
			Doc: "i64 index of the first largest element over axes, counted row-major over the reduced axes (torch.argmax, which takes one axis or all); a NaN counts as larger than any number; reducing an axis of size 0 is an error"}},
		{OpArgmin, OpInfo{Name: "argmin", Args: []string{"x"}, Class: ClassReduction, Attrs: reduceAttrs, Infer: reduceInferArg,
			Doc: "i64 index of the first smallest element over axes, counted row-major over the reduced axes (torch.argmin, which takes one axis or all); a NaN counts as smaller than any number, as in PyTorch; reducing an axis of size 0 is an error"}},
		{OpProdExclusive, OpInfo{Name: "prod_exclusive", Args: []string{"x"}, Attrs: exclusiveAttrs, Infer: reduceInferExclusive, Grad: reduceGradProdExclusive,
			Doc: "each element replaced by the product of the other elements of its slice over axes, by prefix and suffix products without division, so exact at zeros (the gradient of prod)"}},
		{OpProdExclusiveGrad, OpInfo{Name: "prod_exclusive_grad", Args: []string{"dy", "x"}, Attrs: exclusiveAttrs, Infer: reduceInferExclusive,
			NoGrad: "the third derivative of prod is not implemented",
			Doc:    "out[j] = sum over i != j of dy[i] times the product of x[k] for k not in {i, j}, within each slice over axes (the gradient of prod_exclusive); exact at zeros"}},

		{OpGreater, OpInfo{Name: "greater", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferOrder, Doc: "a > b with NumPy broadcasting; bool result (NaN compares false); numeric operands of one dtype"}},
		{OpGreaterEqual, OpInfo{Name: "greater_equal", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferOrder, Doc: "a >= b with NumPy broadcasting; bool result (NaN compares false); numeric operands of one dtype"}},
		{OpLess, OpInfo{Name: "less", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferOrder, Doc: "a < b with NumPy broadcasting; bool result (NaN compares false); numeric operands of one dtype"}},
		{OpLessEqual, OpInfo{Name: "less_equal", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferOrder, Doc: "a <= b with NumPy broadcasting; bool result (NaN compares false); numeric operands of one dtype"}},
		{OpEqual, OpInfo{Name: "equal", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferEquality, Doc: "a == b elementwise with NumPy broadcasting (torch.eq); bool result (NaN equals nothing); operands of one dtype, bool included"}},
		{OpNotEqual, OpInfo{Name: "not_equal", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferEquality, Doc: "a != b elementwise with NumPy broadcasting (torch.ne); bool result (true where either is NaN); operands of one dtype, bool included"}},
		{OpWhere, OpInfo{Name: "where", Args: []string{"cond", "a", "b"}, Class: ClassElementwise, Infer: reduceInferWhere, Grad: reduceGradWhere,
			Doc: "a where cond, else b; all three broadcast (torch.where); cond is bool, a and b of one dtype (no promotion)"}},
		{OpLogicalAnd, OpInfo{Name: "logical_and", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferLogical, Doc: "a and b with NumPy broadcasting; bool operands only (PyTorch also takes numbers)"}},
		{OpLogicalOr, OpInfo{Name: "logical_or", Args: []string{"a", "b"}, Class: ClassElementwise, Infer: reduceInferLogical, Doc: "a or b with NumPy broadcasting; bool operands only (PyTorch also takes numbers)"}},
		{OpLogicalNot, OpInfo{Name: "logical_not", Args: []string{"x"}, Class: ClassElementwise, Infer: reduceInferLogicalNot, Doc: "not x; a bool operand only (PyTorch also takes numbers)"}},
	}
}

// reduceCheckNonEmpty returns an error when one of the axes has size 0: a
// max, min or arg-extreme of nothing is undefined, as in PyTorch ("Expected
// reduction dim to have non-zero size").
func reduceCheckNonEmpty(x Type, a Attrs) error {
	axes, err := ReduceAxes(a, len(x.Shape))
	if err != nil {
		return fmt.Errorf("%v (input %s)", err, x)
	}
	for _, ax := range axes {
		if x.Shape[ax] == 0 {
			return fmt.Errorf("expected reduced axes of nonzero size (the extreme of no elements is undefined), found axis %d of size 0 in %s", ax, x)
		}
	}
	return nil
}

func reduceInferExtreme(args []Type, a Attrs) (Type, error) {
	t, err := inferReduce(args, a)
	if err != nil {
		return t, err
	}
	if err := reduceCheckNonEmpty(args[0], a); err != nil {
		return Type{}, err
	}
	return t, nil
}

func reduceInferArg(args []Type, a Attrs) (Type, error) {
	t, err := reduceInferExtreme(args, a)
	if err != nil {
		return t, err
	}
	return Type{I64, t.Shape}, nil
}

func reduceInferExclusive(args []Type, a Attrs) (Type, error) {
	x := args[len(args)-1]
	for _, t := range args {
		if !t.Equal(x) {
			return Type{}, fmt.Errorf("expected dy of the type of x, found %s and %s", t, x)
		}
	}
	if !x.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float operand (f32 or f64), found %s", x)
	}
	if _, err := ReduceAxes(a, len(x.Shape)); err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// reduceInferCompare is the type of a comparison: bool, broadcast shape.
func reduceInferCompare(args []Type, allowBool bool) (Type, error) {
	a, b := args[0], args[1]
	if a.DType != b.DType {
		return Type{}, fmt.Errorf("expected operands of one dtype (kiln does not promote), found %s and %s", a, b)
	}
	if a.DType == Bool && !allowBool {
		return Type{}, fmt.Errorf("expected numeric operands (f32, f64, i32 or i64), found %s and %s", a, b)
	}
	s, ok := BroadcastShapes(a.Shape, b.Shape)
	if !ok {
		return Type{}, fmt.Errorf("incompatible shapes %s and %s (they do not broadcast)", a, b)
	}
	return Type{Bool, s}, nil
}

func reduceInferOrder(args []Type, _ Attrs) (Type, error) { return reduceInferCompare(args, false) }

func reduceInferEquality(args []Type, _ Attrs) (Type, error) { return reduceInferCompare(args, true) }

func reduceInferLogical(args []Type, _ Attrs) (Type, error) {
	a, b := args[0], args[1]
	if a.DType != Bool || b.DType != Bool {
		return Type{}, fmt.Errorf("expected bool operands, found %s and %s", a, b)
	}
	return reduceInferCompare(args, true)
}

func reduceInferLogicalNot(args []Type, _ Attrs) (Type, error) {
	if args[0].DType != Bool {
		return Type{}, fmt.Errorf("expected a bool operand, found %s", args[0])
	}
	return Type{Bool, args[0].Shape.Clone()}, nil
}

func reduceInferWhere(args []Type, _ Attrs) (Type, error) {
	c, a, b := args[0], args[1], args[2]
	if c.DType != Bool {
		return Type{}, fmt.Errorf("expected a bool cond, found %s", c)
	}
	if a.DType != b.DType {
		return Type{}, fmt.Errorf("expected a and b of one dtype (kiln does not promote), found %s and %s", a, b)
	}
	s, ok := BroadcastShapes(c.Shape, a.Shape)
	if ok {
		s, ok = BroadcastShapes(s, b.Shape)
	}
	if !ok {
		return Type{}, fmt.Errorf("incompatible shapes: cond %s, a %s and b %s do not broadcast", c, a, b)
	}
	return Type{a.DType, s}, nil
}

// reduceKeep returns the normalized axes of reduction y and the shape of
// its result with the reduced axes kept as size 1, to which dy and y are
// reshaped so that they broadcast against x.
func reduceKeep(e *Emitter, y ID) ([]int, Shape) {
	xs := e.shape(e.args(y)[0])
	axes, err := ReduceAxes(e.G.Values[y].Attrs, len(xs))
	if err != nil {
		e.err = err
		return nil, nil
	}
	return axes, ReducedShape(xs, axes, true)
}

func reduceGradExtreme(e *Emitter, y, dy ID) []ID {
	// As PyTorch's amax/amin: mask = (x == y), dx = dy / count(mask) * mask,
	// so ties share dy equally. A slice whose result is NaN matches nothing
	// and gets NaN (dy/0 * 0), as in PyTorch. equal has no gradient, so the
	// rule is linear in dy and differentiable again.
	x := e.args(y)[0]
	dt := e.Type(x).DType
	axes, keep := reduceKeep(e, y)
	if keep == nil {
		return []ID{NoID}
	}
	mask := e.Op(OpEqual, nil, x, e.Reshape(y, keep))
	ones := e.Op(OpWhere, nil, mask, e.Scalar(1, dt), e.Scalar(0, dt))
	count := e.Op(OpSum, MakeAttrs("axes", Ints(axes...), "keepdims", BoolAttr(true)), ones)
	return []ID{e.mul(e.div(e.Reshape(dy, keep), count), ones)}
}

func reduceGradProd(e *Emitter, y, dy ID) []ID {
	// dx[i] = dy * (product of the other elements of i's slice), from the
	// exclusive product: exact with zeros, where PyTorch's prod / x would
	// divide by zero.
	x := e.args(y)[0]
	axes, keep := reduceKeep(e, y)
	if keep == nil {
		return []ID{NoID}
	}
	others := e.Op(OpProdExclusive, MakeAttrs("axes", Ints(axes...)), x)
	return []ID{e.mul(e.Reshape(dy, keep), others)}
}

func reduceGradProdExclusive(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	return []ID{e.Op(OpProdExclusiveGrad, e.G.Values[y].Attrs, dy, x)}
}

func reduceGradLogSumExp(e *Emitter, y, dy ID) []ID {
	// dx = dy * exp(x - y): the softmax of each slice.
	x := e.args(y)[0]
	_, keep := reduceKeep(e, y)
	if keep == nil {
		return []ID{NoID}
	}
	w := e.Op(OpExp, nil, e.sub(x, e.Reshape(y, keep)))
	return []ID{e.mul(w, e.Reshape(dy, keep))}
}

// reduceVarBackward returns dx for var(x) with gradient gv (of var's result
// shape), where y is the var or std value: PyTorch's var_backward,
// 2/(N - correction) * gv * (x - mean). A divisor of 0 makes the scale inf,
// as the forward's.
func reduceVarBackward(e *Emitter, y, gv ID) ID {
	x := e.args(y)[0]
	xs := e.shape(x)
	axes, keep := reduceKeep(e, y)
	if keep == nil {
		return NoID
	}
	n := 1
	for _, ax := range axes {
		n *= xs[ax]
	}
	c := e.G.Values[y].Attrs.Float("correction", 1)
	dof := math.Max(0, float64(n)-c)
	dt := e.Type(x).DType
	mean := e.Op(OpMean, MakeAttrs("axes", Ints(axes...), "keepdims", BoolAttr(true)), x)
	scaled := e.mul(e.Reshape(gv, keep), e.Scalar(2/dof, dt))
	return e.mul(scaled, e.sub(x, mean))
}

func reduceGradVar(e *Emitter, y, dy ID) []ID { return []ID{reduceVarBackward(e, y, dy)} }

func reduceGradStd(e *Emitter, y, dy ID) []ID {
	// PyTorch's std_backward: gv = dy / (2 std), 0 where std is 0.
	dt := e.Type(y).DType
	zero := e.Scalar(0, dt)
	gv := e.div(dy, e.mul(y, e.Scalar(2, dt)))
	gv = e.Op(OpWhere, nil, e.Op(OpEqual, nil, y, zero), zero, gv)
	return []ID{reduceVarBackward(e, y, gv)}
}

func reduceGradWhere(e *Emitter, y, dy ID) []ID {
	// dy goes to a where cond holds and to b elsewhere, each summed back to
	// its operand's shape; cond gets none.
	args := e.args(y)
	zero := e.Scalar(0, e.Type(y).DType)
	da := e.Op(OpWhere, nil, args[0], dy, zero)
	db := e.Op(OpWhere, nil, args[0], zero, dy)
	return []ID{NoID, e.SumTo(da, e.shape(args[1])), e.SumTo(db, e.shape(args[2]))}
}
