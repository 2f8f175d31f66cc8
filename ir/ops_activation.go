package ir

import (
	"fmt"
	"math"
)

// Activations: elementwise nonlinearities with PyTorch's semantics and
// attribute defaults, and gelu_grad, the derivative of gelu as an op of its
// own so that gelu can be differentiated twice.
//
// The gradient rules are written with ops of the table. Where PyTorch picks
// a one-sided slope at a kink (x == 0 for leaky_relu, prelu and elu; beta*x
// == threshold for softplus), the rules select it with where and the
// comparison PyTorch's backward makes ("x > 0 ?"), so that each side is
// exact and a NaN or an infinity takes the side PyTorch gives it (a product
// such as 0*exp(+Inf - +Inf) would turn it into NaN).

func activationOps() []opRow {
	return []opRow{
		{OpLeakyRelu, OpInfo{Name: "leaky_relu", Args: []string{"x"}, Class: ClassElementwise,
			Doc:   "x where x > 0, else alpha*x (torch leaky_relu); gradient alpha at 0",
			Attrs: []AttrSpec{{Name: "alpha", Kind: AttrFloat, Default: defFloat(0.01), Doc: "slope for x <= 0 (torch negative_slope)"}},
			Infer: inferUnaryFloat, Grad: activationGradLeakyRelu}},
		{OpPrelu, OpInfo{Name: "prelu", Args: []string{"x", "weight"},
			Doc:   "x where x > 0, else weight*x, with weight [C] per channel (axis 1; C = 1 for rank < 2) or [1] shared (torch prelu); gradient weight at 0",
			Infer: activationInferPrelu, Grad: activationGradPrelu}},
		{OpElu, OpInfo{Name: "elu", Args: []string{"x"}, Class: ClassElementwise,
			Doc:   "x where x > 0, else alpha*(exp(x) - 1) (torch elu); gradient alpha at 0",
			Attrs: []AttrSpec{{Name: "alpha", Kind: AttrFloat, Default: defFloat(1), Doc: "scale of the negative part"}},
			Infer: inferUnaryFloat, Grad: activationGradElu}},
		{OpGelu, OpInfo{Name: "gelu", Args: []string{"x"}, Class: ClassElementwise,
			Doc:   `x*Phi(x) with Phi the standard normal CDF (torch gelu); approximate="tanh": 0.5*x*(1 + tanh(sqrt(2/pi)*(x + 0.044715*x^3))); both without torch's cancellation for x << 0, where torch rounds tiny results to 0`,
			Attrs: []AttrSpec{{Name: "approximate", Kind: AttrString, Default: defString("none"), Doc: `"none" (exact, with erf) or "tanh"`}},
			Infer: activationInferGelu, Grad: activationGradGelu}},
		{OpSoftsign, OpInfo{Name: "softsign", Args: []string{"x"}, Class: ClassElementwise,
			Doc:   "x/(1 + |x|) (torch softsign)",
			Infer: inferUnaryFloat, Grad: activationGradSoftsign}},
		{OpSilu, OpInfo{Name: "silu", Args: []string{"x"}, Class: ClassElementwise,
			Doc:   "x*sigmoid(x) (torch silu, swish)",
			Infer: inferUnaryFloat, Grad: activationGradSilu}},
		{OpSoftplus, OpInfo{Name: "softplus", Args: []string{"x"}, Class: ClassElementwise,
			Doc: "log(1 + exp(beta*x))/beta, and x where beta*x > threshold (torch softplus); computed as (max(z,0) + log1p(exp(-|z|)))/beta, z = beta*x, which never overflows",
			Attrs: []AttrSpec{
				{Name: "beta", Kind: AttrFloat, Default: defFloat(1), Doc: "sharpness: softplus(x) = log(1 + exp(beta*x))/beta"},
				{Name: "threshold", Kind: AttrFloat, Default: defFloat(20), Doc: "above this value of beta*x the result is x"},
			},
			Infer: inferUnaryFloat, Grad: activationGradSoftplus}},
		{OpGeluGrad, OpInfo{Name: "gelu_grad", Args: []string{"dy", "x"}, Class: ClassElementwise,
			Doc:   "dy * gelu'(x) (the gradient of gelu)",
			Attrs: []AttrSpec{{Name: "approximate", Kind: AttrString, Default: defString("none"), Doc: `"none" or "tanh", as gelu's`}},
			Infer: activationInferGeluGrad, Grad: activationGradGeluGrad}},
	}
}

// Constants of the tanh form of gelu, as PyTorch's kBeta and kKappa.
const (
	activationGeluK = 0.7978845608028654 // sqrt(2/pi)
	activationGeluC = 0.044715
)

func activationApproximate(a Attrs) (string, error) {
	switch s := a.Str("approximate", "none"); s {
	case "none", "tanh":
		return s, nil
	default:
		return "", fmt.Errorf(`approximate must be "none" or "tanh", found %q`, s)
	}
}

func activationInferGelu(args []Type, a Attrs) (Type, error) {
	if _, err := activationApproximate(a); err != nil {
		return Type{}, err
	}
	return inferUnaryFloat(args, a)
}

func activationInferGeluGrad(args []Type, a Attrs) (Type, error) {
	if _, err := activationApproximate(a); err != nil {
		return Type{}, err
	}
	return inferSameFloat(args, a)
}

// PReLUChannels returns the number of channels prelu's weight is indexed
// by for an input of shape x: x[1] for rank >= 2, else 1 (torch's rule).
func PReLUChannels(x Shape) int {
	if len(x) >= 2 {
		return x[1]
	}
	return 1
}

func activationInferPrelu(args []Type, _ Attrs) (Type, error) {
	x, w := args[0], args[1]
	if !x.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float input (f32 or f64), found %s", x)
	}
	if w.DType != x.DType {
		return Type{}, fmt.Errorf("expected a %s weight like the input %s, found %s", x.DType, x, w)
	}
	if len(w.Shape) > 1 {
		return Type{}, fmt.Errorf("expected a weight of rank 0 or 1, found %s", w)
	}
	c := PReLUChannels(x.Shape)
	n := w.Shape.NumElements()
	if n != 1 && len(x.Shape) < 2 {
		return Type{}, fmt.Errorf("expected a weight of 1 element for input %s (below rank 2 there is one channel), found %s", x, w)
	}
	if n != 1 && n != c {
		return Type{}, fmt.Errorf("expected a weight of 1 or %d elements (the channels, axis 1 of input %s), found %s", c, x, w)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// activationPick returns dy where z > 0 and dy*s elsewhere (NaN included),
// each exactly.
func activationPick(e *Emitter, dy, z, s ID) ID {
	pos := e.Op(OpGreater, nil, z, e.Scalar(0, e.Type(z).DType))
	return e.Op(OpWhere, nil, pos, dy, e.mul(dy, s))
}

func activationGradLeakyRelu(e *Emitter, y, dy ID) []ID {
	// PyTorch: x > 0 ? dy : alpha*dy, so alpha at 0.
	x := e.args(y)[0]
	alpha := e.G.Values[y].Attrs.Float("alpha", 0.01)
	return []ID{activationPick(e, dy, x, e.Scalar(alpha, e.Type(y).DType))}
}

func activationGradPrelu(e *Emitter, y, dy ID) []ID {
	// PyTorch: dx = x > 0 ? dy : w*dy; dw = sum of (x > 0 ? 0 : x*dy) over
	// every axis but the channel axis.
	x, w := e.args(y)[0], e.args(y)[1]
	xs, wsh := e.shape(x), e.shape(w)
	bshape := Shape{} // w as it broadcasts against x
	if wsh.NumElements() != 1 {
		bshape = Shape{wsh.NumElements()}
		for range len(xs) - 2 {
			bshape = append(bshape, 1)
		}
	}
	wb := e.Reshape(w, bshape)
	pos := e.Op(OpGreater, nil, x, e.Scalar(0, e.Type(x).DType))
	zero := e.Scalar(0, e.Type(dy).DType)
	neg := e.Op(OpWhere, nil, pos, zero, dy) // dy where !(x > 0), else 0
	dx := e.Op(OpWhere, nil, pos, dy, e.mul(dy, wb))
	dw := e.Reshape(e.SumTo(e.mul(neg, x), bshape), wsh)
	return []ID{dx, dw}
}

func activationGradElu(e *Emitter, y, dy ID) []ID {
	// PyTorch: x > 0 ? dy : dy*alpha*exp(x), so alpha at 0 (and NaN at
	// NaN). exp(x - relu(x)) = exp(min(x, 0)) is exp(x) where it is used
	// and never overflows.
	x := e.args(y)[0]
	dt := e.Type(y).DType
	alpha := e.G.Values[y].Attrs.Float("alpha", 1)
	ex := e.Op(OpExp, nil, e.sub(x, e.Op(OpRelu, nil, x)))
	return []ID{activationPick(e, dy, x, e.mul(ex, e.Scalar(alpha, dt)))}
}

func activationGradGelu(e *Emitter, y, dy ID) []ID {
	attrs := MakeAttrs("approximate", String(e.G.Values[y].Attrs.Str("approximate", "none")))
	return []ID{e.Op(OpGeluGrad, attrs, dy, e.args(y)[0])}
}

func activationGradGeluGrad(e *Emitter, y, dy ID) []ID {
	// gelu_grad(g, x) = g*gelu'(x) is linear in g; its derivative in x is
	// g*gelu''(x).
	g, x := e.args(y)[0], e.args(y)[1]
	dt := e.Type(y).DType
	approx := e.G.Values[y].Attrs.Str("approximate", "none")
	c := func(v float64) ID { return e.Scalar(v, dt) }
	x2 := e.mul(x, x)
	var second ID
	if approx == "tanh" {
		// u = k(x + c x^3), t = tanh(u): gelu' = (1+t)/2 + x(1-t^2)u'/2, so
		// gelu'' = (1-t^2)(u' + x(u'' - 2t u'^2)/2) with u' = k(1 + 3c x^2),
		// u'' = 6kc x.
		u := e.mul(c(activationGeluK), e.add(x, e.mul(c(activationGeluC), e.mul(x, x2))))
		t := e.Op(OpTanh, nil, u)
		s := e.sub(c(1), e.mul(t, t))
		du := e.mul(c(activationGeluK), e.add(c(1), e.mul(c(3*activationGeluC), x2)))
		ddu := e.mul(c(6*activationGeluK*activationGeluC), x)
		inner := e.sub(ddu, e.mul(e.mul(c(2), t), e.mul(du, du)))
		second = e.mul(s, e.add(du, e.mul(e.mul(c(0.5), x), inner)))
	} else {
		// gelu'' = phi(x)(2 - x^2), phi(x) = exp(-x^2/2)/sqrt(2 pi).
		phi := e.mul(c(1/math.Sqrt(2*math.Pi)), e.Op(OpExp, nil, e.mul(c(-0.5), x2)))
		second = e.mul(phi, e.sub(c(2), x2))
	}
	attrs := MakeAttrs("approximate", String(approx))
	return []ID{e.Op(OpGeluGrad, attrs, dy, x), e.mul(e.mul(dy, g), second)}
}

func activationGradSoftsign(e *Emitter, y, dy ID) []ID {
	// d/dx x/(1+|x|) = 1/(1+|x|)^2, written as PyTorch's autograd composes
	// it from x / d with d = 1 + |x|: dy/d - dy*x/(d*d)*sign(x), so that
	// ±Inf gives NaN as there.
	x := e.args(y)[0]
	d := e.add(e.one(y), e.Op(OpAbs, nil, x))
	viaD := e.Op(OpNeg, nil, e.div(e.mul(dy, x), e.mul(d, d)))
	return []ID{e.add(e.div(dy, d), e.mul(viaD, e.Op(OpSign, nil, x)))}
}

func activationGradSilu(e *Emitter, y, dy ID) []ID {
	// PyTorch: dy * s * (1 + x*(1 - s)), s = sigmoid(x).
	x := e.args(y)[0]
	s := e.Op(OpSigmoid, nil, x)
	one := e.one(y)
	return []ID{e.mul(dy, e.mul(s, e.add(one, e.mul(x, e.sub(one, s)))))}
}

func activationGradSoftplus(e *Emitter, y, dy ID) []ID {
	// PyTorch: beta*x > threshold ? dy : dy*sigmoid(beta*x).
	x := e.args(y)[0]
	dt := e.Type(y).DType
	attrs := e.G.Values[y].Attrs
	z := e.mul(x, e.Scalar(attrs.Float("beta", 1), dt))
	above := e.sub(z, e.Scalar(attrs.Float("threshold", 20), dt)) // > 0 exactly where z > threshold
	return []ID{activationPick(e, dy, above, e.Op(OpSigmoid, nil, z))}
}
