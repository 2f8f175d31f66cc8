package tests

import (
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

func init() { gradCases = append(gradCases, actlossCases...) }

// actlossProb maps a drawn value v in ±[0.1, 1] to 0.5 + 0.4v in [0.1, 0.9],
// a probability away from bce's clamps.
func actlossProb(b *frontends.Builder, v frontends.Value, dt ir.DType) frontends.Value {
	return b.Add(b.Mul(v, b.Scalar(0.4, dt)), b.Scalar(0.5, dt))
}

// actlossCases are the gradient checks of the activations and losses,
// against central differences with DESIGN.md's bounds. The drawn values
// keep |x| >= 0.1 away from the kinks at 0; the kinks themselves are
// checked against PyTorch's one-sided values by TestActLossKinks.
var actlossCases = []gradCase{
	{name: "leaky_relu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpLeakyRelu, nil, p(b, "a", dt, 3, 4))
	}},
	{name: "leaky_relu alpha", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LeakyRelu(p(b, "a", dt, 3, 4), 0.2)
	}},
	{name: "prelu per channel", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.PRelu(p(b, "a", dt, 2, 3, 4), p(b, "w", dt, 3))
	}},
	{name: "prelu per channel rank 2", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.PRelu(p(b, "a", dt, 4, 3), p(b, "w", dt, 3))
	}},
	{name: "prelu shared", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.PRelu(p(b, "a", dt, 2, 3, 2), p(b, "w", dt, 1))
	}},
	{name: "prelu scalar weight rank 1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.PRelu(p(b, "a", dt, 5), p(b, "w", dt))
	}},
	{name: "elu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpElu, nil, p(b, "a", dt, 3, 4))
	}},
	{name: "elu alpha", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Elu(p(b, "a", dt, 3, 4), 2.5)
	}},
	{name: "gelu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Gelu(p(b, "a", dt, 3, 4), "")
	}},
	{name: "gelu tanh", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Gelu(p(b, "a", dt, 3, 4), "tanh")
	}},
	// gelu_grad's own rule (gelu twice differentiated), in dy and x.
	{name: "gelu_grad", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpGeluGrad, nil, p(b, "g", dt, 3, 4), b.Mul(p(b, "a", dt, 3, 4), b.Scalar(3, dt)))
	}},
	{name: "gelu_grad tanh", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpGeluGrad, ir.MakeAttrs("approximate", ir.String("tanh")), p(b, "g", dt, 3, 4), b.Mul(p(b, "a", dt, 3, 4), b.Scalar(3, dt)))
	}},
	{name: "silu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Silu(b.Mul(p(b, "a", dt, 3, 4), b.Scalar(4, dt)))
	}},
	{name: "softplus", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpSoftplus, nil, b.Mul(p(b, "a", dt, 3, 4), b.Scalar(4, dt)))
	}},
	{name: "softsign", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpSoftsign, nil, b.Mul(p(b, "a", dt, 3, 4), b.Scalar(4, dt)))
	}},
	// beta*x spans ±[0.3, 3] around the threshold 1: both branches.
	{name: "softplus beta threshold", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Softplus(p(b, "a", dt, 4, 5), 3, 1)
	}},

	{name: "mse_loss sum broadcast left", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.MSELossWith(p(b, "a", dt, 4), p(b, "b", dt, 3, 4), frontends.ReduceSum)
	}},
	{name: "mse_loss none broadcast both", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.MSELossWith(p(b, "a", dt, 3, 1), p(b, "b", dt, 1, 4), frontends.ReduceNone)
	}},
	{name: "l1_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.L1Loss(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4), "")
	}},
	{name: "l1_loss sum broadcast right", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.L1Loss(p(b, "a", dt, 2, 3, 4), p(b, "b", dt, 3, 1), frontends.ReduceSum)
	}},
	{name: "l1_loss none scalar", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.L1Loss(p(b, "a", dt), p(b, "b", dt, 2, 3), frontends.ReduceNone)
	}},
	// |a - b| spans [0, 2]: both sides of delta.
	{name: "huber_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpHuberLoss, nil, p(b, "a", dt, 4, 5), p(b, "b", dt, 4, 5))
	}},
	{name: "huber_loss delta none broadcast", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.HuberLoss(p(b, "a", dt, 4, 1), p(b, "b", dt, 5), 0.5, frontends.ReduceNone)
	}},
	{name: "huber_loss sum broadcast left", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.HuberLoss(p(b, "a", dt, 1, 5), p(b, "b", dt, 3, 5), 0.8, frontends.ReduceSum)
	}},
	{name: "bce_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BCELoss(actlossProb(b, p(b, "a", dt, 3, 4), dt), actlossProb(b, p(b, "b", dt, 3, 4), dt), "")
	}},
	{name: "bce_loss sum", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BCELoss(actlossProb(b, p(b, "a", dt, 5), dt), actlossProb(b, p(b, "b", dt, 5), dt), frontends.ReduceSum)
	}},
	{name: "bce_loss none", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BCELoss(actlossProb(b, p(b, "a", dt, 2, 3), dt), actlossProb(b, p(b, "b", dt, 2, 3), dt), frontends.ReduceNone)
	}},
	{name: "bce_with_logits", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BCEWithLogits(b.Mul(p(b, "a", dt, 3, 4), b.Scalar(5, dt)), actlossProb(b, p(b, "b", dt, 3, 4), dt), "")
	}},
	{name: "bce_with_logits none", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BCEWithLogits(p(b, "a", dt, 2, 3), p(b, "b", dt, 2, 3), frontends.ReduceNone)
	}},
	{name: "bce_with_logits sum", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BCEWithLogits(p(b, "a", dt, 6), p(b, "b", dt, 6), frontends.ReduceSum)
	}},
	{name: "nll_loss", labels: map[string]int{"y": 5}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.NLLLoss(b.LogSoftmax(p(b, "a", dt, 4, 5), -1), b.Input("y", ir.I64, 4), "")
	}},
	{name: "nll_loss none i32", labels: map[string]int{"y": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.NLLLoss(p(b, "a", dt, 6, 3), b.Input("y", ir.I32, 6), frontends.ReduceNone)
	}},
	{name: "nll_loss sum", labels: map[string]int{"y": 4}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.NLLLoss(p(b, "a", dt, 3, 4), b.Input("y", ir.I64, 3), frontends.ReduceSum)
	}},
	{name: "softmax_cross_entropy none", labels: map[string]int{"y": 5}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropyWith(p(b, "a", dt, 4, 5), b.Input("y", ir.I64, 4), frontends.ReduceNone)
	}},
	{name: "softmax_cross_entropy sum", labels: map[string]int{"y": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropyWith(p(b, "a", dt, 4, 3), b.Input("y", ir.I32, 4), frontends.ReduceSum)
	}},
	// Probability targets: gradients for the logits and for the target
	// (which need not sum to 1 for the rule to hold).
	{name: "softmax_cross_entropy probabilities", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropy(b.Mul(p(b, "a", dt, 4, 5), b.Scalar(3, dt)), p(b, "t", dt, 4, 5))
	}},
	{name: "softmax_cross_entropy probabilities softmax target", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropyWith(p(b, "a", dt, 3, 4), b.Softmax(p(b, "t", dt, 3, 4), -1), frontends.ReduceSum)
	}},
	{name: "softmax_cross_entropy probabilities none", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropyWith(p(b, "a", dt, 3, 4), p(b, "t", dt, 3, 4), frontends.ReduceNone)
	}},
}

// actlossKink is a graph evaluated at exact points where PyTorch picks a
// one-sided derivative (or clamps), with the gradients it gives there.
type actlossKink struct {
	name  string
	build func(b *frontends.Builder, dt ir.DType) frontends.Value
	feeds feeds                // the params' values
	r     []float64            // the weights of the loss sum(y*r)
	want  map[string][]float64 // the expected gradient of each param
}

// TestActLossKinks checks the analytic gradient at the kinks against the
// values of PyTorch's backward formulas, where central differences would
// average the two sides (or see the jump). Bounds: DESIGN.md's, against
// the exact expected value.
func TestActLossKinks(t *testing.T) {
	sig1 := 1 / (1 + math.Exp(-1))
	tests := []actlossKink{
		// leaky_relu_backward: x > 0 ? dy : dy*slope, so the slope at 0.
		{name: "leaky_relu at 0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.LeakyRelu(p(b, "a", dt, 3), 0.25)
		}, feeds: feeds{"a": {0, -1, 1}}, r: []float64{2, 2, 2}, want: map[string][]float64{"a": {0.5, 0.5, 2}}},
		// elu_backward (is_result=false): x <= 0 ? dy*alpha*exp(x) : dy.
		{name: "elu at 0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Elu(p(b, "a", dt, 2), 2)
		}, feeds: feeds{"a": {0, 1}}, r: []float64{1, 1}, want: map[string][]float64{"a": {2, 1}}},
		// _prelu_kernel_backward: dx = x > 0 ? dy : w*dy, dw = x > 0 ? 0 : x*dy.
		{name: "prelu at 0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.PRelu(p(b, "a", dt, 1, 2, 2), p(b, "w", dt, 2))
		}, feeds: feeds{"a": {0, -2, 0, 3}, "w": {0.5, -0.25}}, r: []float64{1, 1, 1, 1},
			want: map[string][]float64{"a": {0.5, 0.5, -0.25, 1}, "w": {-2, 0}}},
		// l1_loss: sign(a - b), 0 where a == b.
		{name: "l1_loss at 0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.L1Loss(p(b, "a", dt, 3), p(b, "b", dt, 3), frontends.ReduceSum)
		}, feeds: feeds{"a": {0.5, 1, -1}, "b": {0.5, 0, 0}}, r: []float64{1},
			want: map[string][]float64{"a": {0, 1, -1}, "b": {0, -1, 1}}},
		// huber_loss_backward: d < -delta ? -delta : d > delta ? delta :
		// d, so ±delta at |d| == delta (continuous there).
		{name: "huber_loss at delta", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.HuberLoss(p(b, "a", dt, 4), p(b, "b", dt, 4), 0.5, frontends.ReduceMean)
		}, feeds: feeds{"a": {0.5, -0.5, 0, 3}, "b": {0, 0, 0, 0}}, r: []float64{4},
			want: map[string][]float64{"a": {0.5, -0.5, 0, 0.5}, "b": {-0.5, 0.5, 0, -0.5}}},
		// softplus_backward: beta*x > threshold ? dy : dy*sigmoid(beta*x);
		// at beta*x == threshold the sigmoid side.
		{name: "softplus at threshold", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Softplus(p(b, "a", dt, 3), 2, 1)
		}, feeds: feeds{"a": {0.5, 0.75, 0}}, r: []float64{1, 1, 1}, want: map[string][]float64{"a": {sig1, 1, 0.5}}},
		// binary_cross_entropy_backward: dy*(x - t)/max(x(1 - x), 1e-12), so
		// -1e12 at x = 0 against t = 1; the target gradient is the clamped
		// log(1 - x) - log(x) = 0 - (-100) (torch: +inf).
		{name: "bce_loss at 0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.BCELoss(p(b, "a", dt, 2), p(b, "b", dt, 2), frontends.ReduceSum)
		}, feeds: feeds{"a": {0, 0.5}, "b": {1, 0.5}}, r: []float64{1},
			want: map[string][]float64{"a": {-1e12, 0}, "b": {100, 0}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, dt := range []ir.DType{ir.F64, ir.F32} {
				g := buildLoss(t, gradCase{name: tc.name, build: tc.build}, dt)
				f := feeds{"r": tc.r}
				for k, v := range tc.feeds {
					f[k] = v
				}
				tol := f64Tol
				if dt == ir.F32 {
					tol = f32Tol
				}
				r := newRunner(t, g, kiln.Options{Grad: true})
				r.run(f)
				for name, want := range tc.want {
					got := r.get("grad/" + name)
					for j := range want {
						if math.Abs(got[j]-want[j]) > tol.atol+tol.rtol*math.Abs(want[j]) {
							t.Errorf("%s grad/%s[%d] = %.12g, want %.12g", dt, name, j, got[j], want[j])
						}
					}
				}
			}
		})
	}
}

// TestActLossSecondOrder differentiates each activation and loss twice:
// the gradient rules are written with ops of the table, so the backward
// graph of y = op(params) can itself be differentiated. The loss sum(y*r)
// is differentiated once, sum of the squares of its gradients becomes the
// new loss, and the gradient of that is checked against central
// differences of the first gradient, within DESIGN.md's f64 bound.
func TestActLossSecondOrder(t *testing.T) {
	cases := []gradCase{
		{name: "leaky_relu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.LeakyRelu(p(b, "a", dt, 2, 3), 0.2)
		}},
		{name: "prelu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			w := p(b, "w", dt, 3)
			return b.PRelu(b.Mul(p(b, "a", dt, 2, 3), w), w)
		}},
		{name: "elu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Elu(p(b, "a", dt, 2, 3), 1.5) }},
		{name: "gelu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Gelu(p(b, "a", dt, 2, 3), "none") }},
		{name: "gelu tanh", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Gelu(p(b, "a", dt, 2, 3), "tanh") }},
		{name: "silu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Silu(p(b, "a", dt, 2, 3)) }},
		{name: "softplus", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Softplus(p(b, "a", dt, 2, 3), 2, 20)
		}},
		{name: "mse_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			a := p(b, "a", dt, 2, 3)
			return b.MSELossWith(b.Mul(a, a), p(b, "b", dt, 3), frontends.ReduceMean)
		}},
		{name: "l1_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			a := p(b, "a", dt, 2, 3)
			return b.L1Loss(b.Mul(a, a), p(b, "b", dt, 3), frontends.ReduceNone)
		}},
		{name: "huber_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			a := p(b, "a", dt, 2, 3)
			return b.HuberLoss(b.Mul(a, a), p(b, "b", dt, 3), 0.5, frontends.ReduceSum)
		}},
		{name: "bce_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.BCELoss(actlossProb(b, p(b, "a", dt, 2, 3), dt), actlossProb(b, p(b, "b", dt, 2, 3), dt), frontends.ReduceNone)
		}},
		{name: "bce_with_logits", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			a := p(b, "a", dt, 2, 3)
			return b.BCEWithLogits(b.Mul(a, b.Scalar(3, dt)), b.Mul(a, p(b, "b", dt, 2, 3)), frontends.ReduceMean)
		}},
		{name: "nll_loss", labels: map[string]int{"y": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.NLLLoss(b.LogSoftmax(p(b, "a", dt, 2, 3), -1), b.Input("y", ir.I64, 2), frontends.ReduceNone)
		}},
		{name: "softmax_cross_entropy labels", labels: map[string]int{"y": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.SoftmaxCrossEntropyWith(p(b, "a", dt, 2, 3), b.Input("y", ir.I64, 2), frontends.ReduceSum)
		}},
		{name: "softmax_cross_entropy probabilities", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.SoftmaxCrossEntropyWith(p(b, "a", dt, 2, 3), p(b, "t", dt, 2, 3), frontends.ReduceMean)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := buildLoss(t, c, ir.F64)
			squaredGradLoss(t, g)
			f := randomFeeds(g, 5, c.kinds, c.labels)
			checkGrads(t, g, f, f64Tol)
		})
	}
}
