package onnx

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// resizeSpec is what a Resize node asks for, per axis and overall.
type resizeSpec struct {
	mode, ctm, nearest    string
	cubicA, extrapolation float64
	excludeOutside        bool
	scales                []float64 // per axis
	out                   []int     // per axis
	roi                   []float64 // [starts..., ends...] or nil
}

// resizeTaps is the 1-D interpolation of one axis: output position j reads
// input positions idx[j][k] (clamped into the axis, as ONNX's edge padding
// does) with weights w[j][k], plus bias[j] (the extrapolation value where
// tf_crop_and_resize maps j outside the input).
type resizeTaps struct {
	idx  [][]int
	w    [][]float64
	bias []float64
}

// resizeAxis computes the taps of an axis of input size n as ONNX's
// reference implementation of Resize does (interpolate_1d_with_x).
func resizeAxis(s *resizeSpec, axis, n int) (resizeTaps, error) {
	scale := s.scales[axis]
	outW := scale * float64(n) // ONNX's output_width: not rounded
	var t resizeTaps
	for x := range s.out[axis] {
		xf := float64(x)
		var xo float64
		switch s.ctm {
		case "align_corners":
			if outW != 1 {
				xo = xf * float64(n-1) / (outW - 1)
			}
		case "asymmetric":
			xo = xf / scale
		case "tf_crop_and_resize":
			start, end := s.roi[axis], s.roi[len(s.roi)/2+axis]
			if outW == 1 {
				xo = (end - start) * float64(n-1) / 2
			} else {
				xo = xf * (end - start) * float64(n-1) / (outW - 1)
			}
			xo += start * float64(n-1)
		case "pytorch_half_pixel":
			xo = -0.5
			if outW != 1 {
				xo = (xf+0.5)/scale - 0.5
			}
		case "half_pixel":
			xo = (xf+0.5)/scale - 0.5
		case "tf_half_pixel_for_nn":
			xo = (xf + 0.5) / scale
		default:
			return t, fmt.Errorf("coordinate_transformation_mode %q is not supported", ir.Excerpt(s.ctm))
		}
		if s.ctm == "tf_crop_and_resize" && (xo < 0 || xo > float64(n-1)) {
			taps := map[string]int{"nearest": 1, "linear": 2, "cubic": 4}[s.mode]
			t.idx = append(t.idx, make([]int, taps))
			t.w = append(t.w, make([]float64, taps))
			t.bias = append(t.bias, s.extrapolation)
			continue
		}
		ratio := 1.0
		if xo != math.Floor(xo) {
			ratio = xo - math.Floor(xo)
		}
		coeffs, err := s.coeffs(ratio)
		if err != nil {
			return t, err
		}
		idx := neighbors(xo, len(coeffs))
		if s.excludeOutside {
			sum := 0.0
			for k, i := range idx {
				if i < 0 || i >= n {
					coeffs[k] = 0
				}
				sum += coeffs[k]
			}
			for k := range coeffs {
				coeffs[k] /= sum
			}
		}
		for k, i := range idx {
			idx[k] = min(max(i, 0), n-1)
		}
		if s.mode == "nearest" {
			// One tap: the input position whose coefficient is 1.
			pick := idx[0]
			for k, c := range coeffs {
				if c != 0 {
					pick = idx[k]
				}
			}
			idx, coeffs = []int{pick}, []float64{1}
		}
		t.idx = append(t.idx, idx)
		t.w = append(t.w, coeffs)
		t.bias = append(t.bias, 0)
	}
	return t, nil
}

// neighbors returns the k integer positions nearest to x, ties going to the
// smaller, in increasing order; as ONNX's get_neighbor_idxes over the input
// padded by ceil(k/2) at both ends, in the unpadded positions.
func neighbors(x float64, k int) []int {
	f := int(math.Floor(x))
	var cand []int
	for i := f - k; i <= f+k+1; i++ {
		cand = append(cand, i)
	}
	sort.SliceStable(cand, func(a, b int) bool {
		da, db := math.Abs(x-float64(cand[a])), math.Abs(x-float64(cand[b]))
		if da != db {
			return da < db
		}
		return cand[a] < cand[b]
	})
	out := append([]int(nil), cand[:k]...)
	sort.Ints(out)
	return out
}

// coeffs returns the interpolation weights at ratio in (0, 1].
func (s *resizeSpec) coeffs(ratio float64) ([]float64, error) {
	switch s.mode {
	case "nearest":
		whole := ratio == 1
		switch s.nearest {
		case "round_prefer_floor":
			return b2f(!whole && ratio <= 0.5, whole || ratio > 0.5), nil
		case "round_prefer_ceil":
			return b2f(!whole && ratio < 0.5, whole || ratio >= 0.5), nil
		case "floor":
			return b2f(!whole, whole), nil
		case "ceil":
			return b2f(false, true), nil
		}
		return nil, fmt.Errorf("nearest_mode %q is not supported", ir.Excerpt(s.nearest))
	case "linear":
		return []float64{1 - ratio, ratio}, nil
	case "cubic":
		a, r := s.cubicA, ratio
		return []float64{
			((a*(r+1)-5*a)*(r+1)+8*a)*(r+1) - 4*a,
			((a+2)*r-(a+3))*r*r + 1,
			((a+2)*(1-r)-(a+3))*(1-r)*(1-r) + 1,
			((a*((1-r)+1)-5*a)*((1-r)+1)+8*a)*((1-r)+1) - 4*a,
		}, nil
	}
	return nil, fmt.Errorf("mode %q is not supported (nearest, linear or cubic)", ir.Excerpt(s.mode))
}

func b2f(a, b bool) []float64 {
	f := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	return []float64{f(a), f(b)}
}

// floatsIn returns constant input k as floats, nil when it is absent or
// empty.
func (im *importer) floatsIn(n *onnxpb.NodeProto, k int) ([]float64, error) {
	if !has(n, k) {
		return nil, nil
	}
	c, err := im.constIn(n, k)
	if err != nil || c.n() == 0 {
		return nil, err
	}
	return c.floats(), nil
}

func emitResize(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOf(x)
	s := &resizeSpec{
		mode: attrString(n, "mode", "nearest"), ctm: attrString(n, "coordinate_transformation_mode", "half_pixel"),
		nearest: attrString(n, "nearest_mode", "round_prefer_floor"), cubicA: attrFloat(n, "cubic_coeff_a", -0.75),
		extrapolation: attrFloat(n, "extrapolation_value", 0), excludeOutside: attrInt(n, "exclude_outside", 0) != 0,
	}
	switch s.mode {
	case "nearest", "linear", "cubic":
	default:
		return nil, fmt.Errorf("mode %q is not supported (nearest, linear or cubic)", ir.Excerpt(s.mode))
	}
	var scales, sizes []float64
	if n.GetOpType() == "Upsample" || im.opset < 11 {
		// Upsample and Resize-10: scales alone, an attribute of Upsample-7.
		if a := attr(n, "scales"); a != nil {
			for _, f := range a.Floats {
				scales = append(scales, float64(f))
			}
		} else if scales, err = im.floatsIn(n, 1); err != nil {
			return nil, err
		}
		if s.mode != "nearest" {
			return nil, fmt.Errorf("mode %q before opset 11 is not supported (nearest is)", ir.Excerpt(s.mode))
		}
		for _, f := range scales {
			if f != math.Floor(f) || f < 1 {
				return nil, fmt.Errorf("scales %v: before opset 11 only whole scales >= 1 are supported", scales)
			}
		}
		s.ctm, s.nearest = "asymmetric", "floor"
	} else {
		if s.roi, err = im.floatsIn(n, 1); err != nil {
			return nil, err
		}
		if scales, err = im.floatsIn(n, 2); err != nil {
			return nil, err
		}
		if sizes, err = im.floatsIn(n, 3); err != nil {
			return nil, err
		}
	}
	r := len(shape)
	switch {
	case sizes != nil && len(sizes) == r:
		for k, d := range sizes {
			if d < 0 || d > ir.MaxTensorBytes {
				return nil, fmt.Errorf("sizes %v: %g is not a size", sizes, d)
			}
			s.out = append(s.out, int(d))
			s.scales = append(s.scales, d/float64(shape[k]))
		}
	case scales != nil && len(scales) == r:
		for k, f := range scales {
			o := f * float64(shape[k])
			if !(f > 0) || o > ir.MaxTensorBytes {
				return nil, fmt.Errorf("scales %v: %g is not a positive scale", scales, f)
			}
			s.out = append(s.out, int(o))
			s.scales = append(s.scales, f)
		}
	default:
		return nil, fmt.Errorf("expected scales or sizes for each of the %d axes", r)
	}
	if s.ctm == "tf_crop_and_resize" && len(s.roi) != 2*r {
		return nil, fmt.Errorf("tf_crop_and_resize needs roi with %d values, found %d", 2*r, len(s.roi))
	}
	if _, err := (ir.Type{DType: ir.F32, Shape: s.out}).BytesChecked(); err != nil {
		return nil, err
	}
	dt := im.g.Type(x).DType
	if s.mode != "nearest" && !dt.IsFloat() {
		return nil, fmt.Errorf("%s interpolation of %s is not supported (floats only)", s.mode, dt)
	}
	b := &builder{im: im}
	for axis := range r {
		if shape[axis] == 0 || s.out[axis] == 0 {
			return nil, errors.New("resizing an empty axis is not supported")
		}
		t, err := resizeAxis(s, axis, shape[axis])
		if err != nil {
			return nil, err
		}
		x = resizeApply(b, x, axis, t)
		shape = im.shapeOf(x)
		if b.err != nil {
			return nil, b.err
		}
	}
	return b.result(x)
}

// resizeApply applies the taps of an axis to x: an index_select of the taps
// (alone for one tap of weight 1), times the weights, summed over the taps,
// plus the bias. An axis the taps leave as it is is skipped.
func resizeApply(b *builder, x ir.ID, axis int, t resizeTaps) ir.ID {
	shape := b.im.shapeOf(x)
	taps := len(t.idx[0])
	identity := len(t.idx) == shape[axis]
	var flat []int64
	var w []float64
	for j := range t.idx {
		for k, i := range t.idx[j] {
			flat = append(flat, int64(i))
			w = append(w, t.w[j][k])
		}
		if taps != 1 || t.idx[j][0] != j || t.w[j][0] != 1 || t.bias[j] != 0 {
			identity = false
		}
	}
	if identity {
		return x
	}
	dt := b.dtype(x)
	ic := b.constant(&tensor{dt: ir.I64, shape: []int{len(flat)}, i: flat})
	y := b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(axis)), x, ic)
	plain := taps == 1
	for k := range w {
		plain = plain && w[k] == 1
	}
	if !plain {
		split := append(append(append([]int(nil), shape[:axis]...), len(t.idx), taps), shape[axis+1:]...)
		y = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(split...)), y)
		ws := append([]int{len(t.idx), taps}, ones(len(shape)-axis-1)...)
		y = b.op(ir.OpMul, nil, y, b.constant(&tensor{dt: dt, shape: ws, f: w}))
		y = b.op(ir.OpSum, ir.MakeAttrs("axes", ir.Ints(axis+1)), y)
	}
	for _, v := range t.bias {
		if v != 0 {
			bs := append([]int{len(t.idx)}, ones(len(shape)-axis-1)...)
			return b.op(ir.OpAdd, nil, y, b.constant(&tensor{dt: dt, shape: bs, f: t.bias}))
		}
	}
	return y
}

func ones(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = 1
	}
	return out
}

// constant is a const op holding c.
func (b *builder) constant(c *tensor) ir.ID {
	if b.err != nil {
		return ir.NoID
	}
	id, err := b.im.constOp(c)
	b.err = err
	return id
}
