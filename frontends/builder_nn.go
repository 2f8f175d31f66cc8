package frontends

import "github.com/kilnml/kiln/ir"

// ConvOptions are the attributes of a convolution. A nil list takes
// PyTorch's default (stride 1, padding 0, dilation 1); a list has one entry
// per spatial axis or one for all of them. Groups 0 means 1.
type ConvOptions struct {
	Stride, Padding, Dilation []int
	Groups                    int
}

func (o ConvOptions) attrs() ir.Attrs {
	var a ir.Attrs
	for _, kv := range []struct {
		k string
		v []int
	}{{"stride", o.Stride}, {"padding", o.Padding}, {"dilation", o.Dilation}} {
		if kv.v != nil {
			a = a.With(kv.k, ir.Ints(kv.v...))
		}
	}
	if o.Groups != 0 {
		a = a.With("groups", ir.Int(o.Groups))
	}
	return a
}

// nnOptional returns args followed by each of opt up to the first zero
// Value (an absent optional argument).
func nnOptional(args []Value, opt ...Value) []Value {
	for _, v := range opt {
		if v.b == nil {
			break
		}
		args = append(args, v)
	}
	return args
}

// Conv1d returns the 1-D convolution of x [N,C_in,L] with w
// [C_out,C_in/groups,k], plus bias [C_out] unless bias is the zero Value,
// as torch.nn.functional.conv1d.
func (b *Builder) Conv1d(x, w, bias Value, o ConvOptions) Value {
	return b.op(ir.OpConv1d, o.attrs(), nnOptional([]Value{x, w}, bias)...)
}

// Conv2d returns the 2-D convolution of x [N,C_in,H,W] with w
// [C_out,C_in/groups,kH,kW], plus bias [C_out] unless bias is the zero
// Value, as torch.nn.functional.conv2d.
func (b *Builder) Conv2d(x, w, bias Value, o ConvOptions) Value {
	return b.op(ir.OpConv2d, o.attrs(), nnOptional([]Value{x, w}, bias)...)
}

// ConvInputGrad returns the gradient of the convolution of an input of
// shape inputShape with w, with respect to that input, for the upstream
// gradient dy: the transposed convolution.
func (b *Builder) ConvInputGrad(dy, w Value, inputShape []int, o ConvOptions) Value {
	return b.op(ir.OpConvInputGrad, o.attrs().With("input_shape", ir.Ints(inputShape...)), dy, w)
}

// ConvWeightGrad returns the gradient of the convolution of x with a weight
// of shape weightShape, with respect to that weight, for the upstream
// gradient dy.
func (b *Builder) ConvWeightGrad(x, dy Value, weightShape []int, o ConvOptions) Value {
	return b.op(ir.OpConvWeightGrad, o.attrs().With("weight_shape", ir.Ints(weightShape...)), x, dy)
}

// PoolOptions are the attributes of a 2-D pooling. Kernel is required; a
// nil Stride is the kernel, nil Padding 0 and nil Dilation 1; a list has
// two entries or one for both axes. Dilation is for max pooling only;
// ExcludePad (avg pooling only) divides by the number of input elements in
// the window instead of the window size (count_include_pad=false).
type PoolOptions struct {
	Kernel, Stride, Padding, Dilation []int
	ExcludePad                        bool
}

func (o PoolOptions) attrs(avg bool) ir.Attrs {
	a := ir.MakeAttrs("kernel", ir.Ints(o.Kernel...))
	if o.Stride != nil {
		a = a.With("stride", ir.Ints(o.Stride...))
	}
	if o.Padding != nil {
		a = a.With("padding", ir.Ints(o.Padding...))
	}
	if o.Dilation != nil && !avg {
		a = a.With("dilation", ir.Ints(o.Dilation...))
	}
	if avg {
		a = a.With("count_include_pad", ir.BoolAttr(!o.ExcludePad))
	}
	return a
}

// MaxPool2d returns the maximum over 2-D windows of x [N,C,H,W] or [C,H,W],
// as torch.nn.functional.max_pool2d (ceil_mode=False).
func (b *Builder) MaxPool2d(x Value, o PoolOptions) Value {
	return b.op(ir.OpMaxPool2d, o.attrs(false), x)
}

// MaxPool2dGrad returns the gradient of MaxPool2d(x, o) for the upstream
// gradient dy: each window's dy at its arg max in x.
func (b *Builder) MaxPool2dGrad(dy, x Value, o PoolOptions) Value {
	return b.op(ir.OpMaxPool2dGrad, o.attrs(false), dy, x)
}

// MaxPool2dSelect returns g, shaped like x, taken at each window's arg max
// in x: the gradient of MaxPool2dGrad with respect to dy.
func (b *Builder) MaxPool2dSelect(g, x Value, o PoolOptions) Value {
	return b.op(ir.OpMaxPool2dSelect, o.attrs(false), g, x)
}

// AvgPool2d returns the mean over 2-D windows of x [N,C,H,W] or [C,H,W], as
// torch.nn.functional.avg_pool2d (ceil_mode=False, no divisor_override).
func (b *Builder) AvgPool2d(x Value, o PoolOptions) Value {
	return b.op(ir.OpAvgPool2d, o.attrs(true), x)
}

// AvgPool2dGrad returns the gradient of AvgPool2d of an input of shape
// inputShape for the upstream gradient dy.
func (b *Builder) AvgPool2dGrad(dy Value, inputShape []int, o PoolOptions) Value {
	return b.op(ir.OpAvgPool2dGrad, o.attrs(true).With("input_shape", ir.Ints(inputShape...)), dy)
}

// LayerNorm normalizes x over its trailing axes (nil: the last one) with
// the biased variance and eps (PyTorch's default is 1e-5), then scales by
// weight and shifts by bias, each of the normalized shape, unless they are
// the zero Value (bias only with weight), as torch.nn.functional.layer_norm.
func (b *Builder) LayerNorm(x, weight, bias Value, axes []int, eps float64) Value {
	a := ir.MakeAttrs("eps", ir.Float(eps))
	if axes != nil {
		a = a.With("axes", ir.Ints(axes...))
	}
	return b.op(ir.OpLayerNorm, a, nnOptional([]Value{x}, weight, bias)...)
}

// LayerNormGrad returns the gradient of LayerNorm(x, weight, ..., axes,
// eps) with respect to x for the upstream gradient dy (weight the zero
// Value when the norm has none).
func (b *Builder) LayerNormGrad(dy, x, weight Value, axes []int, eps float64) Value {
	a := ir.MakeAttrs("eps", ir.Float(eps))
	if axes != nil {
		a = a.With("axes", ir.Ints(axes...))
	}
	return b.op(ir.OpLayerNormGrad, a, nnOptional([]Value{dy, x}, weight)...)
}

// BatchNorm normalizes x [N,C,...] per channel with the batch's mean and
// biased variance and eps (PyTorch's default is 1e-5), then scales by
// weight [C] and shifts by bias [C]: torch batch_norm in training mode,
// without running statistics.
func (b *Builder) BatchNorm(x, weight, bias Value, eps float64) Value {
	return b.op(ir.OpBatchNorm, ir.MakeAttrs("eps", ir.Float(eps)), x, weight, bias)
}

// Dropout zeroes each element of x with probability p and scales the rest
// by 1/(1-p); the mask is a function of seed, the step and the element's
// index, so give each dropout its own seed. Compiling with Inference
// removes it.
func (b *Builder) Dropout(x Value, p float64, seed int) Value {
	return b.op(ir.OpDropout, ir.MakeAttrs("p", ir.Float(p), "seed", ir.Int(seed)), x)
}
