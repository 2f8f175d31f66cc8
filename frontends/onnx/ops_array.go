package onnx

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// castValue returns x cast to dtype to: x itself when it already is.
func castValue(im *importer, x ir.ID, to ir.DType) ([]*val, error) {
	if im.g.Type(x).DType == to {
		return []*val{{id: x}}, nil
	}
	return one(im.add(ir.OpCast, ir.MakeAttrs("dtype", ir.String(to.String())), x))
}

// emitCastLike casts input 0 to input 1's dtype (opset 15), as Cast does.
func emitCastLike(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	like, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	to := im.dtypeOfVal(like)
	if v.c != nil && !v.param {
		return []*val{{id: ir.NoID, c: castConst(v.c, to)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	return castValue(im, x, to)
}

// dtypeOfVal returns the element type of a value.
func (im *importer) dtypeOfVal(v *val) ir.DType {
	if v.id != ir.NoID {
		return im.g.Type(v.id).DType
	}
	return v.c.dt
}

// scalarIn returns the one element of constant input k as an int.
func (im *importer) scalarIn(n *onnxpb.NodeProto, k int) (int, error) {
	c, err := im.constIn(n, k)
	if err != nil {
		return 0, err
	}
	if c.n() != 1 || c.dt.IsFloat() || c.dt == ir.Bool {
		return 0, fmt.Errorf("input %d: expected one integer, found %s%v", k, c.dt, c.shape)
	}
	v := c.ints()[0]
	if v < -ir.MaxTensorBytes || v > ir.MaxTensorBytes {
		return 0, fmt.Errorf("input %d: %d is out of range", k, v)
	}
	return int(v), nil
}

func emitCumSum(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	axis, err := im.scalarIn(n, 1)
	if err != nil {
		return nil, err
	}
	if axis, err = normAxis(axis, len(im.shapeOf(x))); err != nil {
		return nil, err
	}
	return one(im.add(ir.OpCumsum, ir.MakeAttrs("axis", ir.Int(axis),
		"exclusive", ir.BoolAttr(attrInt(n, "exclusive", 0) != 0), "reverse", ir.BoolAttr(attrInt(n, "reverse", 0) != 0)), x))
}

func emitTrilu(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	k := 0
	if has(n, 1) {
		if k, err = im.scalarIn(n, 1); err != nil {
			return nil, err
		}
	}
	return one(im.add(ir.OpTrilu, ir.MakeAttrs("upper", ir.BoolAttr(attrInt(n, "upper", 1) != 0), "k", ir.Int(k)), x))
}

// emitGatherElements maps GatherElements to gather {axis}, which is
// torch.gather: constant indices have their negative entries counted from
// the end here; a computed index must lie in [0, size) (gather reports an
// index out of range when the model runs).
func emitGatherElements(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	axis, err := normAxis(int(attrInt(n, "axis", 0)), len(xs))
	if err != nil {
		return nil, err
	}
	iv, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	var idx ir.ID
	if iv.c != nil {
		c, err := normIndices(iv.c, xs[axis])
		if err != nil {
			return nil, err
		}
		if idx, err = im.constOp(c); err != nil {
			return nil, err
		}
	} else if idx, err = im.value(iv, false); err != nil {
		return nil, err
	}
	return one(im.add(ir.OpGather, ir.MakeAttrs("axis", ir.Int(axis)), x, idx))
}

// normIndices returns the integer constant c with its entries counted from
// the end of an axis of size d where negative, checked against [0, d).
func normIndices(c *tensor, d int) (*tensor, error) {
	if c.dt != ir.I32 && c.dt != ir.I64 {
		return nil, fmt.Errorf("expected integer indices, found %s", c.dt)
	}
	out := &tensor{dt: c.dt, shape: c.shape, i: make([]int64, c.n())}
	for k, v := range c.ints() {
		w := v
		if w < 0 {
			w += int64(d)
		}
		if w < 0 || w >= int64(d) {
			return nil, fmt.Errorf("index %d is out of range for an axis of size %d", v, d)
		}
		out.i[k] = w
	}
	return out, nil
}

// emitArg maps ArgMax and ArgMin to argmax and argmin {axes=[axis],
// keepdims}: the first extreme element, as ONNX's default
// select_last_index=0; with 1, size-1 minus that of the axis reversed.
func emitArg(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		axis, err := normAxis(int(attrInt(n, "axis", 0)), len(im.shapeOf(x)))
		if err != nil {
			return nil, err
		}
		attrs := ir.MakeAttrs("axes", ir.Ints(axis), "keepdims", ir.BoolAttr(attrInt(n, "keepdims", 1) != 0))
		if attrInt(n, "select_last_index", 0) == 0 {
			return one(im.add(op, attrs, x))
		}
		// The last extreme element: the first of the axis reversed,
		// counted from the end.
		c := &builder{im: im}
		i := c.op(op, attrs, c.op(ir.OpFlip, ir.MakeAttrs("axes", ir.Ints(axis)), x))
		return c.result(c.op(ir.OpSub, nil, c.scalarLike(float64(im.shapeOf(x)[axis]-1), i), i))
	}
}

// Normalizations. LayerNormalization is kiln's layer_norm; the instance
// and group normalizations are compositions around it (layer_norm over the
// spatial axes of each (sample, channel) or (sample, group) slice, then the
// per-channel scale and bias as broadcast mul and add), so their gradients
// are layer_norm's exact analytic rule, checked against central
// differences with the rest of the op table, and they run wherever
// layer_norm runs, the GPU included, without a kernel of their own.

// emitLayerNormalization maps LayerNormalization (opset 17) to layer_norm
// {axes=[axis..], eps}; the Mean and InvStdDev outputs, when the node has
// them, are computed beside it.
func emitLayerNormalization(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(xs))
	if err != nil {
		return nil, err
	}
	axes := make([]int, 0, len(xs)-axis)
	for k := axis; k < len(xs); k++ {
		axes = append(axes, k)
	}
	eps := attrFloat(n, "epsilon", 1e-5)
	y, err := im.g.Add("", ir.OpLayerNorm, ir.MakeAttrs("axes", ir.Ints(axes...), "eps", ir.Float(eps)), x)
	if err != nil {
		return nil, err
	}
	outs, err := im.scaleShift(n, y, nil)
	if err != nil || len(n.Output) < 2 {
		return outs, err
	}
	// Mean and InvStdDev, when asked for: the statistics over the axes,
	// kept as size-1 axes (biased variance).
	c := &builder{im: im}
	red := ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true))
	mean := c.op(ir.OpMean, red, x)
	v := c.op(ir.OpMean, red, c.op(ir.OpSquare, nil, c.op(ir.OpSub, nil, x, mean)))
	inv := c.op(ir.OpRsqrt, nil, c.op(ir.OpAdd, nil, v, c.scalarLike(eps, x)))
	if c.err != nil {
		return nil, c.err
	}
	return append(outs, &val{id: mean}, &val{id: inv}), nil
}

// scaleShift returns y * input 1 + input 2 (when present), each broadcast
// to y (as shape when shape is given, else as it is).
func (im *importer) scaleShift(n *onnxpb.NodeProto, y ir.ID, shape []int) ([]*val, error) {
	for k, op := range []ir.Op{ir.OpMul, ir.OpAdd} {
		if !has(n, k+1) {
			continue
		}
		v, err := im.id(n, k+1)
		if err != nil {
			return nil, err
		}
		if shape != nil && !ir.Shape(im.shapeOf(v)).Equal(shape) {
			if im.g.Type(v).Shape.NumElements() != prod(shape) {
				return nil, fmt.Errorf("input %d has shape %v, expected %d elements", k+1, im.shapeOf(v), prod(shape))
			}
			if v, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), v); err != nil {
				return nil, err
			}
		}
		if y, err = im.g.Add("", op, nil, y, v); err != nil {
			return nil, err
		}
	}
	return []*val{{id: y}}, nil
}

// channelShape returns [c, 1, ...] for an input of rank r: a per-channel
// vector broadcast against [N, C, ...].
func channelShape(c, r int) []int {
	s := make([]int, r-1)
	s[0] = c
	for k := 1; k < len(s); k++ {
		s[k] = 1
	}
	return s
}

// emitInstanceNormalization: layer_norm over the spatial axes, then scale
// and B per channel.
func emitInstanceNormalization(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	if len(xs) < 3 {
		return nil, fmt.Errorf("expected an input [N,C,D1,...] of rank >= 3, found %v", xs)
	}
	axes := make([]int, 0, len(xs)-2)
	for k := 2; k < len(xs); k++ {
		axes = append(axes, k)
	}
	y, err := im.g.Add("", ir.OpLayerNorm, ir.MakeAttrs("axes", ir.Ints(axes...), "eps", ir.Float(attrFloat(n, "epsilon", 1e-5))), x)
	if err != nil {
		return nil, err
	}
	return im.scaleShift(n, y, channelShape(xs[1], len(xs)))
}

// emitGroupNormalization: x [N,C,...] reshaped to [N, G, rest], layer_norm
// over rest, reshaped back, then scale and bias per channel (opset 21 and
// opset 18 models whose scale has C elements) or per group (opset 18's
// [G] scale, repeated over each group's channels by the reshape to
// [N, G, rest]).
func emitGroupNormalization(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	g := int(attrInt(n, "num_groups", 0))
	if len(xs) < 3 || g < 1 || xs[1]%g != 0 {
		return nil, fmt.Errorf("expected an input [N,C,D1,...] of rank >= 3 and num_groups dividing C, found %v and num_groups %d", xs, g)
	}
	rest := prod(xs[1:]) / g
	h, err := im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(xs[0], g, rest)), x)
	if err != nil {
		return nil, err
	}
	if h, err = im.g.Add("", ir.OpLayerNorm, ir.MakeAttrs("axes", ir.Ints(2), "eps", ir.Float(attrFloat(n, "epsilon", 1e-5))), h); err != nil {
		return nil, err
	}
	scaleN := 0
	if has(n, 1) {
		v, err := im.id(n, 1)
		if err != nil {
			return nil, err
		}
		scaleN = im.g.Type(v).Shape.NumElements()
	}
	if scaleN == g && g != xs[1] {
		// Per group: scale and bias [G] broadcast as [G, 1] over [N, G, rest].
		out, err := im.scaleShift(n, h, []int{g, 1})
		if err != nil {
			return nil, err
		}
		return one(im.add(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(xs...)), out[0].id))
	}
	if h, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(xs...)), h); err != nil {
		return nil, err
	}
	return im.scaleShift(n, h, channelShape(xs[1], len(xs)))
}

// emitConvTranspose maps ConvTranspose to conv_input_grad, the adjoint of
// the convolution whose input has the transposed convolution's output
// shape, so its gradients are conv and conv_weight_grad, exact (3-D: the
// 2-D one per depth tap, convTranspose3d). The pads come from pads, or
// from output_shape or auto_pad SAME as ONNX says (the odd one at the end
// unless auto_pad is SAME_UPPER); convTranspose turns them into the
// convolution's padding, a crop or zeros.
func emitConvTranspose(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	w, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	xs, ws := im.shapeOf(x), im.shapeOf(w)
	d := len(ws) - 2
	if d < 1 || d > 3 || len(xs) != d+2 {
		return nil, fmt.Errorf("expected a 1-D, 2-D or 3-D transposed convolution (input [N,C,...] and weight [C,C_out/group,k...] of one rank 3 to 5), found input %v and weight %v", xs, ws)
	}
	if ks, ok := attrInts(n, "kernel_shape"); ok && !ir.Shape(ks).Equal(ir.Shape(ws[2:])) {
		return nil, fmt.Errorf("kernel_shape %v does not match the weight's shape %v", ks, ws)
	}
	groups := int(attrInt(n, "group", 1))
	if groups < 1 || xs[1] != ws[0] || ws[0]%groups != 0 {
		return nil, fmt.Errorf("expected input channels %d equal to the weight's first dim %d and divisible by group %d", xs[1], ws[0], groups)
	}
	stride, dil, outPad := intsOr(n, "strides", d, 1), intsOr(n, "dilations", d, 1), intsOr(n, "output_padding", d, 0)
	if len(stride) != d || len(dil) != d || len(outPad) != d {
		return nil, fmt.Errorf("expected strides, dilations and output_padding of %d entries", d)
	}
	begin, end := make([]int, d), make([]int, d)
	autoPad := attrString(n, "auto_pad", "NOTSET")
	os, hasOS := attrInts(n, "output_shape")
	if !hasOS && (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
		// SAME: the output is the input times the stride.
		os, hasOS = make([]int, d), true
		for k := range d {
			os[k] = xs[k+2] * stride[k]
		}
	}
	if hasOS {
		if len(os) != d {
			return nil, fmt.Errorf("expected output_shape of %d entries, found %v", d, os)
		}
		for k := range d {
			total := stride[k]*(xs[k+2]-1) + outPad[k] + (ws[k+2]-1)*dil[k] + 1 - os[k]
			half := total / 2
			if total < 0 && total%2 != 0 {
				half-- // floor division, as ONNX's reference
			}
			begin[k], end[k] = total-half, half
			if autoPad == "SAME_UPPER" {
				begin[k], end[k] = half, total-half
			}
		}
	} else if autoPad != "NOTSET" && autoPad != "VALID" {
		return nil, fmt.Errorf("auto_pad %q is not supported (NOTSET, VALID, SAME_UPPER, SAME_LOWER)", ir.Excerpt(autoPad))
	} else if pads, ok := attrInts(n, "pads"); ok && autoPad == "NOTSET" {
		if len(pads) != 2*d {
			return nil, fmt.Errorf("expected %d pads, found %d", 2*d, len(pads))
		}
		copy(begin, pads[:d])
		copy(end, pads[d:])
	}
	var y ir.ID
	if d == 3 {
		y, err = im.convTranspose3d(x, w, groups, stride, dil, outPad, begin, end) // conv3d.go
	} else {
		y, err = im.convTranspose(x, w, groups, stride, dil, outPad, begin, end)
	}
	if err != nil {
		return nil, err
	}
	if !has(n, 2) {
		return []*val{{id: y}}, nil
	}
	b, err := im.id(n, 2)
	if err != nil {
		return nil, err
	}
	ys := im.shapeOf(y)
	if b, err = im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(channelShape(ys[1], len(ys))...)), b); err != nil {
		return nil, err
	}
	return one(im.add(ir.OpAdd, nil, y, b))
}

// convTranspose is the 1-D or 2-D transposed convolution of x by w with
// the pads resolved to begin and end per spatial axis: conv_input_grad
// with padding begin when 0 <= output_padding + begin - end < stride, else
// with no padding and a slice keeping [begin, begin + length) of the whole
// result (plus output_padding); a negative pad (an output_shape beyond the
// whole result) adds zeros at that end.
func (im *importer) convTranspose(x, w ir.ID, groups int, stride, dil, outPad, begin, end []int) (ir.ID, error) {
	xs, ws := im.shapeOf(x), im.shapeOf(w)
	d := len(ws) - 2
	begin, end = append([]int(nil), begin...), append([]int(nil), end...)
	out := []int{xs[0], ws[1] * groups}
	grow := make([]int, 2*d) // kiln pad pairs from the last axis
	pad := make([]int, d)
	type crop struct{ axis, start, end int }
	var crops []crop
	for k := range d {
		if begin[k] < 0 {
			grow[2*(d-1-k)], begin[k] = -begin[k], 0
		}
		if end[k] < 0 {
			grow[2*(d-1-k)+1], end[k] = -end[k], 0
		}
		if outPad[k] < 0 || outPad[k] >= max(stride[k], dil[k]) {
			return ir.NoID, fmt.Errorf("axis %d: output_padding %d is not below the stride %d or the dilation %d", k, outPad[k], stride[k], dil[k])
		}
		full := (xs[k+2]-1)*stride[k] + dil[k]*(ws[k+2]-1) + 1
		length := full - begin[k] - end[k] + outPad[k]
		if length < 1 {
			return ir.NoID, fmt.Errorf("axis %d: pads %d and %d leave no output", k, begin[k], end[k])
		}
		if extra := outPad[k] + begin[k] - end[k]; extra >= 0 && extra < stride[k] {
			pad[k] = begin[k]
			out = append(out, length)
			continue
		}
		out = append(out, full+outPad[k])
		crops = append(crops, crop{k + 2, begin[k], begin[k] + length})
	}
	c := &builder{im: im}
	y := c.op(ir.OpConvInputGrad, ir.MakeAttrs("stride", ir.Ints(stride...), "padding", ir.Ints(pad...),
		"dilation", ir.Ints(dil...), "groups", ir.Int(groups), "input_shape", ir.Ints(out...)), x, w)
	for _, cr := range crops {
		y = c.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(cr.axis), "start", ir.Int(cr.start), "end", ir.Int(cr.end), "step", ir.Int(1)), y)
	}
	for _, g := range grow {
		if g != 0 {
			y = c.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(grow...)), y)
			break
		}
	}
	return y, c.err
}

// padMode pads x with ONNX's pads [b_0 .., e_0 ..] in mode reflect
// (mirrored without the edge element, as numpy.pad's reflect and
// torch's "reflect"), edge (the edge element repeated) or wrap (the other
// end's elements), axis by axis: a concat of slices of x (flipped for
// reflect, broadcast for edge) around it, so the gradients are those of
// slice, flip, broadcast_to and concat. A negative pad crops first.
func padMode(im *importer, x ir.ID, mode string, pads []int) ([]*val, error) {
	r := len(im.shapeOf(x))
	slice := func(x ir.ID, axis, start, end int) (ir.ID, error) {
		return im.g.Add("", ir.OpSlice, ir.MakeAttrs("axis", ir.Int(axis), "start", ir.Int(start), "end", ir.Int(end), "step", ir.Int(1)), x)
	}
	for k := range r {
		b, e := pads[k], pads[k+r]
		var err error
		if b < 0 || e < 0 {
			d := im.shapeOf(x)[k]
			if x, err = slice(x, k, max(-b, 0), d-max(-e, 0)); err != nil {
				return nil, err
			}
			b, e = max(b, 0), max(e, 0)
		}
		if b == 0 && e == 0 {
			continue
		}
		d := im.shapeOf(x)[k]
		if mode == "reflect" && (b >= d || e >= d) || d == 0 {
			return nil, fmt.Errorf("axis %d of size %d cannot be padded by %d and %d in mode %s (reflect needs pads below the size)", k, d, b, e, mode)
		}
		if mode == "wrap" && (b > d || e > d) {
			return nil, fmt.Errorf("axis %d of size %d cannot be padded by %d and %d in mode wrap (pads up to the size)", k, d, b, e)
		}
		part := func(before bool, p int) (ir.ID, error) {
			switch mode {
			case "reflect":
				lo, hi := 1, p+1
				if !before {
					lo, hi = d-1-p, d-1
				}
				s, err := slice(x, k, lo, hi)
				if err != nil {
					return ir.NoID, err
				}
				return im.g.Add("", ir.OpFlip, ir.MakeAttrs("axes", ir.Ints(k)), s)
			case "edge":
				at := 0
				if !before {
					at = d - 1
				}
				s, err := slice(x, k, at, at+1)
				if err != nil {
					return ir.NoID, err
				}
				shape := append([]int(nil), im.shapeOf(x)...)
				shape[k] = p
				return im.g.Add("", ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(shape...)), s)
			}
			if before {
				return slice(x, k, d-p, d)
			}
			return slice(x, k, 0, p)
		}
		args := []ir.ID{}
		if b > 0 {
			s, err := part(true, b)
			if err != nil {
				return nil, err
			}
			args = append(args, s)
		}
		args = append(args, x)
		if e > 0 {
			s, err := part(false, e)
			if err != nil {
				return nil, err
			}
			args = append(args, s)
		}
		if x, err = im.g.Add("", ir.OpConcat, ir.MakeAttrs("axis", ir.Int(k)), args...); err != nil {
			return nil, err
		}
	}
	return []*val{{id: x}}, nil
}

// foldTranspose transposes the constant c by n's perm (default reversed):
// shape arithmetic (PyTorch's exported pad lists) transposes constants.
func foldTranspose(n *onnxpb.NodeProto, c *tensor) ([]*val, error) {
	c.load()
	r := len(c.shape)
	perm, ok := attrInts(n, "perm")
	if !ok {
		perm = make([]int, r)
		for k := range perm {
			perm[k] = r - 1 - k
		}
	}
	if len(perm) != r {
		return nil, fmt.Errorf("perm %v for a constant of rank %d", perm, r)
	}
	seen := make([]bool, r)
	shape := make([]int, r)
	for k, p := range perm {
		if p < 0 || p >= r || seen[p] {
			return nil, fmt.Errorf("perm %v is not a permutation of %d axes", perm, r)
		}
		seen[p] = true
		shape[k] = c.shape[p]
	}
	st := ir.Shape(c.shape).Strides()
	strides := make([]int, r)
	for k, p := range perm {
		strides[k] = st[p]
	}
	return []*val{{id: ir.NoID, c: stridedConst(c, shape, strides)}}, nil
}
