package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// 3-D convolution and pooling are lowered at import to the 2-D ops: the
// depth axis moves next to the batch (one transpose), each kernel tap t
// along depth takes the depth slices it reads (a strided slice, after the
// depth padding), folded into the batch, through the 2-D op over height
// and width; the taps' results are added (conv), maximized (max pool) or
// averaged (average pool), and the depth axis moves back. Every op used
// has an exact gradient, and the lowering runs wherever the 2-D ops run,
// the GPU included.

// depthTaps returns, for x [N,C,D,H,W] padded by pad at both ends of D with
// fill, the kd inputs [N*Dout, C, H, W] of the taps of a kernel of depth
// kd with stride s and dilation dil, and Dout.
func (im *importer) depthTaps(x ir.ID, kd, s, pad, dil int, fill float64) ([]ir.ID, int, error) {
	xs := im.shapeOf(x)
	n, c, h, w := xs[0], xs[1], xs[3], xs[4]
	d := xs[2] + 2*pad
	dout := (d-dil*(kd-1)-1)/s + 1
	if kd < 1 || s < 1 || dil < 1 || pad < 0 || dout < 1 {
		return nil, 0, fmt.Errorf("a depth of %d padded by %d leaves no window of depth %d (stride %d, dilation %d)", xs[2], pad, kd, s, dil)
	}
	var err error
	if pad > 0 {
		if x, err = im.g.Add("", ir.OpPad, ir.MakeAttrs("pads", ir.Ints(0, 0, 0, 0, pad, pad), "value", ir.Float(fill)), x); err != nil {
			return nil, 0, err
		}
	}
	if x, err = im.g.Add("", ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 2, 1, 3, 4)), x); err != nil {
		return nil, 0, err
	}
	taps := make([]ir.ID, kd)
	for t := range kd {
		start := t * dil
		v, err := im.g.Add("", ir.OpSlice, ir.MakeAttrs("axis", ir.Int(1), "start", ir.Int(start), "end", ir.Int(start+(dout-1)*s+1), "step", ir.Int(s)), x)
		if err != nil {
			return nil, 0, err
		}
		if taps[t], err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n*dout, c, h, w)), v); err != nil {
			return nil, 0, err
		}
	}
	return taps, dout, nil
}

// depthBack reshapes y [N*Dout, C, H, W] to [N, C, Dout, H, W].
func (im *importer) depthBack(y ir.ID, n, dout int) (ir.ID, error) {
	ys := im.shapeOf(y)
	y, err := im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n, dout, ys[1], ys[2], ys[3])), y)
	if err != nil {
		return ir.NoID, err
	}
	return im.g.Add("", ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 2, 1, 3, 4)), y)
}

// spatial3 reads strides, pads (symmetric) and dilations of a 3-D node.
func spatial3(n *onnxpb.NodeProto) (stride, pad, dil []int, err error) {
	if pad, err = spatial(n, 3); err != nil {
		return nil, nil, nil, err
	}
	stride, dil = intsOr(n, "strides", 3, 1), intsOr(n, "dilations", 3, 1)
	if len(stride) != 3 || len(dil) != 3 {
		return nil, nil, nil, fmt.Errorf("expected 3 strides and dilations, found %v and %v", stride, dil)
	}
	return stride, pad, dil, nil
}

func emitConv3d(im *importer, n *onnxpb.NodeProto, x, w ir.ID) ([]*val, error) {
	xs, ws := im.shapeOf(x), im.shapeOf(w)
	if len(xs) != 5 {
		return nil, fmt.Errorf("expected an input [N,C,D,H,W] for a weight %v, found %v", ws, xs)
	}
	stride, pad, dil, err := spatial3(n)
	if err != nil {
		return nil, err
	}
	taps, dout, err := im.depthTaps(x, ws[2], stride[0], pad[0], dil[0], 0)
	if err != nil {
		return nil, err
	}
	attrs := ir.MakeAttrs("stride", ir.Ints(stride[1:]...), "padding", ir.Ints(pad[1:]...),
		"dilation", ir.Ints(dil[1:]...), "groups", ir.Int(int(attrInt(n, "group", 1))))
	y := ir.NoID
	for t, tap := range taps {
		wt, err := im.g.Add("", ir.OpSlice, ir.MakeAttrs("axis", ir.Int(2), "start", ir.Int(t), "end", ir.Int(t+1), "step", ir.Int(1)), w)
		if err != nil {
			return nil, err
		}
		if wt, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(ws[0], ws[1], ws[3], ws[4])), wt); err != nil {
			return nil, err
		}
		yt, err := im.g.Add("", ir.OpConv2d, attrs, tap, wt)
		if err != nil {
			return nil, err
		}
		if y == ir.NoID {
			y = yt
		} else if y, err = im.g.Add("", ir.OpAdd, nil, y, yt); err != nil {
			return nil, err
		}
	}
	if y, err = im.depthBack(y, xs[0], dout); err != nil {
		return nil, err
	}
	if !has(n, 2) {
		return []*val{{id: y}}, nil
	}
	b, err := im.id(n, 2)
	if err != nil {
		return nil, err
	}
	if b, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(channelShape(ws[0], 5)...)), b); err != nil {
		return nil, err
	}
	return one(im.add(ir.OpAdd, nil, y, b))
}

// pool3d lowers MaxPool and AveragePool over [N,C,D,H,W]. Max pooling pads
// depth with the lowest finite value of the dtype (so a window of padding
// and -Inf gives that value, not -Inf); average pooling takes the mean of
// the taps' 2-D means, which is the 3-D mean when the padding counts
// (count_include_pad=1) or there is none.
func pool3d(im *importer, n *onnxpb.NodeProto, op ir.Op, x ir.ID, kernel []int) ([]*val, error) {
	xs := im.shapeOf(x)
	if len(xs) != 5 {
		return nil, fmt.Errorf("expected an input [N,C,D,H,W] for a 3-D kernel, found %v", xs)
	}
	stride, pad, dil, err := spatial3(n)
	if err != nil {
		return nil, err
	}
	attrs := ir.MakeAttrs("kernel", ir.Ints(kernel[1:]...), "stride", ir.Ints(stride[1:]...), "padding", ir.Ints(pad[1:]...))
	fill := 0.0
	if op == ir.OpMaxPool2d {
		if attrInt(n, "storage_order", 0) != 0 {
			return nil, errors.New("storage_order 1 is not supported")
		}
		attrs = attrs.With("dilation", ir.Ints(dil[1:]...))
		fill = -math.MaxFloat32
		if im.g.Type(x).DType == ir.F64 {
			fill = -math.MaxFloat64
		}
	} else {
		include := attrInt(n, "count_include_pad", 0) != 0
		if !include && (pad[0] != 0 || pad[1] != 0 || pad[2] != 0) {
			return nil, errors.New("3-D average pooling with padding and count_include_pad=0 is not supported")
		}
		attrs = attrs.With("count_include_pad", ir.BoolAttr(true))
		dil = []int{1, 1, 1}
	}
	taps, dout, err := im.depthTaps(x, kernel[0], stride[0], pad[0], dil[0], fill)
	if err != nil {
		return nil, err
	}
	y := ir.NoID
	for _, tap := range taps {
		yt, err := im.g.Add("", op, attrs, tap)
		if err != nil {
			return nil, err
		}
		switch {
		case y == ir.NoID:
			y = yt
		case op == ir.OpMaxPool2d:
			y, err = im.g.Add("", ir.OpMaximum, nil, y, yt)
		default:
			y, err = im.g.Add("", ir.OpAdd, nil, y, yt)
		}
		if err != nil {
			return nil, err
		}
	}
	if op == ir.OpAvgPool2d && len(taps) > 1 {
		if y, err = im.scale(y, 1/float64(len(taps))); err != nil {
			return nil, err
		}
	}
	if y, err = im.depthBack(y, xs[0], dout); err != nil {
		return nil, err
	}
	return []*val{{id: y}}, nil
}

// convTranspose3d is the 3-D transposed convolution of x [N,C,D,H,W] by w
// [C,O/g,kd,kh,kw]: for each depth tap t, the 2-D transposed convolution
// of every depth slice (folded into the batch) by w[:, :, t], its depth
// spread by the stride (zeros between, as slice's gradient spreads) and
// shifted by t*dilation; the taps' sum is the whole result along depth,
// of which [begin, begin + length) is kept (zeros where a negative pad or
// output_padding reaches past it).
func (im *importer) convTranspose3d(x, w ir.ID, groups int, stride, dil, outPad, begin, end []int) (ir.ID, error) {
	xs, ws := im.shapeOf(x), im.shapeOf(w)
	n, ch, d := xs[0], xs[1], xs[2]
	c := &builder{im: im}
	xf := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n*d, ch, xs[3], xs[4])),
		c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 2, 1, 3, 4)), x))
	if c.err != nil {
		return ir.NoID, c.err
	}
	full := (d-1)*stride[0] + dil[0]*(ws[2]-1) + 1
	spread := (d-1)*stride[0] + 1
	sum := ir.NoID
	var plane []int // the 2-D result's [O, Ho, Wo]
	for t := range ws[2] {
		wt := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(ws[0], ws[1], ws[3], ws[4])),
			c.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(2), "start", ir.Int(t), "end", ir.Int(t+1), "step", ir.Int(1)), w))
		if c.err != nil {
			return ir.NoID, c.err
		}
		z, err := im.convTranspose(xf, wt, groups, stride[1:], dil[1:], outPad[1:], begin[1:], end[1:])
		if err != nil {
			return ir.NoID, err
		}
		plane = im.shapeOf(z)[1:]
		inner := prod(plane)
		z = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n, d, 1, inner)), z)
		if stride[0] > 1 {
			z = c.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(0, 0, 0, stride[0]-1)), z)
		}
		z = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n, d*stride[0], inner)), z)
		// The d*stride positions, less the stride-1 zeros after the last,
		// placed at t*dilation of the whole (a negative pad crops).
		z = c.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(0, 0, t*dil[0], full-spread-t*dil[0]-(d*stride[0]-spread))), z)
		if sum == ir.NoID {
			sum = z
		} else {
			sum = c.op(ir.OpAdd, nil, sum, z)
		}
	}
	b, e, op := begin[0], end[0], outPad[0]
	length := full + op - b - e
	if length < 1 {
		return ir.NoID, fmt.Errorf("depth: pads %d and %d leave no output", b, e)
	}
	// Zeros before for a negative begin, after for output_padding and a
	// negative end; then the kept window.
	if before, after := max(-b, 0), op+max(-e, 0); before > 0 || after > 0 {
		sum = c.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(0, 0, before, after)), sum)
	}
	start := max(b, 0)
	sum = c.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(1), "start", ir.Int(start), "end", ir.Int(start+length), "step", ir.Int(1)), sum)
	sum = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n, length, plane[0], plane[1], plane[2])), sum)
	return c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 2, 1, 3, 4)), sum), c.err
}
