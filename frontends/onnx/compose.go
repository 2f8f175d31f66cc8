package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// ONNX ops that are compositions of kiln ops: each is written with ops
// whose gradients are exact, so nothing here needs a rule or a kernel of
// its own.

// scalarLike returns a one-element constant of like's dtype holding v.
func (b *builder) scalarLike(v float64, like ir.ID) ir.ID {
	return b.scalar(b.dtype(like), v)
}

// composed returns the emitter of a unary composition f of input 0.
func composed(f func(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		c := &builder{im: im}
		return c.result(f(c, n, x))
	}
}

func emitHardSigmoid(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a, b := attrFloat(n, "alpha", 0.2), attrFloat(n, "beta", 0.5)
	if n.GetOpType() == "HardSwish" {
		a, b = 1.0/6, 0.5
	}
	h := c.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(1)), c.op(ir.OpAdd, nil, c.op(ir.OpMul, nil, x, c.scalarLike(a, x)), c.scalarLike(b, x)))
	if n.GetOpType() == "HardSwish" {
		return c.op(ir.OpMul, nil, x, h)
	}
	return h
}

func emitSelu(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a, g := attrFloat(n, "alpha", 1.67326319217681884765625), attrFloat(n, "gamma", 1.05070102214813232421875)
	return c.op(ir.OpMul, nil, c.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(a)), x), c.scalarLike(g, x))
}

func emitCelu(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a := attrFloat(n, "alpha", 1)
	return c.op(ir.OpMul, nil, c.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(1)), c.op(ir.OpDiv, nil, x, c.scalarLike(a, x))), c.scalarLike(a, x))
}

func emitSoftsign(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	return c.op(ir.OpDiv, nil, x, c.op(ir.OpAdd, nil, c.op(ir.OpAbs, nil, x), c.scalarLike(1, x)))
}

func emitMish(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	sp := c.op(ir.OpSoftplus, ir.MakeAttrs("beta", ir.Float(1), "threshold", ir.Float(20)), x)
	return c.op(ir.OpMul, nil, x, c.op(ir.OpTanh, nil, sp))
}

func emitThresholdedRelu(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	keep := c.op(ir.OpGreater, nil, x, c.scalarLike(attrFloat(n, "alpha", 1), x))
	return c.op(ir.OpWhere, nil, keep, x, c.scalarLike(0, x))
}

func emitTan(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	return c.op(ir.OpDiv, nil, c.op(ir.OpSin, nil, x), c.op(ir.OpCos, nil, x))
}

func emitIsNaN(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	return c.op(ir.OpNotEqual, nil, x, x)
}

// emitIsInf compares |x| (or x, or -x) with the largest finite value.
func emitIsInf(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	big := math.MaxFloat64
	if c.im.g.Type(x).DType == ir.F32 {
		big = math.MaxFloat32
	}
	pos, neg := attrInt(n, "detect_positive", 1) != 0, attrInt(n, "detect_negative", 1) != 0
	switch {
	case pos && neg:
		return c.op(ir.OpGreater, nil, c.op(ir.OpAbs, nil, x), c.scalarLike(big, x))
	case pos:
		return c.op(ir.OpGreater, nil, x, c.scalarLike(big, x))
	case neg:
		return c.op(ir.OpLess, nil, x, c.scalarLike(-big, x))
	}
	a := c.op(ir.OpAbs, nil, x)
	return c.op(ir.OpGreater, nil, a, a) // detects nothing: false everywhere
}

// emitPRelu is prelu when the slope is one value or one per channel,
// else relu(x) + slope * (x - relu(x)) with the slope broadcast.
func emitPRelu(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	s, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	xs, ss := im.shapeOf(x), im.shapeOf(s)
	c := &builder{im: im}
	k := prod(ss)
	// Per channel: the slope [C, 1, ...] aligned with x's axes 1, 2, ...
	perChannel := len(xs) >= 2 && len(ss) == len(xs)-1 && ss[0] == xs[1] && k == xs[1]
	if k == 1 || perChannel {
		return c.result(c.op(ir.OpPrelu, nil, x, c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(k)), s)))
	}
	r := c.op(ir.OpRelu, nil, x)
	return c.result(c.op(ir.OpAdd, nil, r, c.op(ir.OpMul, nil, s, c.op(ir.OpSub, nil, x, r))))
}

// emitVariadicMean is Mean: the inputs added left to right, divided by
// their number.
func emitVariadicMean(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	out, err := variadic(ir.OpAdd)(im, n)
	if err != nil {
		return nil, err
	}
	c := &builder{im: im}
	y := out[0].id
	return c.result(c.op(ir.OpDiv, nil, y, c.scalarLike(float64(len(n.Input)), y)))
}

// reduceComposite is a ReduceX that is pre applied before reduction op and
// post after (ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSum).
func reduceComposite(pre ir.Op, op ir.Op, post ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		attrs, err := im.reduceAttrs(n, x, 18)
		if err != nil {
			return nil, err
		}
		c := &builder{im: im}
		if pre != ir.OpInvalid {
			x = c.op(pre, nil, x)
		}
		if attrs != nil {
			x = c.op(op, attrs, x)
		}
		if post != ir.OpInvalid {
			x = c.op(post, nil, x)
		}
		return c.result(x)
	}
}

// emitTile repeats x by the constant repeats: reshape to [1, d0, 1, d1,
// ...], broadcast to [r0, d0, r1, d1, ...], reshape to [r0*d0, ...].
func emitTile(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	rc, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	reps := rc.ints()
	if len(reps) != len(xs) {
		return nil, fmt.Errorf("expected %d repeats for rank %d, found %v", len(xs), len(xs), reps)
	}
	var split, wide, out []int
	for k, d := range xs {
		if reps[k] < 0 || reps[k] > ir.MaxTensorBytes {
			return nil, fmt.Errorf("repeat %d is invalid", reps[k])
		}
		rep := int(reps[k])
		split = append(split, 1, d)
		wide = append(wide, rep, d)
		out = append(out, rep*d)
	}
	if _, err := (ir.Type{DType: ir.F32, Shape: out}).BytesChecked(); err != nil {
		return nil, err
	}
	c := &builder{im: im}
	y := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(split...)), x)
	y = c.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(wide...)), y)
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), y))
}

// emitDepthToSpace and emitSpaceToDepth move blocks between the channels
// and the spatial axes of [N,C,H,W] by reshape, transpose, reshape.
func emitDepthToSpace(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	b := int(attrInt(n, "blocksize", 0))
	if len(xs) != 4 || b < 1 || xs[1]%(b*b) != 0 {
		return nil, fmt.Errorf("expected an input [N,C,H,W] with C divisible by blocksize^2, found %v and blocksize %d", xs, b)
	}
	nn, ch, h, w := xs[0], xs[1]/(b*b), xs[2], xs[3]
	c := &builder{im: im}
	var y ir.ID
	switch mode := attrString(n, "mode", "DCR"); mode {
	case "DCR":
		y = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, b, b, ch, h, w)), x)
		y = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 3, 4, 1, 5, 2)), y)
	case "CRD":
		y = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, b, b, h, w)), x)
		y = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 1, 4, 2, 5, 3)), y)
	default:
		return nil, fmt.Errorf("mode %q is not supported (DCR or CRD)", ir.Excerpt(mode))
	}
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, h*b, w*b)), y))
}

func emitSpaceToDepth(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	b := int(attrInt(n, "blocksize", 0))
	if len(xs) != 4 || b < 1 || xs[2]%b != 0 || xs[3]%b != 0 {
		return nil, fmt.Errorf("expected an input [N,C,H,W] with H and W divisible by blocksize, found %v and blocksize %d", xs, b)
	}
	nn, ch, h, w := xs[0], xs[1], xs[2]/b, xs[3]/b
	c := &builder{im: im}
	y := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, h, b, w, b)), x)
	y = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 3, 5, 1, 2, 4)), y)
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch*b*b, h, w)), y))
}

// emitMod is mod (the remainder with the divisor's sign) for fmod=0, and
// for fmod=1 (the dividend's sign, C's fmod) sign(a) * mod(|a|, |b|).
func emitMod(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	if attrInt(n, "fmod", 0) == 0 {
		return binaryOp(ir.OpMod)(im, n)
	}
	a, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	b, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	c := &builder{im: im}
	m := c.op(ir.OpMod, nil, c.op(ir.OpAbs, nil, a), c.op(ir.OpAbs, nil, b))
	return c.result(c.op(ir.OpMul, nil, c.op(ir.OpSign, nil, a), m))
}

func emitSinh(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	d := c.op(ir.OpSub, nil, c.op(ir.OpExp, nil, x), c.op(ir.OpExp, nil, c.op(ir.OpNeg, nil, x)))
	return c.op(ir.OpMul, nil, d, c.scalarLike(0.5, x))
}

func emitCosh(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	s := c.op(ir.OpAdd, nil, c.op(ir.OpExp, nil, x), c.op(ir.OpExp, nil, c.op(ir.OpNeg, nil, x)))
	return c.op(ir.OpMul, nil, s, c.scalarLike(0.5, x))
}

// emitLpNormalization divides by the p-norm (p 1 or 2) along axis.
func emitLpNormalization(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(c.im.shapeOf(x)))
	if err != nil {
		c.err = err
		return ir.NoID
	}
	red := ir.MakeAttrs("axes", ir.Ints(axis), "keepdims", ir.BoolAttr(true))
	var norm ir.ID
	switch p := attrInt(n, "p", 2); p {
	case 1:
		norm = c.op(ir.OpSum, red, c.op(ir.OpAbs, nil, x))
	case 2:
		norm = c.op(ir.OpSqrt, nil, c.op(ir.OpSum, red, c.op(ir.OpSquare, nil, x)))
	default:
		c.err = fmt.Errorf("p %d is not supported (1 or 2)", p)
		return ir.NoID
	}
	return c.op(ir.OpDiv, nil, x, norm)
}

// emitMeanVarianceNormalization is ONNX's function: (x - mean) / (sqrt of
// the biased variance + 1e-9) over axes (default [0, 2, 3]).
func emitMeanVarianceNormalization(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	axes, ok := attrInts(n, "axes")
	if !ok {
		axes = []int{0, 2, 3}
	}
	red := ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true))
	d := c.op(ir.OpSub, nil, x, c.op(ir.OpMean, red, x))
	sd := c.op(ir.OpSqrt, nil, c.op(ir.OpMean, red, c.op(ir.OpSquare, nil, d)))
	return c.op(ir.OpDiv, nil, d, c.op(ir.OpAdd, nil, sd, c.scalarLike(1e-9, x)))
}

// moveLastTo moves the last axis of y to position axis.
func (c *builder) moveLastTo(y ir.ID, axis int) ir.ID {
	if c.err != nil {
		return ir.NoID
	}
	r := len(c.im.shapeOf(y))
	if axis == r-1 {
		return y
	}
	perm := make([]int, 0, r)
	for k := range r - 1 {
		if k == axis {
			perm = append(perm, r-1)
		}
		perm = append(perm, k)
	}
	return c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), y)
}

// emitHardmax is one_hot of argmax along axis (the first largest), in x's
// dtype.
func emitHardmax(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	if c.im.opset < 13 {
		c.err = errors.New("opsets before 13 (over the flattened axes from axis) are not supported")
		return ir.NoID
	}
	xs := c.im.shapeOf(x)
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(xs))
	if err != nil {
		c.err = err
		return ir.NoID
	}
	am := c.op(ir.OpArgmax, ir.MakeAttrs("axes", ir.Ints(axis), "keepdims", ir.BoolAttr(false)), x)
	oh := c.op(ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(xs[axis]), "dtype", ir.String(c.im.g.Type(x).DType.String())), am)
	return c.moveLastTo(oh, axis)
}

// emitOneHot is one_hot {classes=depth} of the indices (cast to i64 when
// they are floats), scaled to values [off, on], its class axis moved to
// axis. Indices must lie in [0, depth); one_hot reports one that does not.
func emitOneHot(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	idx, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	dc, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	if dc.n() != 1 {
		return nil, fmt.Errorf("depth has %d elements, expected 1", dc.n())
	}
	depth := int(dc.floats()[0])
	if depth < 1 || depth > MaxFolded {
		return nil, fmt.Errorf("depth %d is not in [1, %d]", depth, MaxFolded)
	}
	values, err := im.id(n, 2)
	if err != nil {
		return nil, err
	}
	if vs := im.shapeOf(values); prod(vs) != 2 || len(vs) != 1 {
		return nil, fmt.Errorf("values has shape %v, expected [2] (off, on)", vs)
	}
	is := im.shapeOf(idx)
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(is)+1)
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	dt := b.dtype(idx)
	shape := append(append(append([]int(nil), is[:axis]...), 1), is[axis:]...)
	x := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), b.op(ir.OpMod, nil, idx, b.scalar(dt, float64(depth))))
	cs := append(append(ones(axis), depth), ones(len(is)-axis)...)
	classes := &tensor{dt: dt, shape: cs}
	for c := range depth {
		if dt.IsFloat() {
			classes.f = append(classes.f, float64(c))
		} else {
			classes.i = append(classes.i, int64(c))
		}
	}
	pick := func(k int) ir.ID {
		s := b.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(0), "start", ir.Int(k), "end", ir.Int(k+1)), values)
		return b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints()), s)
	}
	return b.result(b.op(ir.OpWhere, nil, b.op(ir.OpEqual, nil, x, b.constant(classes)), pick(1), pick(0)))
}

// emitScatterElements is scatter_add for reduction "add", and for "none"
// (the default) where(hit, scatter_add(0, indices, updates), data), hit
// where an index points: exact when indices are unique, as ONNX requires
// for a defined result. Constant indices count negatives from the end.
func emitScatterElements(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	args, err := im.ids(n, 3)
	if err != nil {
		return nil, err
	}
	data, idx, upd := args[0], args[1], args[2]
	s := im.shapeOf(data)
	axis, err := normAxis(int(attrInt(n, "axis", 0)), len(s))
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	idx = wrapNegative(b, idx, b.scalar(b.dtype(idx), float64(s[axis])))
	y, err := scatterInto(b, n, data, s, upd, func(base, src ir.ID) ir.ID {
		return b.op(ir.OpScatterAdd, ir.MakeAttrs("axis", ir.Int(axis)), base, idx, src)
	})
	if err != nil {
		return nil, err
	}
	return b.result(y)
}

// emitSize folds to the number of elements, an i64 scalar.
func emitSize(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	return []*val{{id: ir.NoID, c: &tensor{dt: ir.I64, shape: []int{}, i: []int64{int64(prod(im.shapeOfVal(v)))}}}}, nil
}

func emitXor(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	a, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	b, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	c := &builder{im: im}
	return c.result(c.op(ir.OpLogicalAnd, nil, c.op(ir.OpLogicalOr, nil, a, b), c.op(ir.OpLogicalNot, nil, c.op(ir.OpLogicalAnd, nil, a, b))))
}

func emitAsinh(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	r := c.op(ir.OpSqrt, nil, c.op(ir.OpAdd, nil, c.op(ir.OpSquare, nil, x), c.scalarLike(1, x)))
	return c.op(ir.OpLog, nil, c.op(ir.OpAdd, nil, x, r))
}

func emitAcosh(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	r := c.op(ir.OpSqrt, nil, c.op(ir.OpSub, nil, c.op(ir.OpSquare, nil, x), c.scalarLike(1, x)))
	return c.op(ir.OpLog, nil, c.op(ir.OpAdd, nil, x, r))
}

func emitAtanh(c *builder, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	q := c.op(ir.OpDiv, nil, c.op(ir.OpAdd, nil, c.scalarLike(1, x), x), c.op(ir.OpSub, nil, c.scalarLike(1, x), x))
	return c.op(ir.OpMul, nil, c.op(ir.OpLog, nil, q), c.scalarLike(0.5, x))
}
