package gpu_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln/kernels"
)

// nnCases are the convolution, pooling, normalization, dropout, B-spline
// and logic-gate kernels against the CPU's, on odd shapes (not multiples
// of the workgroup size), within 1e-4 relative. The absolute floors are
// for sums of many terms added in another order than the CPU's.
var nnCases = []kernelCase{
	{name: "conv2d bias stride padding", src: "input %x: f32[3,5,9,11]\ninput %w: f32[7,5,3,3]\ninput %b: f32[7]\n%y = conv2d %x, %w, %b {stride=[2,1], padding=[1,2]}\noutput %y", atol: 1e-5},
	{name: "conv2d groups dilation", src: "input %x: f32[2,6,10,9]\ninput %w: f32[4,3,3,2]\n%y = conv2d %x, %w {groups=2, dilation=[2,3], padding=[2,1], stride=[1,2]}\noutput %y", atol: 1e-5},
	{name: "conv1d", src: "input %x: f32[3,4,29]\ninput %w: f32[5,4,4]\ninput %b: f32[5]\n%y = conv1d %x, %w, %b {stride=[2], padding=[2]}\noutput %y", atol: 1e-5},
	{name: "conv_input_grad 2d", src: "input %dy: f32[3,7,5,6]\ninput %w: f32[7,5,3,4]\n%y = conv_input_grad %dy, %w {stride=[2,2], padding=[1,2], dilation=[1,1], input_shape=[3,5,9,11]}\noutput %y", atol: 1e-5},
	{name: "conv_input_grad groups dilation", src: "input %dy: f32[2,4,10,4]\ninput %w: f32[4,3,3,2]\n%y = conv_input_grad %dy, %w {groups=2, dilation=[2,3], padding=[2,1], stride=[1,2], input_shape=[2,6,10,9]}\noutput %y", atol: 1e-5},
	{name: "conv_input_grad 1d", src: "input %dy: f32[3,5,15]\ninput %w: f32[5,4,4]\n%y = conv_input_grad %dy, %w {stride=[2], padding=[2], input_shape=[3,4,29]}\noutput %y", atol: 1e-5},
	{name: "conv_weight_grad 2d", src: "input %x: f32[3,5,9,11]\ninput %dy: f32[3,7,5,6]\n%y = conv_weight_grad %x, %dy {stride=[2,2], padding=[1,2], weight_shape=[7,5,3,4]}\noutput %y", atol: 1e-4},
	{name: "conv_weight_grad groups small", src: "input %x: f32[2,6,4,3]\ninput %dy: f32[2,4,2,3]\n%y = conv_weight_grad %x, %dy {groups=2, padding=[1,1], dilation=[2,1], weight_shape=[4,3,3,3]}\noutput %y", atol: 1e-5},
	{name: "conv_weight_grad 1d", src: "input %x: f32[3,4,29]\ninput %dy: f32[3,5,15]\n%y = conv_weight_grad %x, %dy {stride=[2], padding=[2], weight_shape=[5,4,4]}\noutput %y", atol: 1e-5},
	{name: "max_pool2d", src: "input %x: f32[3,5,9,11]\n%y = max_pool2d %x {kernel=[3,2], stride=[2,3], padding=[1,1], dilation=[1,2]}\n%z = max_pool2d %x {kernel=[2,2]}\noutput %y, %z"},
	{name: "max_pool2d_grad", src: "input %dy: f32[3,5,5,4]\ninput %x: f32[3,5,9,11]\n%y = max_pool2d_grad %dy, %x {kernel=[3,2], stride=[2,3], padding=[1,1], dilation=[1,2]}\noutput %y", atol: 1e-6},
	{name: "max_pool2d_grad overlapping", src: "input %dy: f32[7,9,10]\ninput %x: f32[7,9,10]\n%y = max_pool2d_grad %dy, %x {kernel=[3,3], stride=[1,1], padding=[1,1]}\noutput %y", atol: 1e-6},
	{name: "max_pool2d_select", src: "input %g: f32[3,5,9,11]\ninput %x: f32[3,5,9,11]\n%y = max_pool2d_select %g, %x {kernel=[3,2], stride=[2,3], padding=[1,1], dilation=[1,2]}\noutput %y"},
	{name: "avg_pool2d", src: "input %x: f32[3,5,9,11]\n%y = avg_pool2d %x {kernel=[3,2], stride=[2,3], padding=[1,1]}\n%z = avg_pool2d %x {kernel=[3,3], stride=[2,2], padding=[1,1], count_include_pad=false}\noutput %y, %z", atol: 1e-6},
	{name: "avg_pool2d_grad", src: "input %dy: f32[3,5,5,4]\ninput %e: f32[3,5,5,5]\n%y = avg_pool2d_grad %dy {kernel=[3,2], stride=[2,3], padding=[1,1], input_shape=[3,5,9,11]}\n%z = avg_pool2d_grad %e {kernel=[3,3], stride=[2,2], padding=[1,1], count_include_pad=false, input_shape=[3,5,9,9]}\noutput %y, %z", atol: 1e-6},
	{name: "layer_norm", src: "input %x: f32[7,301]\ninput %w: f32[301]\ninput %b: f32[301]\n%y = layer_norm %x, %w, %b\n%z = layer_norm %x {eps=0.001}\noutput %y, %z", atol: 1e-5},
	{name: "layer_norm two axes", src: "input %x: f32[5,3,11]\ninput %w: f32[3,11]\n%y = layer_norm %x, %w {axes=[1,2]}\noutput %y", atol: 1e-5},
	{name: "batch_norm", src: "input %x: f32[5,3,7,9]\ninput %w: f32[3]\ninput %b: f32[3]\n%y = batch_norm %x, %w, %b\noutput %y", atol: 1e-5},
	{name: "batch_norm 2d", src: "input %x: f32[33,4]\ninput %w: f32[4]\ninput %b: f32[4]\n%y = batch_norm %x, %w, %b {eps=0.01}\noutput %y", atol: 1e-5},
	{name: "logic_gate", src: "input %a: f32[9,13]\ninput %b: f32[9,13]\ninput %l: f32[13,16]\n%y = logic_gate %a, %b, %l\noutput %y", atol: 1e-5},
	{name: "logic_gate broadcast", src: "input %a: f32[5,1,7]\ninput %b: f32[3,7]\ninput %l: f32[7,16]\n%y = logic_gate %a, %b, %l\noutput %y", atol: 1e-5},
}

// bsplineCases covers every order up to 5 with every derivative, on the
// default grid and another; the inputs in [-3, 3) fall inside and outside
// the grids.
func bsplineCases() []kernelCase {
	var cs []kernelCase
	for order := 0; order <= 5; order++ {
		for d := 0; d <= order; d++ {
			cs = append(cs, kernelCase{name: fmt.Sprintf("bspline order %d derivative %d", order, d),
				src:  fmt.Sprintf("input %%x: f32[7,19]\n%%y = bspline %%x {order=%d, derivative=%d}\n%%z = bspline %%x {order=%d, derivative=%d, grid_min=-2.5, grid_max=1.5, grid_size=7}\noutput %%y, %%z", order, d, order, d),
				atol: 1e-5})
		}
	}
	return cs
}

func TestNNKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	for _, tc := range append(nnCases, bsplineCases()...) {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			p := plan(t, "graph k\n"+tc.src)
			want, got := runBoth(t, p, 1, tc.labels)
			atol := tc.atol
			if atol == 0 {
				atol = atolEw
			}
			for name := range want {
				scale := 0.0
				for _, v := range want[name] {
					scale = max(scale, math.Abs(v))
				}
				// Derivatives of high order reach large values: the floor
				// scales with the tensor's largest magnitude.
				compare(t, name, got[name], want[name], rtol, atol*max(scale, 1))
			}
		})
	}
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
		for _, x := range []interface{ Step(context.Context) error }{c, g} {
			if err := x.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
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
				if prev != nil && equalFloats(prev, want) {
					t.Errorf("step %d: the mask of %%a did not change from the step before", step)
				}
				prev = append(prev[:0], want...)
			}
		}
	}
}

func equalFloats(a, b []float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
