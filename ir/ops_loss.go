package ir

import "fmt"

// Losses, with PyTorch's semantics. Each takes {reduction}: "mean" (the
// default) and "sum" give a scalar; "none" keeps the unreduced losses, in
// the broadcast shape for the elementwise losses and [N] for the per-sample
// ones (nll_loss, softmax_cross_entropy).

// Reductions of a loss.
const (
	lossMean = "mean"
	lossSum  = "sum"
	lossNone = "none"
)

var lossReductionAttr = AttrSpec{Name: "reduction", Kind: AttrString, Default: defString(lossMean),
	Doc: `"mean" (average over the losses), "sum", or "none" (the unreduced losses)`}

func lossOps() []opRow {
	red := []AttrSpec{lossReductionAttr}
	return []opRow{
		{OpSoftmaxCrossEntropy, OpInfo{Name: "softmax_cross_entropy", Args: []string{"logits", "target"}, Attrs: red,
			Doc:   "cross-entropy of softmax(logits [N,C]) against integer labels [N] (-log_softmax(logits)[n, labels[n]]) or class probabilities [N,C] (-sum over C of target*log_softmax(logits)), per row (torch cross_entropy without weight, ignore_index and label_smoothing: every label must be in [0,C))",
			Infer: lossInferSoftmaxCE, Grad: lossGradSoftmaxCE, Cost: costPerElement(4), Indices: classLabels}},
		{OpMSELoss, OpInfo{Name: "mse_loss", Args: []string{"a", "b"}, Attrs: red,
			Doc:   "(a - b)^2 over the broadcast shape (torch mse_loss)",
			Infer: lossInferElementwise, Grad: lossGradMSE}},
		{OpL1Loss, OpInfo{Name: "l1_loss", Args: []string{"a", "b"}, Attrs: red,
			Doc:   "|a - b| over the broadcast shape (torch l1_loss); gradient 0 where a == b",
			Infer: lossInferElementwise, Grad: lossGradL1}},
		{OpHuberLoss, OpInfo{Name: "huber_loss", Args: []string{"a", "b"},
			Attrs: []AttrSpec{
				{Name: "delta", Kind: AttrFloat, Default: defFloat(1), Doc: "where the loss turns from quadratic to linear; must be positive"},
				lossReductionAttr,
			},
			Doc:   "0.5*d^2 where |d| < delta, else delta*(|d| - 0.5*delta), d = a - b over the broadcast shape (torch huber_loss)",
			Infer: lossInferHuber, Grad: lossGradHuber}},
		{OpBCELoss, OpInfo{Name: "bce_loss", Args: []string{"input", "target"}, Attrs: red,
			Doc:   "-(target*log(input) + (1 - target)*log(1 - input)) with each log clamped at -100, input and target in [0,1] and of one shape (torch binary_cross_entropy without weight); the target gradient is log(1-input) - log(input) with the same clamps, where torch leaves them out",
			Infer: lossInferSameShape, Grad: lossGradBCE, Cost: costPerElement(4)}},
		{OpBCEWithLogits, OpInfo{Name: "bce_with_logits", Args: []string{"input", "target"}, Attrs: red,
			Doc:   "bce_loss(sigmoid(input), target), computed as max(x,0) - x*target + log1p(exp(-|x|)), stable for any x; input and target of one shape (torch binary_cross_entropy_with_logits without weight and pos_weight)",
			Infer: lossInferSameShape, Grad: lossGradBCEWithLogits, Cost: costPerElement(4)}},
		{OpNLLLoss, OpInfo{Name: "nll_loss", Args: []string{"input", "labels"}, Attrs: red,
			Doc:   "-input[n, labels[n]] for log-probabilities input [N,C] and integer labels [N] (torch nll_loss without weight and ignore_index: every label must be in [0,C))",
			Infer: lossInferNLL, Grad: lossGradNLL, Cost: costPerElement(4), Indices: classLabels}},
	}
}

// lossReduction returns the reduction attribute, checked.
func lossReduction(a Attrs) (string, error) {
	switch r := a.Str("reduction", lossMean); r {
	case lossMean, lossSum, lossNone:
		return r, nil
	default:
		return "", fmt.Errorf(`reduction must be "mean", "sum" or "none", found %q`, r)
	}
}

// lossResult is the type of a loss with reduction r whose unreduced losses
// have type t.
func lossResult(t Type, r string) Type {
	if r == lossNone {
		return t
	}
	return Type{t.DType, Shape{}}
}

func lossInferElementwise(args []Type, a Attrs) (Type, error) {
	r, err := lossReduction(a)
	if err != nil {
		return Type{}, err
	}
	if !args[0].DType.IsFloat() {
		return Type{}, fmt.Errorf("expected float operands (f32 or f64), found %s", args[0])
	}
	t, err := inferBroadcast(args, a)
	if err != nil {
		return Type{}, err
	}
	return lossResult(t, r), nil
}

func lossInferHuber(args []Type, a Attrs) (Type, error) {
	if d := a.Float("delta", 1); !(d > 0) {
		return Type{}, fmt.Errorf("delta must be positive, found %s", formatFloat(d))
	}
	return lossInferElementwise(args, a)
}

func lossInferSameShape(args []Type, a Attrs) (Type, error) {
	r, err := lossReduction(a)
	if err != nil {
		return Type{}, err
	}
	in, tg := args[0], args[1]
	if !in.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float input (f32 or f64), found %s", in)
	}
	if !tg.Equal(in) {
		return Type{}, fmt.Errorf("expected a target of the input's type %s, found %s", in, tg)
	}
	return lossResult(in, r), nil
}

// lossInferRows checks float [N,C] scores and integer labels [N].
func lossInferRows(what string, args []Type, a Attrs) (Type, error) {
	r, err := lossReduction(a)
	if err != nil {
		return Type{}, err
	}
	x, lb := args[0], args[1]
	if !x.DType.IsFloat() || len(x.Shape) != 2 {
		return Type{}, fmt.Errorf("expected float %s [N,C], found %s", what, x)
	}
	if !lb.DType.IsInt() || len(lb.Shape) != 1 || lb.Shape[0] != x.Shape[0] {
		return Type{}, fmt.Errorf("expected integer labels [%d] for %s %s, found %s", x.Shape[0], what, x, lb)
	}
	return lossResult(Type{x.DType, Shape{x.Shape[0]}}, r), nil
}

func lossInferNLL(args []Type, a Attrs) (Type, error) {
	return lossInferRows("log-probabilities", args, a)
}

func lossInferSoftmaxCE(args []Type, a Attrs) (Type, error) {
	// A float target of rank 2 is probabilities; anything else is meant
	// as labels and checked as such.
	lg, tg := args[0], args[1]
	if tg.DType.IsFloat() && len(tg.Shape) == 2 {
		r, err := lossReduction(a)
		if err != nil {
			return Type{}, err
		}
		if !lg.DType.IsFloat() || len(lg.Shape) != 2 {
			return Type{}, fmt.Errorf("expected float logits [N,C], found %s", lg)
		}
		if !tg.Equal(lg) {
			return Type{}, fmt.Errorf("expected class probabilities %s (or integer labels [%d]) for logits %s, found %s", lg, lg.Shape[0], lg, tg)
		}
		return lossResult(Type{lg.DType, Shape{lg.Shape[0]}}, r), nil
	}
	return lossInferRows("logits", args, a)
}

// lossScale returns dy scaled for the reduction of loss y over n terms:
// dy/n for "mean", dy for "sum" and "none".
func lossScale(e *Emitter, y, dy ID, n int) ID {
	if e.G.Values[y].Attrs.Str("reduction", lossMean) != lossMean {
		return dy
	}
	return e.mul(dy, e.Scalar(1/float64(max(n, 1)), e.Type(y).DType))
}

// lossExpand returns s (a scalar, or already of shape sh) broadcast to sh.
func lossExpand(e *Emitter, s ID, sh Shape) ID {
	if e.shape(s).Equal(sh) {
		return s
	}
	return e.Op(OpBroadcastTo, MakeAttrs("shape", Ints(sh...)), s)
}

// lossRows returns s, the scaled gradient of a per-sample loss over N rows
// (a scalar, or [N] for "none"), shaped to broadcast against [N,C].
func lossRows(e *Emitter, s ID) ID {
	if sh := e.shape(s); len(sh) == 1 {
		return e.Reshape(s, Shape{sh[0], 1})
	}
	return s
}

func lossGradSoftmaxCE(e *Emitter, y, dy ID) []ID {
	// Labels: d logits = (softmax(logits) - onehot(labels)) * dy.
	// Probabilities: d logits = (softmax(logits)*sum(target) - target) * dy
	// and d target = -log_softmax(logits) * dy, per row.
	logits, target := e.args(y)[0], e.args(y)[1]
	t := e.Type(logits)
	n, c := t.Shape[0], t.Shape[1]
	p := e.Op(OpSoftmax, MakeAttrs("axis", Int(-1)), logits)
	if !e.Type(target).DType.IsFloat() {
		oh := e.Op(OpOneHot, MakeAttrs("classes", Int(c), "dtype", String(t.DType.String())), target)
		scale := lossRows(e, lossScale(e, y, dy, n))
		return []ID{e.mul(e.sub(p, oh), scale), NoID}
	}
	scale := lossRows(e, lossScale(e, y, dy, n))
	st := e.Op(OpSum, MakeAttrs("axes", Ints(1), "keepdims", BoolAttr(true)), target)
	dl := e.mul(e.sub(e.mul(p, st), target), scale)
	ls := e.Op(OpLogSoftmax, MakeAttrs("axis", Int(-1)), logits)
	return []ID{dl, e.neg(e.mul(ls, scale))}
}

func lossGradNLL(e *Emitter, y, dy ID) []ID {
	// d input = -onehot(labels) * dy, per row.
	x, labels := e.args(y)[0], e.args(y)[1]
	t := e.Type(x)
	oh := e.Op(OpOneHot, MakeAttrs("classes", Int(t.Shape[1]), "dtype", String(t.DType.String())), labels)
	scale := lossRows(e, lossScale(e, y, dy, t.Shape[0]))
	return []ID{e.neg(e.mul(oh, scale)), NoID}
}

// lossBoth returns g summed to a's shape and -g summed to b's: the
// gradients of a loss of a - b.
func lossBoth(e *Emitter, g, a, b ID) []ID {
	return []ID{e.SumTo(g, e.shape(a)), e.SumTo(e.neg(g), e.shape(b))}
}

func lossGradMSE(e *Emitter, y, dy ID) []ID {
	// d a = 2 (a - b) dy, d b = -d a, each summed to its operand's shape.
	a, b := e.args(y)[0], e.args(y)[1]
	diff := e.sub(a, b)
	n := e.shape(diff).NumElements()
	var scale ID
	if e.G.Values[y].Attrs.Str("reduction", lossMean) == lossMean {
		scale = e.mul(dy, e.Scalar(2/float64(max(n, 1)), e.Type(y).DType))
	} else {
		scale = e.mul(dy, e.Scalar(2, e.Type(y).DType))
	}
	return lossBoth(e, e.mul(diff, scale), a, b)
}

func lossGradL1(e *Emitter, y, dy ID) []ID {
	// d a = sign(a - b) dy with sign(0) = 0 (torch), written as
	// relu_grad(dy, d) - relu_grad(dy, -d).
	a, b := e.args(y)[0], e.args(y)[1]
	d := e.sub(a, b)
	s := lossExpand(e, lossScale(e, y, dy, e.shape(d).NumElements()), e.shape(d))
	g := e.sub(e.Op(OpReluGrad, nil, s, d), e.Op(OpReluGrad, nil, s, e.neg(d)))
	return lossBoth(e, g, a, b)
}

func lossGradHuber(e *Emitter, y, dy ID) []ID {
	// d a = clamp(d, -delta, delta) dy (torch: d < -delta ? -delta : d >
	// delta ? delta : d): exact on every side, NaN for a NaN d, ±delta for
	// an infinite one.
	a, b := e.args(y)[0], e.args(y)[1]
	delta := e.G.Values[y].Attrs.Float("delta", 1)
	d := e.sub(a, b)
	s := lossExpand(e, lossScale(e, y, dy, e.shape(d).NumElements()), e.shape(d))
	c := e.Op(OpClip, MakeAttrs("max", Float(delta), "min", Float(-delta)), d)
	return lossBoth(e, e.mul(c, s), a, b)
}

func lossGradBCE(e *Emitter, y, dy ID) []ID {
	// d input = dy (x - t) / max(x (1 - x), 1e-12) (torch's EPSILON);
	// d target = dy (clamped log(1 - x) - clamped log(x)), which is
	// bce(x, 1) - bce(x, 0) since the loss is linear in the target.
	x, t := e.args(y)[0], e.args(y)[1]
	xt := e.Type(x)
	s := lossScale(e, y, dy, xt.Shape.NumElements())
	q := e.mul(x, e.sub(e.one(x), x))
	eps := e.Scalar(1e-12, xt.DType)
	den := e.add(q, e.Op(OpRelu, nil, e.sub(eps, q))) // max(q, eps): q exactly where q >= eps
	dx := e.div(e.mul(s, e.sub(x, t)), den)
	none := MakeAttrs("reduction", String(lossNone))
	at1 := e.Op(OpBCELoss, none, x, e.Fill(1, xt))
	at0 := e.Op(OpBCELoss, none, x, e.Fill(0, xt))
	return []ID{dx, e.mul(s, e.sub(at1, at0))}
}

func lossGradBCEWithLogits(e *Emitter, y, dy ID) []ID {
	// d input = dy (sigmoid(x) - t), d target = -dy x (torch).
	x, t := e.args(y)[0], e.args(y)[1]
	s := lossScale(e, y, dy, e.shape(x).NumElements())
	dx := e.mul(s, e.sub(e.Op(OpSigmoid, nil, x), t))
	return []ID{dx, e.neg(e.mul(s, x))}
}
