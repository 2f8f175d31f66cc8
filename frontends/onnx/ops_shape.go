package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// shapeOps are the movement rows of Ops that shape arithmetic also uses:
// each folds on constants.
func shapeOps() map[string]Rule {
	return map[string]Rule{
		"Slice":  {emitSlice, "slice {axis, start, end, step} per axis; starts, ends, axes, steps attributes before opset 10, constant inputs from 10; a negative step is flip then slice; folded on constants"},
		"Expand": {emitExpand, "broadcast_to the broadcast of the input's shape with the constant shape input; folded on constants"},
		"Cast":   {emitCast, "cast {dtype=to} (f32, f64, i32, i64, bool; floats to integers truncate, NaN gives 0, out of range saturates); folded on constants by the same rules"},
		"Range":  {emitRange, "folded: start, limit, delta constants"},
		"Split":  {emitSplit, "slice {axis} per output; sizes from the split attribute before opset 13, the constant split input from 13, else equal parts (num_outputs at opset 18)"},
	}
}

// sliceSpec is one axis of a Slice.
type sliceSpec struct{ axis, start, end, step int }

// clampSlice resolves start and end of an axis of size d as Python does
// for a positive step.
func clampSlice(start, end int64, d int) (int, int) {
	norm := func(v int64) int {
		if v < 0 {
			v += int64(d)
		}
		return int(min(max(v, 0), int64(d)))
	}
	return norm(start), norm(end)
}

func emitSlice(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOfVal(v)
	var starts, ends, axes, steps []int64
	if im.opset < 10 {
		get := func(name string) []int64 {
			a, _ := attrInts(n, name)
			out := make([]int64, len(a))
			for k, x := range a {
				out[k] = int64(x)
			}
			return out
		}
		starts, ends, axes = get("starts"), get("ends"), get("axes")
	} else {
		list := func(k int) ([]int64, error) {
			if !has(n, k) {
				return nil, nil
			}
			c, err := im.constIn(n, k)
			if err != nil {
				return nil, err
			}
			return c.ints(), nil
		}
		if starts, err = list(1); err != nil {
			return nil, err
		}
		if ends, err = list(2); err != nil {
			return nil, err
		}
		if axes, err = list(3); err != nil {
			return nil, err
		}
		if steps, err = list(4); err != nil {
			return nil, err
		}
	}
	if len(ends) != len(starts) || (axes != nil && len(axes) != len(starts)) || (steps != nil && len(steps) != len(starts)) {
		return nil, errors.New("starts, ends, axes and steps differ in length")
	}
	specs := make([]sliceSpec, len(starts))
	flips := make([]bool, len(starts)) // the axis reversed first (a negative step)
	for k := range starts {
		axis := k
		if axes != nil {
			if axes[k] < -int64(len(shape)) || axes[k] >= int64(len(shape)) {
				return nil, fmt.Errorf("axis %d is out of range for rank %d", axes[k], len(shape))
			}
			axis, _ = normAxis(int(axes[k]), len(shape))
		}
		if axis >= len(shape) {
			return nil, fmt.Errorf("slice %d has no axis in rank %d", k, len(shape))
		}
		step := int64(1)
		if steps != nil {
			step = steps[k]
		}
		if step == 0 || step > ir.MaxTensorBytes || step < -ir.MaxTensorBytes {
			return nil, fmt.Errorf("step %d is not supported (a nonzero step)", step)
		}
		if step < 0 {
			// ONNX clamps start to [0, d-1] and end to [-1, d-1]; the
			// elements start, start+step, ... above end are a positive
			// slice of the axis reversed.
			d := int64(shape[axis])
			norm := func(v, lo int64) int64 {
				if v < 0 {
					v += d
				}
				return min(max(v, lo), d-1)
			}
			s, e := norm(starts[k], 0), norm(ends[k], -1)
			specs[k] = sliceSpec{axis, int(d - 1 - s), int(max(d-1-e, d-1-s)), int(-step)}
			flips[k] = true
			continue
		}
		s, e := clampSlice(starts[k], ends[k], shape[axis])
		specs[k] = sliceSpec{axis, s, e, int(step)}
	}
	if v.c != nil && !v.param {
		c := v.c
		for k, sp := range specs {
			if flips[k] {
				c = flipConst(c, sp.axis)
			}
			c = sliceConst(c, sp)
		}
		return []*val{{id: ir.NoID, c: c}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	for k, sp := range specs {
		if flips[k] {
			if x, err = im.g.Add("", ir.OpFlip, ir.MakeAttrs("axes", ir.Ints(sp.axis)), x); err != nil {
				return nil, err
			}
		}
		if x, err = im.g.Add("", ir.OpSlice, ir.MakeAttrs("axis", ir.Int(sp.axis), "start", ir.Int(sp.start), "end", ir.Int(sp.end), "step", ir.Int(sp.step)), x); err != nil {
			return nil, err
		}
	}
	return []*val{{id: x}}, nil
}

// flipConst reverses a constant along one axis.
func flipConst(c *tensor, axis int) *tensor {
	c.load()
	outer, d, inner := prod(c.shape[:axis]), c.shape[axis], prod(c.shape[axis+1:])
	out := &tensor{dt: c.dt, shape: c.shape}
	for o := range outer {
		for i := d - 1; i >= 0; i-- {
			base := (o*d + i) * inner
			if c.dt.IsFloat() {
				out.f = append(out.f, c.f[base:base+inner]...)
			} else {
				out.i = append(out.i, c.i[base:base+inner]...)
			}
		}
	}
	return out
}

// sliceConst slices a constant along one axis (start <= end already
// clamped; an empty range gives a zero-size axis).
func sliceConst(c *tensor, sp sliceSpec) *tensor {
	c.load()
	outer, d, inner := prod(c.shape[:sp.axis]), c.shape[sp.axis], prod(c.shape[sp.axis+1:])
	var idx []int
	for i := sp.start; i < sp.end; i += sp.step {
		idx = append(idx, i)
	}
	out := &tensor{dt: c.dt, shape: append([]int(nil), c.shape...)}
	out.shape[sp.axis] = len(idx)
	for o := range outer {
		for _, i := range idx {
			base := (o*d + i) * inner
			if c.dt.IsFloat() {
				out.f = append(out.f, c.f[base:base+inner]...)
			} else {
				out.i = append(out.i, c.i[base:base+inner]...)
			}
		}
	}
	return out
}

func emitExpand(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	sc, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	want := make(ir.Shape, sc.n())
	for k, d := range sc.ints() {
		if d < 0 || d > ir.MaxTensorBytes {
			return nil, fmt.Errorf("shape %v has an invalid dim %d", sc.ints(), d)
		}
		want[k] = int(d)
	}
	out, ok := ir.BroadcastShapes(ir.Shape(im.shapeOfVal(v)), want)
	if !ok {
		return nil, fmt.Errorf("shape %v does not broadcast with the input's %v", want, im.shapeOfVal(v))
	}
	if _, err := (ir.Type{DType: ir.F32, Shape: out}).BytesChecked(); err != nil {
		return nil, err
	}
	if v.c != nil && !v.param {
		if out.NumElements() > MaxFolded {
			return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", out, out.NumElements(), MaxFolded)
		}
		return []*val{{id: ir.NoID, c: broadcastConst(v.c, out)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	if ir.Shape(im.shapeOf(x)).Equal(out) {
		return []*val{{id: x}}, nil
	}
	return one(im.add(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(out...)), x))
}

// broadcastConst repeats c to shape (NumPy rules).
func broadcastConst(c *tensor, shape ir.Shape) *tensor {
	c.load()
	r := len(shape)
	in := make([]int, r)
	for k := range in {
		in[k] = 1
	}
	copy(in[r-len(c.shape):], c.shape)
	strides := ir.Shape(in).Strides()
	for k := range strides {
		if in[k] == 1 {
			strides[k] = 0
		}
	}
	return stridedConst(c, []int(shape.Clone()), strides)
}

// stridedConst returns a constant of the given shape whose element at
// index idx is c's element at sum(idx[k] * strides[k]): a broadcast (stride
// 0) or a permutation of c's axes.
func stridedConst(c *tensor, shape, strides []int) *tensor {
	c.load()
	r := len(shape)
	out := &tensor{dt: c.dt, shape: shape}
	idx := make([]int, r)
	for range prod(shape) {
		src := 0
		for k := range r {
			src += idx[k] * strides[k]
		}
		if c.dt.IsFloat() {
			out.f = append(out.f, c.f[src])
		} else {
			out.i = append(out.i, c.i[src])
		}
		for k := r - 1; k >= 0; k-- {
			idx[k]++
			if idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	return out
}

func emitCast(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	to, err := onnxDType(int32(attrInt(n, "to", 0)))
	if err != nil {
		return nil, err
	}
	if v.c != nil && !v.param {
		return []*val{{id: ir.NoID, c: castConst(v.c, to)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	return castValue(im, x, to)
}

// castConst converts a constant as kiln's cast op does (ir's cast doc:
// floats to integers truncate toward zero, NaN gives 0 and out of range
// saturates; integers wrap; nonzero is true).
func castConst(c *tensor, to ir.DType) *tensor {
	c.load()
	out := &tensor{dt: to, shape: c.shape}
	if to.IsFloat() {
		out.f = make([]float64, c.n())
		for k, x := range c.floats() {
			if to == ir.F32 {
				if c.dt == ir.I64 {
					x = float64(float32(c.i[k])) // rounded once, as the kernel
				} else {
					x = float64(float32(x))
				}
			}
			out.f[k] = x
		}
		return out
	}
	out.i = make([]int64, c.n())
	for k := range out.i {
		var x int64
		if c.dt.IsFloat() {
			f := c.f[k]
			if to == ir.Bool {
				if f != 0 {
					x = 1
				}
			} else {
				x = ir.CastFloatToInt(f, to)
			}
		} else {
			x = c.i[k]
			if to == ir.Bool && x != 0 {
				x = 1
			}
		}
		if to == ir.I32 {
			x = int64(int32(x))
		}
		out.i[k] = x
	}
	return out
}

func emitRange(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	var cs [3]*tensor
	for k := range cs {
		c, err := im.constIn(n, k)
		if err != nil {
			return nil, err
		}
		if c.n() != 1 {
			return nil, fmt.Errorf("input %d has %d elements, expected a scalar", k, c.n())
		}
		cs[k] = c
	}
	dt := cs[0].dt
	start, limit, delta := cs[0].floats()[0], cs[1].floats()[0], cs[2].floats()[0]
	if delta == 0 {
		return nil, errors.New("delta is 0")
	}
	count := math.Max(math.Ceil((limit-start)/delta), 0)
	if count > MaxFolded {
		return nil, fmt.Errorf("a range of %g elements is above onnx.MaxFolded (%d)", count, MaxFolded)
	}
	out := &tensor{dt: dt, shape: []int{int(count)}}
	for k := range int(count) {
		x := start + float64(k)*delta
		if dt.IsFloat() {
			out.f = append(out.f, x)
		} else {
			out.i = append(out.i, int64(x))
		}
	}
	return []*val{{id: ir.NoID, c: out}}, nil
}

func emitSplit(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOfVal(v)
	axis, err := normAxis(int(attrInt(n, "axis", 0)), len(shape))
	if err != nil {
		return nil, err
	}
	var sizes []int
	if im.opset < 2 && has(n, 1) {
		return nil, errors.New("Split-1's split input is not supported")
	}
	if im.opset < 13 {
		sizes, _ = attrInts(n, "split")
	} else if has(n, 1) {
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, err
		}
		for _, s := range c.ints() {
			if s < 0 || s > ir.MaxTensorBytes {
				return nil, fmt.Errorf("split size %d is invalid", s)
			}
			sizes = append(sizes, int(s))
		}
	}
	if sizes == nil {
		parts := len(n.Output)
		if im.opset >= 18 {
			parts = int(attrInt(n, "num_outputs", int64(parts)))
		}
		if parts < 1 {
			return nil, errors.New("no outputs")
		}
		// ONNX: equal parts of ceil(d/parts), the last smaller.
		chunk := (shape[axis] + parts - 1) / parts
		for left := shape[axis]; left > 0; left -= chunk {
			sizes = append(sizes, min(chunk, left))
		}
	}
	total := 0
	for _, s := range sizes {
		total += s
	}
	if total != shape[axis] {
		return nil, fmt.Errorf("split sizes %v add up to %d, not the axis's %d", sizes, total, shape[axis])
	}
	var outs []*val
	start := 0
	for _, s := range sizes {
		sp := sliceSpec{axis, start, start + s, 1}
		start += s
		if v.c != nil && !v.param {
			outs = append(outs, &val{id: ir.NoID, c: sliceConst(v.c, sp)})
			continue
		}
		x, err := im.value(v, true)
		if err != nil {
			return nil, err
		}
		o, err := im.add(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(sp.axis), "start", ir.Int(sp.start), "end", ir.Int(sp.end), "step", ir.Int(1)), x)
		if err != nil {
			return nil, err
		}
		outs = append(outs, o)
	}
	return outs, nil
}
