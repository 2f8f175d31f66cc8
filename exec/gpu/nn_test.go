package gpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// nnCases are the convolution, pooling, normalization, dropout, B-spline
// and logic-gate kernels against the CPU's, on odd shapes (not multiples
// of the workgroup size), within 1e-4 relative. The absolute floors are
// for sums of many terms added in another order than the CPU's.
var nnCases = []kernelCase{
	{Name: "conv2d bias stride padding", Src: "input %x: f32[3,5,9,11]\ninput %w: f32[7,5,3,3]\ninput %b: f32[7]\n%y = conv2d %x, %w, %b {stride=[2,1], padding=[1,2]}\noutput %y", Atol: 1e-5},
	{Name: "conv2d groups dilation", Src: "input %x: f32[2,6,10,9]\ninput %w: f32[4,3,3,2]\n%y = conv2d %x, %w {groups=2, dilation=[2,3], padding=[2,1], stride=[1,2]}\noutput %y", Atol: 1e-5},
	{Name: "conv1d", Src: "input %x: f32[3,4,29]\ninput %w: f32[5,4,4]\ninput %b: f32[5]\n%y = conv1d %x, %w, %b {stride=[2], padding=[2]}\noutput %y", Atol: 1e-5},
	{Name: "conv_input_grad 2d", Src: "input %dy: f32[3,7,5,6]\ninput %w: f32[7,5,3,4]\n%y = conv_input_grad %dy, %w {stride=[2,2], padding=[1,2], dilation=[1,1], input_shape=[3,5,9,11]}\noutput %y", Atol: 1e-5},
	{Name: "conv_input_grad groups dilation", Src: "input %dy: f32[2,4,10,4]\ninput %w: f32[4,3,3,2]\n%y = conv_input_grad %dy, %w {groups=2, dilation=[2,3], padding=[2,1], stride=[1,2], input_shape=[2,6,10,9]}\noutput %y", Atol: 1e-5},
	{Name: "conv_input_grad 1d", Src: "input %dy: f32[3,5,15]\ninput %w: f32[5,4,4]\n%y = conv_input_grad %dy, %w {stride=[2], padding=[2], input_shape=[3,4,29]}\noutput %y", Atol: 1e-5},
	{Name: "conv_weight_grad 2d", Src: "input %x: f32[3,5,9,11]\ninput %dy: f32[3,7,5,6]\n%y = conv_weight_grad %x, %dy {stride=[2,2], padding=[1,2], weight_shape=[7,5,3,4]}\noutput %y", Atol: 1e-4},
	{Name: "conv_weight_grad groups small", Src: "input %x: f32[2,6,4,3]\ninput %dy: f32[2,4,2,3]\n%y = conv_weight_grad %x, %dy {groups=2, padding=[1,1], dilation=[2,1], weight_shape=[4,3,3,3]}\noutput %y", Atol: 1e-5},
	{Name: "conv_weight_grad 1d", Src: "input %x: f32[3,4,29]\ninput %dy: f32[3,5,15]\n%y = conv_weight_grad %x, %dy {stride=[2], padding=[2], weight_shape=[5,4,4]}\noutput %y", Atol: 1e-5},
	{Name: "max_pool2d", Src: "input %x: f32[3,5,9,11]\n%y = max_pool2d %x {kernel=[3,2], stride=[2,3], padding=[1,1], dilation=[1,2]}\n%z = max_pool2d %x {kernel=[2,2]}\noutput %y, %z"},
	{Name: "max_pool2d_grad", Src: "input %dy: f32[3,5,5,4]\ninput %x: f32[3,5,9,11]\n%y = max_pool2d_grad %dy, %x {kernel=[3,2], stride=[2,3], padding=[1,1], dilation=[1,2]}\noutput %y", Atol: 1e-6},
	{Name: "max_pool2d_grad overlapping", Src: "input %dy: f32[7,9,10]\ninput %x: f32[7,9,10]\n%y = max_pool2d_grad %dy, %x {kernel=[3,3], stride=[1,1], padding=[1,1]}\noutput %y", Atol: 1e-6},
	{Name: "max_pool2d_select", Src: "input %g: f32[3,5,9,11]\ninput %x: f32[3,5,9,11]\n%y = max_pool2d_select %g, %x {kernel=[3,2], stride=[2,3], padding=[1,1], dilation=[1,2]}\noutput %y"},
	{Name: "avg_pool2d", Src: "input %x: f32[3,5,9,11]\n%y = avg_pool2d %x {kernel=[3,2], stride=[2,3], padding=[1,1]}\n%z = avg_pool2d %x {kernel=[3,3], stride=[2,2], padding=[1,1], count_include_pad=false}\noutput %y, %z", Atol: 1e-6},
	{Name: "avg_pool2d_grad", Src: "input %dy: f32[3,5,5,4]\ninput %e: f32[3,5,5,5]\n%y = avg_pool2d_grad %dy {kernel=[3,2], stride=[2,3], padding=[1,1], input_shape=[3,5,9,11]}\n%z = avg_pool2d_grad %e {kernel=[3,3], stride=[2,2], padding=[1,1], count_include_pad=false, input_shape=[3,5,9,9]}\noutput %y, %z", Atol: 1e-6},
	{Name: "layer_norm", Src: "input %x: f32[7,301]\ninput %w: f32[301]\ninput %b: f32[301]\n%y = layer_norm %x, %w, %b\n%z = layer_norm %x {eps=0.001}\noutput %y, %z", Atol: 1e-5},
	{Name: "layer_norm two axes", Src: "input %x: f32[5,3,11]\ninput %w: f32[3,11]\n%y = layer_norm %x, %w {axes=[1,2]}\noutput %y", Atol: 1e-5},
	{Name: "layer_norm_grad", Src: "input %dy: f32[7,301]\ninput %x: f32[7,301]\ninput %w: f32[301]\n%y = layer_norm_grad %dy, %x, %w\n%z = layer_norm_grad %dy, %x {eps=0.001}\noutput %y, %z", Atol: 1e-5, Scaled: true},
	{Name: "layer_norm_grad two axes", Src: "input %dy: f32[5,3,11]\ninput %x: f32[5,3,11]\ninput %w: f32[3,11]\n%y = layer_norm_grad %dy, %x, %w {axes=[1,2]}\noutput %y", Atol: 1e-5, Scaled: true},
	{Name: "batch_norm", Src: "input %x: f32[5,3,7,9]\ninput %w: f32[3]\ninput %b: f32[3]\n%y = batch_norm %x, %w, %b\noutput %y", Atol: 1e-5},
	{Name: "batch_norm 2d", Src: "input %x: f32[33,4]\ninput %w: f32[4]\ninput %b: f32[4]\n%y = batch_norm %x, %w, %b {eps=0.01}\noutput %y", Atol: 1e-5},
	{Name: "logic_gate", Src: "input %a: f32[9,13]\ninput %b: f32[9,13]\ninput %l: f32[13,16]\n%y = logic_gate %a, %b, %l\noutput %y", Atol: 1e-5},
	{Name: "logic_gate broadcast", Src: "input %a: f32[5,1,7]\ninput %b: f32[3,7]\ninput %l: f32[7,16]\n%y = logic_gate %a, %b, %l\noutput %y", Atol: 1e-5},
}

// bsplineCases covers every order up to 5 with every derivative, on the
// default grid and another; the inputs in [-3, 3) fall inside and outside
// the grids.
func bsplineCases() []kernelCase {
	var cs []kernelCase
	for order := 0; order <= 5; order++ {
		for d := 0; d <= order; d++ {
			cs = append(cs, kernelCase{Name: fmt.Sprintf("bspline order %d derivative %d", order, d),
				Src:  fmt.Sprintf("input %%x: f32[7,19]\n%%y = bspline %%x {order=%d, derivative=%d}\n%%z = bspline %%x {order=%d, derivative=%d, grid_min=-2.5, grid_max=1.5, grid_size=7}\noutput %%y, %%z", order, d, order, d),
				Atol: 1e-5})
		}
	}
	return cs
}

func TestNNKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	// Derivatives of high order reach large values: every floor scales
	// with the tensor's largest magnitude.
	cases := append(append([]kernelCase(nil), nnCases...), bsplineCases()...)
	for i := range cases {
		cases[i].Scaled = true
	}
	runCases(t, cases)
}

// TestDropoutMaskMatchesCPU checks that the GPU's dropout masks are the
// CPU's bit for bit, for several seeds and probabilities and at several
// steps (the executor's step count reaches the kernel), and that they
// differ from step to step.
func TestDropoutMaskMatchesCPU(t *testing.T) {
	needGPU(t)
	p := plan(t, `graph k
input %x: f32[3,1001]
%a = dropout %x {p=0.5, seed=7}
%b = dropout %x {p=0.1, seed=-4294967297}
%c = dropout %x {p=0.9}
%d = dropout %x {p=1.0, seed=3}
%e = dropout %x {p=0.0, seed=3}
output %a, %b, %c, %d, %e`)
	c, g := executors(t, p)
	feed(t, p, rand.New(rand.NewPCG(5, 6)), 0, c, g)
	var prev []float64
	for step := 0; step < 3; step++ {
		stepAll(t, step, c, g)
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			ct, err := c.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			gt, err := g.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			want, got := kernels.Float64s(ct), kernels.Float64s(gt)
			for i := range want {
				if math.Float64bits(want[i]) != math.Float64bits(got[i]) {
					t.Fatalf("step %d: %s[%d] = %v on the GPU, %v on the CPU (must be bitwise equal)", step, name, i, got[i], want[i])
				}
			}
			if name == "a" {
				if prev != nil && nnEqual(prev, want) {
					t.Errorf("step %d: the mask of %%a did not change from the step before", step)
				}
				prev = append(prev[:0], want...)
			}
		}
	}
}

func nnEqual(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// digitsCNN returns examples/digits/cnn.kir with a dropout (p = 0.25)
// before the linear layer, so that a training step has convolutions, batch
// norms, max pooling and dropout forward and backward.
func digitsCNN(t testing.TB) []byte {
	t.Helper()
	src, err := os.ReadFile("../../examples/digits/cnn.kir")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, r := range [][2]string{
		{"%z = matmul %flat, %w3", "%drop = dropout %flat {p=0.25, seed=11}\n%z = matmul %drop, %w3"},
		{"%c1 = conv2d %img, %w1, %b1", "%c1 = conv2d %img, %w1"},
		{"%c2 = conv2d %p1, %w2, %b2", "%c2 = conv2d %p1, %w2"},
		{"param %b1: f32[16]\n", ""},
		{"param %b2: f32[32]\n", ""},
	} {
		if !strings.Contains(s, r[0]) {
			t.Fatalf("examples/digits/cnn.kir has no line %q", r[0])
		}
		s = strings.Replace(s, r[0], r[1], 1)
	}
	return []byte(s)
}

// nnCheckTraining compiles src twice: with gradients, whose outputs and
// gradients after steps steps (new inputs each, the dropout masks
// changing) must match the CPU's within gradTol; and with Adam, whose
// loss at every step and params and state after steps steps must too.
func nnCheckTraining(t *testing.T, src []byte, o0 bool, labels, steps int) {
	t.Run("gradients", func(t *testing.T) {
		p := compile(t, src, kiln.Options{Grad: true, O0: o0})
		c, g := executors(t, p)
		rng := rand.New(rand.NewPCG(1, 2))
		for step := range steps {
			feed(t, p, rng, labels, c, g)
			stepAll(t, step, c, g)
			compareOutputsAndGrads(t, p, c, g)
		}
		if len(p.Grads) == 0 {
			t.Fatal("no gradients compared")
		}
	})
	t.Run("adam", func(t *testing.T) {
		opt := passes.OptimizerConfig{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
		p := compile(t, src, kiln.Options{Optimizer: &opt, O0: o0})
		c, g := executors(t, p)
		trainMatches(t, p, c, g, rand.New(rand.NewPCG(5, 6)), labels, steps)
	})
}

func TestDigitsCNNTrainingMatchesCPU(t *testing.T) {
	needGPU(t)
	nnCheckTraining(t, digitsCNN(t), false, 10, 3)
}

// kanLayers is two Kolmogorov-Arnold layers (efficient-kan's KANLinear:
// silu(x)·W_base + bsplines(x)·W_spline) on a squared error, so that the
// backward has bspline's derivative.
const kanLayers = `graph kan
input %x: f32[9,4]
input %t: f32[9,3]
param %wb1: f32[4,5]
param %ws1: f32[32,5]
param %wb2: f32[5,3]
param %ws2: f32[40,3]
%s1 = silu %x
%base1 = matmul %s1, %wb1
%bs1 = bspline %x {grid_size=5, order=3, grid_min=-3.0, grid_max=3.0}
%flat1 = reshape %bs1 {shape=[9,32]}
%sp1 = matmul %flat1, %ws1
%h = add %base1, %sp1
%s2 = silu %h
%base2 = matmul %s2, %wb2
%bs2 = bspline %h {grid_size=5, order=3}
%flat2 = reshape %bs2 {shape=[9,40]}
%sp2 = matmul %flat2, %ws2
%y = add %base2, %sp2
%d = sub %y, %t
%sq = square %d
%loss = mean %sq
output %loss
`

func TestKANTrainingMatchesCPU(t *testing.T) {
	needGPU(t)
	nnCheckTraining(t, []byte(kanLayers), false, 0, 2)
}

// logicLayers is two difflogic layers; %a [8,1] is read by every gate of
// the first, so its gradient adds the contributions of 12 gates.
const logicLayers = `graph gates
input %a: f32[8,1]
input %b: f32[8,12]
input %t: f32[8,12]
param %l1: f32[12,16]
param %l2: f32[12,16]
%h1 = logic_gate %a, %b, %l1
%h2 = logic_gate %h1, %b, %l2
%d = sub %h2, %t
%sq = square %d
%loss = mean %sq
output %loss
`

// TestLogicGateTrainingMatchesCPU compiles without the optimizing passes,
// so that the softmax gradient in logic_gate's backward stays composite
// (mul, sub, sum) rather than the fused softmax_grad, a kernel of another
// family.
func TestLogicGateTrainingMatchesCPU(t *testing.T) {
	needGPU(t)
	nnCheckTraining(t, []byte(logicLayers), true, 0, 2)
}

// TestNNDeterministic runs two gradient steps of a small network of this
// family's ops (the gather-form backward of convolutions and pooling,
// workgroup reductions of the norms, dropout) twice on the GPU and
// compares every output and gradient bit for bit.
func TestNNDeterministic(t *testing.T) {
	needGPU(t)
	p := compile(t, []byte(`graph det
input %x: f32[6,3,9,9]
input %t: f32[6,4,5,5]
param %w: f32[4,3,3,3]
param %b: f32[4]
param %g: f32[4] {init="ones"}
param %s: f32[4]
%c = conv2d %x, %w, %b {padding=[1,1]}
%n = batch_norm %c, %g, %s
%m = max_pool2d %n {kernel=[3,3], stride=[2,2], padding=[1,1]}
%a = avg_pool2d %m {kernel=[3,3], stride=[1,1], padding=[1,1]}
%l = layer_norm %a {axes=[2,3]}
%d = dropout %l {p=0.3, seed=5}
%e = sub %d, %t
%q = square %e
%loss = mean %q
output %loss
`), kiln.Options{Grad: true})
	run := func() map[string][]byte {
		g, err := gpu.New(p, gpu.Options{Seed: 4})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		rng := rand.New(rand.NewPCG(8, 9))
		out := map[string][]byte{}
		for step := range 2 {
			feed(t, p, rng, 0, g)
			stepAll(t, step, g)
			for _, n := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
				v, err := g.Get(n.Name)
				if err != nil {
					t.Fatal(err)
				}
				out[fmt.Sprintf("%s at step %d", n.Name, step)] = append([]byte(nil), v.Data...)
			}
		}
		return out
	}
	a, b := run(), run()
	for name, v := range a {
		if string(v) != string(b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	if len(a) != 2*5 {
		t.Fatalf("%d tensors compared, want 10 (the loss and 4 gradients, 2 steps)", len(a))
	}
}

// BenchmarkDigitsCNNStep times one Adam step of the digits CNN (batch 32,
// with the dropout of digitsCNN) on the GPU and on the CPU executor (one
// worker), inputs set once.
func BenchmarkDigitsCNNStep(b *testing.B) {
	needGPU(b)
	opt := passes.OptimizerConfig{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	p := compile(b, digitsCNN(b), kiln.Options{Optimizer: &opt})
	c, g := executors(b, p)
	feed(b, p, rand.New(rand.NewPCG(1, 2)), 10, c, g)
	for _, x := range []struct {
		name string
		x    interface{ Step(context.Context) error }
	}{{"gpu", g}, {"cpu", c}} {
		b.Run(x.name, func(b *testing.B) {
			for b.Loop() {
				if err := x.x.Step(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
