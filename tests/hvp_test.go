package tests

import (
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// hvpCases are scalar losses of params; TestHessianVectorProducts
// differentiates each twice.
var hvpCases = []struct {
	name   string
	kinds  map[string]valueKind
	labels map[string]int
	build  func(b *frontends.Builder) frontends.Value
}{
	{name: "elementwise", kinds: map[string]valueKind{"c": positive}, build: func(b *frontends.Builder) frontends.Value {
		a := b.Param("a", ir.F64, 3, 4)
		c := b.Param("c", ir.F64, 4)
		y := b.Add(b.Mul(b.Tanh(a), b.Sigmoid(a)), b.Div(b.Exp(b.Mul(a, a)), c))
		y = b.Add(y, b.Log(b.Sqrt(b.BroadcastTo(c, 3, 4))))
		return b.Sum(b.Sub(y, b.Neg(b.Mul(y, y))), nil, false)
	}},
	{name: "matmul", build: func(b *frontends.Builder) frontends.Value {
		a := b.Param("a", ir.F64, 2, 3, 4)
		w := b.Param("w", ir.F64, 4, 5)
		v := b.Param("v", ir.F64, 5)
		h := b.Tanh(b.Matmul(a, w))
		return b.Sum(b.Mul(b.Matmul(h, v), b.Matmul(h, v)), nil, false)
	}},
	{name: "reductions", build: func(b *frontends.Builder) frontends.Value {
		a := b.Param("a", ir.F64, 2, 3, 4)
		s := b.Sum(b.Mul(a, a), []int{0, 2}, true)
		m := b.Mean(b.Exp(a), []int{1}, false)
		return b.Add(b.Sum(b.Mul(s, s), nil, false), b.Mean(b.Mul(m, b.Transpose(b.Sum(a, []int{1}, false), 0, 1)), nil, false))
	}},
	{name: "softmax", labels: map[string]int{"y": 5}, build: func(b *frontends.Builder) frontends.Value {
		a := b.Param("a", ir.F64, 4, 5)
		w := b.Param("w", ir.F64, 5, 5)
		p := b.Softmax(b.Matmul(a, w), -1)
		ls := b.LogSoftmax(a, 0)
		ce := b.SoftmaxCrossEntropy(b.Mul(a, p), b.Input("y", ir.I64, 4))
		return b.Add(ce, b.Sum(b.Mul(ls, p), nil, false))
	}},
}

// hvpGraph returns g extended to the scalar sum over params p of
// sum(grad_p * v_p), with v_p new inputs named v.P: its gradient with
// respect to the params is the Hessian-vector product H v.
func hvpGraph(t *testing.T, g *ir.Graph) *ir.Graph {
	t.Helper()
	h := g.Clone()
	if err := passes.Autodiff(h); err != nil {
		t.Fatal(err)
	}
	e := ir.NewEmitter(h, "h")
	total := ir.NoID
	for _, gp := range h.Grads {
		v, err := h.Leaf(ir.OpInput, "v."+h.Value(gp.Param).Name, h.Type(gp.Param), nil)
		if err != nil {
			t.Fatal(err)
		}
		term := e.Op(ir.OpSum, ir.MakeAttrs("keepdims", ir.BoolAttr(false)), e.Op(ir.OpMul, nil, gp.Grad, v))
		if total == ir.NoID {
			total = term
		} else {
			total = e.Add(total, term)
		}
	}
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	h.Outputs = []ir.ID{total}
	h.Grads = nil
	if err := passes.DCE(h); err != nil {
		t.Fatal(err)
	}
	return h
}

// TestHessianVectorProducts checks second derivatives: autodiff applied to a
// graph that already contains a backward gives H v, compared with the
// five-point central difference of the (first-order) gradient along v:
// (g(θ-2hv) - 8g(θ-hv) + 8g(θ+hv) - g(θ+2hv)) / 12h, in float64 with
// DESIGN.md's bound.
func TestHessianVectorProducts(t *testing.T) {
	for _, c := range hvpCases {
		t.Run(c.name, func(t *testing.T) {
			b := frontends.NewBuilder("hvp")
			b.Output(c.build(b))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			f := randomFeeds(g, 11, c.kinds, c.labels)
			params := g.Params()
			dirs := randomFeeds(g, 12, nil, nil) // the direction v, one per param
			hg := hvpGraph(t, g)
			hf := feeds{}
			for k, v := range f {
				hf[k] = v
			}
			for _, p := range params {
				name := g.Value(p).Name
				hf["v."+name] = dirs[name]
			}
			analytic := newRunner(t, hg, kiln.Options{Grad: true})
			analytic.run(hf)

			grad := newRunner(t, g, kiln.Options{Grad: true})
			const h = 1e-3
			gradAt := func(d float64) map[string][]float64 {
				moved := feeds{}
				for k, v := range f {
					moved[k] = v
				}
				for _, p := range params {
					name := g.Value(p).Name
					x := make([]float64, len(f[name]))
					for i := range x {
						x[i] = f[name][i] + d*dirs[name][i]
					}
					moved[name] = x
				}
				grad.run(moved)
				out := map[string][]float64{}
				for _, p := range params {
					name := g.Value(p).Name
					out[name] = grad.get("grad/" + name)
				}
				return out
			}
			m2, m1, p1, p2 := gradAt(-2*h), gradAt(-h), gradAt(h), gradAt(2*h)
			for _, p := range params {
				name := g.Value(p).Name
				got := analytic.get("grad/" + name)
				for i := range got {
					num := (m2[name][i] - 8*m1[name][i] + 8*p1[name][i] - p2[name][i]) / (12 * h)
					if d := math.Abs(got[i] - num); !(d <= f64Tol.atol+f64Tol.rtol*math.Abs(num)) {
						t.Errorf("(Hv)[%s][%d]: autodiff %.12g, central difference %.12g", name, i, got[i], num)
					}
				}
			}
		})
	}
}
