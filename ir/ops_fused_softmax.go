package ir

import "fmt"

// Softmax with an elementwise prologue and its gradient with an
// elementwise epilogue: ops that carry an elementwise program (see
// ops_fused_elementwise.go) around a softmax or log_softmax over the last
// axis, or around its gradient. The fuse pass makes them, so that the
// program's operand or result (a tensor of the softmax's size) is never
// stored. They appear only after autodiff.

// fusedSoftmaxOps returns the rows of fused_softmax and fused_softmax_grad.
func fusedSoftmaxOps() []opRow {
	program := AttrSpec{Name: ProgramAttr, Kind: AttrList, Required: true,
		Doc: "the elementwise program, as fused_elementwise's"}
	from := AttrSpec{Name: FromAttr, Kind: AttrList,
		Doc: "the .kir lines of the values the fuse pass replaced, in order"}
	return []opRow{
		{OpFusedSoftmax, OpInfo{Name: "fused_softmax", Args: []string{"in"}, Variadic: true,
			Attrs: []AttrSpec{from,
				{Name: "log", Kind: AttrBool, Default: defBool(false), Doc: "true: log_softmax instead of softmax"},
				program},
			Doc:   "softmax (or log_softmax) over the last axis of an elementwise program's result, which is never stored: each block of rows is computed by the program into scratch, then normalized as softmax does it, so the result is bitwise that of the ops it replaced (made by the fuse pass)",
			Infer: fusedSoftmaxInfer,
			Cost: func(args []Type, out Type, attrs Attrs) float64 {
				return largestElems(args, out) * (programLength(attrs) + 4)
			},
			NoGrad: fuseewNoGrad}},
		{OpFusedSoftmaxGrad, OpInfo{Name: "fused_softmax_grad", Args: []string{"dy", "y", "in"}, Optional: 1, Variadic: true,
			Attrs: []AttrSpec{from,
				{Name: "log", Kind: AttrBool, Default: defBool(false), Doc: "true: log_softmax_grad instead of softmax_grad"},
				program},
			Doc:   "softmax_grad(dy, y) (or log_softmax_grad) over the last axis with an elementwise epilogue: the program (input i0 is the gradient, i1... the extra arguments) is applied to each block of rows of the gradient while it is in cache, so the gradient is never stored; the result has the gradient's dtype and element count (made by the fuse pass)",
			Infer: fusedSoftmaxGradInfer,
			Cost: func(args []Type, out Type, attrs Attrs) float64 {
				return largestElems(args, out) * (programLength(attrs) + 3)
			},
			// The epilogue reads the extra arguments element by element as
			// it writes the result (the new value of a param, over it).
			InPlaceFrom: 2,
			NoGrad:      fuseewNoGrad}},
	}
}

// fusedSoftmaxInfer infers fused_softmax: the program's type, a float
// tensor of rank 1 or more.
func fusedSoftmaxInfer(args []Type, a Attrs) (Type, error) {
	if err := fusedPatternCheckFrom(a); err != nil {
		return Type{}, err
	}
	t, err := fuseewProgramType(args, a)
	if err != nil {
		return Type{}, err
	}
	if !t.DType.IsFloat() || len(t.Shape) == 0 {
		return Type{}, fmt.Errorf("expected the program to give a float tensor of rank 1 or more (softmax runs over its last axis), found %s", t)
	}
	return t, nil
}

// fusedSoftmaxGradInfer infers fused_softmax_grad: dy and y of one float
// type of rank 1 or more, and the epilogue's type over the gradient and
// the extra arguments, which must have the gradient's dtype and element
// count.
func fusedSoftmaxGradInfer(args []Type, a Attrs) (Type, error) {
	if err := fusedPatternCheckFrom(a); err != nil {
		return Type{}, err
	}
	dy, y := args[0], args[1]
	if !y.DType.IsFloat() || len(y.Shape) == 0 {
		return Type{}, fmt.Errorf("expected a float y of rank 1 or more (f32 or f64), found %s", y)
	}
	if !dy.Equal(y) {
		return Type{}, fmt.Errorf("expected dy of y's type %s, found %s", y, dy)
	}
	t, err := fuseewProgramType(append([]Type{y}, args[2:]...), a)
	if err != nil {
		return Type{}, err
	}
	if t.DType != y.DType || t.Shape.NumElements() != y.Shape.NumElements() {
		return Type{}, fmt.Errorf("the epilogue gives %s, expected the gradient's dtype and element count (%s)", t, y)
	}
	return t, nil
}
