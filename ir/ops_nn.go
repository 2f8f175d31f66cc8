package ir

import "fmt"

// Neural-network layers: convolution, pooling, normalization, dropout.
//
// Layouts are PyTorch's: NCL and NCHW inputs, conv weights
// [C_out, C_in/groups, k...]. Spatial attributes (stride, padding, ...) are
// lists with one entry per spatial axis, or one entry for all of them, as
// PyTorch expands a 1-element list. The convolution and pooling gradient
// ops are ops of their own whose rules close over the forward ops, so every
// rule here is differentiable again.

func nnOps() []opRow {
	conv := func(name string, spatial int, doc string) OpInfo {
		one, zero := make([]int, spatial), make([]int, spatial)
		for i := range one {
			one[i] = 1
		}
		return OpInfo{Name: name, Args: []string{"x", "w", "bias"}, Optional: 1, Doc: doc, Infer: nnInferConv(spatial), Grad: nnGradConv,
			// Two per multiply-add (C_in/groups × kernel per output
			// element) and the bias.
			Cost: func(args []Type, out Type, _ Attrs) float64 {
				n := float64(out.Shape.NumElements())
				return 2*n*perOutputChannel(args[1].Shape) + n
			},
			Attrs: []AttrSpec{
				{Name: "stride", Kind: attrInts, Default: nnDefInts(one...), Doc: "step between windows along each spatial axis (one entry for all axes, or one per axis)"},
				{Name: "padding", Kind: attrInts, Default: nnDefInts(zero...), Doc: "zeros added at both ends of each spatial axis (one entry for all axes, or one per axis)"},
				{Name: "dilation", Kind: attrInts, Default: nnDefInts(one...), Doc: "spacing between kernel taps along each spatial axis (one entry for all axes, or one per axis)"},
				{Name: "groups", Kind: AttrInt, Default: defInt(1), Doc: "channel groups: C_in and C_out split into groups convolved separately (C_in for depthwise)"},
			}}
	}
	convGradAttrs := func(shapeName, shapeDoc string) []AttrSpec {
		return []AttrSpec{
			{Name: "stride", Kind: attrInts, Default: nnDefInts(1), Doc: "the forward convolution's stride (one entry for all spatial axes, or one per axis)"},
			{Name: "padding", Kind: attrInts, Default: nnDefInts(0), Doc: "the forward convolution's padding (one entry for all spatial axes, or one per axis)"},
			{Name: "dilation", Kind: attrInts, Default: nnDefInts(1), Doc: "the forward convolution's dilation (one entry for all spatial axes, or one per axis)"},
			{Name: "groups", Kind: AttrInt, Default: defInt(1), Doc: "the forward convolution's groups"},
			{Name: shapeName, Kind: attrInts, Required: true, Doc: shapeDoc},
		}
	}
	maxPoolAttrs := []AttrSpec{
		{Name: "kernel", Kind: attrInts, Required: true, Doc: "window size [kH, kW] (or [k] for both)"},
		{Name: "stride", Kind: attrInts, Doc: "step between windows [sH, sW] (or [s]); absent or [] means the kernel size, as PyTorch's stride=None"},
		{Name: "padding", Kind: attrInts, Default: nnDefInts(0, 0), Doc: "implicit -inf padding at both ends [pH, pW] (or [p]); at most half the kernel"},
		{Name: "dilation", Kind: attrInts, Default: nnDefInts(1, 1), Doc: "spacing between window taps [dH, dW] (or [d])"},
	}
	avgPoolAttrs := []AttrSpec{
		{Name: "kernel", Kind: attrInts, Required: true, Doc: "window size [kH, kW] (or [k] for both)"},
		{Name: "stride", Kind: attrInts, Doc: "step between windows [sH, sW] (or [s]); absent or [] means the kernel size, as PyTorch's stride=None"},
		{Name: "padding", Kind: attrInts, Default: nnDefInts(0, 0), Doc: "implicit zero padding at both ends [pH, pW] (or [p]); at most half the kernel"},
		{Name: "count_include_pad", Kind: AttrBool, Default: defBool(true), Doc: "divide by the whole window size, padding included; false: by the number of input elements in the window"},
	}
	avgPoolGradAttrs := append(append([]AttrSpec(nil), avgPoolAttrs...),
		AttrSpec{Name: "input_shape", Kind: attrInts, Required: true, Doc: "shape of the pooled input, which the result takes"})
	return []opRow{
		{OpConv1d, conv("conv1d", 1, "1-D convolution (cross-correlation) of x [N,C_in,L] with w [C_out,C_in/groups,k], plus bias [C_out] if given, as torch.nn.functional.conv1d; batched input and integer zero padding only (no 'same' or 'valid')")},
		{OpConv2d, conv("conv2d", 2, "2-D convolution (cross-correlation) of x [N,C_in,H,W] with w [C_out,C_in/groups,kH,kW], plus bias [C_out] if given, as torch.nn.functional.conv2d; batched input and integer zero padding only (no 'same' or 'valid')")},
		{OpConvInputGrad, OpInfo{Name: "conv_input_grad", Args: []string{"dy", "w"},
			Doc:   "gradient of conv1d/conv2d with respect to x (the transposed convolution of dy with w), shaped input_shape",
			Attrs: convGradAttrs("input_shape", "shape of the convolution's input x, which the result takes"),
			Infer: nnInferConvInputGrad, Grad: nnGradConvInputGrad,
			// The forward convolution's multiply-adds: dy [N, C_out, ...]
			// with w [C_out, C_in/groups, k...].
			Cost: func(args []Type, _ Type, _ Attrs) float64 {
				return 2 * float64(args[0].Shape.NumElements()) * perOutputChannel(args[1].Shape)
			}}},
		{OpConvWeightGrad, OpInfo{Name: "conv_weight_grad", Args: []string{"x", "dy"},
			Doc:   "gradient of conv1d/conv2d with respect to w: the correlation of x with dy, shaped weight_shape",
			Attrs: convGradAttrs("weight_shape", "shape of the convolution's weight w, which the result takes"),
			Infer: nnInferConvWeightGrad, Grad: nnGradConvWeightGrad,
			// One multiply-add per output position of dy and weight
			// element of its output channel.
			Cost: func(args []Type, out Type, _ Attrs) float64 {
				return 2 * float64(args[1].Shape.NumElements()) * perOutputChannel(out.Shape)
			}}},

		{OpMaxPool2d, OpInfo{Name: "max_pool2d", Args: []string{"x"}, Attrs: maxPoolAttrs,
			Doc:   "max over 2-D windows of x [N,C,H,W] or [C,H,W], as torch.nn.functional.max_pool2d; NaN wins; ceil_mode and return_indices are not supported",
			Infer: nnInferMaxPool, Grad: nnGradMaxPool}},
		{OpMaxPool2dGrad, OpInfo{Name: "max_pool2d_grad", Args: []string{"dy", "x"}, Attrs: maxPoolAttrs,
			Doc:   "gradient of max_pool2d: each window's dy added at the window's arg max in x (the first on ties), zero elsewhere",
			Infer: nnInferMaxPoolGrad, Grad: nnGradMaxPoolGrad}},
		{OpMaxPool2dSelect, OpInfo{Name: "max_pool2d_select", Args: []string{"g", "x"}, Attrs: maxPoolAttrs,
			Doc:   "g taken at each window's arg max in x (the first on ties): max_pool2d's selection applied to g, the gradient of max_pool2d_grad",
			Infer: nnInferMaxPoolSelect, Grad: nnGradMaxPoolSelect}},
		{OpAvgPool2d, OpInfo{Name: "avg_pool2d", Args: []string{"x"}, Attrs: avgPoolAttrs,
			Doc:   "mean over 2-D windows of x [N,C,H,W] or [C,H,W], as torch.nn.functional.avg_pool2d; ceil_mode and divisor_override are not supported",
			Infer: nnInferAvgPool, Grad: nnGradAvgPool}},
		{OpAvgPool2dGrad, OpInfo{Name: "avg_pool2d_grad", Args: []string{"dy"}, Attrs: avgPoolGradAttrs,
			Doc:   "gradient of avg_pool2d: each window's dy divided by its divisor and added over the window, shaped input_shape",
			Infer: nnInferAvgPoolGrad, Grad: nnGradAvgPoolGrad}},

		{OpLayerNorm, OpInfo{Name: "layer_norm", Args: []string{"x", "weight", "bias"}, Optional: 2,
			Doc:   "(x - mean) / sqrt(var + eps) * weight + bias over the trailing axes, biased variance, as torch.nn.functional.layer_norm; weight and bias have the normalized shape (bias only with weight)",
			Attrs: layerNormAttrs,
			Infer: nnInferLayerNorm, Grad: nnGradLayerNorm, Cost: costPerElement(8)}},
		{OpLayerNormGrad, OpInfo{Name: "layer_norm_grad", Args: []string{"dy", "x", "weight"}, Optional: 1,
			Doc:   "gradient of layer_norm(x, weight, ...) with respect to x, given dy: rstd * (g - mean(g) - xhat * mean(g * xhat)) over the trailing axes, with xhat = (x - mean) * rstd, rstd = 1/sqrt(var + eps) and g = dy * weight (dy without weight); one pass a row, the statistics recomputed from x, with the arithmetic of that composite, op by op",
			Attrs: layerNormAttrs,
			Infer: nnInferLayerNormGrad, Grad: nnGradLayerNormGrad, Cost: costPerElement(12)}},
		{OpBatchNorm, OpInfo{Name: "batch_norm", Args: []string{"x", "weight", "bias"},
			Doc: "(x - mean) / sqrt(var + eps) * weight + bias with the batch's statistics over every axis but 1 (biased variance), as torch batch_norm with training=True; no running statistics are kept",
			Attrs: []AttrSpec{
				{Name: "eps", Kind: AttrFloat, Default: defFloat(1e-5), Doc: "added to the variance"},
			},
			Infer: nnInferBatchNorm, Grad: nnGradBatchNorm, Cost: costPerElement(8)}},
		// dropout is not ClassElementwise: its mask depends on the element's
		// position and the step, so rewrites that move elementwise ops across
		// broadcasts or reshapes would change it.
		{OpDropout, OpInfo{Name: "dropout", Args: []string{"x"},
			Doc: "x * mask / (1 - p), mask[i] = 0 with probability p from a counter-based hash of (seed, step, i), as torch.nn.functional.dropout in training; removed by the inference pass",
			Attrs: []AttrSpec{
				{Name: "p", Kind: AttrFloat, Default: defFloat(0.5), Doc: "probability that an element is zeroed, in [0, 1]"},
				{Name: "seed", Kind: AttrInt, Default: defInt(0), Doc: "selects the mask stream; give distinct dropouts distinct seeds, or they drop the same positions"},
			},
			Infer: nnInferDropout, Grad: nnGradDropout}},
	}
}

func nnDefInts(v ...int) *AttrValue { a := Ints(v...); return &a }

// nnSpatial reads the int-list attribute name for a layer with spatial
// axes: one entry per axis, or one entry for all of them (as PyTorch
// expands a 1-element list). An absent attribute gives def for every axis.
func nnSpatial(a Attrs, name string, spatial, def, lo int) ([]int, error) {
	out := make([]int, spatial)
	v, ok := a.Ints(name)
	switch {
	case !ok || len(v) == 0:
		for i := range out {
			out[i] = def
		}
		return out, nil
	case len(v) == 1:
		for i := range out {
			out[i] = v[0]
		}
	case len(v) == spatial:
		copy(out, v)
	default:
		return nil, fmt.Errorf("%s %s has %d entries, expected 1 or %d (one per spatial axis)", name, Shape(v), len(v), spatial)
	}
	for _, x := range out {
		if x < lo {
			return nil, fmt.Errorf("%s %s: every entry must be at least %d", name, Shape(v), lo)
		}
	}
	return out, nil
}

// nnOutSize is PyTorch's output size of a window op along one axis (floor
// mode): floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1, or -1 when it
// is less than 1.
func nnOutSize(in, k, stride, pad, dil int) int {
	n := in + 2*pad - dil*(k-1) - 1
	if n < 0 {
		return -1
	}
	return n/stride + 1
}

// ConvGeom is the geometry of a 1-D or 2-D convolution: the input x
// [N,C_in,spatial...], the weight [C_out,C_in/Groups,Kernel...] and the
// result [N,C_out,Out...].
type ConvGeom struct {
	N, CIn, COut, Groups      int
	In, Kernel, Out           []int // per spatial axis
	Stride, Padding, Dilation []int // per spatial axis
}

// OutShape returns the shape of the convolution's result.
func (g ConvGeom) OutShape() Shape {
	return append(Shape{g.N, g.COut}, g.Out...)
}

// ConvGeometry checks a convolution of an input of shape x with a weight of
// shape w under the attributes a (stride, padding, dilation, groups) and
// returns its geometry. The rules are PyTorch's: a positive stride and
// dilation, padding >= 0, C_in and C_out divisible by groups, w[1] =
// C_in/groups, and every output size at least 1.
func ConvGeometry(x, w Shape, a Attrs) (ConvGeom, error) {
	var g ConvGeom
	if len(x) != len(w) || len(x) < 3 || len(x) > 4 {
		return g, fmt.Errorf("expected input [N,C_in,L] with weight [C_out,C_in/groups,k], or input [N,C_in,H,W] with weight [C_out,C_in/groups,kH,kW], found input %s and weight %s", x, w)
	}
	sp := len(x) - 2
	var err error
	if g.Stride, err = nnSpatial(a, "stride", sp, 1, 1); err != nil {
		return g, err
	}
	if g.Padding, err = nnSpatial(a, "padding", sp, 0, 0); err != nil {
		return g, err
	}
	if g.Dilation, err = nnSpatial(a, "dilation", sp, 1, 1); err != nil {
		return g, err
	}
	g.Groups = a.Int("groups", 1)
	if g.Groups < 1 {
		return g, fmt.Errorf("groups must be at least 1, found %d", g.Groups)
	}
	g.N, g.CIn, g.COut = x[0], x[1], w[0]
	if g.CIn%g.Groups != 0 || g.COut%g.Groups != 0 {
		return g, fmt.Errorf("groups %d must divide C_in and C_out, found input %s and weight %s", g.Groups, x, w)
	}
	if w[1]*g.Groups != g.CIn {
		return g, fmt.Errorf("expected weight [%d,%d,...] (C_in/groups = %d/%d) for input %s, found weight %s", g.COut, g.CIn/g.Groups, g.CIn, g.Groups, x, w)
	}
	g.In, g.Kernel = []int(x[2:].Clone()), []int(w[2:].Clone())
	g.Out = make([]int, sp)
	for i := range sp {
		if g.Kernel[i] < 1 {
			return g, fmt.Errorf("kernel sizes must be positive, found weight %s", w)
		}
		g.Out[i] = nnOutSize(g.In[i], g.Kernel[i], g.Stride[i], g.Padding[i], g.Dilation[i])
		if g.Out[i] < 1 {
			return g, fmt.Errorf("output size is too small: input %s with kernel %s, stride %s, padding %s, dilation %s leaves no window along spatial axis %d",
				x, w[2:], Shape(g.Stride), Shape(g.Padding), Shape(g.Dilation), i)
		}
	}
	return g, nil
}

func nnFloatSame(what string, ts ...Type) error {
	if !ts[0].DType.IsFloat() {
		return fmt.Errorf("expected a float %s (f32 or f64), found %s", what, ts[0])
	}
	for _, t := range ts[1:] {
		if t.DType != ts[0].DType {
			return fmt.Errorf("dtype mismatch: %s and %s", ts[0], t)
		}
	}
	return nil
}

func nnInferConv(spatial int) func([]Type, Attrs) (Type, error) {
	return func(args []Type, a Attrs) (Type, error) {
		x, w := args[0], args[1]
		if err := nnFloatSame("input", args...); err != nil {
			return Type{}, err
		}
		if len(x.Shape) != spatial+2 {
			return Type{}, fmt.Errorf("expected a batched input of rank %d, found %s", spatial+2, x)
		}
		g, err := ConvGeometry(x.Shape, w.Shape, a)
		if err != nil {
			return Type{}, fmt.Errorf("%v (input %s, weight %s)", err, x, w)
		}
		if len(args) == 3 && !args[2].Shape.Equal(Shape{g.COut}) {
			return Type{}, fmt.Errorf("expected bias [%d] (C_out of weight %s), found %s", g.COut, w, args[2])
		}
		return Type{x.DType, g.OutShape()}, nil
	}
}

// nnShapeAttr reads a required shape attribute (input_shape, weight_shape).
func nnShapeAttr(a Attrs, name string) (Shape, error) {
	s, ok := a.Ints(name)
	if !ok {
		return nil, fmt.Errorf("%s must be a list of ints", name)
	}
	for _, d := range s {
		if d < 0 {
			return nil, fmt.Errorf("%s %s has a negative dimension", name, Shape(s))
		}
	}
	return Shape(s).Clone(), nil
}

func nnInferConvInputGrad(args []Type, a Attrs) (Type, error) {
	dy, w := args[0], args[1]
	if err := nnFloatSame("dy", dy, w); err != nil {
		return Type{}, err
	}
	xs, err := nnShapeAttr(a, "input_shape")
	if err != nil {
		return Type{}, err
	}
	g, err := ConvGeometry(xs, w.Shape, a)
	if err != nil {
		return Type{}, fmt.Errorf("%v (input_shape %s, weight %s)", err, xs, w)
	}
	if !g.OutShape().Equal(dy.Shape) {
		return Type{}, fmt.Errorf("expected dy %s (the convolution of input_shape %s with weight %s), found %s", g.OutShape(), xs, w, dy)
	}
	return Type{dy.DType, xs}, nil
}

func nnInferConvWeightGrad(args []Type, a Attrs) (Type, error) {
	x, dy := args[0], args[1]
	if err := nnFloatSame("input", x, dy); err != nil {
		return Type{}, err
	}
	ws, err := nnShapeAttr(a, "weight_shape")
	if err != nil {
		return Type{}, err
	}
	g, err := ConvGeometry(x.Shape, ws, a)
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s, weight_shape %s)", err, x, ws)
	}
	if !g.OutShape().Equal(dy.Shape) {
		return Type{}, fmt.Errorf("expected dy %s (the convolution of %s with weight_shape %s), found %s", g.OutShape(), x, ws, dy)
	}
	return Type{x.DType, ws}, nil
}

// nnConvAttrs returns the convolution attributes of a conv op's attrs
// (stride, padding, dilation, groups), without the shape attributes of
// the gradient ops.
func nnConvAttrs(a Attrs) Attrs {
	var out Attrs
	for _, k := range []string{"dilation", "groups", "padding", "stride"} {
		if v, ok := a.Get(k); ok {
			out = out.With(k, v)
		}
	}
	return out
}

// nnConvOp returns conv1d or conv2d for a value of rank r.
func nnConvOp(r int) Op {
	if r == 3 {
		return OpConv1d
	}
	return OpConv2d
}

func nnGradConv(e *Emitter, y, dy ID) []ID {
	// dx = conv_input_grad(dy, w), dw = conv_weight_grad(x, dy), dbias =
	// the sum of dy over the batch and spatial axes.
	args := e.args(y)
	x, w := args[0], args[1]
	ca := nnConvAttrs(e.G.Values[y].Attrs)
	out := []ID{
		e.Op(OpConvInputGrad, ca.With("input_shape", Ints(e.shape(x)...)), dy, w),
		e.Op(OpConvWeightGrad, ca.With("weight_shape", Ints(e.shape(w)...)), x, dy),
	}
	if len(args) == 3 {
		axes := []int{0}
		for i := 2; i < len(e.shape(dy)); i++ {
			axes = append(axes, i)
		}
		out = append(out, e.Op(OpSum, MakeAttrs("axes", Ints(axes...), "keepdims", BoolAttr(false)), dy))
	}
	return out
}

func nnGradConvInputGrad(e *Emitter, y, g ID) []ID {
	// conv_input_grad(dy, w) is bilinear: the adjoint of x -> conv(x, w)
	// applied to dy. With G shaped like x: d dy = conv(G, w) and
	// d w = conv_weight_grad(G, dy).
	dy, w := e.args(y)[0], e.args(y)[1]
	ca := nnConvAttrs(e.G.Values[y].Attrs)
	return []ID{
		e.Op(nnConvOp(len(e.shape(w))), ca, g, w),
		e.Op(OpConvWeightGrad, ca.With("weight_shape", Ints(e.shape(w)...)), g, dy),
	}
}

func nnGradConvWeightGrad(e *Emitter, y, g ID) []ID {
	// conv_weight_grad(x, dy) is bilinear: the adjoint of w -> conv(x, w)
	// applied to dy. With G shaped like w: d x = conv_input_grad(dy, G) and
	// d dy = conv(x, G).
	x, dy := e.args(y)[0], e.args(y)[1]
	ca := nnConvAttrs(e.G.Values[y].Attrs)
	return []ID{
		e.Op(OpConvInputGrad, ca.With("input_shape", Ints(e.shape(x)...)), dy, g),
		e.Op(nnConvOp(len(e.shape(x))), ca, x, g),
	}
}

// PoolGeom is the geometry of a 2-D pooling of an input [N,C,H,W] or
// [C,H,W]: Planes (N*C or C) independent H×W planes, each pooled to OH×OW.
type PoolGeom struct {
	Planes, H, W, OH, OW int
	Kernel, Stride       [2]int
	Padding, Dilation    [2]int
	CountIncludePad      bool // avg_pool2d only
	lead                 Shape
}

// OutShape returns the shape of the pooled result.
func (g PoolGeom) OutShape() Shape {
	return append(g.lead.Clone(), g.OH, g.OW)
}

// PoolGeometry checks a 2-D pooling of an input of shape x under the
// attributes a (kernel, stride, padding, dilation, count_include_pad; an
// absent dilation is 1) and returns its geometry. The rules are PyTorch's:
// a 3-D or 4-D input whose non-batch dimensions are non-zero, positive
// kernel, stride and dilation, padding at most half the kernel, and an
// output size of at least 1 (floor mode).
func PoolGeometry(x Shape, a Attrs) (PoolGeom, error) {
	var g PoolGeom
	if len(x) != 3 && len(x) != 4 {
		return g, fmt.Errorf("expected an input [N,C,H,W] or [C,H,W], found shape %s", x)
	}
	for i := len(x) - 3; i < len(x); i++ {
		if x[i] == 0 {
			return g, fmt.Errorf("expected non-zero channel and spatial dimensions (only the batch may be empty), found shape %s", x)
		}
	}
	if v, ok := a.Ints("kernel"); !ok || len(v) == 0 {
		return g, fmt.Errorf("kernel must be a list of 1 or 2 ints")
	}
	k, err := nnSpatial(a, "kernel", 2, 1, 1)
	if err != nil {
		return g, err
	}
	s, err := nnSpatial(a, "stride", 2, 0, 1)
	if err != nil {
		return g, err
	}
	if s[0] == 0 { // absent or []: the kernel
		s = k
	}
	p, err := nnSpatial(a, "padding", 2, 0, 0)
	if err != nil {
		return g, err
	}
	d, err := nnSpatial(a, "dilation", 2, 1, 1)
	if err != nil {
		return g, err
	}
	g.lead = x[:len(x)-2].Clone()
	g.Planes = g.lead.NumElements()
	g.H, g.W = x[len(x)-2], x[len(x)-1]
	for i := range 2 {
		if p[i] > k[i]/2 {
			return g, fmt.Errorf("padding %s must be at most half the kernel %s", Shape(p), Shape(k))
		}
		g.Kernel[i], g.Stride[i], g.Padding[i], g.Dilation[i] = k[i], s[i], p[i], d[i]
	}
	g.OH = nnOutSize(g.H, k[0], s[0], p[0], d[0])
	g.OW = nnOutSize(g.W, k[1], s[1], p[1], d[1])
	if g.OH < 1 || g.OW < 1 {
		return g, fmt.Errorf("output size is too small: input %s with kernel %s, stride %s, padding %s, dilation %s leaves no window", x, Shape(k), Shape(s), Shape(p), Shape(d))
	}
	g.CountIncludePad = a.Bool("count_include_pad", true)
	return g, nil
}

func nnInferMaxPool(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if err := nnFloatSame("input", x); err != nil {
		return Type{}, err
	}
	g, err := PoolGeometry(x.Shape, a)
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	return Type{x.DType, g.OutShape()}, nil
}

// nnInferPoolGrad checks dy against the pooling of an input of shape xs.
func nnInferPoolGrad(dy Type, xs Shape, a Attrs) (Type, error) {
	g, err := PoolGeometry(xs, a)
	if err != nil {
		return Type{}, err
	}
	if !dy.Shape.Equal(g.OutShape()) {
		return Type{}, fmt.Errorf("expected dy %s (the pooling of %s), found %s", g.OutShape(), xs, dy)
	}
	return Type{dy.DType, xs.Clone()}, nil
}

func nnInferMaxPoolGrad(args []Type, a Attrs) (Type, error) {
	if err := nnFloatSame("dy", args...); err != nil {
		return Type{}, err
	}
	return nnInferPoolGrad(args[0], args[1].Shape, a)
}

func nnInferMaxPoolSelect(args []Type, a Attrs) (Type, error) {
	g, x := args[0], args[1]
	if err := nnFloatSame("g", g, x); err != nil {
		return Type{}, err
	}
	if !g.Shape.Equal(x.Shape) {
		return Type{}, fmt.Errorf("expected g shaped like x %s, found %s", x, g)
	}
	return nnInferMaxPool(args[1:], a)
}

func nnInferAvgPool(args []Type, a Attrs) (Type, error) { return nnInferMaxPool(args, a) }

func nnInferAvgPoolGrad(args []Type, a Attrs) (Type, error) {
	if err := nnFloatSame("dy", args[0]); err != nil {
		return Type{}, err
	}
	xs, err := nnShapeAttr(a, "input_shape")
	if err != nil {
		return Type{}, err
	}
	return nnInferPoolGrad(args[0], xs, a)
}

func nnGradMaxPool(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	return []ID{e.Op(OpMaxPool2dGrad, e.G.Values[y].Attrs, dy, x)}
}

func nnGradMaxPoolGrad(e *Emitter, y, g ID) []ID {
	// max_pool2d_grad(dy, x) is linear in dy: dx = S^T dy for the selection
	// S of each window's arg max, which is piecewise constant in x (its
	// derivative in x is 0 wherever it exists). d dy = S G, as PyTorch's
	// max_pool2d double backward gathers by the saved indices.
	x := e.args(y)[1]
	return []ID{e.Op(OpMaxPool2dSelect, e.G.Values[y].Attrs, g, x), NoID}
}

func nnGradMaxPoolSelect(e *Emitter, y, dy ID) []ID {
	// max_pool2d_select(g, x) = S g: d g = S^T dy = max_pool2d_grad(dy, x).
	x := e.args(y)[1]
	return []ID{e.Op(OpMaxPool2dGrad, e.G.Values[y].Attrs, dy, x), NoID}
}

func nnGradAvgPool(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	return []ID{e.Op(OpAvgPool2dGrad, e.G.Values[y].Attrs.With("input_shape", Ints(e.shape(x)...)), dy)}
}

func nnGradAvgPoolGrad(e *Emitter, y, g ID) []ID {
	// avg_pool2d_grad is the adjoint of avg_pool2d (a linear map), so its
	// own gradient is avg_pool2d of the upstream gradient.
	var a Attrs
	for _, at := range e.G.Values[y].Attrs {
		if at.Key != "input_shape" {
			a = a.With(at.Key, at.Value)
		}
	}
	return []ID{e.Op(OpAvgPool2d, a, g)}
}

// LayerNormStart returns the first of the axes layer_norm normalizes over
// for an input of rank r: the axes attribute must name the last r - start
// axes (at least one).
func LayerNormStart(a Attrs, r int) (int, error) {
	axes, err := ReduceAxes(a, r)
	if err != nil {
		return 0, err
	}
	if _, ok := a.Get("axes"); !ok || len(axes) == 0 {
		return 0, fmt.Errorf("axes must name at least one axis")
	}
	start := r - len(axes)
	for i, ax := range axes {
		if ax != start+i {
			v, _ := a.Get("axes")
			return 0, fmt.Errorf("axes %s must be the last %d axes of a rank-%d input", v, len(axes), r)
		}
	}
	return start, nil
}

// LayerNormRows returns how layer_norm and layer_norm_grad cut an input
// of shape x: rows groups (the leading axes) of m elements each (the
// normalized trailing axes), row r at elements [r·m, (r+1)·m).
func LayerNormRows(a Attrs, x Shape) (rows, m int, err error) {
	start, err := LayerNormStart(a, len(x))
	if err != nil {
		return 0, 0, err
	}
	return x[:start].NumElements(), x[start:].NumElements(), nil
}

func nnInferLayerNorm(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if err := nnFloatSame("input", args...); err != nil {
		return Type{}, err
	}
	start, err := LayerNormStart(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	norm := x.Shape[start:]
	for i, t := range args[1:] {
		if !t.Shape.Equal(norm) {
			return Type{}, fmt.Errorf("expected %s %s (the normalized shape of %s), found %s", []string{"weight", "bias"}[i], norm, x, t)
		}
	}
	if a.Float("eps", 1e-5) < 0 {
		return Type{}, fmt.Errorf("eps must not be negative, found %g", a.Float("eps", 0))
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// layerNormAttrs are the attributes of layer_norm and layer_norm_grad.
var layerNormAttrs = []AttrSpec{
	{Name: "axes", Kind: attrInts, Default: nnDefInts(-1), Doc: "the normalized axes, which must be the last ones (torch's normalized_shape is x's shape there)"},
	{Name: "eps", Kind: AttrFloat, Default: defFloat(1e-5), Doc: "added to the variance"},
}

// nnInferLayerNormGrad infers layer_norm_grad(dy, x[, weight]): dy of x's
// type, weight as layer_norm's; the result is x's type.
func nnInferLayerNormGrad(args []Type, a Attrs) (Type, error) {
	dy, x := args[0], args[1]
	if !dy.Equal(x) {
		return Type{}, fmt.Errorf("expected dy of the input's type %s, found %s", x, dy)
	}
	return nnInferLayerNorm(args[1:], a)
}

func nnInferBatchNorm(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if err := nnFloatSame("input", args...); err != nil {
		return Type{}, err
	}
	if len(x.Shape) < 2 {
		return Type{}, fmt.Errorf("expected an input [N,C,...] of rank at least 2, found %s", x)
	}
	c := x.Shape[1]
	for i, t := range args[1:] {
		if !t.Shape.Equal(Shape{c}) {
			return Type{}, fmt.Errorf("expected %s [%d] (the channels of %s), found %s", []string{"weight", "bias"}[i], c, x, t)
		}
	}
	if x.Shape.NumElements() == c && c > 0 {
		// PyTorch: "Expected more than 1 value per channel when training".
		return Type{}, fmt.Errorf("expected more than 1 value per channel, found input %s", x)
	}
	if a.Float("eps", 1e-5) < 0 {
		return Type{}, fmt.Errorf("eps must not be negative, found %g", a.Float("eps", 0))
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// nnNormGrad appends the gradient of normalizing x over axes (keepdims
// broadcasting) and then scaling by w (NoID: none), given dy: with xhat =
// (x - mean) * rstd, rstd = 1/sqrt(var + eps) and g = dy * w,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). It returns dx and xhat.
func nnNormGrad(e *Emitter, x, w, dy ID, axes []int, eps float64) (dx, xhat ID) {
	dt := e.Type(x).DType
	keep := MakeAttrs("axes", Ints(axes...), "keepdims", BoolAttr(true))
	mean := func(v ID) ID { return e.Op(OpMean, keep, v) }
	xc := e.sub(x, mean(x))
	variance := mean(e.mul(xc, xc))
	rstd := e.div(e.one(x), e.Op(OpSqrt, nil, e.add(variance, e.Scalar(eps, dt))))
	xhat = e.mul(xc, rstd)
	g := dy
	if w != NoID {
		g = e.mul(dy, w)
	}
	dx = e.mul(rstd, e.sub(e.sub(g, mean(g)), e.mul(xhat, mean(e.mul(g, xhat)))))
	return dx, xhat
}

func nnGradLayerNorm(e *Emitter, y, dy ID) []ID {
	args := e.args(y)
	x := args[0]
	attrs := e.G.Values[y].Attrs
	r := len(e.shape(x))
	start, err := LayerNormStart(attrs, r)
	if err != nil {
		e.err = err
		out := make([]ID, len(args))
		for i := range out {
			out[i] = NoID
		}
		return out
	}
	axes := make([]int, 0, r-start)
	for i := start; i < r; i++ {
		axes = append(axes, i)
	}
	w := NoID
	if len(args) > 1 {
		w = args[1]
	}
	norm := MakeAttrs("axes", Ints(axes...), "eps", Float(attrs.Float("eps", 1e-5)))
	gargs := []ID{dy, x}
	if w != NoID {
		gargs = append(gargs, w)
	}
	out := []ID{e.Op(OpLayerNormGrad, norm, gargs...)}
	if w != NoID {
		// xhat, the normalized x, is layer_norm without weight and bias.
		xhat := e.Op(OpLayerNorm, norm, x)
		out = append(out, e.SumTo(e.mul(dy, xhat), e.shape(w)))
	}
	if len(args) > 2 {
		out = append(out, e.SumTo(dy, e.shape(args[2])))
	}
	return out
}

// nnGradLayerNormGrad differentiates layer_norm_grad(dy, x[, weight]) as the
// composite it computes (nnNormGrad), so that layer_norm stays
// differentiable to any order.
func nnGradLayerNormGrad(e *Emitter, y, ddx ID) []ID {
	args := e.args(y)
	dy, x := args[0], args[1]
	w := NoID
	if len(args) > 2 {
		w = args[2]
	}
	attrs := e.G.Values[y].Attrs
	axes, err := ReduceAxes(attrs, len(e.shape(x)))
	if err != nil {
		e.err = err
		return []ID{NoID, NoID, NoID}[:len(args)]
	}
	return e.compositeGrad(args, ddx, func() ID {
		dx, _ := nnNormGrad(e, x, w, dy, axes, attrs.Float("eps", 1e-5))
		return dx
	})
}

func nnGradBatchNorm(e *Emitter, y, dy ID) []ID {
	x, w := e.args(y)[0], e.args(y)[1]
	xs := e.shape(x)
	axes := []int{0}
	wShape := Shape{1, xs[1]}
	for i := 2; i < len(xs); i++ {
		axes = append(axes, i)
		wShape = append(wShape, 1)
	}
	dx, xhat := nnNormGrad(e, x, e.Reshape(w, wShape), dy, axes, e.G.Values[y].Attrs.Float("eps", 1e-5))
	sum := MakeAttrs("axes", Ints(axes...), "keepdims", BoolAttr(false))
	return []ID{dx, e.Op(OpSum, sum, e.mul(dy, xhat)), e.Op(OpSum, sum, dy)}
}

func nnInferDropout(args []Type, a Attrs) (Type, error) {
	if err := nnFloatSame("input", args[0]); err != nil {
		return Type{}, err
	}
	if p := a.Float("p", 0.5); !(p >= 0 && p <= 1) {
		return Type{}, fmt.Errorf("dropout probability p must be between 0 and 1, found %g", p)
	}
	return Type{args[0].DType, args[0].Shape.Clone()}, nil
}

func nnGradDropout(e *Emitter, y, dy ID) []ID {
	// The mask depends on (seed, step, index) only, and the backward runs in
	// the same step, so dropout of dy with the same attributes applies the
	// same mask and scale.
	return []ID{e.Op(OpDropout, e.G.Values[y].Attrs, dy)}
}
