package gpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// needGPU is gputest.Need: skip without an adapter, except in CI.
var needGPU = gputest.Need

// randomTensor fills a tensor of type ty with values in [-3, 3) (floats),
// 0 or 1 (bool), or labels in [0, labels) (integers, labels > 0).
func randomTensor(rng *rand.Rand, ty ir.Type, labels int) kernels.Tensor {
	t := kernels.New(ty)
	v := make([]float64, ty.Shape.NumElements())
	for i := range v {
		switch {
		case ty.DType.IsFloat():
			v[i] = rng.Float64()*6 - 3
		case ty.DType == ir.Bool:
			v[i] = float64(rng.IntN(2))
		default:
			v[i] = float64(rng.IntN(max(labels, 1)))
		}
	}
	if err := kernels.SetFloat64s(t, v); err != nil {
		panic(err)
	}
	return t
}

func plan(t testing.TB, src string) *planner.Plan {
	t.Helper()
	g, err := ir.Parse("test.kir", []byte(src))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	p, err := planner.New(g, planner.Options{})
	if err != nil {
		t.Fatalf("plan: %v", err)
	}
	return p
}

// runBoth runs p once on the CPU and on the GPU with the same random
// inputs (labels in [0, labels)) and the same initial params, and returns
// every output by name: CPU's, then GPU's.
func runBoth(t testing.TB, p *planner.Plan, seed uint64, labels int) (map[string][]float64, map[string][]float64) {
	t.Helper()
	c, err := cpu.New(p, cpu.Options{Seed: seed, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, err := gpu.New(p, gpu.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	rng := rand.New(rand.NewPCG(seed, 7))
	for _, i := range p.Inputs {
		b := p.Buffers[i]
		in := randomTensor(rng, b.Type, labels)
		if err := c.Set(b.Name, in); err != nil {
			t.Fatal(err)
		}
		if err := g.Set(b.Name, in); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Step(context.Background()); err != nil {
		t.Fatalf("cpu: %v", err)
	}
	if err := g.Step(context.Background()); err != nil {
		t.Fatalf("gpu: %v", err)
	}
	want, got := map[string][]float64{}, map[string][]float64{}
	for _, o := range p.Outputs {
		ct, err := c.Get(o.Name)
		if err != nil {
			t.Fatal(err)
		}
		gt, err := g.Get(o.Name)
		if err != nil {
			t.Fatal(err)
		}
		want[o.Name], got[o.Name] = kernels.Float64s(ct), kernels.Float64s(gt)
	}
	return want, got
}

// close reports whether got is within rtol of want, relative to |want|,
// with atol for values near 0; NaNs and infinities must match.
func close(got, want, rtol, atol float64) bool {
	if math.IsNaN(want) || math.IsNaN(got) {
		return math.IsNaN(want) && math.IsNaN(got)
	}
	if math.IsInf(want, 0) || math.IsInf(got, 0) {
		return got == want
	}
	return math.Abs(got-want) <= rtol*math.Abs(want)+atol
}

func compare(t testing.TB, name string, got, want []float64, rtol, atol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", name, len(got), len(want))
	}
	bad := 0
	for i := range want {
		if !close(got[i], want[i], rtol, atol) {
			if bad < 5 {
				t.Errorf("%s[%d] = %v on the GPU, %v on the CPU (rtol %g, atol %g)", name, i, got[i], want[i], rtol, atol)
			}
			bad++
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements differ", name, bad, len(want))
	}
}

// Kernel tolerances: 1e-4 relative for f32, with an absolute floor of 1e-6
// (elementwise, where values are O(1)) or 1e-5 per ~100 terms summed
// (matmul, reductions: the GPU adds in another order than the CPU).
const (
	rtol   = 1e-4
	atolEw = 1e-6
)

// kernelCase is one graph body over inputs a, b, c (declared by the case)
// whose outputs are compared.
type kernelCase struct {
	name   string
	src    string // the graph without its first line
	labels int    // range of integer inputs
	atol   float64
}

func TestKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	var cases []kernelCase
	// Every elementwise op, on odd shapes with broadcasting.
	unary := []string{"neg", "exp", "tanh", "sigmoid", "relu", "abs", "sign", "square", "sin", "cos", "erf", "floor", "ceil", "round", "expm1",
		"leaky_relu", "elu", "gelu", "silu", "softplus", "clip %a {min=-1.0, max=0.5}", "gelu %a {approximate=\"tanh\"}", "pow %a {exponent=3.0}"}
	for _, op := range unary {
		if !strings.Contains(op, "%a") {
			op += " %a"
		}
		cases = append(cases, kernelCase{name: op, src: fmt.Sprintf("input %%a: f32[7,37]\n%%y = %s\noutput %%y", op)})
	}
	positive := []string{"log", "sqrt", "rsqrt", "reciprocal", "log2", "log10", "log1p"}
	for _, op := range positive {
		cases = append(cases, kernelCase{name: op, src: fmt.Sprintf("input %%a: f32[7,37]\n%%e = exp %%a\n%%y = %s %%e\noutput %%y", op)})
	}
	binary := []string{"add", "sub", "mul", "div", "maximum", "minimum", "mod", "floor_div"}
	for _, op := range binary {
		cases = append(cases, kernelCase{name: op + " broadcast", src: fmt.Sprintf("input %%a: f32[5,1,33]\ninput %%b: f32[3,33]\n%%y = %s %%a, %%b\noutput %%y", op)})
	}
	for _, op := range []string{"relu_grad %a, %b", "gelu_grad %a, %b", "gelu_grad %a, %b {approximate=\"tanh\"}"} {
		cases = append(cases, kernelCase{name: op, src: fmt.Sprintf("input %%a: f32[5,33]\ninput %%b: f32[5,33]\n%%y = %s\noutput %%y", op)})
	}
	cases = append(cases,
		kernelCase{name: "add scalar", src: "input %a: f32[1000]\ninput %b: f32[]\n%y = add %a, %b\noutput %y"},
		kernelCase{name: "pow", src: "input %a: f32[9,13]\ninput %b: f32[13]\n%e = exp %a\n%y = pow %e, %b\noutput %y"},
		kernelCase{name: "comparisons and where", src: "input %a: f32[3,301]\ninput %b: f32[301]\n%g = greater %a, %b\n%l = less_equal %a, %b\n%e = equal %a, %a\n%n = logical_not %g\n%o = logical_or %n, %l\n%d = logical_and %o, %e\n%y = where %d, %a, %b\noutput %y, %g"},
		kernelCase{name: "fused_elementwise", src: "input %a: f32[65,3]\ninput %b: f32[3]\n%y: f32[65,3] = fused_elementwise %a, %b {program=[\"t0 = mul i0, i1\", \"t1 = tanh t0\", \"t2 = add t1, 0.5\", \"t3 = greater t2, i1\", \"t4 = where t3, t2, i0\"]}\noutput %y"},
		kernelCase{name: "matmul", src: "input %a: f32[33,70]\ninput %b: f32[70,65]\n%y = matmul %a, %b\noutput %y", atol: 1e-5},
		kernelCase{name: "matmul batched broadcast", src: "input %a: f32[2,3,17,9]\ninput %b: f32[3,9,5]\n%y = matmul %a, %b\noutput %y", atol: 1e-5},
		kernelCase{name: "matmul vector", src: "input %a: f32[19]\ninput %b: f32[4,19,3]\n%y = matmul %a, %b\noutput %y", atol: 1e-5},
		kernelCase{name: "fused_matmul", src: "input %a: f32[31,20]\ninput %b: f32[20,67]\ninput %c: f32[67]\n%y: f32[31,67] = fused_matmul %a, %b, %c {program=[\"t0 = add i0, i1\", \"t1 = relu t0\"]}\noutput %y", atol: 1e-5},
		kernelCase{name: "sum axis 0", src: "input %a: f32[300,7]\n%y = sum %a {axes=[0]}\noutput %y", atol: 1e-4},
		kernelCase{name: "sum axis 1 keepdims", src: "input %a: f32[7,33]\n%y = sum %a {axes=[1], keepdims=true}\noutput %y", atol: 1e-5},
		kernelCase{name: "mean all", src: "input %a: f32[3,5,71]\n%y = mean %a\noutput %y", atol: 1e-5},
		kernelCase{name: "mean middle", src: "input %a: f32[3,5,7]\n%y = mean %a {axes=[1]}\noutput %y", atol: 1e-5},
		kernelCase{name: "fused_reduce", src: "input %a: f32[9,130]\ninput %b: f32[130]\n%y: f32[130] = fused_reduce %a, %b {axes=[0], op=\"mean\", program=[\"t0 = mul i0, i1\"]}\noutput %y", atol: 1e-5},
		kernelCase{name: "softmax", src: "input %a: f32[6,300]\n%y = softmax %a\noutput %y", atol: 1e-6},
		kernelCase{name: "softmax axis 0", src: "input %a: f32[5,3,7]\n%y = softmax %a {axis=1}\n%z = log_softmax %a {axis=0}\noutput %y, %z", atol: 1e-6},
		kernelCase{name: "softmax_cross_entropy i64", src: "input %a: f32[33,10]\ninput %l: i64[33]\n%y = softmax_cross_entropy %a, %l\n%s = softmax_cross_entropy %a, %l {reduction=\"none\"}\noutput %y, %s", labels: 10, atol: 1e-5},
		kernelCase{name: "softmax_cross_entropy probs", src: "input %a: f32[5,11]\ninput %p: f32[5,11]\n%y = softmax_cross_entropy %a, %p {reduction=\"sum\"}\noutput %y", atol: 1e-5},
		kernelCase{name: "softmax_ce_grad", src: "input %a: f32[17,10]\ninput %l: i32[17]\ninput %d: f32[]\n%y: f32[17,10] = softmax_ce_grad %a, %l, %d {reduction=\"mean\"}\n%z: f32[17,10] = softmax_ce_grad %a, %l {reduction=\"sum\"}\noutput %y, %z", labels: 10, atol: 1e-6},
		kernelCase{name: "transpose", src: "input %a: f32[3,5,7]\n%y = transpose %a {perm=[2,0,1]}\n%z = transpose %a\noutput %y, %z"},
		kernelCase{name: "reshape broadcast_to", src: "input %a: f32[3,1,7]\n%y = broadcast_to %a {shape=[2,3,5,7]}\n%z = reshape %a {shape=[21]}\noutput %y, %z"},
		kernelCase{name: "const one_hot", src: "input %l: i64[9]\n%c = const {dtype=\"f32\", shape=[2,3], value=[1.0, 2.5, -3.0, 4.0, 5.0, 6.0]}\n%s = const {dtype=\"f32\", value=0.25}\n%o = one_hot %l {classes=5}\noutput %c, %s, %o", labels: 5},
	)
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := plan(t, "graph k\n"+tc.src)
			want, got := runBoth(t, p, 1, tc.labels)
			atol := tc.atol
			if atol == 0 {
				atol = atolEw
			}
			for name := range want {
				compare(t, name, got[name], want[name], rtol, atol)
			}
		})
	}
}
