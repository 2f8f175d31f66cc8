package frontends

import "github.com/kilnml/kiln/ir"

// Activations and losses. The losses take a Reduction; the zero value is
// PyTorch's default, ReduceMean.

// Reduction says how a loss reduces its per-element (or per-sample) losses.
type Reduction string

// The reductions of a loss.
const (
	ReduceMean Reduction = "mean" // the average (also the zero Reduction)
	ReduceSum  Reduction = "sum"  // the sum
	ReduceNone Reduction = "none" // no reduction: one loss per element or sample
)

func reductionAttrs(r Reduction) ir.Attrs {
	if r == "" {
		return nil
	}
	return ir.MakeAttrs("reduction", ir.String(string(r)))
}

// LeakyRelu returns x where x > 0, else alpha*x (torch's negative_slope,
// 0.01 by default there).
func (b *Builder) LeakyRelu(x Value, alpha float64) Value {
	return b.op(ir.OpLeakyRelu, ir.MakeAttrs("alpha", ir.Float(alpha)), x)
}

// PRelu returns x where x > 0, else weight*x, with weight [C] indexed by
// axis 1 of x or [1] shared by every element.
func (b *Builder) PRelu(x, weight Value) Value { return b.op(ir.OpPrelu, nil, x, weight) }

// Elu returns x where x > 0, else alpha*(exp(x) - 1).
func (b *Builder) Elu(x Value, alpha float64) Value {
	return b.op(ir.OpElu, ir.MakeAttrs("alpha", ir.Float(alpha)), x)
}

// Gelu returns x*Phi(x), Phi the standard normal CDF; approximate is "none"
// (or "", exact) or "tanh" (PyTorch's tanh approximation).
func (b *Builder) Gelu(x Value, approximate string) Value {
	var a ir.Attrs
	if approximate != "" {
		a = ir.MakeAttrs("approximate", ir.String(approximate))
	}
	return b.op(ir.OpGelu, a, x)
}

// Silu returns x*sigmoid(x).
func (b *Builder) Silu(x Value) Value { return b.op(ir.OpSilu, nil, x) }

// Softplus returns log(1 + exp(beta*x))/beta, and x where beta*x >
// threshold (PyTorch's defaults are beta 1, threshold 20).
func (b *Builder) Softplus(x Value, beta, threshold float64) Value {
	return b.op(ir.OpSoftplus, ir.MakeAttrs("beta", ir.Float(beta), "threshold", ir.Float(threshold)), x)
}

// MSELossWith returns (x - y)^2 over the broadcast shape, reduced by r.
func (b *Builder) MSELossWith(x, y Value, r Reduction) Value {
	return b.op(ir.OpMSELoss, reductionAttrs(r), x, y)
}

// L1Loss returns |x - y| over the broadcast shape, reduced by r.
func (b *Builder) L1Loss(x, y Value, r Reduction) Value {
	return b.op(ir.OpL1Loss, reductionAttrs(r), x, y)
}

// HuberLoss returns the Huber loss of x - y over the broadcast shape
// (quadratic below delta, linear above), reduced by r.
func (b *Builder) HuberLoss(x, y Value, delta float64, r Reduction) Value {
	return b.op(ir.OpHuberLoss, reductionAttrs(r).With("delta", ir.Float(delta)), x, y)
}

// BCELoss returns the binary cross-entropy of probabilities input against
// target (same shape, both in [0,1]), reduced by r.
func (b *Builder) BCELoss(input, target Value, r Reduction) Value {
	return b.op(ir.OpBCELoss, reductionAttrs(r), input, target)
}

// BCEWithLogits returns the binary cross-entropy of sigmoid(logits) against
// target (same shape), computed stably, reduced by r.
func (b *Builder) BCEWithLogits(logits, target Value, r Reduction) Value {
	return b.op(ir.OpBCEWithLogits, reductionAttrs(r), logits, target)
}

// NLLLoss returns -logp[n, labels[n]] for log-probabilities logp [N,C] and
// integer labels [N], reduced by r over N.
func (b *Builder) NLLLoss(logp, labels Value, r Reduction) Value {
	return b.op(ir.OpNLLLoss, reductionAttrs(r), logp, labels)
}

// SoftmaxCrossEntropyWith returns the cross-entropy of softmax(logits
// [N,C]) against integer labels [N] or class probabilities [N,C], reduced
// by r over N.
func (b *Builder) SoftmaxCrossEntropyWith(logits, target Value, r Reduction) Value {
	return b.op(ir.OpSoftmaxCrossEntropy, reductionAttrs(r), logits, target)
}
