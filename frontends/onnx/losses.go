package onnx

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// lossNeedsComposition reports whether a SoftmaxCrossEntropyLoss or
// NegativeLogLikelihoodLoss node uses what kiln's loss ops lack: class
// weights, scores of rank other than 2 ([N,C,d1,...]), or an ignore_index
// that is a class.
func (im *importer) lossNeedsComposition(n *onnxpb.NodeProto) bool {
	if has(n, 2) {
		return true
	}
	v, err := im.in(n, 0)
	if err != nil {
		return false
	}
	s := im.shapeOfVal(v)
	if len(s) != 2 {
		return true
	}
	a := attr(n, "ignore_index")
	return a != nil && a.GetI() >= 0 && a.GetI() < int64(s[1])
}

// emitLossComposed computes the loss as ONNX defines it from kiln ops
// whose gradients are exact: the log-probabilities (log_softmax for
// SoftmaxCrossEntropyLoss) moved to [M, C], each row's entry at its label
// (gather), times the label's weight (index_select of the weights; 0
// where the label is ignore_index, whose rows read class 0 instead), negated;
// then the reduction: none reshapes to the labels' shape, sum adds, mean
// divides the sum by the sum of the weights taken.
func emitLossComposed(im *importer, n *onnxpb.NodeProto, softmax bool) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	l, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	xs, ls := im.shapeOf(x), im.shapeOf(l)
	if len(xs) < 2 || len(ls) != len(xs)-1 || ls[0] != xs[0] || !ir.Shape(ls[1:]).Equal(ir.Shape(xs[2:])) {
		return nil, fmt.Errorf("expected scores [N,C,d1,...] and labels [N,d1,...], found %v and %v", xs, ls)
	}
	red := attrString(n, "reduction", "mean")
	if red != "mean" && red != "sum" && red != "none" {
		return nil, fmt.Errorf("unknown reduction %q", ir.Excerpt(red))
	}
	c := &builder{im: im}
	classes := xs[1]
	lp := x
	if softmax {
		lp = c.op(ir.OpLogSoftmax, ir.MakeAttrs("axis", ir.Int(1)), x)
	}
	m := prod(ls)
	lp2 := lp
	if len(xs) > 2 {
		perm := []int{0}
		for k := 2; k < len(xs); k++ {
			perm = append(perm, k)
		}
		perm = append(perm, 1)
		lp2 = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), lp)
	}
	lp2 = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(m, classes)), lp2)
	lab := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(m)), l)
	dt := im.g.Type(x).DType
	keep := ir.NoID
	if a := attr(n, "ignore_index"); a != nil {
		ii, err := im.constOp(&tensor{dt: im.g.Type(l).DType, shape: []int{}, i: []int64{a.GetI()}})
		if err != nil {
			return nil, err
		}
		keep = c.op(ir.OpNotEqual, nil, lab, ii)
		zero, err := im.constOp(&tensor{dt: im.g.Type(l).DType, shape: []int{}, i: []int64{0}})
		if err != nil {
			return nil, err
		}
		lab = c.op(ir.OpWhere, nil, keep, lab, zero)
	}
	picked := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(m)),
		c.op(ir.OpGather, ir.MakeAttrs("axis", ir.Int(1)), lp2, c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(m, 1)), lab)))
	w := ir.NoID
	if has(n, 2) {
		wv, err := im.id(n, 2)
		if err != nil {
			return nil, err
		}
		w = c.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(0)), wv, lab)
	}
	if keep != ir.NoID {
		k := c.op(ir.OpCast, ir.MakeAttrs("dtype", ir.String(dt.String())), keep)
		if w == ir.NoID {
			w = k
		} else {
			w = c.op(ir.OpMul, nil, w, k)
		}
	}
	loss := c.op(ir.OpNeg, nil, picked)
	if w != ir.NoID {
		loss = c.op(ir.OpMul, nil, loss, w)
	}
	all := ir.MakeAttrs("keepdims", ir.BoolAttr(false))
	switch red {
	case "none":
		loss = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(ls...)), loss)
	case "sum":
		loss = c.op(ir.OpSum, all, loss)
	default:
		if w == ir.NoID {
			loss = c.op(ir.OpMean, all, loss)
		} else {
			loss = c.op(ir.OpDiv, nil, c.op(ir.OpSum, all, loss), c.op(ir.OpSum, all, w))
		}
	}
	outs := []*val{{id: loss}}
	if softmax && len(n.Output) > 1 && n.Output[1] != "" {
		outs = append(outs, &val{id: lp})
	}
	return outs, c.err
}
