package tests

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

func init() { gradCases = append(gradCases, reduceGradCases...) }

// reduceGradCases checks the reductions and where against central
// differences on the harness's random draws, which never tie: ties, zeros
// and extreme values are set by the tests further down.
var reduceGradCases = []gradCase{
	{name: "max all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Max(p(b, "a", dt, 2, 3, 4), nil, false)
	}},
	{name: "max one axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Max(p(b, "a", dt, 3, 5), []int{1}, false)
	}},
	{name: "max two axes keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Max(p(b, "a", dt, 2, 3, 4), []int{0, 2}, true)
	}},
	{name: "max two axes", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Max(p(b, "a", dt, 2, 3, 4), []int{-1, 0}, false)
	}},
	// Every element of a row is a copy of one param element: a four-way
	// tie whose shares must add up to dy.
	{name: "max ties by broadcast", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Max(b.BroadcastTo(p(b, "a", dt, 3, 1), 3, 4), []int{1}, false)
	}},
	{name: "min one axis keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Min(p(b, "a", dt, 4, 3), []int{0}, true)
	}},
	{name: "min all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Min(p(b, "a", dt, 3, 4), nil, false)
	}},
	{name: "min ties by broadcast", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Min(b.Add(p(b, "a", dt, 2, 1, 3), b.Const(dt, []int{4, 1}, 0, 0, 0, 0)), []int{1, 2}, false)
	}},
	{name: "prod all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Prod(p(b, "a", dt, 2, 3), nil, false)
	}},
	{name: "prod one axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Prod(p(b, "a", dt, 3, 4), []int{1}, false)
	}},
	{name: "prod two axes keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Prod(p(b, "a", dt, 2, 3, 4), []int{0, 2}, true)
	}},
	{name: "prod_exclusive", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpProdExclusive, ir.MakeAttrs("axes", ir.Ints(0, 2)), p(b, "a", dt, 2, 3, 4))
	}},
	{name: "prod_exclusive all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpProdExclusive, nil, p(b, "a", dt, 5))
	}},
	{name: "logsumexp one axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogSumExp(p(b, "a", dt, 3, 5), []int{1}, false)
	}},
	{name: "logsumexp two axes keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogSumExp(p(b, "a", dt, 2, 3, 4), []int{0, 2}, true)
	}},
	{name: "logsumexp all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogSumExp(p(b, "a", dt, 3, 4), nil, false)
	}},
	{name: "var correction 1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Var(p(b, "a", dt, 3, 5), []int{1}, false, 1)
	}},
	{name: "var correction 0 two axes keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Var(p(b, "a", dt, 2, 3, 4), []int{0, 2}, true, 0)
	}},
	{name: "var all", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Var(p(b, "a", dt, 3, 4), nil, false, 1)
	}},
	{name: "std correction 1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Std(p(b, "a", dt, 4, 3), []int{0}, false, 1)
	}},
	{name: "std correction 0 all keepdims", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Std(p(b, "a", dt, 2, 3, 2), nil, true, 0)
	}},
	{name: "std fractional correction", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Std(p(b, "a", dt, 2, 5), []int{-1}, false, 0.5)
	}},
	// where: each argument broadcast in turn; cond from comparisons of
	// inputs (no gradient flows into cond).
	{name: "where same shapes", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		c := b.Greater(b.Input("x", dt, 3, 4), b.Scalar(0, dt))
		return b.Where(c, p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "where broadcast cond", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		c := b.LessEqual(b.Input("x", dt, 4), b.Scalar(0, dt))
		return b.Where(c, p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "where broadcast a", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		c := b.GreaterEqual(b.Input("x", dt, 3, 4), b.Scalar(0, dt))
		return b.Where(c, p(b, "a", dt, 3, 1), p(b, "b", dt, 3, 4))
	}},
	{name: "where broadcast b scalar", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		c := b.Less(b.Input("x", dt, 3, 4), b.Scalar(0, dt))
		return b.Where(c, p(b, "a", dt, 3, 4), p(b, "b", dt))
	}},
	{name: "where broadcast all three", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		c := b.NotEqual(b.Greater(b.Input("x", dt, 2, 1, 1), b.Scalar(0, dt)), b.Const(ir.Bool, []int{3}, 1, 0, 1))
		return b.Where(c, p(b, "a", dt, 1, 4, 1), p(b, "b", dt, 4, 3))
	}},
	// cond from the params themselves and logical ops: the comparison
	// flips nowhere within the finite-difference steps of these draws.
	{name: "where of param comparisons and logic", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a, c := p(b, "a", dt, 3, 4), p(b, "c", dt, 4)
		pos := b.Greater(a, b.Scalar(0, dt))
		small := b.Less(c, b.Scalar(0.5, dt))
		cond := b.LogicalOr(b.LogicalAnd(pos, small), b.LogicalNot(b.Equal(pos, small)))
		return b.Mul(b.Where(cond, a, c), b.Where(pos, c, b.Scalar(2, dt)))
	}},
	// The index ops are not differentiable; a graph that uses their result
	// still differentiates through its other paths.
	{name: "argmax alongside", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 3, 4)
		hit := b.Equal(b.Argmax(a, []int{1}, true), b.Argmin(a, []int{1}, true))
		return b.Where(hit, b.Max(a, []int{1}, true), b.Min(a, []int{1}, true))
	}},
}

// reduceCheckWith runs the central-difference check of c in f64 and f32
// with the random draws overridden by set: param name -> flat index ->
// value.
func reduceCheckWith(t *testing.T, c gradCase, set map[string]map[int]float64) {
	t.Helper()
	for _, dt := range []ir.DType{ir.F64, ir.F32} {
		g := buildLoss(t, c, dt)
		f := randomFeeds(g, 1, c.kinds, c.labels)
		for name, vals := range set {
			for j, v := range vals {
				f[name][j] = v
			}
		}
		tol := f64Tol
		if dt == ir.F32 {
			tol = f32Tol
		}
		checkGrads(t, g, f, tol)
	}
}

// reduceAnalytic returns the gradient of every param of c's loss in dtype
// dt at the random draws overridden by set, and the feeds used (f["r"]
// holds the weights of the loss sum(y * r), so dy = r).
func reduceAnalytic(t *testing.T, c gradCase, dt ir.DType, set map[string]map[int]float64) (map[string][]float64, feeds) {
	t.Helper()
	g := buildLoss(t, c, dt)
	f := randomFeeds(g, 1, c.kinds, c.labels)
	for name, vals := range set {
		for j, v := range vals {
			f[name][j] = v
		}
	}
	r := newRunner(t, g, kiln.Options{Grad: true})
	r.run(f)
	out := map[string][]float64{}
	for _, pid := range g.Params() {
		name := g.Values[pid].Name
		out[name] = r.get("grad/" + name)
	}
	return out, f
}

// reduceExpect compares got with want within rel·|want| (exact for rel 0).
func reduceExpect(t *testing.T, what string, got, want []float64, rel float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > rel*math.Abs(want[i]) || math.IsNaN(got[i]) != math.IsNaN(want[i]) {
			t.Errorf("%s[%d] = %.17g, want %.17g", what, i, got[i], want[i])
		}
	}
}

// reduceRel is the relative tolerance of an analytic gradient in dt against
// the same arithmetic in float64.
func reduceRel(dt ir.DType) float64 {
	if dt == ir.F32 {
		return 1e-6
	}
	return 1e-15
}

// TestReduceGradTies checks max and min at exact two-way ties against
// central differences: perturbing one of two tied maxima by ±h moves the
// result by h one way and not at all the other, so the central difference
// is exactly half the slope, the equal share the rule gives each.
func TestReduceGradTies(t *testing.T) {
	tests := []struct {
		name string
		c    gradCase
		set  map[int]float64
	}{
		// a [3,4] over axis 1: rows tie at (0,1)/(0,3) and (2,0)/(2,2).
		{"max one axis", gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Max(p(b, "a", dt, 3, 4), []int{1}, false)
		}}, map[int]float64{1: 1.25, 3: 1.25, 8: 1.5, 10: 1.5}},
		// a [2,3,4] over axes [0, 2]: slice j holds a[i,j,k]; ties across
		// both reduced axes at (0,0,1)/(1,0,3) and (0,2,0)/(0,2,2).
		{"max two axes", gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Max(p(b, "a", dt, 2, 3, 4), []int{0, 2}, true)
		}}, map[int]float64{1: 2, 15: 2, 8: 1.5, 10: 1.5}},
		{"max all", gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Max(p(b, "a", dt, 3, 4), nil, false)
		}}, map[int]float64{0: 3, 11: 3}},
		{"min one axis", gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Min(p(b, "a", dt, 4, 3), []int{0}, false)
		}}, map[int]float64{0: -1.25, 9: -1.25, 5: -2, 8: -2}},
		{"min all keepdims", gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			return b.Min(p(b, "a", dt, 2, 3), nil, true)
		}}, map[int]float64{2: -4, 4: -4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reduceCheckWith(t, tc.c, map[string]map[int]float64{"a": tc.set})
		})
	}
}

// TestReduceGradTiesExact checks the equal split exactly where central
// differences cannot (a k-way tie, k > 2): each of k tied elements gets
// dy/k, the others 0, as torch.amax. Row 0 of a [2,4] ties three ways for
// the max, row 1 is all equal; the same for min.
func TestReduceGradTiesExact(t *testing.T) {
	set := map[string]map[int]float64{"a": {0: 0.5, 1: 0.5, 2: -0.25, 3: 0.5, 4: 0.75, 5: 0.75, 6: 0.75, 7: 0.75}}
	for _, op := range []string{"max", "min"} {
		c := gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
			a := p(b, "a", dt, 2, 4)
			if op == "min" {
				return b.Min(b.Neg(a), []int{1}, false)
			}
			return b.Max(a, []int{1}, false)
		}}
		for _, dt := range []ir.DType{ir.F64, ir.F32} {
			got, f := reduceAnalytic(t, c, dt, set)
			r := f["r"]
			if dt == ir.F32 {
				r = []float64{float64(float32(r[0])), float64(float32(r[1]))}
			}
			sign := 1.0
			if op == "min" {
				sign = -1 // min(-a) = -max(a)
			}
			want := []float64{r[0] / 3, r[0] / 3, 0, r[0] / 3, r[1] / 4, r[1] / 4, r[1] / 4, r[1] / 4}
			for i := range want {
				want[i] *= sign
			}
			reduceExpect(t, fmt.Sprintf("%s %s grad/a", op, dt), got["a"], want, reduceRel(dt))
		}
	}
}

// TestReduceGradProdZeros checks prod's gradient exactly at zeros: one zero
// in a slice gives that element dy times the product of the others and
// every other element 0; two zeros give 0 everywhere, as torch.prod. The
// values are powers of two, so every product is exact. prod is multilinear,
// so central differences are exact there too and are checked as well.
func TestReduceGradProdZeros(t *testing.T) {
	// a [3,4] over axis 1: row 0 has no zero, row 1 one zero, row 2 two.
	vals := []float64{2, -0.5, 4, 0.25, 0.5, 0, -2, 4, 0, 8, 0, 0.5}
	set := map[string]map[int]float64{"a": {}}
	for i, v := range vals {
		set["a"][i] = v
	}
	c := gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Prod(p(b, "a", dt, 3, 4), []int{1}, false)
	}}
	for _, dt := range []ir.DType{ir.F64, ir.F32} {
		got, f := reduceAnalytic(t, c, dt, set)
		r := f["r"]
		if dt == ir.F32 {
			r = []float64{float64(float32(r[0])), float64(float32(r[1])), float64(float32(r[2]))}
		}
		want := []float64{
			r[0] * -0.5 * 4 * 0.25, r[0] * 2 * 4 * 0.25, r[0] * 2 * -0.5 * 0.25, r[0] * 2 * -0.5 * 4,
			0, r[1] * 0.5 * -2 * 4, 0, 0,
			0, 0, 0, 0,
		}
		reduceExpect(t, fmt.Sprintf("prod %s grad/a", dt), got["a"], want, 0)
	}
	reduceCheckWith(t, c, set)

	// Over all axes with one zero, and over two axes with two zeros in
	// one slice and one in another.
	reduceCheckWith(t, gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Prod(p(b, "a", dt, 2, 3), nil, false)
	}}, map[string]map[int]float64{"a": {4: 0}})
	reduceCheckWith(t, gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Prod(p(b, "a", dt, 2, 3, 2), []int{0, 2}, true)
	}}, map[string]map[int]float64{"a": {0: 0, 7: 0, 2: 0}})
}

// TestReduceGradLogSumExpExtreme checks logsumexp's gradient at ±1000,
// where exp overflows or underflows unless the max is subtracted: rows of
// large positive, large negative and mixed values. Values are exact in f32.
func TestReduceGradLogSumExpExtreme(t *testing.T) {
	vals := []float64{1000, 1000.5, 999.25, -1000, -999.5, -1000.25, 1000, -1000, 999}
	set := map[string]map[int]float64{"a": {}}
	for i, v := range vals {
		set["a"][i] = v
	}
	c := gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.LogSumExp(p(b, "a", dt, 3, 3), []int{1}, false)
	}}
	reduceCheckWith(t, c, set)
	// The gradient is the softmax of each row times its dy.
	got, f := reduceAnalytic(t, c, ir.F64, set)
	for row := range 3 {
		x := vals[3*row : 3*row+3]
		m := math.Max(x[0], math.Max(x[1], x[2]))
		s := 0.0
		for _, v := range x {
			s += math.Exp(v - m)
		}
		for k, v := range x {
			// The rule computes exp(x - y) with y = logsumexp near ±1000,
			// whose rounding (an ulp of 1000 is 1.1e-13) bounds the
			// agreement.
			want := f["r"][row] * math.Exp(v-m) / s
			if g := got["a"][3*row+k]; math.Abs(g-want) > 1e-12 {
				t.Errorf("grad/a[%d] = %.17g, want %.17g", 3*row+k, g, want)
			}
		}
	}
}

// TestReduceGradStdAtZero checks std's gradient where the result is 0 (a
// constant slice), which is not differentiable there: 0, as PyTorch's
// std_backward masks it.
func TestReduceGradStdAtZero(t *testing.T) {
	c := gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Std(p(b, "a", dt, 2, 3), []int{1}, false, 1)
	}}
	set := map[string]map[int]float64{"a": {0: 0.5, 1: 0.5, 2: 0.5}}
	for _, dt := range []ir.DType{ir.F64, ir.F32} {
		got, _ := reduceAnalytic(t, c, dt, set)
		for i := range 3 {
			if got["a"][i] != 0 {
				t.Errorf("%s grad/a[%d] = %v, want 0 for a constant row", dt, i, got["a"][i])
			}
		}
		for i := 3; i < 6; i++ {
			if got["a"][i] == 0 || math.IsNaN(got["a"][i]) {
				t.Errorf("%s grad/a[%d] = %v, want a finite nonzero gradient", dt, i, got["a"][i])
			}
		}
	}
}

// reduceSecondOrder appends to g (whose first output is the loss) its
// gradient with respect to param w, makes sum(grad^2) the new loss, and
// checks the gradient of that against central differences of it, in f64
// to DESIGN.md's bound. It returns the ops of the first-order graph so that
// callers can check which backward ops ran.
func reduceSecondOrder(t *testing.T, g *ir.Graph, f feeds) map[ir.Op]bool {
	t.Helper()
	squaredGradLoss(t, g)
	ops := map[ir.Op]bool{}
	for _, v := range g.Values {
		ops[v.Op] = true
	}
	checkGrads(t, g, f, f64Tol)
	return ops
}

// TestSecondOrderMax differentiates a graph that already holds max's
// backward (equal, where, sum, div, mul), so each of their rules runs, and
// checks the second derivative against central differences of the first.
// y = max over two axes of x @ w is locally linear in w, and the loss
// sum(y^2 r) makes the second derivative nonzero.
func TestSecondOrderMax(t *testing.T) {
	b := frontends.NewBuilder("second-max")
	w := b.Param("w", ir.F64, 3, 4)
	x := b.Input("x", ir.F64, 2, 2, 3)
	r := b.Input("r", ir.F64, 2)
	y := b.Max(b.Matmul(x, w), []int{1, 2}, false)
	b.Output(b.Sum(b.Mul(b.Mul(y, y), r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	ops := reduceSecondOrder(t, g, randomFeeds(g, 3, nil, nil))
	for _, op := range []ir.Op{ir.OpMax, ir.OpEqual, ir.OpWhere} {
		if !ops[op] {
			t.Errorf("the first-order graph has no %s; the test would not exercise max's rule", op)
		}
	}
}

// TestSecondOrderProdZeros differentiates prod's backward (prod_exclusive)
// again, so prod_exclusive's rule and prod_exclusive_grad run, with a zero
// in one slice and two in another. The first-order gradient is
// multilinear in w, so central differences of its square are exact.
func TestSecondOrderProdZeros(t *testing.T) {
	b := frontends.NewBuilder("second-prod")
	w := b.Param("w", ir.F64, 3, 4)
	r := b.Input("r", ir.F64, 3)
	b.Output(b.Sum(b.Mul(b.Prod(w, []int{1}, false), r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	f := randomFeeds(g, 4, nil, nil)
	f["w"][5] = 0
	f["w"][8], f["w"][11] = 0, 0
	ops := reduceSecondOrder(t, g, f)
	if !ops[ir.OpProdExclusive] {
		t.Error("the first-order graph has no prod_exclusive")
	}
}

// TestThirdOrderProdRefused checks that differentiating prod three times
// stops with prod_exclusive_grad's NoGrad reason instead of returning a
// silent zero.
func TestThirdOrderProdRefused(t *testing.T) {
	b := frontends.NewBuilder("third-prod")
	w := b.Param("w", ir.F64, 4)
	b.Output(b.Prod(w, nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for order := 1; order <= 3; order++ {
		err := passes.Autodiff(g)
		if order < 3 {
			if err != nil {
				t.Fatalf("order %d: %v", order, err)
			}
			e := ir.NewEmitter(g, fmt.Sprintf("o%d", order))
			g.Outputs = []ir.ID{e.Op(ir.OpSum, nil, g.Grads[0].Grad)}
			if e.Err() != nil {
				t.Fatal(e.Err())
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "third derivative of prod") {
			t.Fatalf("third-order autodiff: error %v, want prod_exclusive_grad's reason", err)
		}
	}
}

// TestReduceGradVarNoDegreesOfFreedom checks var's gradient where N -
// correction is 0, so the forward divides by 0: the scale 2/0 is inf, as in
// PyTorch's var_backward, giving NaN where x equals the mean (inf * 0) and
// an infinity of the sign of dy * (x - mean) elsewhere.
func TestReduceGradVarNoDegreesOfFreedom(t *testing.T) {
	c := gradCase{build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Var(p(b, "a", dt, 2, 2), []int{1}, false, 2)
	}}
	set := map[string]map[int]float64{"a": {0: 0.5, 1: 0.5, 2: 0.25, 3: -0.75}}
	for _, dt := range []ir.DType{ir.F64, ir.F32} {
		got, f := reduceAnalytic(t, c, dt, set)
		want := []float64{math.NaN(), math.NaN(), math.Inf(1), math.Inf(-1)}
		if f["r"][1] < 0 {
			want[2], want[3] = want[3], want[2]
		}
		for i, w := range want {
			g := got["a"][i]
			if math.IsNaN(w) != math.IsNaN(g) || !math.IsNaN(w) && g != w {
				t.Errorf("%s grad/a[%d] = %v, want %v", dt, i, g, w)
			}
		}
	}
}
