package tests

import (
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// Gradient checks of the neural-network layers (ir/ops_nn.go).

func init() { gradCases = append(gradCases, nnGradCases...) }

// nnSpaced returns a constant of shape s whose elements are a permutation
// of 0, 3, 6, ...: added to harness values (|v| <= 1) it gives inputs whose
// elements differ by at least 1, so no max-pool window has a tie, or an
// arg max that a finite-difference step can move.
func nnSpaced(b *frontends.Builder, dt ir.DType, s ...int) frontends.Value {
	n := ir.Shape(s).NumElements()
	vals := make([]float64, n)
	for i := range vals {
		vals[i] = 3 * float64((i*7+3)%n) // 7 is prime to every n used below
	}
	return b.Const(dt, s, vals...)
}

var nnGradCases = []gradCase{
	// Convolutions: gradients for x, w and bias.
	{name: "nn conv1d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Conv1d(p(b, "x", dt, 2, 3, 7), p(b, "w", dt, 4, 3, 3), p(b, "b", dt, 4), frontends.ConvOptions{})
	}},
	{name: "nn conv1d stride 2 padding 1 dilation 2 groups 2", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Conv1d(p(b, "x", dt, 2, 4, 9), p(b, "w", dt, 6, 2, 3), p(b, "b", dt, 6),
			frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}, Groups: 2})
	}},
	{name: "nn conv2d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Conv2d(p(b, "x", dt, 2, 3, 5, 4), p(b, "w", dt, 4, 3, 3, 2), p(b, "b", dt, 4), frontends.ConvOptions{})
	}},
	{name: "nn conv2d stride 2 padding 1 dilation 2 groups 2", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Conv2d(p(b, "x", dt, 2, 4, 7, 6), p(b, "w", dt, 4, 2, 3, 2), p(b, "b", dt, 4),
			frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}, Groups: 2})
	}},
	{name: "nn conv2d depthwise no bias", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Conv2d(p(b, "x", dt, 1, 3, 5, 5), p(b, "w", dt, 3, 1, 3, 3), frontends.Value{},
			frontends.ConvOptions{Stride: []int{1, 2}, Padding: []int{1, 0}, Groups: 3})
	}},
	// The gradient ops as ops of their own, so their rules are checked.
	{name: "nn conv_input_grad 1d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.ConvInputGrad(p(b, "dy", dt, 2, 6, 4), p(b, "w", dt, 6, 2, 3), []int{2, 4, 9},
			frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}, Groups: 2})
	}},
	{name: "nn conv_input_grad 2d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.ConvInputGrad(p(b, "dy", dt, 2, 4, 3, 3), p(b, "w", dt, 4, 2, 3, 2), []int{2, 4, 7, 6},
			frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}, Groups: 2})
	}},
	{name: "nn conv_weight_grad 1d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.ConvWeightGrad(p(b, "x", dt, 2, 4, 9), p(b, "dy", dt, 2, 6, 4), []int{6, 2, 3},
			frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}, Groups: 2})
	}},
	{name: "nn conv_weight_grad 2d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.ConvWeightGrad(p(b, "x", dt, 2, 4, 7, 6), p(b, "dy", dt, 2, 4, 3, 3), []int{4, 2, 3, 2},
			frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}, Dilation: []int{2}, Groups: 2})
	}},

	// Pooling. Max pooling reads a + spaced constants (distinct values, no
	// tie within the finite-difference step).
	{name: "nn max_pool2d padding", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Add(p(b, "a", dt, 2, 2, 5, 5), nnSpaced(b, dt, 2, 2, 5, 5))
		return b.MaxPool2d(x, frontends.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})
	}},
	{name: "nn max_pool2d dilation unbatched", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Add(p(b, "a", dt, 2, 5, 6), nnSpaced(b, dt, 2, 5, 6))
		return b.MaxPool2d(x, frontends.PoolOptions{Kernel: []int{2, 3}, Stride: []int{1}, Dilation: []int{2, 1}})
	}},
	{name: "nn max_pool2d_grad", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Add(p(b, "a", dt, 1, 2, 5, 5), nnSpaced(b, dt, 1, 2, 5, 5))
		return b.MaxPool2dGrad(p(b, "dy", dt, 1, 2, 3, 3), x, frontends.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})
	}},
	{name: "nn max_pool2d_select", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Add(p(b, "a", dt, 1, 2, 5, 5), nnSpaced(b, dt, 1, 2, 5, 5))
		return b.MaxPool2dSelect(p(b, "g", dt, 1, 2, 5, 5), x, frontends.PoolOptions{Kernel: []int{2}, Stride: []int{1}})
	}},
	{name: "nn avg_pool2d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.AvgPool2d(p(b, "a", dt, 2, 2, 4, 6), frontends.PoolOptions{Kernel: []int{2, 3}})
	}},
	{name: "nn avg_pool2d padding", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.AvgPool2d(p(b, "a", dt, 1, 2, 5, 5), frontends.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}})
	}},
	{name: "nn avg_pool2d padding excluded", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.AvgPool2d(p(b, "a", dt, 1, 2, 5, 5), frontends.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}, ExcludePad: true})
	}},
	{name: "nn avg_pool2d_grad", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.AvgPool2dGrad(p(b, "dy", dt, 1, 2, 3, 3), []int{1, 2, 5, 5}, frontends.PoolOptions{Kernel: []int{3}, Stride: []int{2}, Padding: []int{1}, ExcludePad: true})
	}},

	// Normalizations.
	{name: "nn layer_norm", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNorm(p(b, "x", dt, 3, 5), frontends.Value{}, frontends.Value{}, nil, 1e-5)
	}},
	{name: "nn layer_norm weight", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNorm(p(b, "x", dt, 3, 5), p(b, "w", dt, 5), frontends.Value{}, nil, 1e-5)
	}},
	{name: "nn layer_norm weight bias one axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNorm(p(b, "x", dt, 2, 3, 4), p(b, "w", dt, 4), p(b, "b", dt, 4), []int{-1}, 1e-5)
	}},
	{name: "nn layer_norm weight bias two axes", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNorm(p(b, "x", dt, 2, 3, 4), p(b, "w", dt, 3, 4), p(b, "b", dt, 3, 4), []int{1, 2}, 0.01)
	}},
	{name: "nn layer_norm two axes no weight", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNorm(p(b, "x", dt, 2, 3, 4), frontends.Value{}, frontends.Value{}, []int{-2, -1}, 1e-5)
	}},
	{name: "nn layer_norm_grad", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNormGrad(p(b, "dy", dt, 3, 5), p(b, "x", dt, 3, 5), p(b, "w", dt, 5), nil, 1e-5)
	}},
	{name: "nn layer_norm_grad two axes no weight", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LayerNormGrad(p(b, "dy", dt, 2, 3, 4), p(b, "x", dt, 2, 3, 4), frontends.Value{}, []int{1, 2}, 0.01)
	}},
	{name: "nn batch_norm 2d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BatchNorm(p(b, "x", dt, 4, 3), p(b, "w", dt, 3), p(b, "b", dt, 3), 1e-5)
	}},
	{name: "nn batch_norm 4d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BatchNorm(p(b, "x", dt, 2, 3, 2, 2), p(b, "w", dt, 3), p(b, "b", dt, 3), 1e-3)
	}},

	// dropout with p = 0 is the identity at every step; the harness's
	// numeric runner advances the step between evaluations, so p > 0 is
	// checked by TestGradientDropout below with the step held at 0.
	{name: "nn dropout p=0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Dropout(p(b, "x", dt, 3, 4), 0, 1)
	}},
}

// TestGradientDropout checks dropout's gradient (dropout of dy with the
// same attributes, hence the same mask) against central differences taken
// at step 0: the numeric executor is reset before every evaluation so that
// every evaluation draws the mask the analytic step used.
func TestGradientDropout(t *testing.T) {
	for _, dt := range []ir.DType{ir.F64, ir.F32} {
		b := frontends.NewBuilder("dropout")
		x := p(b, "x", dt, 4, 5)
		y := b.Dropout(b.Tanh(x), 0.4, 9)
		b.Output(b.Sum(b.Mul(y, b.Input("r", dt, 4, 5)), nil, false))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		f := randomFeeds(g, 1, nil, nil)
		analytic := newRunner(t, g, kiln.Options{Grad: true})
		analytic.run(f)
		got := analytic.get("grad/x")
		g64, err := g.Promote()
		if err != nil {
			t.Fatal(err)
		}
		numeric := newRunner(t, g64, kiln.Options{})
		const h = 1e-3
		eval := func(j int, d float64) float64 {
			old := f["x"][j]
			f["x"][j] = old + d
			if err := numeric.x.Reset(0); err != nil {
				t.Fatal(err)
			}
			numeric.run(f)
			f["x"][j] = old
			return numeric.get(g.Values[g.Outputs[0]].Name)[0]
		}
		tol := f64Tol
		if dt == ir.F32 {
			tol = f32Tol
		}
		dropped := 0
		for j := range got {
			want := (eval(j, -2*h) - 8*eval(j, -h) + 8*eval(j, h) - eval(j, 2*h)) / (12 * h)
			if math.Abs(got[j]-want) > tol.atol+tol.rtol*math.Abs(want) {
				t.Errorf("%s grad/x[%d]: analytic %.12g, numeric %.12g", dt, j, got[j], want)
			}
			if got[j] == 0 && math.Abs(want) < 1e-12 {
				dropped++ // exactly 0 analytically; the stencil leaves rounding
			}
		}
		// The check means something only if the mask drops some elements
		// and keeps others.
		if dropped == 0 || dropped == len(got) {
			t.Errorf("%s: %d of %d elements dropped", dt, dropped, len(got))
		}
	}
}

// TestSecondOrderNN differentiates a graph that already holds the backward
// of a small CNN (conv2d, layer_norm, avg_pool2d, batch_norm), so that the
// rules of conv_input_grad, conv_weight_grad and avg_pool2d_grad and the
// composite normalization gradients are differentiated in turn, and checks
// the second derivatives against central differences of the first.
func TestSecondOrderNN(t *testing.T) {
	b := frontends.NewBuilder("second_nn")
	x := b.Param("x", ir.F64, 2, 2, 5, 5)
	w := b.Param("w", ir.F64, 3, 2, 3, 3)
	h := b.Conv2d(x, w, b.Param("bias", ir.F64, 3), frontends.ConvOptions{Stride: []int{2}, Padding: []int{1}})
	h = b.LayerNorm(h, b.Param("lnw", ir.F64, 3, 3), frontends.Value{}, []int{-2, -1}, 1e-5)
	h = b.AvgPool2d(h, frontends.PoolOptions{Kernel: []int{2}, Stride: []int{1}})
	h = b.BatchNorm(h, b.Param("bnw", ir.F64, 3), b.Param("bnb", ir.F64, 3), 1e-5)
	y := b.Tanh(h)
	b.Output(b.Sum(b.Mul(b.Mul(y, y), b.Input("r", ir.F64, 2, 3, 2, 2)), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	squaredGradLoss(t, g)
	for _, op := range []ir.Op{ir.OpConvInputGrad, ir.OpConvWeightGrad, ir.OpAvgPool2dGrad} {
		if len(g.IDsOf(op)) == 0 {
			t.Fatalf("the first-order graph has no %s; the test would not exercise its rule", op)
		}
	}
	f := randomFeeds(g, 3, nil, nil)
	checkGrads(t, g, f, f64Tol)
}
