package ir

import "fmt"

// Fused patterns: ops that the fuse pass puts in place of a group of ops
// with a dedicated one-pass kernel. They appear only after autodiff.
//
// Each records in its "from" attribute the .kir lines of the values it
// replaced (Graph.Provenance). The arithmetic of each is exactly that of
// the group it replaces, operation for operation, so the CPU kernels give
// the unfused results bit for bit.

// fusedPatternNoGrad is the NoGrad reason of every fused pattern op.
const fusedPatternNoGrad = "fused ops appear after autodiff"

// fusedPatternFrom is the schema entry of the provenance attribute.
var fusedPatternFrom = AttrSpec{Name: FromAttr, Kind: AttrList,
	Doc: "the .kir lines of the values this op replaced, as they read before fusion (kiln dump shows them)"}

// fusedPatternOps returns the rows of the fused pattern ops.
func fusedPatternOps() []opRow {
	axis := []AttrSpec{
		{Name: "axis", Kind: AttrInt, Default: defInt(-1), Doc: "the normalized axis"},
		fusedPatternFrom,
	}
	return []opRow{
		{OpSoftmaxGrad, OpInfo{Name: "softmax_grad", Args: []string{"dy", "y"}, Attrs: axis,
			Infer: fusedPatternInferAxis, NoGrad: fusedPatternNoGrad,
			Doc: "y * (dy - sum(dy*y, axis)): the gradient of y = softmax(x) along axis, one kernel per slice (a sum pass, then a write pass; no Jacobian); the fuse pass puts it in place of mul(y, sub(dy, sum(mul(dy, y), axes=[axis], keepdims=true)))"}},
		{OpLogSoftmaxGrad, OpInfo{Name: "log_softmax_grad", Args: []string{"dy", "y"}, Attrs: axis,
			Infer: fusedPatternInferAxis, NoGrad: fusedPatternNoGrad,
			Doc: "dy - exp(y) * sum(dy, axis): the gradient of y = log_softmax(x) along axis, one kernel per slice; the fuse pass puts it in place of sub(dy, mul(exp(y), sum(dy, axes=[axis], keepdims=true)))"}},
		{OpMaxGrad, OpInfo{Name: "max_grad", Args: []string{"dy", "x", "y"},
			Attrs: []AttrSpec{
				{Name: "axes", Kind: attrInts, Doc: "the reduced axes of the max or min (negative counts from the end); absent means all axes"},
				{Name: "keepdims", Kind: AttrBool, Default: defBool(false), Doc: "whether dy and y keep the reduced axes with size 1"},
				{Name: "min", Kind: AttrBool, Default: defBool(false), Doc: "y is the min rather than the max (the arithmetic is the same)"},
				fusedPatternFrom,
			},
			Infer: fusedPatternInferMaxGrad, NoGrad: fusedPatternNoGrad,
			Doc: "the gradient of y = max(x) or min(x) over axes in gather form (dy of y's shape, or a scalar for every slice): each element of a slice reads the slice's y and dy and its tie count n (the elements equal to y, counted by the same kernel) and gets (dy/n)*1 where x == y, else (dy/n)*0, so a NaN slice gives NaN as the unfused rule; no mask is stored"}},
		{OpSoftmaxCEGrad, OpInfo{Name: "softmax_ce_grad", Args: []string{"logits", "target", "dy"}, Optional: 1,
			Attrs: []AttrSpec{
				{Name: "reduction", Kind: AttrString, Default: defString(lossMean), Doc: `how dy scales the rows: "mean" dy/N, "sum" dy (1 when dy is absent), "none" dy[n] per row`},
				fusedPatternFrom,
			},
			Infer: fusedPatternInferSoftmaxCE, NoGrad: fusedPatternNoGrad,
			Doc: "the gradient of softmax_cross_entropy with respect to the logits [N,C], one kernel per row: (softmax(logits) - onehot(target)) * scale for integer labels [N], (softmax(logits) * sum(target) - target) * scale for probabilities [N,C], with scale dy*(1/N) (mean, dy a scalar), dy (sum; 1 without dy, where simplification removed a multiplication by 1) or dy[n] (none, dy [N] or [N,1])"}},
	}
}

// fusedPatternCheckFrom checks that the provenance attribute, when present,
// is a list of strings.
func fusedPatternCheckFrom(a Attrs) error {
	v, ok := a.Get(FromAttr)
	if !ok {
		return nil
	}
	for _, e := range v.L {
		if e.Kind != AttrString {
			return fmt.Errorf("%s must be a list of strings, found %s", FromAttr, v)
		}
	}
	return nil
}

// fusedPatternInferAxis infers softmax_grad and log_softmax_grad: dy and y
// of one float type, the axis within its rank.
func fusedPatternInferAxis(args []Type, a Attrs) (Type, error) {
	if err := fusedPatternCheckFrom(a); err != nil {
		return Type{}, err
	}
	dy, y := args[0], args[1]
	if !y.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float y (f32 or f64), found %s", y)
	}
	if !dy.Equal(y) {
		return Type{}, fmt.Errorf("expected dy of y's type %s, found %s", y, dy)
	}
	if _, err := Axis(a, len(y.Shape)); err != nil {
		return Type{}, fmt.Errorf("%v (y %s)", err, y)
	}
	return Type{y.DType, y.Shape.Clone()}, nil
}

// fusedPatternInferMaxGrad infers max_grad: float x, y of x's reduced type,
// dy of y's type or a scalar.
func fusedPatternInferMaxGrad(args []Type, a Attrs) (Type, error) {
	if err := fusedPatternCheckFrom(a); err != nil {
		return Type{}, err
	}
	dy, x, y := args[0], args[1], args[2]
	if !x.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float x (f32 or f64), found %s", x)
	}
	axes, err := ReduceAxes(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (x %s)", err, x)
	}
	want := Type{x.DType, ReducedShape(x.Shape, axes, a.Bool("keepdims", false))}
	if !y.Equal(want) || !dy.Equal(want) && !dy.Equal(Type{x.DType, Shape{}}) {
		return Type{}, fmt.Errorf("expected y of type %s (x %s reduced) and dy of that type or a scalar, found %s and %s", want, x, y, dy)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// fusedPatternInferSoftmaxCE infers softmax_ce_grad: float logits [N,C],
// labels [N] or probabilities [N,C], dy shaped for the reduction.
func fusedPatternInferSoftmaxCE(args []Type, a Attrs) (Type, error) {
	if err := fusedPatternCheckFrom(a); err != nil {
		return Type{}, err
	}
	r, err := lossReduction(a)
	if err != nil {
		return Type{}, err
	}
	lg, tg := args[0], args[1]
	if !lg.DType.IsFloat() || len(lg.Shape) != 2 {
		return Type{}, fmt.Errorf("expected float logits [N,C], found %s", lg)
	}
	n := lg.Shape[0]
	switch {
	case tg.DType.IsFloat():
		if !tg.Equal(lg) {
			return Type{}, fmt.Errorf("expected class probabilities %s (or integer labels [%d]), found %s", lg, n, tg)
		}
	case tg.DType.IsInt():
		if len(tg.Shape) != 1 || tg.Shape[0] != n {
			return Type{}, fmt.Errorf("expected integer labels [%d] (or class probabilities %s), found %s", n, lg, tg)
		}
	default:
		return Type{}, fmt.Errorf("expected integer labels [%d] or class probabilities %s, found %s", n, lg, tg)
	}
	if len(args) == 2 {
		if r != lossSum {
			return Type{}, fmt.Errorf(`without dy the reduction must be "sum" (a scale of 1), found %q`, r)
		}
		return Type{lg.DType, lg.Shape.Clone()}, nil
	}
	dy := args[2]
	ok := dy.DType == lg.DType
	if r == lossNone {
		ok = ok && (dy.Shape.Equal(Shape{n}) || dy.Shape.Equal(Shape{n, 1}))
	} else {
		ok = ok && len(dy.Shape) == 0
	}
	if !ok {
		want := fmt.Sprintf("%s[]", lg.DType)
		if r == lossNone {
			want = fmt.Sprintf("%s[%d] or %s[%d,1]", lg.DType, n, lg.DType, n)
		}
		return Type{}, fmt.Errorf("reduction %q expects dy %s, found %s", r, want, dy)
	}
	return Type{lg.DType, lg.Shape.Clone()}, nil
}
