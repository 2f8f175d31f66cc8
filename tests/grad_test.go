package tests

import (
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// gradCase builds y from params (and inputs); the harness turns it into the
// scalar loss sum(y * r) with a random r, so every element of y carries a
// different weight.
type gradCase struct {
	name   string
	build  func(b *frontends.Builder, dt ir.DType) frontends.Value
	kinds  map[string]valueKind
	labels map[string]int
}

func p(b *frontends.Builder, name string, dt ir.DType, shape ...int) frontends.Value {
	return b.Param(name, dt, shape...)
}

var gradCases = []gradCase{
	{name: "add same shape", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Add(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "add broadcast row", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Add(p(b, "a", dt, 3, 4), p(b, "b", dt, 4))
	}},
	{name: "add broadcast both", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Add(p(b, "a", dt, 3, 1), p(b, "b", dt, 1, 4))
	}},
	{name: "sub scalar left", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Sub(p(b, "a", dt), p(b, "b", dt, 2, 3))
	}},
	{name: "mul broadcast middle", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mul(p(b, "a", dt, 2, 3, 4), p(b, "b", dt, 3, 1))
	}},
	{name: "div broadcast", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Div(p(b, "a", dt, 2, 3), p(b, "b", dt, 2, 1))
	}},
	{name: "div by self", kinds: map[string]valueKind{"a": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 5)
		return b.Div(b.Exp(a), a)
	}},
	{name: "neg", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Neg(p(b, "a", dt, 4)) }},
	{name: "exp", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Exp(p(b, "a", dt, 2, 3)) }},
	{name: "log", kinds: map[string]valueKind{"a": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Log(p(b, "a", dt, 2, 3))
	}},
	{name: "sqrt", kinds: map[string]valueKind{"a": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Sqrt(p(b, "a", dt, 2, 3))
	}},
	{name: "tanh", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Tanh(p(b, "a", dt, 2, 3)) }},
	{name: "sigmoid", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Sigmoid(p(b, "a", dt, 2, 3)) }},
	{name: "relu", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Relu(p(b, "a", dt, 3, 4)) }},
	{name: "matmul 2d", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 3, 4), p(b, "b", dt, 4, 5))
	}},
	{name: "matmul vector left", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 4), p(b, "b", dt, 4, 5))
	}},
	{name: "matmul vector right", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 3, 4), p(b, "b", dt, 4))
	}},
	{name: "matmul dot", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 4), p(b, "b", dt, 4))
	}},
	{name: "matmul batched", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 2, 3, 4), p(b, "b", dt, 2, 4, 2))
	}},
	{name: "matmul broadcast batch", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 2, 1, 3, 4), p(b, "b", dt, 3, 4, 2))
	}},
	{name: "matmul batched by matrix", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 2, 3, 4), p(b, "b", dt, 4, 2))
	}},
	{name: "matmul vector by batch", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(p(b, "a", dt, 4), p(b, "b", dt, 2, 4, 3))
	}},
	{name: "matmul transpose_a", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpMatmul, ir.MakeAttrs("transpose_a", ir.BoolAttr(true)), p(b, "a", dt, 4, 3), p(b, "b", dt, 4, 5))
	}},
	{name: "matmul transpose_b", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpMatmul, ir.MakeAttrs("transpose_b", ir.BoolAttr(true)), p(b, "a", dt, 3, 4), p(b, "b", dt, 5, 4))
	}},
	{name: "matmul transpose both, batched by matrix", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpMatmul, ir.MakeAttrs("transpose_a", ir.BoolAttr(true), "transpose_b", ir.BoolAttr(true)), p(b, "a", dt, 2, 4, 3), p(b, "b", dt, 5, 4))
	}},
	{name: "matmul transpose_b, vector by broadcast batch", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpMatmul, ir.MakeAttrs("transpose_b", ir.BoolAttr(true)), p(b, "a", dt, 4), p(b, "b", dt, 2, 3, 4))
	}},
	{name: "transpose default", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Transpose(p(b, "a", dt, 2, 3, 4))
	}},
	{name: "transpose perm", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Transpose(p(b, "a", dt, 2, 3, 4), 1, 2, 0)
	}},
	{name: "reshape", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Reshape(p(b, "a", dt, 2, 3, 4), 4, -1)
	}},
	{name: "broadcast_to", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.BroadcastTo(p(b, "a", dt, 3, 1), 2, 3, 4)
	}},
	{name: "sum all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Sum(p(b, "a", dt, 2, 3, 4), nil, false)
	}},
	{name: "sum two axes", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Sum(p(b, "a", dt, 2, 3, 4), []int{0, 2}, false)
	}},
	{name: "sum keepdims negative axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Sum(p(b, "a", dt, 2, 3, 4), []int{-2}, true)
	}},
	{name: "mean two axes keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mean(p(b, "a", dt, 2, 3, 4), []int{1, 2}, true)
	}},
	{name: "mean all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mean(p(b, "a", dt, 3, 5), nil, false)
	}},
	{name: "softmax last", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Softmax(p(b, "a", dt, 3, 5), -1)
	}},
	{name: "softmax first axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Softmax(p(b, "a", dt, 3, 2, 4), 0)
	}},
	{name: "log_softmax", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogSoftmax(p(b, "a", dt, 3, 5), -1)
	}},
	{name: "log_softmax middle axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogSoftmax(p(b, "a", dt, 2, 3, 4), 1)
	}},
	{name: "softmax_cross_entropy", labels: map[string]int{"y": 5}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropy(p(b, "a", dt, 4, 5), b.Input("y", ir.I64, 4))
	}},
	{name: "softmax_cross_entropy i32 labels", labels: map[string]int{"y": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.SoftmaxCrossEntropy(p(b, "a", dt, 6, 3), b.Input("y", ir.I32, 6))
	}},
	{name: "mse_loss", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.MSELoss(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "mse_loss broadcast", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.MSELoss(p(b, "a", dt, 3, 4), p(b, "b", dt, 4))
	}},
	{name: "value used twice", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 3, 4)
		return b.Add(b.Mul(a, a), b.Tanh(a))
	}},
	{name: "value used by three ops", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 2, 3)
		w := p(b, "w", dt, 3, 3)
		return b.Sub(b.Matmul(a, w), b.Mul(b.Sigmoid(a), b.Sum(a, []int{1}, true)))
	}},
	{name: "constant operand", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mul(p(b, "a", dt, 2, 2), b.Const(dt, []int{2, 2}, 1, -2, 3, 0.5))
	}},
	{name: "input operand", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Matmul(b.Input("x", dt, 3, 4), p(b, "w", dt, 4, 2))
	}},
	{name: "mlp", labels: map[string]int{"y": 3}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Input("x", dt, 4, 5)
		h := b.Tanh(b.Add(b.Matmul(x, p(b, "w1", dt, 5, 6)), p(b, "b1", dt, 6)))
		z := b.Add(b.Matmul(h, p(b, "w2", dt, 6, 3)), p(b, "b2", dt, 3))
		return b.SoftmaxCrossEntropy(z, b.Input("y", ir.I64, 4))
	}},
}

func buildLoss(t *testing.T, c gradCase, dt ir.DType) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("grad")
	y := c.build(b, dt)
	r := b.Input("r", dt, y.Type().Shape...)
	b.Output(b.Sum(b.Mul(y, r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGradients checks every core op's gradient rule against central
// differences in float64, through the whole pipeline (autodiff, dce, plan,
// CPU executor), and the float32 kernels against the same numbers.
func TestGradients(t *testing.T) {
	for _, c := range gradCases {
		t.Run(c.name, func(t *testing.T) {
			for _, dt := range []ir.DType{ir.F64, ir.F32} {
				g := buildLoss(t, c, dt)
				f := randomFeeds(g, 1, c.kinds, c.labels)
				tol := f64Tol
				if dt == ir.F32 {
					tol = f32Tol
				}
				checkGrads(t, g, f, tol)
			}
		})
	}
}

// TestEveryDifferentiableOpHasAGradientTest keeps the table above complete:
// a differentiable op added to the table without a case here fails.
func TestEveryDifferentiableOpHasAGradientTest(t *testing.T) {
	covered := map[ir.Op]bool{}
	for _, c := range gradCases {
		g := buildLoss(t, c, ir.F64)
		for _, v := range g.Values {
			covered[v.Op] = true
		}
	}
	covered[ir.OpReluGrad] = coveredBySecondOrder
	for _, op := range ir.Ops() {
		if op.Differentiable() && !covered[op] {
			t.Errorf("op %s has a gradient rule but no case in gradCases", op)
		}
	}
}
