package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// Resize (and the older Upsample) is separable in every mode ONNX has
// (nearest, linear, cubic): each resized axis is a linear map of that
// axis, a constant [out, in] matrix of interpolation weights that import
// computes by ONNX's formulas. The model gets one matmul per resized axis
// (with transposes for axes other than the last two), so the gradient is
// exact and the op runs wherever matmul does.

// resizeSpec is what a Resize node asks for, per axis.
type resizeSpec struct {
	mode, coord, nearest string
	cubicA               float64
	exclude              bool
	scales               []float64 // per axis
	out                  []int     // per axis
	// length is the resized length that align_corners divides by: the
	// input's times the scale (not rounded) when scales are given, as
	// ONNX's reference computes it.
	length []float64
}

// weights returns the [out, in] interpolation matrix of axis k (row-major).
func (s *resizeSpec) weights(k, in int) ([]float64, error) {
	out, scale := s.out[k], s.scales[k]
	w := make([]float64, out*in)
	clamp := func(i int) int { return min(max(i, 0), in-1) }
	for o := range out {
		x := float64(o)
		var src float64
		switch s.coord {
		case "half_pixel":
			src = (x+0.5)/scale - 0.5
		case "pytorch_half_pixel":
			if out > 1 {
				src = (x+0.5)/scale - 0.5
			}
		case "align_corners":
			if l := s.length[k]; l > 1 {
				src = x * float64(in-1) / (l - 1)
			}
		case "asymmetric":
			src = x / scale
		case "tf_half_pixel_for_nn":
			src = (x + 0.5) / scale
		case "half_pixel_symmetric":
			adj := float64(out) / (scale * float64(in))
			src = float64(in)/2*(1-adj) + (x+0.5)/scale - 0.5
		default:
			return nil, fmt.Errorf("coordinate_transformation_mode %q is not supported", ir.Excerpt(s.coord))
		}
		row := w[o*in : (o+1)*in]
		switch s.mode {
		case "nearest":
			var i float64
			switch s.nearest {
			case "round_prefer_floor":
				i = math.Ceil(src - 0.5)
			case "round_prefer_ceil":
				i = math.Floor(src + 0.5)
			case "floor":
				i = math.Floor(src)
			case "ceil":
				i = math.Ceil(src)
			default:
				return nil, fmt.Errorf("nearest_mode %q is not supported", ir.Excerpt(s.nearest))
			}
			row[clamp(int(i))] = 1
		case "linear":
			i0 := math.Floor(src)
			r := src - i0
			row[clamp(int(i0))] += 1 - r
			row[clamp(int(i0)+1)] += r
		case "cubic":
			i0 := math.Floor(src)
			r := src - i0
			a := s.cubicA
			c := [4]float64{
				((a*(r+1)-5*a)*(r+1)+8*a)*(r+1) - 4*a,
				((a+2)*r-(a+3))*r*r + 1,
				((a+2)*(1-r)-(a+3))*(1-r)*(1-r) + 1,
				((a*(2-r)-5*a)*(2-r)+8*a)*(2-r) - 4*a,
			}
			sum := 0.0
			for j := range c {
				idx := int(i0) - 1 + j
				if s.exclude && (idx < 0 || idx >= in) {
					c[j] = 0
				}
				sum += c[j]
			}
			for j := range c {
				if s.exclude {
					c[j] /= sum
				}
				row[clamp(int(i0)-1+j)] += c[j]
			}
		default:
			return nil, fmt.Errorf("mode %q is not supported (nearest, linear, cubic)", ir.Excerpt(s.mode))
		}
	}
	return w, nil
}

func emitResize(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	r := len(xs)
	s := &resizeSpec{
		mode:    attrString(n, "mode", "nearest"),
		coord:   attrString(n, "coordinate_transformation_mode", "half_pixel"),
		nearest: attrString(n, "nearest_mode", "round_prefer_floor"),
		cubicA:  attrFloat(n, "cubic_coeff_a", -0.75),
		exclude: attrInt(n, "exclude_outside", 0) != 0,
	}
	if _, ok := attrInts(n, "axes"); ok {
		return nil, errors.New("the axes attribute is not supported")
	}
	if p := attrString(n, "keep_aspect_ratio_policy", "stretch"); p != "stretch" {
		return nil, fmt.Errorf("keep_aspect_ratio_policy %q is not supported (stretch)", ir.Excerpt(p))
	}
	scalesAt, sizesAt := 2, 3
	if n.GetOpType() == "Upsample" || im.opset < 11 {
		// Upsample and Resize-10: scales only; asymmetric coordinates, and
		// nearest takes the floor.
		s.coord, s.nearest, scalesAt, sizesAt = "asymmetric", "floor", 1, -1
	}
	var scales []float64
	if n.GetOpType() == "Upsample" && im.opset < 9 {
		a := attr(n, "scales")
		if a == nil {
			return nil, errors.New("scales are required")
		}
		for _, f := range a.Floats {
			scales = append(scales, float64(f))
		}
	} else if has(n, scalesAt) {
		c, err := im.constIn(n, scalesAt)
		if err != nil {
			return nil, err
		}
		scales = c.floats()
	}
	s.scales, s.out, s.length = make([]float64, r), make([]int, r), make([]float64, r)
	switch {
	case len(scales) > 0:
		if len(scales) != r {
			return nil, fmt.Errorf("expected %d scales for rank %d, found %v", r, r, scales)
		}
		for k, f := range scales {
			if !(f > 0) || f*float64(xs[k]) > ir.MaxTensorBytes {
				return nil, fmt.Errorf("scale %g is invalid", f)
			}
			s.scales[k], s.out[k], s.length[k] = f, int(math.Floor(float64(xs[k])*f)), float64(xs[k])*f
		}
	case sizesAt > 0 && has(n, sizesAt):
		c, err := im.constIn(n, sizesAt)
		if err != nil {
			return nil, err
		}
		sizes := c.ints()
		if len(sizes) != r {
			return nil, fmt.Errorf("expected %d sizes for rank %d, found %v", r, r, sizes)
		}
		for k, d := range sizes {
			if d < 1 || d > ir.MaxTensorBytes {
				return nil, fmt.Errorf("size %d is invalid", d)
			}
			s.out[k], s.scales[k], s.length[k] = int(d), float64(d)/float64(xs[k]), float64(d)
		}
	default:
		return nil, errors.New("expected constant scales or sizes")
	}
	if s.coord == "tf_crop_and_resize" {
		return nil, errors.New("coordinate_transformation_mode tf_crop_and_resize is not supported")
	}
	dt := im.g.Type(x).DType
	c := &builder{im: im}
	y := x
	for k := range r {
		if s.out[k] == xs[k] && s.scales[k] == 1 {
			continue
		}
		if s.out[k]*xs[k] > MaxFolded {
			return nil, fmt.Errorf("the interpolation matrix of axis %d has %d x %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", k, s.out[k], xs[k], MaxFolded)
		}
		w, err := s.weights(k, xs[k])
		if err != nil {
			return nil, err
		}
		if k == r-1 {
			// y @ A^T: the constant is stored as [in, out].
			t := make([]float64, len(w))
			for o := range s.out[k] {
				for i := range xs[k] {
					t[i*s.out[k]+o] = w[o*xs[k]+i]
				}
			}
			a, err := im.constOp(&tensor{dt: dt, shape: []int{xs[k], s.out[k]}, f: t})
			if err != nil {
				return nil, err
			}
			y = c.op(ir.OpMatmul, nil, y, a)
			continue
		}
		a, err := im.constOp(&tensor{dt: dt, shape: []int{s.out[k], xs[k]}, f: w})
		if err != nil {
			return nil, err
		}
		if k == r-2 {
			y = c.op(ir.OpMatmul, nil, a, y)
			continue
		}
		// Swap axis k with r-2, resize it there, swap back.
		perm := make([]int, r)
		for j := range perm {
			perm[j] = j
		}
		perm[k], perm[r-2] = r-2, k
		y = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), y)
		y = c.op(ir.OpMatmul, nil, a, y)
		y = c.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), y)
	}
	return c.result(y)
}
