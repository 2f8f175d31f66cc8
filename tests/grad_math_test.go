package tests

import (
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// Gradient tests of the elementwise math family (ir/ops_math.go). The cases
// below join gradCases, so TestGradients checks them against central
// differences in f64 and f32; the tests after them check values at kinks
// and boundaries (abs at 0, clip at its bounds, ties of maximum and
// minimum, pow's masks) where a central difference means nothing, against
// the values PyTorch defines.

func init() { gradCases = append(gradCases, mathGradCases...) }

var mathPos = map[string]valueKind{"a": positive}

var mathGradCases = []gradCase{
	{name: "abs", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Abs(p(b, "a", dt, 3, 4)) }},
	{name: "sign", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Sign(p(b, "a", dt, 3, 4)) }},
	{name: "rsqrt", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Rsqrt(p(b, "a", dt, 2, 3)) }},
	{name: "square", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Square(p(b, "a", dt, 2, 3)) }},
	{name: "reciprocal", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Reciprocal(p(b, "a", dt, 2, 3)) }},
	{name: "log2", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Log2(p(b, "a", dt, 2, 3)) }},
	{name: "log10", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Log10(p(b, "a", dt, 2, 3)) }},
	{name: "log1p", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Log1p(p(b, "a", dt, 2, 3)) }},
	{name: "log1p of small values", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		// x/1000 in [-1e-3, 1e-3]: the gradient near 0 is 1/(1+x).
		return b.Log1p(b.Mul(p(b, "a", dt, 2, 3), b.Scalar(1e-3, dt)))
	}},
	{name: "expm1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Expm1(p(b, "a", dt, 2, 3)) }},
	{name: "expm1 of small values", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Expm1(b.Mul(p(b, "a", dt, 2, 3), b.Scalar(1e-3, dt)))
	}},
	{name: "sin", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Sin(p(b, "a", dt, 2, 3)) }},
	{name: "cos", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Cos(p(b, "a", dt, 2, 3)) }},
	{name: "erf", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Erf(p(b, "a", dt, 2, 3)) }},
	{name: "floor", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Floor(b.Mul(p(b, "a", dt, 2, 3), b.Scalar(3, dt)))
	}},
	{name: "ceil", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Ceil(b.Mul(p(b, "a", dt, 2, 3), b.Scalar(3, dt)))
	}},
	{name: "round", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Round(b.Mul(p(b, "a", dt, 2, 3), b.Scalar(3, dt)))
	}},
	{name: "zero gradient beside another use", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 2, 3)
		return b.Add(b.Floor(a), b.Mul(a, a))
	}},
	{name: "clip", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Clip(p(b, "a", dt, 3, 4), -0.5, 0.45)
	}},
	{name: "clip min", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.ClipMin(p(b, "a", dt, 3, 4), 0.3) }},
	{name: "clip max", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.ClipMax(p(b, "a", dt, 3, 4), -0.2) }},
	{name: "pow", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Pow(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "pow broadcast exponent", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Pow(p(b, "a", dt, 3, 4), p(b, "b", dt, 4))
	}},
	{name: "pow broadcast base", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Pow(p(b, "a", dt, 3, 1), p(b, "b", dt, 2, 3, 4))
	}},
	{name: "pow of itself", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 5)
		return b.Pow(a, a)
	}},
	{name: "pow exponent 3 negative bases", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3, 4), 3) }},
	{name: "pow exponent 2", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3, 4), 2) }},
	{name: "pow exponent 1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3, 4), 1) }},
	{name: "pow exponent 0", build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3, 4), 0) }},
	{name: "pow exponent 2.5", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3, 4), 2.5) }},
	{name: "pow exponent -1.5", kinds: mathPos, build: func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3, 4), -1.5) }},
	{name: "maximum", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Maximum(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "maximum broadcast b", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Maximum(p(b, "a", dt, 3, 4), p(b, "b", dt, 4))
	}},
	{name: "maximum broadcast a", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Maximum(p(b, "a", dt, 3, 1), p(b, "b", dt, 2, 3, 4))
	}},
	{name: "maximum tie with itself", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 3, 4)
		return b.Maximum(a, a)
	}},
	{name: "minimum", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Minimum(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "minimum broadcast b", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Minimum(p(b, "a", dt, 2, 3, 4), p(b, "b", dt, 3, 1))
	}},
	{name: "minimum broadcast a", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Minimum(p(b, "a", dt), p(b, "b", dt, 3, 4))
	}},
	{name: "minimum tie with itself", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		a := p(b, "a", dt, 3, 4)
		return b.Minimum(b.Mul(a, a), b.Mul(a, a))
	}},
	{name: "floor_div", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.FloorDiv(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "floor_div broadcast b", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.FloorDiv(p(b, "a", dt, 3, 4), p(b, "b", dt, 4))
	}},
	{name: "floor_div broadcast a", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.FloorDiv(p(b, "a", dt, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "mod", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mod(p(b, "a", dt, 3, 4), p(b, "b", dt, 3, 4))
	}},
	{name: "mod negative divisor", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mod(p(b, "a", dt, 3, 4), b.Neg(b.Add(p(b, "b", dt, 3, 4), b.Scalar(2, dt))))
	}},
	{name: "mod broadcast b", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mod(b.Mul(p(b, "a", dt, 3, 4), b.Scalar(4, dt)), p(b, "b", dt, 3, 1))
	}},
	{name: "mod broadcast a", kinds: map[string]valueKind{"b": positive}, build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Mod(b.Mul(p(b, "a", dt, 4), b.Scalar(4, dt)), p(b, "b", dt, 2, 3, 4))
	}},
}

// mathPointCase is a graph y = f(params) with the params set to chosen values;
// the loss is sum(y * r) and each param's gradient must equal want[param]
// times the broadcast r, exactly (or to the dtype's rounding).
type mathPointCase struct {
	name   string
	build  func(b *frontends.Builder, dt ir.DType) frontends.Value
	values feeds
	// want[param][i]: d loss / d param[i] for r = 1, the default; a case
	// that sets r has y and every param of one shape, and want is scaled
	// by r element by element.
	want map[string][]float64
	r    []float64
}

// runMathPoint compiles c for dt with gradients, sets its params and r, runs
// one step and returns each param's gradient.
func runMathPoint(t *testing.T, c mathPointCase, dt ir.DType) map[string][]float64 {
	t.Helper()
	b := frontends.NewBuilder("point")
	y := c.build(b, dt)
	r := b.Input("r", dt, y.Type().Shape...)
	b.Output(b.Sum(b.Mul(y, r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	run := newRunner(t, g, kiln.Options{Grad: true})
	f := feeds{}
	for k, v := range c.values {
		f[k] = v
	}
	rs := c.r
	if rs == nil {
		rs = make([]float64, y.Type().Shape.NumElements())
		for i := range rs {
			rs[i] = 1
		}
	}
	f["r"] = rs
	run.run(f)
	out := map[string][]float64{}
	for name := range c.want {
		out[name] = run.get("grad/" + name)
	}
	return out
}

// TestMathGradientsAtPoints checks gradients where PyTorch defines them by
// convention: abs at 0, clip at its bounds, maximum and minimum on ties
// (half to each), pow's masks at a == 0 and b == 0, and the zero gradients.
func TestMathGradientsAtPoints(t *testing.T) {
	inf := math.Inf(1)
	cases := []mathPointCase{
		{name: "abs at 0",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Abs(p(b, "x", dt, 5)) },
			values: feeds{"x": {0, 1.5, -2, math.Copysign(0, -1), 1e-30}},
			want:   map[string][]float64{"x": {0, 1, -1, 0, 1}}},
		{name: "sign",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Sign(p(b, "x", dt, 3)) },
			values: feeds{"x": {0, 1.5, -2}},
			want:   map[string][]float64{"x": {0, 0, 0}}},
		{name: "clip at its bounds",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.Clip(p(b, "x", dt, 7), -1, 2) },
			values: feeds{"x": {-1, 2, -1.5, 2.5, 0.5, -1.0000001, 2.000001}},
			want:   map[string][]float64{"x": {1, 1, 0, 0, 1, 0, 0}},
			r:      []float64{1, 2, 3, 4, 5, 6, 7}},
		{name: "clip min at its bound",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.ClipMin(p(b, "x", dt, 3), 0.1) },
			values: feeds{"x": {0.1, 0.05, 0.2}},
			want:   map[string][]float64{"x": {1, 0, 1}}},
		{name: "clip max at its bound",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.ClipMax(p(b, "x", dt, 3), -0.3) },
			values: feeds{"x": {-0.3, -0.2, -0.4}},
			want:   map[string][]float64{"x": {1, 0, 1}}},
		{name: "maximum ties with a const",
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				return b.Maximum(p(b, "x", dt, 4), b.Const(dt, []int{4}, 1, 0, 5, -2))
			},
			values: feeds{"x": {1, 2, 3, -2}},
			want:   map[string][]float64{"x": {0.5, 1, 0, 0.5}}},
		{name: "minimum ties with a const",
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				return b.Minimum(b.Const(dt, []int{4}, 1, 0, 5, -2), p(b, "x", dt, 4))
			},
			values: feeds{"x": {1, 2, 3, -2}},
			want:   map[string][]float64{"x": {0.5, 0, 1, 0.5}}},
		{name: "maximum ties between params, broadcast",
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				return b.Maximum(p(b, "x", dt, 2, 2), p(b, "y", dt, 2))
			},
			values: feeds{"x": {1, 2, 3, 0}, "y": {1, 0}},
			want:   map[string][]float64{"x": {0.5, 1, 1, 0.5}, "y": {0.5, 0.5}}},
		{name: "minimum of a shared param",
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				x := p(b, "x", dt, 3)
				return b.Minimum(x, x)
			},
			values: feeds{"x": {1, -2, 0}},
			want:   map[string][]float64{"x": {1, 1, 1}}},
		{name: "pow masks",
			// da = b a^(b-1), 0 where b == 0; db = a^b log a, 0 where
			// a == 0 and b >= 0 (PyTorch's pow_backward_self/exponent).
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				return b.Pow(p(b, "a", dt, 6), p(b, "b", dt, 6))
			},
			values: feeds{"a": {0, 0, 0, 2, 0, -2}, "b": {2, 0, -1, 0, 0.5, 3}},
			want: map[string][]float64{
				"a": {0, 0, -inf, 0, inf, 12},
				"b": {0, 0, -inf, math.Ln2, 0, math.NaN()},
			}},
		{name: "pow exponent 0 at 0",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3), 0) },
			values: feeds{"a": {0, -2, 3}},
			want:   map[string][]float64{"a": {0, 0, 0}}},
		{name: "pow exponent 3 negative base",
			build:  func(b *frontends.Builder, dt ir.DType) frontends.Value { return b.PowScalar(p(b, "a", dt, 3), 3) },
			values: feeds{"a": {0, -2, 3}},
			want:   map[string][]float64{"a": {0, 12, 27}}},
		{name: "floor ceil round",
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				x := p(b, "x", dt, 4)
				return b.Add(b.Add(b.Floor(x), b.Ceil(x)), b.Round(x))
			},
			values: feeds{"x": {0.5, -1.5, 2, 0.3}},
			want:   map[string][]float64{"x": {0, 0, 0, 0}}},
		{name: "floor_div and mod",
			// floor_div passes zeros; mod passes dy to a and
			// -dy*floor_div(a, b) to b.
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				a, d := p(b, "a", dt, 4), p(b, "b", dt, 4)
				return b.Add(b.FloorDiv(a, d), b.Mod(a, d))
			},
			values: feeds{"a": {7, -7, 7, 0.5}, "b": {2, 2, -2, 0.25}},
			want:   map[string][]float64{"a": {1, 1, 1, 1}, "b": {-3, 4, 4, -2}}},
		{name: "log1p and expm1 near 0",
			build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
				x := p(b, "x", dt, 3)
				return b.Add(b.Log1p(x), b.Expm1(x))
			},
			values: feeds{"x": {1e-10, -1e-8, 0}},
			want: map[string][]float64{"x": {
				1/(1+1e-10) + math.Exp(1e-10),
				1/(1-1e-8) + math.Exp(-1e-8),
				2,
			}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, dt := range []ir.DType{ir.F64, ir.F32} {
				got := runMathPoint(t, c, dt)
				tol := 1e-15
				if dt == ir.F32 {
					tol = 1e-7
				}
				for name, want := range c.want {
					for i, w := range want {
						if c.r != nil {
							w *= c.r[i]
						}
						g := got[name][i]
						ok := g == w || (math.IsNaN(g) && math.IsNaN(w)) ||
							(!math.IsInf(w, 0) && math.Abs(g-w) <= tol*math.Abs(w))
						if !ok {
							t.Errorf("%s grad/%s[%d] = %v, want %v", dt, name, i, g, w)
						}
					}
				}
			}
		})
	}
}

// TestMathSecondOrder differentiates twice through the math rules: their
// gradient graphs use sign, square, pow, log, floor_div, cos, sin and exp,
// whose own rules must compose. The second derivative of sum(grad^2) is
// checked against central differences of the first-order graph.
func TestMathSecondOrder(t *testing.T) {
	b := frontends.NewBuilder("second")
	a := b.Param("a", ir.F64, 2, 3)
	e := b.Param("e", ir.F64, 3)
	r := b.Input("r", ir.F64, 2, 3)
	pa := b.Add(b.Abs(a), b.Scalar(0.5, ir.F64)) // positive bases
	terms := []frontends.Value{
		b.Pow(pa, e),
		b.PowScalar(a, 3),
		b.Mul(b.Clip(a, -0.5, 0.45), b.Maximum(a, e)),
		b.Mul(b.Sin(a), b.Erf(e)),
		b.Mul(b.Cos(e), b.Minimum(a, b.Square(e))),
		b.Rsqrt(b.Add(b.Square(a), b.Scalar(1, ir.F64))),
		b.Mul(b.Log1p(pa), b.Expm1(e)),
		b.Add(b.Log2(pa), b.Log10(b.Reciprocal(pa))),
		b.Mod(b.Mul(a, b.Scalar(3, ir.F64)), b.Add(b.Abs(e), b.Scalar(0.7, ir.F64))),
	}
	y := terms[0]
	for _, v := range terms[1:] {
		y = b.Add(y, v)
	}
	b.Output(b.Sum(b.Mul(y, r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	squaredGradLoss(t, g)
	checkGrads(t, g, randomFeeds(g, 5, nil, nil), f64Tol)
}

// TestMathGradNaN pins PyTorch's gradients where an input is NaN: clip
// passes none (NaN is not within the bounds), maximum and minimum pass all
// of dy to both arguments (neither compares less nor equal).
func TestMathGradNaN(t *testing.T) {
	nan := math.NaN()
	b := frontends.NewBuilder("nan")
	x := b.Param("x", ir.F64, 2)
	c := b.Param("c", ir.F64, 2)
	y := b.Add(b.Add(b.Clip(x, -1, 1), b.Maximum(x, c)), b.Minimum(x, c))
	b.Output(b.Sum(y, nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, g, kiln.Options{Grad: true})
	r.run(feeds{"x": {nan, 0.5}, "c": {1, 0.5}})
	// x[0] = NaN: clip 0, maximum 1, minimum 1. x[1] ties c[1]: clip 1,
	// maximum 1/2, minimum 1/2.
	if got, want := r.get("grad/x"), []float64{2, 2}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("grad/x = %v, want %v", got, want)
	}
	if got, want := r.get("grad/c"), []float64{2, 1}; got[0] != want[0] || got[1] != want[1] {
		t.Errorf("grad/c = %v, want %v", got, want)
	}
}
