package tests

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// kanLayerNet is a KAN of the given widths (one layer per pair, the orders
// given per layer, or 3 when orders is nil) on a param x [batch,
// widths[0]], with the loss sum(r * y) for an input r [batch, last width]:
// r is the upstream gradient of the last layer's output y.
func kanLayerNet(tb testing.TB, dt ir.DType, batch int, widths, orders []int) *ir.Graph {
	tb.Helper()
	b := frontends.NewBuilder("kan_layers")
	h := b.Param("x", dt, batch, widths[0])
	r := b.Input("r", dt, batch, widths[len(widths)-1])
	for i, w := range widths[1:] {
		o := frontends.KANOptions{Order: 3}
		if orders != nil {
			o.Order = orders[i]
		}
		h = b.KANLinear(fmt.Sprintf("l%d", i+1), h, w, o)
	}
	b.Output(b.Sum(b.Mul(r, h), nil, false))
	g, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// kanKnotDistance returns the distance from v to the nearest knot of the
// default grid ([-1, 1] in 5 intervals) extended by order knots each side.
func kanKnotDistance(v float64, order int) float64 {
	const h = 0.4
	d := math.Inf(1)
	for j := -order; j <= 5+order; j++ {
		d = min(d, math.Abs(v-(-1+float64(j)*h)))
	}
	return d
}

// TestKANGradFourLayers checks the gradients of a 4-layer KAN [3, 4, 4, 3,
// 2] of orders 2, 3, 4 and 3 (every param and the input x) against central
// differences in float64 with DESIGN.md's bound. The differences must not
// cross a knot, where the splines lose a derivative and the reference its
// accuracy: they step by at most 2e-4 in one param (h = 1e-4; the default
// 1e-3 moves the last hidden values by up to about 0.05 through three
// layers), and every layer's input lies at least 0.02 from a knot of its
// grid. The test draws the inputs and params from seed 1, 2, ... and takes
// the first whose hidden values all do (in the forward run of the graph
// itself).
func TestKANGradFourLayers(t *testing.T) {
	widths, orders := []int{3, 4, 4, 3, 2}, []int{2, 3, 4, 3}
	const batch, margin, kanStep = 3, 0.02, 1e-4
	b := frontends.NewBuilder("kan4")
	h := b.Param("x", ir.F64, batch, widths[0])
	r := b.Input("r", ir.F64, batch, widths[len(widths)-1])
	hidden := []frontends.Value{h}
	for i, w := range widths[1:] {
		h = b.KANLinear(fmt.Sprintf("l%d", i+1), h, w, frontends.KANOptions{Order: orders[i]})
		hidden = append(hidden, b.Rename(h, fmt.Sprintf("h%d", i+1)))
	}
	b.Output(b.Sum(b.Mul(r, h), nil, false))
	b.Output(hidden[1 : len(hidden)-1]...)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	fwd := newRunner(t, g, kiln.Options{})
	for seed := uint64(1); seed <= 100; seed++ {
		f := randomFeeds(g, seed, nil, nil)
		for i, in := range widths[:len(widths)-1] { // weights of size ±[0.1, 1]/√in
			for _, w := range []string{"base_weight", "spline_weight"} {
				v := f[fmt.Sprintf("l%d.%s", i+1, w)]
				for j := range v {
					v[j] /= math.Sqrt(float64(in))
				}
			}
		}
		fwd.run(f)
		away := true // every layer's input at least margin from its knots
		for i, name := range []string{"x", "h1", "h2", "h3"} {
			vals := f[name]
			if name != "x" {
				vals = fwd.get(name)
			}
			for _, v := range vals {
				away = away && kanKnotDistance(v, orders[i]) >= margin
			}
		}
		if !away {
			continue
		}
		t.Logf("seed %d: every layer input at least %g from a knot", seed, margin)
		checkGradsStep(t, g, f, f64Tol, kanStep)
		return
	}
	t.Fatalf("no seed in 1..100 keeps every layer input %g from a knot", margin)
}

// kanFit builds a 2-layer KAN [2, 5, 1] of order 3 on batches of batch
// points x, with the loss mse(pred, y) for targets y [batch] first and
// pred second.
func kanFit(tb testing.TB, dt ir.DType, batch int) *ir.Graph {
	tb.Helper()
	b := frontends.NewBuilder("kan2d")
	x := b.Input("x", dt, batch, 2)
	y := b.Input("y", dt, batch)
	h := b.KANLinear("l1", x, 5, frontends.KANOptions{})
	pred := b.Rename(b.Reshape(b.KANLinear("l2", h, 1, frontends.KANOptions{}), batch), "pred")
	b.Output(b.Rename(b.MSELoss(pred, y), "loss"), pred)
	g, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// TestKANOptimumAndDescent trains nothing: on a 2-layer KAN with its
// initial params (float64), the gradient is exactly zero when the targets
// are the network's own output (an exact optimum of the mse), and for
// other targets a step of η along the negative gradient lowers the loss by
// η·|g|² to first order: the decrease is within 1% of it for η = 1e-4.
func TestKANOptimumAndDescent(t *testing.T) {
	const batch = 16
	p, err := kiln.Compile(kanFit(t, ir.F64, batch), kiln.Options{Grad: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := cpu.New(p, cpu.Options{Seed: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	xy, f := kanPoints(rng, batch)
	setTensor(t, x, "x", xy)
	setTensor(t, x, "y", f)
	step := func() float64 {
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		return getTensor(t, x, "loss")[0]
	}
	grads := func() map[string][]float64 {
		gs := map[string][]float64{}
		for _, gp := range p.Graph.Grads {
			name := p.Graph.Value(gp.Param).Name
			gs[name] = getTensor(t, x, "grad/"+name)
		}
		return gs
	}

	// Descent: loss(θ - ηg) against loss(θ) - η|g|².
	l0 := step()
	gs := grads()
	const eta = 1e-4
	norm2 := 0.0
	for name, g := range gs {
		th := getTensor(t, x, name)
		for i, v := range g {
			th[i] -= eta * v
			norm2 += v * v
		}
		setTensor(t, x, name, th)
	}
	l1 := step()
	t.Logf("loss %.10g -> %.10g, decrease %.6g, η|g|² %.6g", l0, l1, l0-l1, eta*norm2)
	if !(l1 < l0) || math.Abs((l0-l1)/(eta*norm2)-1) > 0.01 {
		t.Errorf("a step of %g along -g took the loss from %.10g to %.10g; want a decrease within 1%% of η|g|² = %.6g", eta, l0, l1, eta*norm2)
	}

	// Optimum: targets = the network's output.
	setTensor(t, x, "y", getTensor(t, x, "pred"))
	if l := step(); l != 0 {
		t.Errorf("loss at the targets equal to the output: %g, want 0", l)
	}
	n := 0
	for name, g := range grads() {
		for i, v := range g {
			if v != 0 {
				t.Errorf("grad of %s[%d] = %g at the optimum, want 0", name, i, v)
			}
			n++
		}
	}
	if n != 2*5+16*5+5*1+40*1 {
		t.Errorf("%d gradient elements, want every param's", n)
	}
}

// TestKANParallelBitwise runs KAN networks on 1 worker and on 2, 3 and 8
// and checks that every buffer (the gradients of x and of every param, the
// outputs) and, after two Adam steps, every param and optimizer state, is
// equal bit for bit to the one-worker result. The cases cover batches of
// 1, 16 and 256, a wide output layer (32→1024) and a wide input layer
// (1024→16), where bspline, its derivative, the matmuls and the
// elementwise ops split across the workers, a zero upstream gradient and a
// masked one (r a 0/1 mask with about one 1 in 8).
func TestKANParallelBitwise(t *testing.T) {
	tests := []struct {
		name     string
		batch    int
		widths   []int
		orders   []int
		upstream string // "random", "zero" or "mask"
	}{
		{"batch 1", 1, []int{64, 128, 32}, []int{2, 3}, "random"},
		{"batch 16", 16, []int{64, 128, 32}, []int{3, 4}, "random"},
		{"batch 256", 256, []int{64, 128, 32}, []int{5, 6}, "random"},
		{"wide outputs 32x1024", 64, []int{32, 1024}, []int{3}, "random"},
		{"wide inputs 1024x16", 64, []int{1024, 16}, []int{3}, "random"},
		{"zero upstream gradient", 256, []int{64, 128, 32}, []int{3, 3}, "zero"},
		{"masked upstream gradient", 256, []int{64, 128, 32}, []int{3, 3}, "mask"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := kanLayerNet(t, ir.F32, tc.batch, tc.widths, tc.orders)
			rng := rand.New(rand.NewPCG(uint64(tc.batch), 9))
			xs := make([]float64, tc.batch*tc.widths[0])
			for i := range xs {
				xs[i] = 2.6*rng.Float64() - 1.3 // some beyond the grid [-1, 1]
			}
			rs := make([]float64, tc.batch*tc.widths[len(tc.widths)-1])
			for i := range rs {
				switch tc.upstream {
				case "random":
					rs[i] = rng.NormFloat64()
				case "mask":
					if rng.IntN(8) == 0 {
						rs[i] = 1
					}
				}
			}
			feeds := map[string][]float64{"x": xs, "r": rs}
			for _, opts := range []kiln.Options{{Grad: true}, {Optimizer: optimizer(t, "adam", 1e-3)}} {
				p, err := kiln.Compile(g, opts)
				if err != nil {
					t.Fatal(err)
				}
				run := func(workers int) map[string][]byte {
					x, err := cpu.New(p, cpu.Options{Seed: 4, Workers: workers})
					if err != nil {
						t.Fatal(err)
					}
					defer x.Close()
					for name, v := range feeds {
						setTensor(t, x, name, v)
					}
					for range 2 {
						if err := x.Step(context.Background()); err != nil {
							t.Fatal(err)
						}
					}
					got := map[string][]byte{}
					for _, n := range x.Names() {
						v, _ := x.Get(n)
						got[n] = bytes.Clone(v.Data)
					}
					return got
				}
				want := run(1)
				if opts.Grad {
					kanCheckUpstream(t, p.Graph, want, tc.upstream)
				}
				for _, w := range []int{2, 3, 8} {
					got := run(w)
					for n, b := range want {
						if !bytes.Equal(got[n], b) {
							t.Errorf("%v, %d workers: %s differs from the one-worker result", opts.Optimizer != nil, w, n)
						}
					}
				}
			}
		})
	}
}

// kanCheckUpstream checks that the gradients are all zero for a zero
// upstream gradient and not all zero otherwise, so that the bitwise
// comparison compares something.
func kanCheckUpstream(t *testing.T, g *ir.Graph, bufs map[string][]byte, upstream string) {
	t.Helper()
	for _, gp := range g.Grads {
		name := "grad/" + g.Value(gp.Param).Name
		b, ok := bufs[name]
		if !ok {
			t.Fatalf("no buffer %s", name)
		}
		zero := !slicesContainsNonzero(b)
		if zero != (upstream == "zero") {
			t.Errorf("%s upstream gradient: %s all zero = %v", upstream, name, zero)
		}
	}
}

func slicesContainsNonzero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return true
		}
	}
	return false
}

// TestKANExampleMatchesBuilder checks that examples/kan/kan.kir is the
// network kanFit builds with KANLinear: from the same params and inputs,
// both give the same loss and predictions, bit for bit.
func TestKANExampleMatchesBuilder(t *testing.T) {
	src, err := os.ReadFile("../examples/kan/kan.kir")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ir.Parse("kan.kir", src)
	if err != nil {
		t.Fatal(err)
	}
	built := kanFit(t, ir.F32, 64)
	feeds := kiln.RandomFeeds(built, 2)
	xy, f := kanPoints(rand.New(rand.NewPCG(3, 4)), 64)
	feeds["x"], feeds["y"] = xy, f
	results := make([]map[string][]float64, 2)
	if len(ex.Params()) != len(built.Params()) {
		t.Errorf("the example has %d params, the builder %d", len(ex.Params()), len(built.Params()))
	}
	for i, g := range []*ir.Graph{ex, built} {
		r := newRunner(t, g, kiln.Options{})
		for _, v := range g.Values {
			if v.Op == ir.OpParam {
				id, ok := built.Lookup(v.Name)
				if !ok {
					t.Fatalf("the builder has no param %s", v.Name)
				}
				want := built.Value(id)
				if !v.Type.Equal(want.Type) || v.Attrs.String() != want.Attrs.String() {
					t.Errorf("%s: param %s: %s %s, want %s %s", g.Name, v.Name, v.Type, v.Attrs, want.Type, want.Attrs)
				}
			}
		}
		r.run(feeds)
		results[i] = map[string][]float64{}
		for _, o := range g.Outputs {
			name := g.Value(o).Name
			results[i][name] = r.get(name)
		}
	}
	for _, name := range []string{"loss", "pred"} {
		a, b := results[0][name], results[1][name]
		if len(a) == 0 || len(a) != len(b) {
			t.Fatalf("%s: %d and %d values", name, len(a), len(b))
		}
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("%s[%d]: example %g, builder %g", name, i, a[i], b[i])
			}
		}
	}
}
