package onnx

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// emitGridSample samples x [N,C,H,W] at the grid [N,Ho,Wo,2] of (x, y) in
// [-1, 1] (ONNX GridSample, torch grid_sample), as a composition: the
// grid unnormalized to pixel coordinates (align_corners as ONNX says;
// padding_mode border clips them to the image, reflection reflects them
// at its edges first), the corners of each point
// (floor and floor+1 for bilinear, round for nearest), and per corner the
// pixel read by gather (a corner outside the image reads a clamped pixel
// weighted 0, the zeros padding) times its weight. The gradient reaches x
// through gather and the grid through the bilinear weights (floor and
// round have zero gradient), as PyTorch's.
func emitGridSample(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	g, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	xs, gs := im.shapeOf(x), im.shapeOf(g)
	if len(xs) != 4 || len(gs) != 4 || gs[0] != xs[0] || gs[3] != 2 {
		return nil, fmt.Errorf("expected an input [N,C,H,W] and a grid [N,Ho,Wo,2], found %v and %v", xs, gs)
	}
	mode := attrString(n, "mode", "bilinear")
	if mode == "linear" {
		mode = "bilinear" // opset 20's name
	}
	if mode != "bilinear" && mode != "nearest" {
		return nil, fmt.Errorf("mode %q is not supported (bilinear, nearest)", ir.Excerpt(mode))
	}
	padMode := attrString(n, "padding_mode", "zeros")
	if padMode != "zeros" && padMode != "border" && padMode != "reflection" {
		return nil, fmt.Errorf("padding_mode %q is not supported (zeros, border, reflection)", ir.Excerpt(padMode))
	}
	align := attrInt(n, "align_corners", 0) != 0
	nn, ch, h, w := xs[0], xs[1], xs[2], xs[3]
	p := gs[1] * gs[2]
	dt := im.g.Type(x).DType
	c := &builder{im: im}
	coord := func(k, size int) ir.ID {
		v := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, p)),
			c.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(3), "start", ir.Int(k), "end", ir.Int(k+1), "step", ir.Int(1)), g))
		v = c.op(ir.OpAdd, nil, v, c.scalarLike(1, v))
		if align {
			v = c.op(ir.OpMul, nil, v, c.scalarLike(float64(size-1)/2, v))
		} else {
			v = c.op(ir.OpMul, nil, c.op(ir.OpSub, nil, c.op(ir.OpMul, nil, v, c.scalarLike(float64(size), v)), c.scalarLike(1, v)), c.scalarLike(0.5, v))
		}
		if padMode == "reflection" {
			v = c.reflect(v, size, align)
		}
		if padMode != "zeros" {
			v = c.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(float64(size-1))), v)
		}
		return v
	}
	ix, iy := coord(0, w), coord(1, h)
	type corner struct{ x, y, w ir.ID }
	var corners []corner
	if mode == "nearest" {
		corners = []corner{{c.op(ir.OpRound, nil, ix), c.op(ir.OpRound, nil, iy), ir.NoID}}
	} else {
		x0, y0 := c.op(ir.OpFloor, nil, ix), c.op(ir.OpFloor, nil, iy)
		x1, y1 := c.op(ir.OpAdd, nil, x0, c.scalarLike(1, x0)), c.op(ir.OpAdd, nil, y0, c.scalarLike(1, y0))
		wx1, wy1 := c.op(ir.OpSub, nil, ix, x0), c.op(ir.OpSub, nil, iy, y0)
		wx0, wy0 := c.op(ir.OpSub, nil, c.scalarLike(1, wx1), wx1), c.op(ir.OpSub, nil, c.scalarLike(1, wy1), wy1)
		corners = []corner{
			{x0, y0, c.op(ir.OpMul, nil, wx0, wy0)}, {x1, y0, c.op(ir.OpMul, nil, wx1, wy0)},
			{x0, y1, c.op(ir.OpMul, nil, wx0, wy1)}, {x1, y1, c.op(ir.OpMul, nil, wx1, wy1)},
		}
	}
	flat := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, h*w)), x)
	inside := func(v ir.ID, size int) ir.ID {
		return c.op(ir.OpLogicalAnd, nil, c.op(ir.OpGreaterEqual, nil, v, c.scalarLike(0, v)), c.op(ir.OpLessEqual, nil, v, c.scalarLike(float64(size-1), v)))
	}
	acc := ir.NoID
	for _, k := range corners {
		xc := c.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(float64(w-1))), k.x)
		yc := c.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(float64(h-1))), k.y)
		// The pixel's flat position, exact in f32 below 2^24 elements.
		pos := c.op(ir.OpAdd, nil, c.op(ir.OpMul, nil, yc, c.scalarLike(float64(w), yc)), xc)
		pos = c.op(ir.OpCast, ir.MakeAttrs("dtype", ir.String("i64")), pos)
		pos = c.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(nn, ch, p)), c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, 1, p)), pos))
		v := c.op(ir.OpGather, ir.MakeAttrs("axis", ir.Int(2)), flat, pos)
		weight := c.op(ir.OpCast, ir.MakeAttrs("dtype", ir.String(dt.String())), c.op(ir.OpLogicalAnd, nil, inside(k.x, w), inside(k.y, h)))
		if k.w != ir.NoID {
			weight = c.op(ir.OpMul, nil, weight, k.w)
		}
		v = c.op(ir.OpMul, nil, v, c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, 1, p)), weight))
		if acc == ir.NoID {
			acc = v
		} else {
			acc = c.op(ir.OpAdd, nil, acc, v)
		}
	}
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(nn, ch, gs[1], gs[2])), acc))
}

// reflect reflects coordinates v at the edges of an axis of size pixels,
// as PyTorch's reflect_coordinates: about 0 and size-1 with align,
// else about -0.5 and size-0.5: |v - lo| folded into spans of the range,
// every other span mirrored.
func (c *builder) reflect(v ir.ID, size int, align bool) ir.ID {
	lo, hi := -0.5, float64(size)-0.5
	if align {
		lo, hi = 0, float64(size-1)
	}
	span := hi - lo
	if span <= 0 {
		return c.op(ir.OpMul, nil, v, c.scalarLike(0, v))
	}
	in := c.op(ir.OpAbs, nil, c.op(ir.OpSub, nil, v, c.scalarLike(lo, v)))
	extra := c.op(ir.OpMod, nil, in, c.scalarLike(span, v))
	flips := c.op(ir.OpFloor, nil, c.op(ir.OpDiv, nil, in, c.scalarLike(span, v)))
	even := c.op(ir.OpEqual, nil, c.op(ir.OpMod, nil, flips, c.scalarLike(2, v)), c.scalarLike(0, v))
	up := c.op(ir.OpAdd, nil, extra, c.scalarLike(lo, v))
	down := c.op(ir.OpSub, nil, c.scalarLike(span+lo, v), extra)
	return c.op(ir.OpWhere, nil, even, up, down)
}
