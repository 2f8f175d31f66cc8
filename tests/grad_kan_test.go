package tests

import (
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

func init() { gradCases = append(gradCases, kanGradCases...) }

// kanGrid is a bspline grid for the gradient cases, with the derivative
// taken.
type kanGrid struct {
	lo, hi             float64
	size, order, deriv int
}

var kanDefaultGrid = kanGrid{-1, 1, 5, 3, 0}

func (g kanGrid) withOrder(k int) kanGrid { g.order = k; return g }
func (g kanGrid) withDeriv(d int) kanGrid { g.deriv = d; return g }

// kanX returns x = c + s·p for a param p of the given shape (the harness
// draws |p| in [0.1, 1]): the centres c lie inside every interval of g's
// extended grid, and one beyond each end, at 0.35, 0.5 or 0.65 of the way
// through (a sweep that starts at the middle of the grid), and s = h/10. So x stays at least h/4 from every knot, also
// under the central differences' steps (2e-3·s), where the bases are
// polynomials: the numeric derivative then has no kink to straddle.
func kanX(b *frontends.Builder, dt ir.DType, g kanGrid, shape ...int) frontends.Value {
	h := (g.hi - g.lo) / float64(g.size)
	e := g.order
	intervals := g.size + 2*e + 2 // the extended grid and one more on each side
	n := ir.Shape(shape).NumElements()
	frac := []float64{0.35, 0.5, 0.65}
	c := make([]float64, n)
	for k := range c {
		i := (k+intervals/2)%intervals - 1 // interval [t_i, t_i+1), t_i = lo + (i - e)·h; from the middle
		c[k] = g.lo + (float64(i-e)+frac[(k/intervals)%3])*h
	}
	p := b.Param("x", dt, shape...)
	return b.Add(b.Const(dt, shape, c...), b.Mul(p, b.Scalar(h/10, dt)))
}

// kanBspline applies bspline with g's attributes.
func kanBspline(b *frontends.Builder, x frontends.Value, g kanGrid) frontends.Value {
	if g.deriv > 0 {
		return b.BSplineDerivative(x, g.lo, g.hi, g.size, g.order, g.deriv)
	}
	return b.BSpline(x, g.lo, g.hi, g.size, g.order)
}

func kanBsplineCase(name string, g kanGrid, shape ...int) gradCase {
	return gradCase{name: name, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return kanBspline(b, kanX(b, dt, g, shape...), g)
	}}
}

// kanLayerCase is a KAN layer (frontends.Builder.KANLinear) of out outputs
// on x [batch, in] = kanX, with the grid g: the gradients of x, of the base
// weight and of the spline weight.
func kanLayerCase(name string, g kanGrid, batch, in, out int) gradCase {
	return gradCase{name: name, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := kanX(b, dt, g, batch, in)
		return b.KANLinear("l1", x, out, frontends.KANOptions{GridMin: g.lo, GridMax: g.hi, GridSize: g.size, Order: g.order})
	}}
}

var kanGradCases = []gradCase{
	kanBsplineCase("bspline order 0", kanDefaultGrid.withOrder(0), 13),
	kanBsplineCase("bspline order 1", kanDefaultGrid.withOrder(1), 3, 3),
	kanBsplineCase("bspline order 2", kanDefaultGrid.withOrder(2), 3, 5),
	kanBsplineCase("bspline order 3", kanDefaultGrid, 2, 13),
	kanBsplineCase("bspline order 4", kanDefaultGrid.withOrder(4), 17),
	kanBsplineCase("bspline order 5", kanDefaultGrid.withOrder(5), 19),
	kanBsplineCase("bspline order 6", kanDefaultGrid.withOrder(6), 3, 7),
	kanBsplineCase("bspline order 3 other grid", kanGrid{0, 3, 3, 3, 0}, 2, 2, 3),
	kanBsplineCase("bspline order 4 fine grid", kanGrid{-0.5, 0.25, 9, 4, 0}, 21),
	kanBsplineCase("bspline order 2 derivative 1", kanGrid{-1, 1, 4, 2, 1}, 14),
	kanBsplineCase("bspline order 4 derivative 1", kanDefaultGrid.withOrder(4).withDeriv(1), 2, 9),
	kanBsplineCase("bspline order 5 derivative 2 other grid", kanGrid{0, 3, 3, 5, 2}, 15),
	kanBsplineCase("bspline order 6 derivative 4", kanDefaultGrid.withOrder(6).withDeriv(4), 19),
	kanBsplineCase("bspline order 3 derivative 3", kanDefaultGrid.withDeriv(3), 13),
	kanBsplineCase("bspline scalar", kanDefaultGrid, []int{}...),

	kanLayerCase("kan layer order 2", kanDefaultGrid.withOrder(2), 3, 4, 3),
	kanLayerCase("kan layer order 3", kanDefaultGrid, 4, 3, 5),
	kanLayerCase("kan layer order 4", kanDefaultGrid.withOrder(4), 3, 5, 2),
	kanLayerCase("kan layer order 6 other grid", kanGrid{0, 3, 3, 6, 0}, 2, 4, 3),

	{name: "logic_gate", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogicGate(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4), p(b, "lg", dt, 4, 16))
	}},
	{name: "logic_gate inputs in [0,1]", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogicGate(b.Sigmoid(p(b, "a", dt, 5, 3)), b.Sigmoid(p(b, "b", dt, 5, 3)), p(b, "lg", dt, 3, 16))
	}},
	{name: "logic_gate broadcast a", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogicGate(p(b, "a", dt, 4), p(b, "b", dt, 2, 3, 4), p(b, "lg", dt, 4, 16))
	}},
	{name: "logic_gate broadcast b", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogicGate(p(b, "a", dt, 2, 3, 4), p(b, "b", dt, 3, 1), p(b, "lg", dt, 4, 16))
	}},
	{name: "logic_gate broadcast both", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogicGate(p(b, "a", dt, 2, 1, 4), p(b, "b", dt, 3, 1), p(b, "lg", dt, 4, 16))
	}},
	{name: "logic_gate same input twice", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 2, 5)
		return b.LogicGate(a, a, p(b, "lg", dt, 5, 16))
	}},
	{name: "logic_gate scalar a one gate", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogicGate(p(b, "a", dt), p(b, "b", dt, 5, 1), p(b, "lg", dt, 1, 16))
	}},
	{name: "logic_gate peaked logits", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		lg := b.Mul(p(b, "lg", dt, 3, 16), b.Scalar(6, dt))
		return b.LogicGate(p(b, "a", dt, 4, 3), p(b, "b", dt, 4, 3), lg)
	}},
}

// TestSecondOrderKan differentiates graphs that already hold the backward of
// bspline and logic_gate, so the ops their rules emit (bspline with a higher
// derivative, softmax, matmul with constants) are
// differentiated in turn, and checks the second derivatives against central
// differences of the first, in float64 with DESIGN.md's bound.
func TestSecondOrderKan(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *frontends.Builder) frontends.Value
	}{
		{"bspline order 3", func(b *frontends.Builder) frontends.Value {
			return kanBspline(b, kanX(b, ir.F64, kanDefaultGrid, 2, 13), kanDefaultGrid)
		}},
		{"bspline order 2", func(b *frontends.Builder) frontends.Value {
			g := kanDefaultGrid.withOrder(2)
			return kanBspline(b, kanX(b, ir.F64, g, 11), g)
		}},
		{"bspline order 5 other grid", func(b *frontends.Builder) frontends.Value {
			g := kanGrid{0, 3, 3, 5, 0}
			return kanBspline(b, kanX(b, ir.F64, g, 15), g)
		}},
		{"logic_gate broadcast", func(b *frontends.Builder) frontends.Value {
			return b.LogicGate(b.Param("a", ir.F64, 2, 1, 4), b.Param("b", ir.F64, 3, 4), b.Param("lg", ir.F64, 4, 16))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { kanSecondOrder(t, tc.build) })
	}
}

func kanSecondOrder(t *testing.T, build func(b *frontends.Builder) frontends.Value) {
	b := frontends.NewBuilder("second")
	y := build(b)
	r := b.Input("r", ir.F64, y.Type().Shape...)
	b.Output(b.Sum(b.Mul(y, r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	squaredGradLoss(t, g)
	f := randomFeeds(g, 3, nil, nil)
	checkGrads(t, g, f, f64Tol)
}
