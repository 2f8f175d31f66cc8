package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// windowPads resolves the padding of a convolution or pooling node n over
// the last d axes of x: explicit pads, or auto_pad SAME_UPPER, SAME_LOWER
// or VALID, and (pooling) ceil_mode, which pads the end so that the last
// partial window counts. The kiln op takes the symmetric part; what is
// left (pads that differ at the two ends, or wider than half the kernel
// when halfMax) is added by a pad op before it, with fill (0 for conv,
// the dtype's lowest finite value for max pooling). It returns the input
// to use, the kiln padding and the pad op's pads (nil without one).
// okPrePad false refuses a pre-pad; ceilOK false refuses ceil_mode.
func (im *importer) windowPads(n *onnxpb.NodeProto, x ir.ID, kernel, stride, dil []int, fill float64, halfMax, okPrePad, ceilOK bool) (ir.ID, []int, []int, error) {
	xs := im.shapeOf(x)
	d := len(kernel)
	r := len(xs)
	begin, end := make([]int, d), make([]int, d)
	switch ap := attrString(n, "auto_pad", "NOTSET"); ap {
	case "NOTSET":
		if pads, ok := attrInts(n, "pads"); ok {
			if len(pads) != 2*d {
				return ir.NoID, nil, nil, fmt.Errorf("expected %d pads, found %d", 2*d, len(pads))
			}
			copy(begin, pads[:d])
			copy(end, pads[d:])
		}
	case "VALID":
	case "SAME_UPPER", "SAME_LOWER":
		for k := range d {
			in := xs[r-d+k]
			out := (in + stride[k] - 1) / stride[k]
			total := max((out-1)*stride[k]+dil[k]*(kernel[k]-1)+1-in, 0)
			begin[k], end[k] = total/2, total-total/2
			if ap == "SAME_LOWER" {
				begin[k], end[k] = end[k], begin[k]
			}
		}
	default:
		return ir.NoID, nil, nil, fmt.Errorf("auto_pad %q is not supported", ir.Excerpt(ap))
	}
	if attrInt(n, "ceil_mode", 0) != 0 {
		if !ceilOK {
			return ir.NoID, nil, nil, errors.New("ceil_mode 1 is not supported here (MaxPool, and AveragePool with count_include_pad=0, take it)")
		}
		for k := range d {
			in := xs[r-d+k] + begin[k] + end[k]
			ek := dil[k]*(kernel[k]-1) + 1
			out := (in-ek+stride[k]-1)/stride[k] + 1
			if (out-1)*stride[k] >= xs[r-d+k]+begin[k] {
				out-- // the last window must start inside the input or the left pad
			}
			end[k] += max((out-1)*stride[k]+ek-in, 0)
		}
	}
	pad := make([]int, d)
	pre := make([]int, 2*r) // kiln pad pairs from the last axis
	needPre := false
	for k := range d {
		if begin[k] < 0 || end[k] < 0 {
			return ir.NoID, nil, nil, fmt.Errorf("negative pads %d and %d are not supported", begin[k], end[k])
		}
		p := min(begin[k], end[k])
		if halfMax {
			p = min(p, kernel[k]/2)
		}
		pad[k] = p
		a, b := begin[k]-p, end[k]-p
		if a != 0 || b != 0 {
			needPre = true
			pre[2*(d-1-k)], pre[2*(d-1-k)+1] = a, b
		}
	}
	if !needPre {
		return x, pad, nil, nil
	}
	if !okPrePad {
		return ir.NoID, nil, nil, fmt.Errorf("pads %v and %v are not supported here (asymmetric or wider than half the kernel, with count_include_pad=0)", begin, end)
	}
	y, err := im.g.Add("", ir.OpPad, ir.MakeAttrs("pads", ir.Ints(pre[:2*d]...), "value", ir.Float(fill)), x)
	return y, pad, pre[:2*d], err
}

// lowest returns the lowest finite value of x's float dtype (max
// pooling's padding).
func (im *importer) lowest(x ir.ID) float64 {
	if im.g.Type(x).DType == ir.F64 {
		return -math.MaxFloat64
	}
	return -math.MaxFloat32
}

// avgPoolCounted is average pooling without count_include_pad over xp, x
// padded by pre (asymmetric pads, pads wider than half the kernel, or
// ceil_mode's): the window sums of xp divided by the window counts of x's
// own elements, both as avg_pool2d over the whole window {count_include_pad}
// (the counts from a constant mask of ones, padded with zeros likewise),
// so the divisor counts x's elements only.
func avgPoolCounted(im *importer, x, xp ir.ID, kernel, stride, pad, pre []int) ([]*val, error) {
	c := &builder{im: im}
	ones := c.op(ir.OpConst, ir.MakeAttrs("dtype", ir.String(im.g.Type(x).DType.String()), "shape", ir.Ints(im.shapeOf(x)...), "value", ir.Float(1)))
	mask := c.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(pre...)), ones)
	attrs := ir.MakeAttrs("kernel", ir.Ints(kernel...), "stride", ir.Ints(stride...), "padding", ir.Ints(pad...), "count_include_pad", ir.BoolAttr(true))
	return c.result(c.op(ir.OpDiv, nil, c.op(ir.OpAvgPool2d, attrs, xp), c.op(ir.OpAvgPool2d, attrs, mask)))
}

// pool1d is 1-D pooling over [N,C,L] as 2-D pooling over [N,C,1,L], the
// node's 1-D attributes widened with a size-1 height.
func pool1d(im *importer, n *onnxpb.NodeProto, op ir.Op, x ir.ID) ([]*val, error) {
	xs := im.shapeOf(x)
	if len(xs) != 3 {
		return nil, fmt.Errorf("expected an input [N,C,L] for a 1-D kernel, found %v", xs)
	}
	widen := func(name string, def int64, pads bool) *onnxpb.AttributeProto {
		a := attr(n, name)
		if a == nil {
			return nil
		}
		out := &onnxpb.AttributeProto{Name: a.Name, Type: a.Type}
		if pads && len(a.Ints) == 2 {
			out.Ints = []int64{0, a.Ints[0], 0, a.Ints[1]}
		} else if len(a.Ints) == 1 {
			out.Ints = []int64{def, a.Ints[0]}
		} else {
			out.Ints = a.Ints
		}
		return out
	}
	n2 := &onnxpb.NodeProto{Name: n.Name, OpType: n.OpType, Input: n.Input, Output: n.Output}
	for _, a := range n.Attribute {
		switch a.GetName() {
		case "kernel_shape", "strides", "dilations":
			n2.Attribute = append(n2.Attribute, widen(a.GetName(), 1, false))
		case "pads":
			n2.Attribute = append(n2.Attribute, widen("pads", 0, true))
		default:
			n2.Attribute = append(n2.Attribute, a)
		}
	}
	c := &builder{im: im}
	x4 := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(xs[0], xs[1], 1, xs[2])), x)
	if c.err != nil {
		return nil, c.err
	}
	// Pool the 4-D value through the 2-D rule, on a node whose input 0 is it.
	name := "pool1d." + n.GetName()
	im.env[name] = &val{id: x4}
	n2.Input = append([]string{name}, n.Input[1:]...)
	out, err := pool(op)(im, n2)
	delete(im.env, name)
	if err != nil {
		return nil, err
	}
	y := out[0].id
	ys := im.shapeOf(y)
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(ys[0], ys[1], ys[3])), y))
}
