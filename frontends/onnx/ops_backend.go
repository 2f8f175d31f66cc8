package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// constTensor returns the import-time constant holding t's elements.
func constTensor(t safetensors.Tensor) *tensor {
	c := &tensor{dt: t.Type.DType, shape: append([]int{}, t.Type.Shape...)}
	return c.fromLE(t.Data, t.Type.Shape.NumElements())
}

// legacyBroadcast applies the broadcasting of the binary ops before opset
// 7 to their second operand b: with broadcast=1, b's shape is a contiguous
// run of a's dims starting at axis (default: the trailing ones), so b is
// reshaped to a's rank with 1s around it and NumPy broadcasting does the
// rest; with broadcast=0 the shapes must be equal.
func (im *importer) legacyBroadcast(n *onnxpb.NodeProto, a, b ir.ID) (ir.ID, error) {
	if im.opset >= 7 {
		return b, nil
	}
	as, bs := im.shapeOf(a), im.shapeOf(b)
	if attrInt(n, "broadcast", 0) == 0 {
		if !ir.Shape(as).Equal(ir.Shape(bs)) {
			return ir.NoID, fmt.Errorf("operands of shapes %v and %v without broadcast=1", as, bs)
		}
		return b, nil
	}
	axis := len(as) - len(bs)
	if a := attr(n, "axis"); a != nil {
		axis = int(a.GetI())
		if axis < 0 {
			axis += len(as)
		}
	}
	if axis < 0 || axis+len(bs) > len(as) {
		return ir.NoID, fmt.Errorf("broadcast of %v onto %v at axis %d does not fit", bs, as, axis)
	}
	shape := make([]int, 0, len(as))
	for k := range as {
		d := 1
		if k >= axis && k < axis+len(bs) {
			d = bs[k-axis]
		}
		shape = append(shape, d)
	}
	if ir.Shape(shape).Equal(ir.Shape(bs)) {
		return b, nil
	}
	return im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), b)
}

// backendOps are rows of Ops made of kiln ops that exist: reductions,
// activations and movements that ONNX's backend tests exercise.
func backendOps() map[string]Rule {
	return map[string]Rule{
		"ReduceL1":                  {reduceWith(ir.OpAbs, ir.OpSum, ir.OpInvalid), "sum of abs {axes, keepdims}; axes as ReduceMean"},
		"ReduceL2":                  {reduceWith(ir.OpSquare, ir.OpSum, ir.OpSqrt), "sqrt of the sum of squares {axes, keepdims}; axes as ReduceMean"},
		"ReduceSumSquare":           {reduceWith(ir.OpSquare, ir.OpSum, ir.OpInvalid), "sum of squares {axes, keepdims}; axes as ReduceMean"},
		"ReduceLogSum":              {reduceWith(ir.OpInvalid, ir.OpSum, ir.OpLog), "log of the sum {axes, keepdims}; axes as ReduceMean"},
		"ReduceLogSumExp":           {reduceWith(ir.OpInvalid, ir.OpLogSumExp, ir.OpInvalid), "logsumexp {axes, keepdims}; axes as ReduceMean"},
		"ReduceProd":                {reduceWith(ir.OpInvalid, ir.OpProd, ir.OpInvalid), "prod {axes, keepdims}; axes as ReduceMean"},
		"ArgMax":                    {emitArg(ir.OpArgmax), "argmax {axes=[axis], keepdims} (default 0 and 1); select_last_index=1 through flip"},
		"ArgMin":                    {emitArg(ir.OpArgmin), "argmin {axes=[axis], keepdims}; as ArgMax"},
		"Size":                      {emitSize, "folded: the element count as an i64 scalar"},
		"LayerNormalization":        {emitLayerNorm, "layer_norm {axes from axis on, eps=epsilon} with Scale and B as weight and bias (other shapes: multiplied and added after); the Mean and InvStdDev outputs as mean and rsqrt(var + eps)"},
		"Xor":                       {binaryOp(ir.OpNotEqual), "not_equal (on bools)"},
		"Mod":                       {emitMod, "mod (fmod=0, the sign of the divisor); fmod=1: the sign of the dividend, mod corrected by where"},
		"Hardmax":                   {emitHardmax, "one_hot of argmax along axis, moved back into place; axis semantics as Softmax"},
		"Sum":                       {variadic(ir.OpAdd), "add, folded left over the inputs"},
		"Mean":                      {emitMean, "add folded left over the inputs, times 1/count"},
		"Tile":                      {emitTile, "reshape, broadcast_to and reshape; repeats a constant input"},
		"IsNaN":                     {emitIsNaN, "not_equal x, x"},
		"IsInf":                     {emitIsInf, "equal to +inf and/or -inf (detect_positive, detect_negative)"},
		"PRelu":                     {emitPRelu, "prelu for a slope [C] (per channel) or [1]; else where(x < 0, slope*x, x) with NumPy broadcasting"},
		"ThresholdedRelu":           {emitFn(thresholdedRelu), "where(x > alpha, x, 0) (alpha default 1)"},
		"Selu":                      {emitFn(selu), "gamma * elu {alpha} (defaults as ONNX)"},
		"Celu":                      {emitFn(celu), "alpha * elu(x / alpha) (alpha default 1)"},
		"HardSigmoid":               {emitFn(hardSigmoid), "clip(alpha*x + beta, 0, 1) (defaults 0.2, 0.5)"},
		"HardSwish":                 {emitFn(hardSwish), "x * clip(x/6 + 0.5, 0, 1)"},
		"Softsign":                  {emitFn(softsign), "x / (1 + abs(x))"},
		"Shrink":                    {emitFn(shrink), "where(x < -lambd, x + bias, where(x > lambd, x - bias, 0))"},
		"Sinh":                      {emitFn(sinh), "(exp(x) - exp(-x)) / 2"},
		"Cosh":                      {emitFn(cosh), "(exp(x) + exp(-x)) / 2"},
		"Tan":                       {emitFn(tan), "sin / cos"},
		"Asinh":                     {emitFn(asinh), "sign(x) * log(abs(x) + sqrt(x^2 + 1))"},
		"Acosh":                     {emitFn(acosh), "log(x + sqrt(x^2 - 1))"},
		"Atanh":                     {emitFn(atanh), "(log1p(x) - log1p(-x)) / 2"},
		"GlobalMaxPool":             {globalPool(ir.OpMax), "max over the spatial axes, keepdims"},
		"DepthToSpace":              {emitDepthToSpace, "reshape, transpose, reshape (mode DCR or CRD)"},
		"SpaceToDepth":              {emitSpaceToDepth, "reshape, transpose, reshape"},
		"EyeLike":                   {emitEyeLike, "folded: ones on diagonal k of the input's (static) shape, dtype from the attribute or the input"},
		"Resize":                    {emitResize, "per resized axis, index_select of the taps ONNX's reference takes (nearest: one; linear: two; cubic: four, cubic_coeff_a, exclude_outside; clamped at the edges) times their weights, summed; coordinate_transformation_mode half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn or tf_crop_and_resize (extrapolation_value); nearest_mode round_prefer_floor, round_prefer_ceil, floor or ceil; scales, sizes and roi constant inputs; before opset 11, nearest with whole scales"},
		"Upsample":                  {emitResize, "as Resize before opset 11: nearest with whole scales (the scales attribute or input)"},
		"HannWindow":                {windowOp(0.5, 0.5), "folded: 0.5 - 0.5 cos(2 pi n / N), N = size (periodic) or size - 1; size a constant input"},
		"HammingWindow":             {windowOp(25.0/46, 21.0/46), "folded: 25/46 - 21/46 cos(2 pi n / N); N as HannWindow"},
		"BlackmanWindow":            {windowOp(0.42, 0.5, 0.08), "folded: 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N); N as HannWindow"},
		"LRN":                       {emitLRN, "x / (bias + alpha/size * s)^beta, s the sum of squares over the size channels around each (avg_pool2d of the zero-padded squares over [C, H*W])"},
		"Compress":                  {emitCompress, "index_select at the positions where the constant condition is true, along axis (absent: of the flattened input)"},
		"ReverseSequence":           {emitReverseSequence, "index_select over the flattened time and batch axes (0 and 1 in either order) at positions from the constant sequence_lens"},
		"GatherND":                  {emitGatherND, "index_select on the data flattened over the indexed dims, at the positions the indices (negative ones wrapped) give, batch_dims included"},
		"ScatterElements":           {emitScatterElements, "scatter_add (reduction add), or for none: where the scatter_add of ones is nonzero, the scatter_add of the updates into zeros, else the data; negative indices wrapped"},
		"Scatter":                   {emitScatterElements, "as ScatterElements"},
		"ScatterND":                 {emitScatterND, "index_add on the data flattened over the indexed dims (reduction add), or for none as ScatterElements"},
		"OneHot":                    {emitOneHot, "where(mod(indices, depth) equals the class along the new axis, on, off), as ONNX's reference; indices of any numeric dtype, depth a constant input"},
		"DFT":                       {emitDFT, "matmuls with constant cos and sin matrices along axis (real input [..., 1] or complex [..., 2]; inverse, onesided); dft_length only the axis's size"},
		"MeanVarianceNormalization": {emitMVN, "(x - mean) / sqrt(var) over axes (default [0,2,3]), biased variance"},
	}
}

// builder adds kiln ops and keeps the first error, so that composites read
// as formulas.
type builder struct {
	im  *importer
	err error
}

func (b *builder) op(op ir.Op, attrs ir.Attrs, args ...ir.ID) ir.ID {
	if b.err != nil {
		return ir.NoID
	}
	id, err := b.im.g.Add("", op, attrs, args...)
	b.err = err
	return id
}

// scalar is a constant of dtype dt holding v.
func (b *builder) scalar(dt ir.DType, v float64) ir.ID {
	if b.err != nil {
		return ir.NoID
	}
	c := &tensor{dt: dt, shape: []int{}}
	if dt.IsFloat() {
		c.f = []float64{v}
	} else {
		c.i = []int64{int64(v)}
	}
	id, err := b.im.constOp(c)
	b.err = err
	return id
}

func (b *builder) dtype(id ir.ID) ir.DType {
	if b.err != nil {
		return ir.F32
	}
	return b.im.g.Type(id).DType
}

func (b *builder) result(id ir.ID) ([]*val, error) {
	if b.err != nil {
		return nil, b.err
	}
	return []*val{{id: id}}, nil
}

// emitFn makes the rule of a unary composite f of input 0.
func emitFn(f func(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		b := &builder{im: im}
		return b.result(f(b, n, x))
	}
}

func thresholdedRelu(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	dt := b.dtype(x)
	return b.op(ir.OpWhere, nil, b.op(ir.OpGreater, nil, x, b.scalar(dt, attrFloat(n, "alpha", 1))), x, b.scalar(dt, 0))
}

func selu(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	e := b.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(attrFloat(n, "alpha", 1.67326319217681884765625))), x)
	return b.op(ir.OpMul, nil, e, b.scalar(b.dtype(x), attrFloat(n, "gamma", 1.05070102214813232421875)))
}

func celu(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	dt := b.dtype(x)
	alpha := attrFloat(n, "alpha", 1)
	e := b.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(1)), b.op(ir.OpDiv, nil, x, b.scalar(dt, alpha)))
	return b.op(ir.OpMul, nil, e, b.scalar(dt, alpha))
}

func hardSigmoid(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	dt := b.dtype(x)
	y := b.op(ir.OpAdd, nil, b.op(ir.OpMul, nil, x, b.scalar(dt, attrFloat(n, "alpha", 0.2))), b.scalar(dt, attrFloat(n, "beta", 0.5)))
	return b.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(1)), y)
}

func hardSwish(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	dt := b.dtype(x)
	y := b.op(ir.OpAdd, nil, b.op(ir.OpMul, nil, x, b.scalar(dt, 1.0/6)), b.scalar(dt, 0.5))
	return b.op(ir.OpMul, nil, x, b.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(0), "max", ir.Float(1)), y))
}

func softsign(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	return b.op(ir.OpDiv, nil, x, b.op(ir.OpAdd, nil, b.op(ir.OpAbs, nil, x), b.scalar(b.dtype(x), 1)))
}

func shrink(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	dt := b.dtype(x)
	l, bias := attrFloat(n, "lambd", 0.5), attrFloat(n, "bias", 0)
	hi := b.op(ir.OpWhere, nil, b.op(ir.OpGreater, nil, x, b.scalar(dt, l)), b.op(ir.OpSub, nil, x, b.scalar(dt, bias)), b.scalar(dt, 0))
	return b.op(ir.OpWhere, nil, b.op(ir.OpLess, nil, x, b.scalar(dt, -l)), b.op(ir.OpAdd, nil, x, b.scalar(dt, bias)), hi)
}

func sinh(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	d := b.op(ir.OpSub, nil, b.op(ir.OpExp, nil, x), b.op(ir.OpExp, nil, b.op(ir.OpNeg, nil, x)))
	return b.op(ir.OpMul, nil, d, b.scalar(b.dtype(x), 0.5))
}

func cosh(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	d := b.op(ir.OpAdd, nil, b.op(ir.OpExp, nil, x), b.op(ir.OpExp, nil, b.op(ir.OpNeg, nil, x)))
	return b.op(ir.OpMul, nil, d, b.scalar(b.dtype(x), 0.5))
}

func tan(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	return b.op(ir.OpDiv, nil, b.op(ir.OpSin, nil, x), b.op(ir.OpCos, nil, x))
}

func asinh(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	a := b.op(ir.OpAbs, nil, x)
	r := b.op(ir.OpSqrt, nil, b.op(ir.OpAdd, nil, b.op(ir.OpSquare, nil, x), b.scalar(b.dtype(x), 1)))
	return b.op(ir.OpMul, nil, b.op(ir.OpSign, nil, x), b.op(ir.OpLog, nil, b.op(ir.OpAdd, nil, a, r)))
}

func acosh(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	r := b.op(ir.OpSqrt, nil, b.op(ir.OpSub, nil, b.op(ir.OpSquare, nil, x), b.scalar(b.dtype(x), 1)))
	return b.op(ir.OpLog, nil, b.op(ir.OpAdd, nil, x, r))
}

func atanh(b *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	d := b.op(ir.OpSub, nil, b.op(ir.OpLog1p, nil, x), b.op(ir.OpLog1p, nil, b.op(ir.OpNeg, nil, x)))
	return b.op(ir.OpMul, nil, d, b.scalar(b.dtype(x), 0.5))
}

// reduceAxes returns the axes of a ReduceX node (an attribute before opset
// inputFrom, the optional constant input 1 from it), normalized for rank
// r; none means every axis unless noop_with_empty_axes is set (noop).
func (im *importer) reduceAxes(n *onnxpb.NodeProto, r, inputFrom int) (axes []int, noop bool, err error) {
	if im.opset < inputFrom {
		axes, _ = attrInts(n, "axes")
	} else if has(n, 1) {
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, false, err
		}
		for _, a := range c.ints() {
			axes = append(axes, int(a))
		}
	}
	if len(axes) == 0 {
		if attrInt(n, "noop_with_empty_axes", 0) != 0 {
			return nil, true, nil
		}
		for k := range r {
			axes = append(axes, k)
		}
	}
	for k, a := range axes {
		if axes[k], err = normAxis(a, r); err != nil {
			return nil, false, err
		}
	}
	return axes, false, nil
}

// reduceWith handles the ReduceX ops made of a reduction red with an
// elementwise pre (before) and post (after) step; ir.OpInvalid is none.
// Their axes became an input at opset 18.
func reduceWith(pre, red, post ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		axes, noop, err := im.reduceAxes(n, len(im.shapeOf(x)), 18)
		if err != nil {
			return nil, err
		}
		b := &builder{im: im}
		if pre != ir.OpInvalid {
			x = b.op(pre, nil, x)
		}
		if noop {
			return b.result(x)
		}
		y := b.op(red, ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(attrInt(n, "keepdims", 1) != 0)), x)
		if post != ir.OpInvalid {
			y = b.op(post, nil, y)
		}
		return b.result(y)
	}
}

func emitArg(op ir.Op) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		x, err := im.id(n, 0)
		if err != nil {
			return nil, err
		}
		shape := im.shapeOf(x)
		axis, err := normAxis(int(attrInt(n, "axis", 0)), len(shape))
		if err != nil {
			return nil, err
		}
		b := &builder{im: im}
		last := attrInt(n, "select_last_index", 0) != 0
		if last {
			x = b.op(ir.OpFlip, ir.MakeAttrs("axes", ir.Ints(axis)), x)
		}
		y := b.op(op, ir.MakeAttrs("axes", ir.Ints(axis), "keepdims", ir.BoolAttr(attrInt(n, "keepdims", 1) != 0)), x)
		if last {
			y = b.op(ir.OpSub, nil, b.scalar(ir.I64, float64(shape[axis]-1)), y)
		}
		return b.result(y)
	}
}

func emitSize(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	return []*val{{id: ir.NoID, c: &tensor{dt: ir.I64, shape: []int{}, i: []int64{int64(prod(im.shapeOfVal(v)))}}}}, nil
}

func emitLayerNorm(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOf(x)
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(shape))
	if err != nil {
		return nil, err
	}
	axes := make([]int, 0, len(shape)-axis)
	for k := axis; k < len(shape); k++ {
		axes = append(axes, k)
	}
	eps := attrFloat(n, "epsilon", 1e-5)
	w, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	var bias ir.ID = ir.NoID
	if has(n, 2) {
		if bias, err = im.id(n, 2); err != nil {
			return nil, err
		}
	}
	b := &builder{im: im}
	attrs := ir.MakeAttrs("axes", ir.Ints(axes...), "eps", ir.Float(eps))
	norm := ir.Shape(shape[axis:])
	var y ir.ID
	if ir.Shape(im.shapeOf(w)).Equal(norm) && (bias == ir.NoID || ir.Shape(im.shapeOf(bias)).Equal(norm)) {
		args := []ir.ID{x, w}
		if bias != ir.NoID {
			args = append(args, bias)
		}
		y = b.op(ir.OpLayerNorm, attrs, args...)
	} else {
		y = b.op(ir.OpMul, nil, b.op(ir.OpLayerNorm, attrs, x), w)
		if bias != ir.NoID {
			y = b.op(ir.OpAdd, nil, y, bias)
		}
	}
	outs := []*val{{id: y}}
	if len(n.Output) > 1 {
		keep := ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true))
		mean := b.op(ir.OpMean, keep, x)
		vr := b.op(ir.OpVar, keep.With("correction", ir.Float(0)), x)
		inv := b.op(ir.OpRsqrt, nil, b.op(ir.OpAdd, nil, vr, b.scalar(b.dtype(x), eps)))
		outs = append(outs, &val{id: mean}, &val{id: inv})
	}
	if b.err != nil {
		return nil, b.err
	}
	return outs, nil
}

func emitMod(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	a, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	c, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	r := b.op(ir.OpMod, nil, a, c)
	if attrInt(n, "fmod", 0) == 0 {
		return b.result(r)
	}
	// C's fmod has the dividend's sign: where Python's remainder is not 0
	// and the signs of a and c differ, it is r - c.
	dt := b.dtype(a)
	zero := b.scalar(dt, 0)
	differ := b.op(ir.OpNotEqual, nil, b.op(ir.OpLess, nil, a, zero), b.op(ir.OpLess, nil, c, zero))
	fix := b.op(ir.OpLogicalAnd, nil, b.op(ir.OpNotEqual, nil, r, zero), differ)
	return b.result(b.op(ir.OpWhere, nil, fix, b.op(ir.OpSub, nil, r, c), r))
}

func emitHardmax(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOf(x)
	b := &builder{im: im}
	dt := b.dtype(x)
	hard := func(x ir.ID, axis, r, c int) ir.ID {
		y := b.op(ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(c), "dtype", ir.String(dt.String())),
			b.op(ir.OpArgmax, ir.MakeAttrs("axes", ir.Ints(axis)), x))
		if axis == r-1 {
			return y
		}
		perm := make([]int, 0, r)
		for k := range r - 1 {
			if k == axis {
				perm = append(perm, r-1)
			}
			perm = append(perm, k)
		}
		return b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), y)
	}
	if im.opset >= 13 {
		axis, err := normAxis(int(attrInt(n, "axis", -1)), len(shape))
		if err != nil {
			return nil, err
		}
		return b.result(hard(x, axis, len(shape), shape[axis]))
	}
	axis, err := normAxis(int(attrInt(n, "axis", 1)), len(shape))
	if err != nil {
		return nil, err
	}
	flat := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(shape[:axis]), prod(shape[axis:]))), x)
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), hard(flat, 1, 2, prod(shape[axis:]))))
}

func emitMean(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	s, err := variadic(ir.OpAdd)(im, n)
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	if len(n.Input) == 1 {
		return s, nil
	}
	return b.result(b.op(ir.OpDiv, nil, s[0].id, b.scalar(b.dtype(s[0].id), float64(len(n.Input)))))
}

func emitTile(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	if im.opset < 6 {
		return nil, errors.New("Tile-1 (tiles and axis inputs) is not supported")
	}
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	rc, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	shape := im.shapeOf(x)
	reps := rc.ints()
	if len(reps) != len(shape) {
		return nil, fmt.Errorf("expected %d repeats for rank %d, found %d", len(shape), len(shape), len(reps))
	}
	var split, wide, out []int
	for k, d := range shape {
		r := reps[k]
		if r < 0 || r > ir.MaxTensorBytes {
			return nil, fmt.Errorf("repeats %v: %d is not a count", reps, r)
		}
		split = append(split, 1, d)
		wide = append(wide, int(r), d)
		out = append(out, int(r)*d)
	}
	if _, err := (ir.Type{DType: ir.F32, Shape: out}).BytesChecked(); err != nil {
		return nil, err
	}
	b := &builder{im: im}
	y := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(split...)), x)
	y = b.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(wide...)), y)
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), y))
}

func emitIsNaN(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	return one(im.add(ir.OpNotEqual, nil, x, x))
}

func emitIsInf(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	dt := b.dtype(x)
	pos, neg := attrInt(n, "detect_positive", 1) != 0, attrInt(n, "detect_negative", 1) != 0
	var y ir.ID = ir.NoID
	for _, s := range []struct {
		on   bool
		sign float64
	}{{pos, 1}, {neg, -1}} {
		if !s.on {
			continue
		}
		e := b.op(ir.OpEqual, nil, x, b.scalar(dt, math.Inf(int(s.sign))))
		if y == ir.NoID {
			y = e
		} else {
			y = b.op(ir.OpLogicalOr, nil, y, e)
		}
	}
	if y == ir.NoID {
		y = b.op(ir.OpNotEqual, nil, x, x)
		y = b.op(ir.OpLogicalAnd, nil, y, b.op(ir.OpLogicalNot, nil, y)) // all false
	}
	return b.result(y)
}

func emitPRelu(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	s, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	xs, ss := im.shapeOf(x), im.shapeOf(s)
	if len(ss) == 1 && (ss[0] == 1 || (len(xs) >= 2 && ss[0] == xs[1])) {
		return one(im.add(ir.OpPrelu, nil, x, s))
	}
	if len(xs) >= 2 && len(ss) >= 1 && ss[0] == xs[1] && prod(ss) == xs[1] {
		// A slope [C,1,...] per channel, as PyTorch exports at opset 6.
		b := &builder{im: im}
		return b.result(b.op(ir.OpPrelu, nil, x, b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(xs[1])), s)))
	}
	b := &builder{im: im}
	dt := b.dtype(x)
	return b.result(b.op(ir.OpWhere, nil, b.op(ir.OpLess, nil, x, b.scalar(dt, 0)), b.op(ir.OpMul, nil, x, s), x))
}

// blockArgs returns the input of DepthToSpace or SpaceToDepth, its shape
// [N,C,H,W] and blocksize.
func blockArgs(im *importer, n *onnxpb.NodeProto) (ir.ID, []int, int, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return ir.NoID, nil, 0, err
	}
	s := im.shapeOf(x)
	if len(s) != 4 {
		return ir.NoID, nil, 0, fmt.Errorf("expected an input of rank 4, found %v", s)
	}
	bs := int(attrInt(n, "blocksize", 0))
	if bs <= 0 || bs > ir.MaxTensorBytes {
		return ir.NoID, nil, 0, fmt.Errorf("blocksize %d is not positive", bs)
	}
	return x, s, bs, nil
}

func emitDepthToSpace(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, s, bs, err := blockArgs(im, n)
	if err != nil {
		return nil, err
	}
	N, C, H, W := s[0], s[1], s[2], s[3]
	if C%(bs*bs) != 0 {
		return nil, fmt.Errorf("channels %d are not a multiple of blocksize^2 = %d", C, bs*bs)
	}
	b := &builder{im: im}
	var y ir.ID
	switch m := attrString(n, "mode", "DCR"); m {
	case "DCR":
		y = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(N, bs, bs, C/(bs*bs), H, W)), x)
		y = b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 3, 4, 1, 5, 2)), y)
	case "CRD":
		y = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(N, C/(bs*bs), bs, bs, H, W)), x)
		y = b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 1, 4, 2, 5, 3)), y)
	default:
		return nil, fmt.Errorf("mode %q is not supported (DCR or CRD)", ir.Excerpt(m))
	}
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(N, C/(bs*bs), H*bs, W*bs)), y))
}

func emitSpaceToDepth(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, s, bs, err := blockArgs(im, n)
	if err != nil {
		return nil, err
	}
	N, C, H, W := s[0], s[1], s[2], s[3]
	if H%bs != 0 || W%bs != 0 {
		return nil, fmt.Errorf("height %d and width %d are not multiples of blocksize %d", H, W, bs)
	}
	b := &builder{im: im}
	y := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(N, C, H/bs, bs, W/bs, bs)), x)
	y = b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(0, 3, 5, 1, 2, 4)), y)
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(N, C*bs*bs, H/bs, W/bs)), y))
}

func emitEyeLike(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	s := im.shapeOfVal(v)
	if len(s) != 2 {
		return nil, fmt.Errorf("expected an input of rank 2, found %v", s)
	}
	var dt ir.DType
	if v.id != ir.NoID {
		dt = im.g.Type(v.id).DType
	} else {
		dt = v.c.dt
	}
	if a := attr(n, "dtype"); a != nil {
		if dt, err = onnxDType(int32(a.GetI())); err != nil {
			return nil, err
		}
	}
	if prod(s) > MaxFolded {
		return nil, fmt.Errorf("a constant of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", s, prod(s), MaxFolded)
	}
	k := int(attrInt(n, "k", 0))
	c := &tensor{dt: dt, shape: append([]int(nil), s...)}
	if dt.IsFloat() {
		c.f = make([]float64, prod(s))
	} else {
		c.i = make([]int64, prod(s))
	}
	for r := range s[0] {
		if j := r + k; j >= 0 && j < s[1] {
			if dt.IsFloat() {
				c.f[r*s[1]+j] = 1
			} else {
				c.i[r*s[1]+j] = 1
			}
		}
	}
	return []*val{{id: ir.NoID, c: c}}, nil
}

func emitMVN(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	r := len(im.shapeOf(x))
	axes, ok := attrInts(n, "axes")
	if !ok {
		axes = []int{0, 2, 3}
	}
	for k, a := range axes {
		if axes[k], err = normAxis(a, r); err != nil {
			return nil, err
		}
	}
	b := &builder{im: im}
	keep := ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true))
	d := b.op(ir.OpSub, nil, x, b.op(ir.OpMean, keep, x))
	sd := b.op(ir.OpSqrt, nil, b.op(ir.OpVar, keep.With("correction", ir.Float(0)), x))
	return b.result(b.op(ir.OpDiv, nil, d, sd))
}

// lossRows returns the scores of a loss node as rows [M,C] and its labels
// as [M]: for scores [N,C,d1,...] the class axis is moved last and the
// rest flattened, as the labels [N,d1,...] are. dims is [N,d1,...].
func lossRows(b *builder, x, labels ir.ID) (rows, flat ir.ID, dims []int, err error) {
	xs, ls := b.im.shapeOf(x), b.im.shapeOf(labels)
	if len(xs) < 2 {
		return ir.NoID, ir.NoID, nil, fmt.Errorf("expected scores of rank >= 2 [N,C,...], found %v", xs)
	}
	dims = append([]int{xs[0]}, xs[2:]...)
	if !ir.Shape(ls).Equal(ir.Shape(dims)) {
		return ir.NoID, ir.NoID, nil, fmt.Errorf("labels of shape %v for scores %v; expected %v", ls, xs, dims)
	}
	rows = x
	if len(xs) > 2 {
		perm := []int{0}
		for k := 2; k < len(xs); k++ {
			perm = append(perm, k)
		}
		perm = append(perm, 1)
		rows = b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), x)
		rows = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(dims), xs[1])), rows)
		labels = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(dims))), labels)
	}
	return rows, labels, dims, b.err
}

// nllLoss is ONNX's NegativeLogLikelihoodLoss of log-probabilities lp
// [N,C,d1,...] and labels [N,d1,...] with the node's weight input (k), its
// ignore_index and reduction. Without weights and an ignore_index that is
// a class it is nll_loss; else the per-element losses are weighted by weight[label] (0
// where the label is ignore_index) and the mean divides by the weights' sum.
func nllLoss(im *importer, n *onnxpb.NodeProto, lp, labels ir.ID, k int) (ir.ID, error) {
	red := attrString(n, "reduction", "mean")
	switch red {
	case "mean", "sum", "none":
	default:
		return ir.NoID, fmt.Errorf("unknown reduction %q", ir.Excerpt(red))
	}
	b := &builder{im: im}
	rows, flat, dims, err := lossRows(b, lp, labels)
	if err != nil {
		return ir.NoID, err
	}
	ii := attr(n, "ignore_index")
	if c := b.im.shapeOf(lp)[1]; ii != nil && (ii.GetI() < 0 || ii.GetI() >= int64(c)) && !has(n, k) {
		// PyTorch exports ignore_index -100: outside the classes, it
		// changes nothing unless a label is -100, which nll_loss refuses.
		ii = nil
	}
	if !has(n, k) && ii == nil {
		y := b.op(ir.OpNLLLoss, ir.MakeAttrs("reduction", ir.String(red)), rows, flat)
		if red == "none" {
			y = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(dims...)), y)
		}
		return y, b.err
	}
	dt := b.dtype(lp)
	lt := b.dtype(flat)
	var keep ir.ID = ir.NoID
	if ii != nil {
		keep = b.op(ir.OpNotEqual, nil, flat, b.scalar(lt, float64(ii.GetI())))
		flat = b.op(ir.OpWhere, nil, keep, flat, b.scalar(lt, 0))
	}
	l := b.op(ir.OpNLLLoss, ir.MakeAttrs("reduction", ir.String("none")), rows, flat)
	var w ir.ID
	if has(n, k) {
		wt, err := im.id(n, k)
		if err != nil {
			return ir.NoID, err
		}
		w = b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(0)), wt, flat)
		if keep != ir.NoID {
			w = b.op(ir.OpWhere, nil, keep, w, b.scalar(dt, 0))
		}
	} else {
		w = b.op(ir.OpWhere, nil, keep, b.scalar(dt, 1), b.scalar(dt, 0))
	}
	l = b.op(ir.OpMul, nil, l, w)
	switch red {
	case "none":
		l = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(dims...)), l)
	case "sum":
		l = b.op(ir.OpSum, nil, l)
	default:
		l = b.op(ir.OpDiv, nil, b.op(ir.OpSum, nil, l), b.op(ir.OpSum, nil, w))
	}
	return l, b.err
}

func emitNLLLoss(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	labels, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	y, err := nllLoss(im, n, x, labels, 2)
	if err != nil {
		return nil, err
	}
	return []*val{{id: y}}, nil
}

func emitSoftmaxCE(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	labels, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	if ii := attr(n, "ignore_index"); len(xs) == 2 && !has(n, 2) && (ii == nil || ii.GetI() < 0 || ii.GetI() >= int64(xs[1])) && (len(n.Output) < 2 || n.Output[1] == "") {
		// The common case: one fused op, which trains fastest (an
		// ignore_index outside the classes as in nllLoss).
		red := attrString(n, "reduction", "mean")
		if red != "mean" && red != "sum" && red != "none" {
			return nil, fmt.Errorf("unknown reduction %q", ir.Excerpt(red))
		}
		return one(im.add(ir.OpSoftmaxCrossEntropy, ir.MakeAttrs("reduction", ir.String(red)), x, labels))
	}
	if len(xs) < 2 {
		return nil, fmt.Errorf("expected scores of rank >= 2 [N,C,...], found %v", xs)
	}
	lp, err := im.g.Add("", ir.OpLogSoftmax, ir.MakeAttrs("axis", ir.Int(1)), x)
	if err != nil {
		return nil, err
	}
	y, err := nllLoss(im, n, lp, labels, 2)
	if err != nil {
		return nil, err
	}
	return []*val{{id: y}, {id: lp}}, nil
}

// keepAll is Dropout's mask where nothing is dropped: a bool constant of
// shape, all true.
func keepAll(shape []int) (*val, error) {
	if k := prod(shape); k > MaxFolded {
		return nil, fmt.Errorf("a mask of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", shape, k, MaxFolded)
	}
	c := &tensor{dt: ir.Bool, shape: append([]int{}, shape...), i: make([]int64, prod(shape))}
	for k := range c.i {
		c.i[k] = 1
	}
	return &val{id: ir.NoID, c: c}, nil
}

func emitNeg(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	if v.c != nil && !v.param && !v.c.dt.IsFloat() {
		c, err := foldBinary(ir.OpSub, &tensor{dt: v.c.dt, shape: []int{}, i: []int64{0}}, v.c)
		if err != nil {
			return nil, err
		}
		return []*val{{id: ir.NoID, c: c}}, nil
	}
	return unary(ir.OpNeg)(im, n)
}

// windowOp folds HannWindow, HammingWindow and BlackmanWindow: the cosine
// sum a[0] - a[1] cos(2 pi n / N) + a[2] cos(4 pi n / N) over n in
// [0, size), N = size when periodic (the default), else size - 1.
func windowOp(a ...float64) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		c, err := im.constIn(n, 0)
		if err != nil {
			return nil, err
		}
		if c.n() != 1 {
			return nil, fmt.Errorf("size has %d elements, expected 1", c.n())
		}
		size := c.ints()[0]
		if size < 0 || size > MaxFolded {
			return nil, fmt.Errorf("size %d is not in [0, %d] (onnx.MaxFolded)", size, MaxFolded)
		}
		dt, err := onnxDType(int32(attrInt(n, "output_datatype", int64(onnxpb.TensorProto_FLOAT))))
		if err != nil {
			return nil, err
		}
		den := float64(size)
		if attrInt(n, "periodic", 1) == 0 {
			den = float64(size - 1)
		}
		out := &tensor{dt: dt, shape: []int{int(size)}}
		for k := range int(size) {
			v := a[0]
			for j := 1; j < len(a); j++ {
				sign := -1.0
				if j%2 == 0 {
					sign = 1
				}
				v += sign * a[j] * math.Cos(2*math.Pi*float64(j*k)/den)
			}
			if dt.IsFloat() {
				out.f = append(out.f, v)
			} else {
				out.i = append(out.i, int64(v))
			}
		}
		return []*val{{id: ir.NoID, c: out}}, nil
	}
}

// emitLRN: x / (bias + alpha/size * s)^beta with s the sum of squares over
// the size channels around each one (floor((size-1)/2) before, the rest
// after): an average pool of the zero-padded squares over [C, H*W].
func emitLRN(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	s := im.shapeOf(x)
	if len(s) < 3 {
		return nil, fmt.Errorf("expected an input of rank >= 3 [N,C,...], found %v", s)
	}
	size := int(attrInt(n, "size", 0))
	if size < 1 || size > ir.MaxTensorBytes {
		return nil, fmt.Errorf("size %d is not positive", size)
	}
	alpha, beta, bias := attrFloat(n, "alpha", 1e-4), attrFloat(n, "beta", 0.75), attrFloat(n, "bias", 1)
	b := &builder{im: im}
	dt := b.dtype(x)
	rest := prod(s[2:])
	sq := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s[0], 1, s[1], rest)), b.op(ir.OpSquare, nil, x))
	lo := (size - 1) / 2
	sq = b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(0, 0, lo, size-1-lo), "value", ir.Float(0)), sq)
	sum := b.op(ir.OpAvgPool2d, ir.MakeAttrs("kernel", ir.Ints(size, 1), "stride", ir.Ints(1, 1), "padding", ir.Ints(0, 0)), sq)
	sum = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s...)), sum)
	// avg_pool2d gave sum/size: alpha/size * sum is alpha * that.
	d := b.op(ir.OpAdd, nil, b.op(ir.OpMul, nil, sum, b.scalar(dt, alpha)), b.scalar(dt, bias))
	return b.result(b.op(ir.OpDiv, nil, x, b.op(ir.OpPow, ir.MakeAttrs("exponent", ir.Float(beta)), d)))
}

// emitCompress selects the slices along axis (or of the flattened input)
// where the constant condition is true: index_select at their positions.
func emitCompress(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	c, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	s := im.shapeOf(x)
	b := &builder{im: im}
	axis := 0
	if a := attr(n, "axis"); a != nil {
		if axis, err = normAxis(int(a.GetI()), len(s)); err != nil {
			return nil, err
		}
	} else {
		x = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(s))), x)
		s = []int{prod(s)}
	}
	cond := c.ints()
	if len(cond) > s[axis] {
		return nil, fmt.Errorf("the condition has %d elements, more than the axis's %d", len(cond), s[axis])
	}
	var keep []int64
	for k, v := range cond {
		if v != 0 {
			keep = append(keep, int64(k))
		}
	}
	ic := b.constant(&tensor{dt: ir.I64, shape: []int{len(keep)}, i: keep})
	return b.result(b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(axis)), x, ic))
}

// emitReverseSequence reverses the first sequence_lens[b] steps of each
// batch entry b: an index_select over the time and batch axes flattened,
// at positions computed from the constant lengths.
func emitReverseSequence(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	c, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	s := im.shapeOf(x)
	ta, ba := int(attrInt(n, "time_axis", 0)), int(attrInt(n, "batch_axis", 1))
	if len(s) < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)) {
		return nil, fmt.Errorf("time_axis %d and batch_axis %d of a rank-%d input: expected 0 and 1 in either order", ta, ba, len(s))
	}
	lens := c.ints()
	T, B := s[ta], s[ba]
	if len(lens) != B {
		return nil, fmt.Errorf("sequence_lens has %d entries for a batch of %d", len(lens), B)
	}
	idx := make([]int64, T*B)
	for t := range T {
		for bi := range B {
			l := int(lens[bi])
			if l < 0 || l > T {
				return nil, fmt.Errorf("sequence length %d is outside [0, %d]", l, T)
			}
			src := t
			if t < l {
				src = l - 1 - t
			}
			pos := func(t int) int64 {
				if ta == 0 {
					return int64(t*B + bi)
				}
				return int64(bi*T + t)
			}
			idx[pos(t)] = pos(src)
		}
	}
	b := &builder{im: im}
	flat := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(append([]int{T * B}, s[2:]...)...)), x)
	y := b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(0)), flat, b.constant(&tensor{dt: ir.I64, shape: []int{len(idx)}, i: idx}))
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s...)), y))
}

// wrapNegative returns the integer indices idx with dims added where they
// are negative (ONNX's indices count from the end), dims broadcasting
// against idx.
func wrapNegative(b *builder, idx, dims ir.ID) ir.ID {
	dt := b.dtype(idx)
	return b.op(ir.OpWhere, nil, b.op(ir.OpLess, nil, idx, b.scalar(dt, 0)), b.op(ir.OpAdd, nil, idx, dims), idx)
}

// ndIndex returns, for indices [..., k] into data's leading k dims after
// batch batch dims, the positions in data flattened to [prod(leading),
// rest...] as a 1-D index, and the shape of the rest.
func ndIndex(b *builder, ds, is []int, idx ir.ID, batch int) (ir.ID, []int, error) {
	if len(is) < 1 || batch < 0 || batch >= len(is) || batch >= len(ds) {
		return ir.NoID, nil, fmt.Errorf("indices %v and batch_dims %d for data %v", is, batch, ds)
	}
	k := is[len(is)-1]
	if k < 1 || batch+k > len(ds) || !ir.Shape(is[:batch]).Equal(ir.Shape(ds[:batch])) {
		return ir.NoID, nil, fmt.Errorf("indices %v do not index data %v (batch_dims %d)", is, ds, batch)
	}
	dt := b.dtype(idx)
	lead := ds[batch : batch+k]
	dims, strides := make([]int64, k), make([]int64, k)
	st := int64(1)
	for j := k - 1; j >= 0; j-- {
		dims[j], strides[j] = int64(lead[j]), st
		st *= int64(lead[j])
	}
	idx = wrapNegative(b, idx, b.constant(&tensor{dt: dt, shape: []int{k}, i: dims}))
	lin := b.op(ir.OpSum, ir.MakeAttrs("axes", ir.Ints(len(is)-1)), b.op(ir.OpMul, nil, idx, b.constant(&tensor{dt: dt, shape: []int{k}, i: strides})))
	if batch > 0 {
		// Batch entry j starts at j * prod(lead).
		bs := append(append([]int(nil), is[:batch]...), ones(len(is)-1-batch)...)
		off := make([]int64, prod(is[:batch]))
		for j := range off {
			off[j] = int64(j) * st
		}
		lin = b.op(ir.OpAdd, nil, lin, b.constant(&tensor{dt: dt, shape: bs, i: off}))
	}
	n := prod(is[:len(is)-1])
	return b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n)), lin), ds[batch+k:], b.err
}

func emitGatherND(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	idx, err := im.id(n, 1)
	if err != nil {
		return nil, err
	}
	ds, is := im.shapeOf(x), im.shapeOf(idx)
	batch := int(attrInt(n, "batch_dims", 0))
	b := &builder{im: im}
	lin, rest, err := ndIndex(b, ds, is, idx, batch)
	if err != nil {
		return nil, err
	}
	flat := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(append([]int{prod(ds) / max(prod(rest), 1)}, rest...)...)), x)
	y := b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(0)), flat, lin)
	out := append(append([]int(nil), is[:len(is)-1]...), rest...)
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), y))
}

// scatterInto returns data with add(zeros) placed where hit(zeros) is
// nonzero (reduction none) or data with add applied (reduction add).
func scatterInto(b *builder, n *onnxpb.NodeProto, data ir.ID, shape []int, upd ir.ID, add func(base, src ir.ID) ir.ID) (ir.ID, error) {
	dt := b.dtype(data)
	switch red := attrString(n, "reduction", "none"); red {
	case "add":
		return add(data, upd), b.err
	case "none":
		zeros := b.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(shape...)), b.scalar(dt, 0))
		hits := add(zeros, b.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(b.im.shapeOf(upd)...)), b.scalar(dt, 1)))
		placed := add(zeros, upd)
		return b.op(ir.OpWhere, nil, b.op(ir.OpNotEqual, nil, hits, b.scalar(dt, 0)), placed, data), b.err
	default:
		return ir.NoID, fmt.Errorf("reduction %q is not supported (none or add)", ir.Excerpt(red))
	}
}

func emitScatterElements(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	args, err := im.ids(n, 3)
	if err != nil {
		return nil, err
	}
	data, idx, upd := args[0], args[1], args[2]
	s := im.shapeOf(data)
	axis, err := normAxis(int(attrInt(n, "axis", 0)), len(s))
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	idx = wrapNegative(b, idx, b.scalar(b.dtype(idx), float64(s[axis])))
	y, err := scatterInto(b, n, data, s, upd, func(base, src ir.ID) ir.ID {
		return b.op(ir.OpScatterAdd, ir.MakeAttrs("axis", ir.Int(axis)), base, idx, src)
	})
	if err != nil {
		return nil, err
	}
	return b.result(y)
}

func emitScatterND(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	args, err := im.ids(n, 3)
	if err != nil {
		return nil, err
	}
	data, idx, upd := args[0], args[1], args[2]
	ds, is := im.shapeOf(data), im.shapeOf(idx)
	b := &builder{im: im}
	lin, rest, err := ndIndex(b, ds, is, idx, 0)
	if err != nil {
		return nil, err
	}
	fshape := append([]int{prod(ds) / max(prod(rest), 1)}, rest...)
	flat := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(fshape...)), data)
	fu := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(append([]int{prod(is[:len(is)-1])}, rest...)...)), upd)
	y, err := scatterInto(b, n, flat, fshape, fu, func(base, src ir.ID) ir.ID {
		return b.op(ir.OpIndexAdd, ir.MakeAttrs("axis", ir.Int(0)), base, lin, src)
	})
	if err != nil {
		return nil, err
	}
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(ds...)), y))
}

// emitOneHot: where(mod(indices, depth) == c along the new axis, on, off)
// with c = 0 .. depth-1, as ONNX's reference (negative indices count from
// the end); indices of any numeric dtype, depth a constant.
func emitOneHot(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	idx, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	dc, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	if dc.n() != 1 {
		return nil, fmt.Errorf("depth has %d elements, expected 1", dc.n())
	}
	depth := int(dc.floats()[0])
	if depth < 1 || depth > MaxFolded {
		return nil, fmt.Errorf("depth %d is not in [1, %d]", depth, MaxFolded)
	}
	values, err := im.id(n, 2)
	if err != nil {
		return nil, err
	}
	if vs := im.shapeOf(values); prod(vs) != 2 || len(vs) != 1 {
		return nil, fmt.Errorf("values has shape %v, expected [2] (off, on)", vs)
	}
	is := im.shapeOf(idx)
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(is)+1)
	if err != nil {
		return nil, err
	}
	b := &builder{im: im}
	dt := b.dtype(idx)
	shape := append(append(append([]int(nil), is[:axis]...), 1), is[axis:]...)
	x := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), b.op(ir.OpMod, nil, idx, b.scalar(dt, float64(depth))))
	cs := append(append(ones(axis), depth), ones(len(is)-axis)...)
	classes := &tensor{dt: dt, shape: cs}
	for c := range depth {
		if dt.IsFloat() {
			classes.f = append(classes.f, float64(c))
		} else {
			classes.i = append(classes.i, int64(c))
		}
	}
	pick := func(k int) ir.ID {
		s := b.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(0), "start", ir.Int(k), "end", ir.Int(k+1)), values)
		return b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints()), s)
	}
	return b.result(b.op(ir.OpWhere, nil, b.op(ir.OpEqual, nil, x, b.constant(classes)), pick(1), pick(0)))
}

// emitDFT: the discrete Fourier transform along axis as two matmuls with
// constant cos and sin matrices; real input [..., 1] or complex [..., 2],
// complex output [..., 2]; inverse divides by N; onesided keeps the first
// N/2+1 frequencies. dft_length, when given, must be the axis's size.
func emitDFT(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	s := im.shapeOf(x)
	r := len(s)
	if r < 2 || (s[r-1] != 1 && s[r-1] != 2) {
		return nil, fmt.Errorf("expected an input [..., N, ..., 1 or 2], found %v", s)
	}
	axis, err := normAxis(int(attrInt(n, "axis", 1)), r)
	if err != nil {
		return nil, err
	}
	if axis == r-1 {
		return nil, errors.New("the axis is the real and imaginary axis")
	}
	N := s[axis]
	if has(n, 1) {
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, err
		}
		if c.n() != 1 || c.ints()[0] != int64(N) {
			return nil, fmt.Errorf("dft_length %v differs from the axis's size %d (padding and truncating are not supported)", c.ints(), N)
		}
	}
	M := N
	if attrInt(n, "onesided", 0) != 0 {
		M = N/2 + 1
	}
	if N*M > MaxFolded {
		return nil, fmt.Errorf("a DFT of %d points needs a %dx%d matrix; constants computed at import are limited to %d elements (onnx.MaxFolded)", N, N, M, MaxFolded)
	}
	inverse := attrInt(n, "inverse", 0) != 0
	b := &builder{im: im}
	dt := b.dtype(x)
	cm, sm := &tensor{dt: dt, shape: []int{N, M}}, &tensor{dt: dt, shape: []int{N, M}}
	scale, sign := 1.0, 1.0
	if inverse {
		scale, sign = 1/float64(N), -1
	}
	for i := range N {
		for k := range M {
			th := 2 * math.Pi * float64((i*k)%N) / float64(N)
			cm.f = append(cm.f, scale*math.Cos(th))
			sm.f = append(sm.f, sign*scale*math.Sin(th))
		}
	}
	// The parts, each [..., N] with the axis moved last.
	perm := make([]int, 0, r-1)
	for k := range r - 1 {
		if k != axis {
			perm = append(perm, k)
		}
	}
	perm = append(perm, axis)
	part := func(k int) ir.ID {
		p := b.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(r-1), "start", ir.Int(k), "end", ir.Int(k+1)), x)
		p = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s[:r-1]...)), p)
		return b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), p)
	}
	C, S := b.constant(cm), b.constant(sm)
	re := part(0)
	outRe := b.op(ir.OpMatmul, nil, re, C)
	outIm := b.op(ir.OpNeg, nil, b.op(ir.OpMatmul, nil, re, S))
	if s[r-1] == 2 {
		im2 := part(1)
		outRe = b.op(ir.OpAdd, nil, outRe, b.op(ir.OpMatmul, nil, im2, S))
		outIm = b.op(ir.OpAdd, nil, outIm, b.op(ir.OpMatmul, nil, im2, C))
	}
	back := make([]int, r-1)
	for k, p := range perm {
		back[p] = k
	}
	y := b.op(ir.OpStack, ir.MakeAttrs("axis", ir.Int(r-1)),
		b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(back...)), outRe),
		b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(back...)), outIm))
	return b.result(y)
}
