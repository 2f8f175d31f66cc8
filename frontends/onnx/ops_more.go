package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// moreOps are the elementwise, comparison and reduction rows of Ops.
func moreOps() map[string]Rule {
	return map[string]Rule{
		"Abs":            {unary(ir.OpAbs), "abs"},
		"Reciprocal":     {unary(ir.OpReciprocal), "reciprocal"},
		"Erf":            {unary(ir.OpErf), "erf"},
		"Floor":          {unary(ir.OpFloor), "floor"},
		"Ceil":           {unary(ir.OpCeil), "ceil"},
		"Round":          {unary(ir.OpRound), "round (halves to even, as ONNX)"},
		"Sin":            {unary(ir.OpSin), "sin"},
		"Cos":            {unary(ir.OpCos), "cos"},
		"Sign":           {unary(ir.OpSign), "sign"},
		"Not":            {unary(ir.OpLogicalNot), "logical_not"},
		"And":            {binaryOp(ir.OpLogicalAnd), "logical_and"},
		"Or":             {binaryOp(ir.OpLogicalOr), "logical_or"},
		"Equal":          {binaryOp(ir.OpEqual), "equal; folded on constants"},
		"Greater":        {binaryOp(ir.OpGreater), "greater; folded on constants"},
		"GreaterOrEqual": {binaryOp(ir.OpGreaterEqual), "greater_equal; folded on constants"},
		"Less":           {binaryOp(ir.OpLess), "less; folded on constants"},
		"LessOrEqual":    {binaryOp(ir.OpLessEqual), "less_equal; folded on constants"},
		"Where":          {emitWhere, "where (cond bool; a and b of one dtype); folded when all three are constants"},
		"Max":            {variadic(ir.OpMaximum), "maximum, folded left over the inputs"},
		"Min":            {variadic(ir.OpMinimum), "minimum, folded left over the inputs"},
		"LeakyRelu":      {withAlpha(ir.OpLeakyRelu, 0.01), "leaky_relu {alpha} (default 0.01)"},
		"Elu":            {withAlpha(ir.OpElu, 1), "elu {alpha} (default 1)"},
		"Softplus":       {unaryAttrs(ir.OpSoftplus, ir.MakeAttrs("beta", ir.Float(1), "threshold", ir.Float(20))), "softplus {beta=1, threshold=20} (x itself above 20, where log(1+e^x) rounds to x in f32)"},
		"Gelu":           {emitGelu, "gelu {approximate} (opset 20; \"none\" or \"tanh\")"},
		"Pow":            {emitPow, "pow {exponent} when the exponent is a one-element constant, else pow a, b with b cast to a's float dtype; an integer base through f64 and cast back"},
		"Clip":           {emitClip, "clip {min, max}; attributes before opset 11, optional constant inputs from 11"},
		"ReduceSum":      {reduce(ir.OpSum, 13), "sum {axes, keepdims}; axes an attribute before opset 13, a constant input from 13; keepdims default 1; no axes: every axis (noop_with_empty_axes=1: the input)"},
		"ReduceMean":     {reduce(ir.OpMean, 18), "mean {axes, keepdims}; axes an input from opset 18, else as ReduceSum"},
		"ReduceMax":      {reduce(ir.OpMax, 18), "max {axes, keepdims}; axes as ReduceMean"},
		"ReduceMin":      {reduce(ir.OpMin, 18), "min {axes, keepdims}; axes as ReduceMean"},
	}
}

func unaryAttrs(op ir.Op, attrs ir.Attrs) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		return one(im.add(op, attrs, x))
	}
}

func withAlpha(op ir.Op, def float64) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		return unaryAttrs(op, ir.MakeAttrs("alpha", ir.Float(attrFloat(n, "alpha", def))))(im, n)
	}
}

func emitGelu(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	a := attrString(n, "approximate", "none")
	if a != "none" && a != "tanh" {
		return nil, fmt.Errorf("approximate %q is not supported (none or tanh)", ir.Excerpt(a))
	}
	return unaryAttrs(ir.OpGelu, ir.MakeAttrs("approximate", ir.String(a)))(im, n)
}

// emitWhere is Where, folded when the condition and both values are
// constants.
func emitWhere(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	var vs [3]*val
	for k := range vs {
		v, err := im.in(n, k)
		if err != nil {
			return nil, err
		}
		vs[k] = v
	}
	if !isConst(vs[0]) || !isConst(vs[1]) || !isConst(vs[2]) {
		args, err := im.ids(n, 3)
		if err != nil {
			return nil, err
		}
		return one(im.add(ir.OpWhere, nil, args...))
	}
	cond, a, b := vs[0].c, vs[1].c, vs[2].c
	if a.dt != b.dt {
		return nil, fmt.Errorf("values of different dtypes %s and %s", a.dt, b.dt)
	}
	shape, ok := ir.BroadcastShapes(ir.Shape(cond.shape), ir.Shape(a.shape))
	if ok {
		shape, ok = ir.BroadcastShapes(shape, ir.Shape(b.shape))
	}
	if !ok {
		return nil, fmt.Errorf("shapes %v, %v and %v do not broadcast", cond.shape, a.shape, b.shape)
	}
	if shape.NumElements() > MaxFolded {
		return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", shape, shape.NumElements(), MaxFolded)
	}
	c, x, y := broadcastConst(cond, shape), broadcastConst(a, shape), broadcastConst(b, shape)
	out := &tensor{dt: a.dt, shape: []int(shape.Clone())}
	for k, t := range c.floats() {
		pick := y
		if t != 0 {
			pick = x
		}
		if out.dt.IsFloat() {
			out.f = append(out.f, pick.f[k])
		} else {
			out.i = append(out.i, pick.i[k])
		}
	}
	return []*val{{id: ir.NoID, c: out}}, nil
}

func variadic(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		if len(n.Input) == 0 {
			return nil, errors.New("no inputs")
		}
		acc, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		for k := 1; k < len(n.Input); k++ {
			y, err := im.id(n, k)
			if err != nil {
				return nil, err
			}
			if acc, err = im.g.Add("", op, nil, acc, y); err != nil {
				return nil, err
			}
		}
		return []*val{{id: acc}}, nil
	}
}

func emitPow(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	e, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	if e.c != nil && !e.param && e.c.n() == 1 && im.g.Type(x).DType.IsFloat() {
		return one(im.add(ir.OpPow, ir.MakeAttrs("exponent", ir.Float(e.c.floats()[0])), x))
	}
	y, err := im.value(e, true)
	if err != nil {
		return nil, err
	}
	if y, err = im.legacyBroadcast(n, x, y); err != nil {
		return nil, err
	}
	if dx := im.g.Type(x).DType; dx.IsInt() {
		// An integer base: computed in f64 (exact for the integers an
		// integer power holds) and cast back, truncating.
		c := &builder{im: im}
		f64 := ir.MakeAttrs("dtype", ir.String("f64"))
		xf, yf := c.op(ir.OpCast, f64, x), y
		if im.g.Type(y).DType != ir.F64 {
			yf = c.op(ir.OpCast, f64, y)
		}
		return c.result(c.op(ir.OpCast, ir.MakeAttrs("dtype", ir.String(dx.String())), c.op(ir.OpPow, nil, xf, yf)))
	} else if dx.IsFloat() && im.g.Type(y).DType != dx {
		// ONNX lets the exponent's type differ: cast it to the base's.
		cy, err := castValue(im, y, dx)
		if err != nil {
			return nil, err
		}
		y = cy[0].id
	}
	return one(im.add(ir.OpPow, nil, x, y))
}

func emitClip(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	attrs := ir.Attrs(nil)
	if im.opset < 11 {
		if a := attr(n, "min"); a != nil {
			attrs = attrs.With("min", ir.Float(float64(a.GetF())))
		}
		if a := attr(n, "max"); a != nil {
			attrs = attrs.With("max", ir.Float(float64(a.GetF())))
		}
	} else {
		for k, key := range []string{"min", "max"} {
			if !has(n, k+1) {
				continue
			}
			c, err := im.constIn(n, k+1)
			if err != nil {
				return nil, err
			}
			if c.n() != 1 {
				return nil, fmt.Errorf("%s has %d elements, expected 1", key, c.n())
			}
			attrs = attrs.With(key, ir.Float(c.floats()[0]))
		}
	}
	if attrs == nil {
		return []*val{{id: x}}, nil
	}
	if lo, hi := attrs.Float("min", math.Inf(-1)), attrs.Float("max", math.Inf(1)); lo > hi {
		return nil, fmt.Errorf("min %g is above max %g", lo, hi)
	}
	return one(im.add(ir.OpClip, attrs, x))
}

// reduce handles ReduceX, whose axes moved from an attribute to an input at
// opset inputFrom.
func reduce(op ir.Op, inputFrom int) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		attrs, err := im.reduceAttrs(n, x, inputFrom)
		if err != nil || attrs == nil {
			return []*val{{id: x}}, err
		}
		return one(im.add(op, attrs, x))
	}
}

// reduceAttrs returns the {axes, keepdims} of ReduceX node n on x, whose
// axes moved from an attribute to an input at opset inputFrom, or nil
// attrs when the node is the identity (no axes, noop_with_empty_axes=1).
func (im *importer) reduceAttrs(n *onnxpb.NodeProto, x ir.ID, inputFrom int) (ir.Attrs, error) {
	var err error
	var axes []int
	if im.opset < inputFrom {
		axes, _ = attrInts(n, "axes")
	} else if has(n, 1) {
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, err
		}
		for _, a := range c.ints() {
			axes = append(axes, int(a))
		}
	}
	r := len(im.shapeOf(x))
	if len(axes) == 0 {
		if attrInt(n, "noop_with_empty_axes", 0) != 0 {
			return nil, nil
		}
		for k := range r {
			axes = append(axes, k)
		}
	}
	for k, a := range axes {
		if axes[k], err = normAxis(a, r); err != nil {
			return nil, err
		}
	}
	return ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(attrInt(n, "keepdims", 1) != 0)), nil
}
