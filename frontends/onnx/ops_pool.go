package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// poolGeneral emits the MaxPool and AveragePool nodes that kiln's pooling
// ops do not take as they are: 1-D pooling (through 2-D with a height of
// 1), auto_pad SAME_UPPER, SAME_LOWER and VALID, pads that differ at the
// two ends or exceed half the kernel, and ceil_mode. The padding becomes a
// pad op (-inf for max); an average divides the pooled padded input by
// the pooled count of the positions it may count, so both
// count_include_pad settings hold. ok is false for the nodes the plain
// rule handles (and 3-D pooling).
func (im *importer) poolGeneral(op ir.Op, n *onnxpb.NodeProto, x ir.ID) (out []*val, ok bool, err error) {
	shape := im.shapeOf(x)
	kernel, has := attrInts(n, "kernel_shape")
	d := len(kernel)
	if !has || (d != 1 && d != 2) || len(shape) != d+2 {
		return nil, false, nil
	}
	autoPad := attrString(n, "auto_pad", "NOTSET")
	ceil := attrInt(n, "ceil_mode", 0) != 0
	pads, hasPads := attrInts(n, "pads")
	plain := d == 2 && autoPad == "NOTSET" && !ceil
	if plain && hasPads && len(pads) == 4 {
		for k := range 2 {
			plain = plain && pads[k] == pads[k+2] && 2*pads[k] <= kernel[k]
		}
	}
	if plain {
		return nil, false, nil
	}
	if len(n.Output) > 1 && n.Output[1] != "" {
		return nil, true, errors.New("the Indices output is not supported")
	}
	strides := intsOr(n, "strides", d, 1)
	dil := intsOr(n, "dilations", d, 1)
	if len(strides) != d || len(dil) != d {
		return nil, true, fmt.Errorf("strides %v and dilations %v for a %d-D kernel", strides, dil, d)
	}
	if op == ir.OpAvgPool2d {
		for _, v := range dil {
			if v != 1 {
				return nil, true, fmt.Errorf("dilations %v in AveragePool are not supported", dil)
			}
		}
	}
	begin, end, extra := make([]int, d), make([]int, d), make([]int, d)
	for k := range d {
		L, kk, s := shape[k+2], kernel[k], strides[k]
		span := (kk-1)*dil[k] + 1
		if kk < 1 || s < 1 || dil[k] < 1 {
			return nil, true, fmt.Errorf("kernel %v, strides %v and dilations %v must be positive", kernel, strides, dil)
		}
		switch autoPad {
		case "NOTSET":
			if hasPads {
				if len(pads) != 2*d {
					return nil, true, fmt.Errorf("expected %d pads, found %d", 2*d, len(pads))
				}
				begin[k], end[k] = pads[k], pads[k+d]
			}
		case "VALID":
		case "SAME_UPPER", "SAME_LOWER":
			o := (L + s - 1) / s
			total := max((o-1)*s+span-L, 0)
			small := total / 2
			if autoPad == "SAME_UPPER" {
				begin[k], end[k] = small, total-small
			} else {
				begin[k], end[k] = total-small, small
			}
		default:
			return nil, true, fmt.Errorf("auto_pad %q is not supported", ir.Excerpt(autoPad))
		}
		if begin[k] < 0 || end[k] < 0 {
			return nil, true, fmt.Errorf("pads %v are negative", pads)
		}
		full := L + begin[k] + end[k]
		if full < span {
			return nil, true, fmt.Errorf("the kernel spans %d, more than the padded input's %d", span, full)
		}
		if ceil {
			o := int(math.Ceil(float64(full-span)/float64(s))) + 1
			extra[k] = max((o-1)*s+span-full, 0)
		}
	}
	b := &builder{im: im}
	dt := b.dtype(x)
	// 1-D pooling runs as 2-D on [N,C,1,L].
	lift := func(v []int, one int) []int {
		if d == 1 {
			return []int{one, v[0]}
		}
		return v
	}
	padsOf := func(lo, hi []int) []int { // kiln's pad: pairs from the last axis
		var p []int
		for k := d - 1; k >= 0; k-- {
			p = append(p, lo[k], hi[k])
		}
		return p
	}
	in := x
	if d == 1 {
		in = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape[0], shape[1], 1, shape[2])), x)
	}
	withExtra := make([]int, d)
	for k := range d {
		withExtra[k] = end[k] + extra[k]
	}
	attrs := ir.MakeAttrs("kernel", ir.Ints(lift(kernel, 1)...), "stride", ir.Ints(lift(strides, 1)...), "padding", ir.Ints(0, 0))
	var y ir.ID
	if op == ir.OpMaxPool2d {
		if attrInt(n, "storage_order", 0) != 0 {
			return nil, true, errors.New("storage_order 1 is not supported")
		}
		if !dt.IsFloat() {
			return nil, true, fmt.Errorf("padded max pooling of %s is not supported (floats only)", dt)
		}
		p := b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(padsOf(begin, withExtra)...), "value", ir.Float(math.Inf(-1))), in)
		y = b.op(ir.OpMaxPool2d, attrs.With("dilation", ir.Ints(lift(dil, 1)...)), p)
	} else {
		// sum over the window / count of the window's positions that count.
		mshape := append([]int{1, 1}, shape[2:]...)
		if prod(mshape) > MaxFolded {
			return nil, true, fmt.Errorf("a mask of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", mshape, prod(mshape), MaxFolded)
		}
		ones := &tensor{dt: dt, shape: lift(shape[2:], 1), f: make([]float64, prod(mshape))}
		ones.shape = append([]int{1, 1}, ones.shape...)
		for k := range ones.f {
			ones.f[k] = 1
		}
		mask := b.constant(ones)
		if attrInt(n, "count_include_pad", 0) != 0 {
			mask = b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(padsOf(begin, end)...), "value", ir.Float(1)), mask)
			mask = b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(padsOf(make([]int, d), extra)...), "value", ir.Float(0)), mask)
		} else {
			mask = b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(padsOf(begin, withExtra)...), "value", ir.Float(0)), mask)
		}
		p := b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(padsOf(begin, withExtra)...), "value", ir.Float(0)), in)
		avg := attrs.With("count_include_pad", ir.BoolAttr(true))
		y = b.op(ir.OpDiv, nil, b.op(ir.OpAvgPool2d, avg, p), b.op(ir.OpAvgPool2d, avg, mask))
	}
	if d == 1 && b.err == nil {
		s := b.im.shapeOf(y)
		y = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s[0], s[1], s[3])), y)
	}
	if b.err != nil {
		return nil, true, b.err
	}
	return []*val{{id: y}}, true, nil
}

// convPad pads x with zeros for a Conv whose auto_pad is set or whose pads
// differ at the two ends (kiln's convolutions pad both ends alike), and
// returns it with kiln's padding, zeros.
func (im *importer) convPad(n *onnxpb.NodeProto, x ir.ID, ws []int) (ir.ID, []int, error) {
	d := len(ws) - 2
	shape := im.shapeOf(x)
	if len(shape) != d+2 {
		return ir.NoID, nil, fmt.Errorf("expected an input of rank %d, found %v", d+2, shape)
	}
	strides, dil := intsOr(n, "strides", d, 1), intsOr(n, "dilations", d, 1)
	if len(strides) != d || len(dil) != d {
		return ir.NoID, nil, fmt.Errorf("strides %v and dilations %v for a %d-D kernel", strides, dil, d)
	}
	var kp []int // kiln's pad: pairs from the last axis
	pads, hasPads := attrInts(n, "pads")
	for k := d - 1; k >= 0; k-- {
		var lo, hi int
		switch ap := attrString(n, "auto_pad", "NOTSET"); ap {
		case "NOTSET":
			if hasPads {
				if len(pads) != 2*d {
					return ir.NoID, nil, fmt.Errorf("expected %d pads, found %d", 2*d, len(pads))
				}
				lo, hi = pads[k], pads[k+d]
			}
		case "VALID":
		case "SAME_UPPER", "SAME_LOWER":
			L, s := shape[k+2], strides[k]
			if s < 1 {
				return ir.NoID, nil, fmt.Errorf("strides %v must be positive", strides)
			}
			o := (L + s - 1) / s
			total := max((o-1)*s+(ws[k+2]-1)*dil[k]+1-L, 0)
			lo, hi = total/2, total-total/2
			if ap == "SAME_LOWER" {
				lo, hi = hi, lo
			}
		default:
			return ir.NoID, nil, fmt.Errorf("auto_pad %q is not supported", ir.Excerpt(ap))
		}
		if lo < 0 || hi < 0 {
			return ir.NoID, nil, fmt.Errorf("pads %v are negative", pads)
		}
		kp = append(kp, lo, hi)
	}
	y, err := im.g.Add("", ir.OpPad, ir.MakeAttrs("pads", ir.Ints(kp...), "value", ir.Float(0)), x)
	return y, make([]int, d), err
}
