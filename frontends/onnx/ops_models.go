package onnx

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// Rules the PyTorch models of tests/onnx need beyond the first slice of the
// importer: LayerNormalization, Gather with computed indices (nn.Embedding),
// and folding of comparisons and Where on constants.
//
// Comparisons and Where on constants are folded at import: PyTorch exports
// x.expand(n, ...) with n from x.size(0) as shape arithmetic through Equal
// and Where (-1 entries of the target shape replaced by the input's dims),
// and Expand needs the resulting shape as a constant.

// isConst reports whether v is a constant known at import that is not a
// param.
func isConst(v *val) bool { return v.c != nil && !v.param }

// compare is binaryOp for a comparison: folded to a bool constant when both
// inputs are constants.
func compare(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	emit := binaryOp(op)
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		a, err := im.in(n, 0)
		if err != nil {
			return nil, err
		}
		b, err := im.in(n, 1)
		if err != nil {
			return nil, err
		}
		if !isConst(a) || !isConst(b) {
			return emit(im, n)
		}
		if a.c.dt != b.c.dt {
			return nil, fmt.Errorf("operands of different dtypes %s and %s", a.c.dt, b.c.dt)
		}
		shape, ok := ir.BroadcastShapes(ir.Shape(a.c.shape), ir.Shape(b.c.shape))
		if !ok {
			return nil, fmt.Errorf("shapes %v and %v do not broadcast", a.c.shape, b.c.shape)
		}
		if shape.NumElements() > MaxFolded {
			return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", shape, shape.NumElements(), MaxFolded)
		}
		x, y := broadcastConst(a.c, shape).floats(), broadcastConst(b.c, shape).floats()
		out := &tensor{dt: ir.Bool, shape: []int(shape.Clone()), i: make([]int64, len(x))}
		for k := range x {
			var r bool
			switch op {
			case ir.OpEqual:
				r = x[k] == y[k]
			case ir.OpLess:
				r = x[k] < y[k]
			case ir.OpLessEqual:
				r = x[k] <= y[k]
			case ir.OpGreater:
				r = x[k] > y[k]
			case ir.OpGreaterEqual:
				r = x[k] >= y[k]
			}
			if r {
				out.i[k] = 1
			}
		}
		return []*val{{id: ir.NoID, c: out}}, nil
	}
}

// emitWhereFold is Where, folded when the condition and both values are
// constants.
func emitWhereFold(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	var vs [3]*val
	for k := range vs {
		v, err := im.in(n, k)
		if err != nil {
			return nil, err
		}
		vs[k] = v
	}
	if !isConst(vs[0]) || !isConst(vs[1]) || !isConst(vs[2]) {
		return emitWhere(im, n)
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
