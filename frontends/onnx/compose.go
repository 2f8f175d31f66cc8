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

// chain builds a composition, keeping the first error: each method adds
// one op (nothing once an error is kept).
type chain struct {
	im  *importer
	err error
}

func (c *chain) op(op ir.Op, attrs ir.Attrs, args ...ir.ID) ir.ID {
	if c.err != nil {
		return ir.NoID
	}
	id, err := c.im.g.Add("", op, attrs, args...)
	c.err = err
	return id
}

// scalar returns a one-element constant of x's dtype.
func (c *chain) scalar(v float64, like ir.ID) ir.ID {
	if c.err != nil {
		return ir.NoID
	}
	id, err := c.im.constOp(&tensor{dt: c.im.g.Type(like).DType, shape: []int{}, f: []float64{v}})
	c.err = err
	return id
}

func (c *chain) done(id ir.ID) ([]*val, error) {
	if c.err != nil {
		return nil, c.err
	}
	return []*val{{id: id}}, nil
}

// composed returns the emitter of a unary composition f of input 0.
func composed(f func(c *chain, n *onnxpb.NodeProto, x ir.ID) ir.ID) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		c := &chain{im: im}
		return c.done(f(c, n, x))
	}
}

func emitHardSigmoid(c *chain, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a, b := attrFloat(n, "alpha", 0.2), attrFloat(n, "beta", 0.5)
	if n.GetOpType() == "HardSwish" {
		a, b = 1.0/6, 0.5
	}
	h := c.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(1)), c.op(ir.OpAdd, nil, c.op(ir.OpMul, nil, x, c.scalar(a, x)), c.scalar(b, x)))
	if n.GetOpType() == "HardSwish" {
		return c.op(ir.OpMul, nil, x, h)
	}
	return h
}

func emitSelu(c *chain, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a, g := attrFloat(n, "alpha", 1.67326319217681884765625), attrFloat(n, "gamma", 1.05070102214813232421875)
	return c.op(ir.OpMul, nil, c.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(a)), x), c.scalar(g, x))
}

func emitCelu(c *chain, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a := attrFloat(n, "alpha", 1)
	return c.op(ir.OpMul, nil, c.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(1)), c.op(ir.OpDiv, nil, x, c.scalar(a, x))), c.scalar(a, x))
}

func emitSoftsign(c *chain, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	return c.op(ir.OpDiv, nil, x, c.op(ir.OpAdd, nil, c.op(ir.OpAbs, nil, x), c.scalar(1, x)))
}

func emitMish(c *chain, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	sp := c.op(ir.OpSoftplus, ir.MakeAttrs("beta", ir.Float(1), "threshold", ir.Float(20)), x)
	return c.op(ir.OpMul, nil, x, c.op(ir.OpTanh, nil, sp))
}

func emitThresholdedRelu(c *chain, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	keep := c.op(ir.OpGreater, nil, x, c.scalar(attrFloat(n, "alpha", 1), x))
	return c.op(ir.OpWhere, nil, keep, x, c.scalar(0, x))
}

func emitTan(c *chain, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	return c.op(ir.OpDiv, nil, c.op(ir.OpSin, nil, x), c.op(ir.OpCos, nil, x))
}

func emitIsNaN(c *chain, _ *onnxpb.NodeProto, x ir.ID) ir.ID {
	return c.op(ir.OpNotEqual, nil, x, x)
}

// emitIsInf compares |x| (or x, or -x) with the largest finite value.
func emitIsInf(c *chain, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	big := math.MaxFloat64
	if c.im.g.Type(x).DType == ir.F32 {
		big = math.MaxFloat32
	}
	pos, neg := attrInt(n, "detect_positive", 1) != 0, attrInt(n, "detect_negative", 1) != 0
	switch {
	case pos && neg:
		return c.op(ir.OpGreater, nil, c.op(ir.OpAbs, nil, x), c.scalar(big, x))
	case pos:
		return c.op(ir.OpGreater, nil, x, c.scalar(big, x))
	case neg:
		return c.op(ir.OpLess, nil, x, c.scalar(-big, x))
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
	c := &chain{im: im}
	k := prod(ss)
	// Per channel: the slope [C, 1, ...] aligned with x's axes 1, 2, ...
	perChannel := len(xs) >= 2 && len(ss) == len(xs)-1 && ss[0] == xs[1] && k == xs[1]
	if k == 1 || perChannel {
		return c.done(c.op(ir.OpPrelu, nil, x, c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(k)), s)))
	}
	r := c.op(ir.OpRelu, nil, x)
	return c.done(c.op(ir.OpAdd, nil, r, c.op(ir.OpMul, nil, s, c.op(ir.OpSub, nil, x, r))))
}

// emitVariadicMean is Mean: the inputs added left to right, divided by
// their number.
func emitVariadicMean(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	out, err := variadic(ir.OpAdd)(im, n)
	if err != nil {
		return nil, err
	}
	c := &chain{im: im}
	y := out[0].id
	return c.done(c.op(ir.OpDiv, nil, y, c.scalar(float64(len(n.Input)), y)))
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
		c := &chain{im: im}
		if pre != ir.OpInvalid {
			x = c.op(pre, nil, x)
		}
		if attrs != nil {
			x = c.op(op, attrs, x)
		}
		if post != ir.OpInvalid {
			x = c.op(post, nil, x)
		}
		return c.done(x)
	}
}

func emitGlobalMaxPool(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	r := len(im.shapeOf(x))
	if r < 3 {
		return nil, fmt.Errorf("expected an input of rank >= 3, found rank %d", r)
	}
	axes := make([]int, 0, r-2)
	for k := 2; k < r; k++ {
		axes = append(axes, k)
	}
	return one(im.add(ir.OpMax, ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true)), x))
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
	c := &chain{im: im}
	y := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(split...)), x)
	y = c.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(wide...)), y)
	return c.done(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), y))
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
	c := &chain{im: im}
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
	return c.done(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, h*b, w*b)), y))
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
	c := &chain{im: im}
	y := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, h, b, w, b)), x)
	y = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 3, 5, 1, 2, 4)), y)
	return c.done(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch*b*b, h, w)), y))
}

// emitMod is mod (the remainder with the divisor's sign) for fmod=0.
func emitMod(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	if attrInt(n, "fmod", 0) != 0 {
		return nil, errors.New("fmod=1 (the remainder with the dividend's sign) is not supported")
	}
	return binaryOp(ir.OpMod)(im, n)
}
