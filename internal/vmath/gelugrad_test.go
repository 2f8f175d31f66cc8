package vmath

import (
	"math"
	"regexp"
	"testing"
)

// grad32 is one gradient function under test: dst = dy f'(x), its float64
// reference f' and the bound its doc comment states, in ulps of
// max(|f'(x)|, gradFloor): near a zero of f' (the exact gelu's at x =
// -0.7518) the error is small against the terms that cancel there, not
// against the result.
type grad32 struct {
	name string
	f    func(p impl, dst, dy, x []float32)
	ref  func(float64) float64
	ulps float64
}

// gradFloor is the magnitude below which gradient errors are counted in
// ulps of gradFloor.
const gradFloor = 0x1p-2

// geluExactGrad64 and geluTanhGrad64 are the derivatives in float64
// (kernels/cpu's f64 code): NaN at ±Inf for the exact form, as PyTorch,
// and the limits 0 and 1 for the tanh form.
func geluExactGrad64(x float64) float64 {
	return 0.5*math.Erfc(-x*geluSqrt1_2) + x*0.3989422804014327*math.Exp(-0.5*x*x)
}

func geluTanhGrad64(x float64) float64 {
	if math.IsInf(x, 0) {
		return math.Max(0, math.Copysign(1, x))
	}
	u := geluK * (x + geluC*x*x*x)
	s, sn := Sigmoid64(2*u), Sigmoid64(-2*u)
	if s*sn == 0 {
		return s
	}
	return s + 2*x*s*sn*geluK*(1+3*geluC*x*x)
}

var grads32 = []grad32{
	{"GeluExactGrad32", geluGradRow, geluExactGrad64, 2},
	{"GeluTanhGrad32", geluTanhGrad32, geluTanhGrad64, 2},
}

// gradErr returns the error of got in ulps of max(|want|, gradFloor).
func gradErr(got float32, want float64) float64 {
	if math.IsNaN(want) || math.IsNaN(float64(got)) {
		if math.IsNaN(want) == math.IsNaN(float64(got)) {
			return 0
		}
		return math.Inf(1)
	}
	w := float32(want)
	m := max(abs32(w), gradFloor)
	ulp := float64(math.Nextafter32(m, float32(math.Inf(1))) - m)
	return math.Abs(float64(got)-want) / ulp
}

// maxGradErr returns the largest error of g over xs (dy = 1) with path p
// and where it occurs.
func maxGradErr(g grad32, p impl, xs []float32) (float64, float32) {
	dy := make([]float32, len(xs))
	for i := range dy {
		dy[i] = 1
	}
	out := make([]float32, len(xs))
	g.f(p, out, dy, xs)
	worst, at := 0.0, float32(0)
	for i, x := range xs {
		if d := gradErr(out[i], g.ref(float64(x))); d > worst {
			worst, at = d, x
		}
	}
	return worst, at
}

// TestGradULP checks each gradient's error over the sampled inputs against
// its stated bound; with -exhaustive over all 2^32 inputs.
func TestGradULP(t *testing.T) {
	re, err := regexp.Compile(*only)
	if err != nil {
		t.Fatalf("-funcs: %v", err)
	}
	for _, g := range grads32 {
		var worst float64
		var at float32
		if *exhaustive {
			if !re.MatchString(g.name) {
				continue
			}
			worst, at = exhaustiveMax(func(in []float32) (float64, float32) { return maxGradErr(g, best, in) })
			t.Logf("%s: max %.2f ulp (at %g, %#08x), stated %.0f", g.name, worst, at, math.Float32bits(at), g.ulps)
		} else {
			worst, at = maxGradErr(g, best, sampleInputs())
		}
		if worst > g.ulps {
			t.Errorf("%s: %.2f ulp at %g (%#08x), stated %.0f", g.name, worst, at, math.Float32bits(at), g.ulps)
		}
	}
}

// gradDy returns dy values for the identity tests: ordinary values, 0,
// ±Inf and NaN.
func gradDy(n int) []float32 {
	vals := []float32{1, -0.75, 3.5e-3, 0, float32(math.Inf(1)), 2e30, float32(math.NaN()), -1e-40}
	dy := make([]float32, n)
	for i := range dy {
		dy[i] = vals[i%len(vals)]
	}
	return dy
}

// TestGradPathsIdentical checks that the gradients give bitwise the same
// results on every path, for any split of a row, and in place (dst = dy
// or dst = x).
func TestGradPathsIdentical(t *testing.T) {
	in := sampleInputs()
	dy := gradDy(len(in))
	for _, g := range grads32 {
		want := make([]float32, len(in))
		g.f(implScalar, want, dy, in)
		same := func(what string, got []float32) {
			t.Helper()
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s %s: dy %g x %g: %#08x, scalar %#08x", g.name, what, dy[i], in[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
		for _, p := range impls() {
			got := make([]float32, len(in))
			g.f(p, got, dy, in)
			same("path", got)
			got = make([]float32, 20000)
			for lo, n := 0, 1; lo < len(got); lo, n = lo+n, n%37+1 {
				hi := min(lo+n, len(got))
				g.f(p, got[lo:hi], dy[lo:hi], in[lo:hi])
			}
			same("split", got)
			x := append([]float32(nil), in[:20000]...)
			g.f(p, x, dy, x)
			same("in place of x", x)
			d := append([]float32(nil), dy[:20000]...)
			g.f(p, d, d, in)
			same("in place of dy", d)
		}
	}
}
