package vmath

import (
	"flag"
	"math"
	"regexp"
	"runtime"
	"sync"
	"testing"

	"github.com/kilnml/kiln/internal/cpufeat"
)

var (
	exhaustive = flag.Bool("exhaustive", false, "TestULP: measure every float32 input (2^32 per function) and print the maximum ulp error")
	only       = flag.String("funcs", "", "TestULP -exhaustive: measure only the functions whose names match this regular expression")
)

// fn32 is one function under test: its vector loops and scalar code, the
// float64 reference it is measured against and the bound its doc comment
// states.
type fn32 struct {
	name string
	f    func(p impl, dst, src []float32)
	ref  func(float64) float64
	ulps float64
}

// sigmoid64 is the float64 function of the kernels before vmath.
func sigmoid64(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

var fns32 = []fn32{
	{"Exp32", exp32Row, math.Exp, 1},
	{"Log32", log32Row, math.Log, 1},
	{"Sigmoid32", sigmoid32, sigmoid64, 2},
	{"Silu32", silu32, func(x float64) float64 { return x * sigmoid64(x) }, 3},
	{"Tanh32", tanh32, math.Tanh, 1},
	{"Log1p32", log1p32, math.Log1p, 1},
	{"Expm1_32", expm132, math.Expm1, 3},
	{"GeluTanh32", geluTanh32, GeluTanh64, 4},
	{"Erf32", erfRow, math.Erf, 1},
	{"GeluExact32", geluRow, GeluExact64, 2},
	{"Sin32", func(p impl, dst, src []float32) { sinCosRow(p, 0, dst, src) }, math.Sin, 2},
	{"Cos32", func(p impl, dst, src []float32) { sinCosRow(p, 1, dst, src) }, math.Cos, 2},
	{"Softplus32", func(p impl, dst, src []float32) { softplus32(p, 1, 20, dst, src) }, func(x float64) float64 {
		if x > 20 {
			return x
		}
		return math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))
	}, 2},
}

// ulpDist returns how many float32 values lie between got and want (0 when
// both are NaN, +Inf when only one is). ±0 are the same value.
func ulpDist(got, want float32) float64 {
	gn, wn := got != got, want != want
	if gn || wn {
		if gn && wn {
			return 0
		}
		return math.Inf(1)
	}
	ord := func(f float32) int64 {
		b := int64(math.Float32bits(f) & 0x7fffffff)
		if math.Signbit(float64(f)) {
			return -b
		}
		return b
	}
	d := ord(got) - ord(want)
	if d < 0 {
		d = -d
	}
	return float64(d)
}

// specials are the inputs every test includes.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, 0.5, -0.5, 2, -2,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), math.Float32frombits(0xffc00001), math.Float32frombits(0x7f800001),
	math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, 0x1p-126, -0x1p-126, 0x1.fffffcp-127,
	88.72283, 88.72284, 88.7, 89, -87.33654, -103.97, -103.972, -104, -150, 1e-8, -1e-8, 0.625, -0.625, 20, -20,
}

// sampleInputs returns about 4 million inputs spread evenly over the bit
// patterns of float32 (every 1031st), and the specials.
func sampleInputs() []float32 {
	const stride = 1031
	in := make([]float32, 0, 1<<32/stride+len(specials))
	for b := uint64(0); b < 1<<32; b += stride {
		in = append(in, math.Float32frombits(uint32(b)))
	}
	return append(in, specials...)
}

// impls returns the code paths this machine runs.
func impls() []impl {
	p := []impl{implScalar}
	if cpufeat.AVX2 && runtime.GOARCH == "amd64" {
		p = append(p, implAVX2)
	}
	if cpufeat.AVX512 {
		p = append(p, implAVX512)
	}
	return p
}

// maxULP returns the largest ulp error of f over in and the input where it
// occurs, computing with path p.
func maxULP(f fn32, p impl, in []float32) (float64, float32) {
	out := make([]float32, len(in))
	f.f(p, out, in)
	worst, at := 0.0, float32(0)
	for i, x := range in {
		if d := ulpDist(out[i], float32(f.ref(float64(x)))); d > worst {
			worst, at = d, x
		}
	}
	return worst, at
}

// TestULP checks each function's maximum ulp error over the sampled inputs
// against its stated bound, on every path; with -exhaustive it measures
// all 2^32 inputs and prints the maxima.
func TestULP(t *testing.T) {
	if *exhaustive {
		re, err := regexp.Compile(*only)
		if err != nil {
			t.Fatalf("-funcs: %v", err)
		}
		for _, f := range fns32 {
			if !re.MatchString(f.name) {
				continue
			}
			worst, at := exhaustiveMax(func(in []float32) (float64, float32) { return maxULP(f, best, in) })
			t.Logf("%s: max %.0f ulp (at %g, %#08x), stated %.0f", f.name, worst, at, math.Float32bits(at), f.ulps)
			if worst > f.ulps {
				t.Errorf("%s: %.0f ulp at %g exceeds the stated %.0f", f.name, worst, at, f.ulps)
			}
		}
		return
	}
	in := sampleInputs()
	// The best path suffices: TestPathsIdentical checks that the others
	// give the same bits.
	for _, f := range fns32 {
		worst, at := maxULP(f, best, in)
		if worst > f.ulps {
			t.Errorf("%s: %.0f ulp at %g (%#08x), stated %.0f", f.name, worst, at, math.Float32bits(at), f.ulps)
		}
	}
}

// exhaustiveMax returns the largest of m over every float32 input and
// where it occurs, measuring chunks in parallel.
func exhaustiveMax(m func(in []float32) (float64, float32)) (float64, float32) {
	const chunk = 1 << 20
	workers := runtime.NumCPU()
	type res struct {
		ulp float64
		at  float32
	}
	results := make([]res, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := make([]float32, chunk)
			for c := uint64(w); c < 1<<32/chunk; c += uint64(workers) {
				for i := range in {
					in[i] = math.Float32frombits(uint32(c*chunk + uint64(i)))
				}
				if u, at := m(in); u > results[w].ulp {
					results[w] = res{u, at}
				}
			}
		}()
	}
	wg.Wait()
	var r res
	for _, x := range results {
		if x.ulp > r.ulp {
			r = x
		}
	}
	return r.ulp, r.at
}

// TestPathsIdentical checks that AVX-512, AVX2 and the scalar code give
// bitwise the same results (NaN payloads included) for the sampled inputs,
// and that splitting a row anywhere changes no element.
func TestPathsIdentical(t *testing.T) {
	in := sampleInputs()
	for _, f := range fns32 {
		want := make([]float32, len(in))
		f.f(implScalar, want, in)
		for _, p := range impls() {
			got := make([]float32, len(in))
			f.f(p, got, in)
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s path %d: f(%g) = %#08x, scalar %#08x", f.name, p, in[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
			// Split the first inputs into pieces of every length 1..37.
			got = make([]float32, 20000)
			for lo, n := 0, 1; lo < len(got); lo, n = lo+n, n%37+1 {
				hi := min(lo+n, len(got))
				f.f(p, got[lo:hi], in[lo:hi])
			}
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s path %d split: f(%g) = %#08x, whole %#08x", f.name, p, in[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
			}
		}
	}
}

// TestInPlace checks that dst may be src, for every function and path.
func TestInPlace(t *testing.T) {
	var in []float32
	for i, x := range sampleInputs() {
		if i%797 == 0 {
			in = append(in, x)
		}
	}
	in = append(in, specials...)
	for _, f := range fns32 {
		for _, p := range impls() {
			want := make([]float32, len(in))
			f.f(p, want, in)
			x := append([]float32(nil), in...)
			f.f(p, x, x)
			for i := range x {
				if math.Float32bits(x[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%s path %d in place: f(%g) = %g, want %g", f.name, p, in[i], x[i], want[i])
				}
			}
		}
	}
}
