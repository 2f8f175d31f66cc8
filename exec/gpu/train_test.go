package gpu_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

func TestDigitsMLPGradientsMatchCPU(t *testing.T) {
	needGPU(t)
	p := compile(t, examples.DigitsMLP, kiln.Options{Grad: true})
	c, g := executors(t, p)
	feed(t, p, rand.New(rand.NewPCG(1, 2)), 10, c, g)
	stepAll(t, 0, c, g)
	if len(p.Grads) != 4 {
		t.Fatalf("%d gradients, want 4", len(p.Grads))
	}
	compareOutputsAndGrads(t, p, c, g)
}

func TestDigitsMLPAdamStepsMatchCPU(t *testing.T) {
	needGPU(t)
	for _, opt := range []passes.OptimizerConfig{
		{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8},
		{Kind: "sgd", LR: 0.1, Momentum: 0.9, WeightDecay: 0.01},
	} {
		t.Run(opt.Kind, func(t *testing.T) {
			p := compile(t, examples.DigitsMLP, kiln.Options{Optimizer: &opt})
			c, g := executors(t, p)
			trainMatches(t, p, c, g, rand.New(rand.NewPCG(5, 6)), 10, 4)
		})
	}
}

// recurrence returns an unrolled recurrence h = tanh(h·W + x_t·U) over
// steps inputs, W shared by every step, as backpropagation through time
// sees it: the gradient of W accumulates over the steps.
func recurrence(steps int) []byte {
	var b strings.Builder
	b.WriteString("graph rnn\nparam %w: f32[12,12]\nparam %u: f32[7,12]\ninput %h0: f32[5,12]\n")
	h := "%h0"
	for s := range steps {
		fmt.Fprintf(&b, "input %%x%d: f32[5,7]\n", s)
		fmt.Fprintf(&b, "%%hw%d = matmul %s, %%w\n%%xu%d = matmul %%x%d, %%u\n%%z%d = add %%hw%d, %%xu%d\n%%h%d = tanh %%z%d\n", s, h, s, s, s, s, s, s+1, s)
		h = fmt.Sprintf("%%h%d", s+1)
	}
	fmt.Fprintf(&b, "%%sq = square %s\n%%loss = mean %%sq\noutput %%loss\n", h)
	return []byte(b.String())
}

func TestUnrolledRecurrenceGradientsMatchCPU(t *testing.T) {
	needGPU(t)
	p := compile(t, recurrence(8), kiln.Options{Grad: true})
	c, g := executors(t, p)
	feed(t, p, rand.New(rand.NewPCG(3, 4)), 0, c, g)
	stepAll(t, 0, c, g)
	compareOutputsAndGrads(t, p, c, g)
}

// TestDeterministic runs three Adam steps of the digits MLP twice on the
// GPU and compares every param, state and output bit for bit.
func TestDeterministic(t *testing.T) {
	needGPU(t)
	opt := passes.OptimizerConfig{Kind: "adam", LR: 0.01, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8}
	p := compile(t, examples.DigitsMLP, kiln.Options{Optimizer: &opt})
	run := func() map[string][]byte {
		g, err := gpu.New(p, gpu.Options{Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		defer g.Close()
		rng := rand.New(rand.NewPCG(1, 1))
		for range 3 {
			feed(t, p, rng, 10, g)
			if err := g.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		out := map[string][]byte{}
		for _, name := range g.Names() {
			v, err := g.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			out[name] = append([]byte(nil), v.Data...)
		}
		return out
	}
	a, b := run(), run()
	for name, v := range a {
		if string(v) != string(b[name]) {
			t.Errorf("%s differs between two runs", name)
		}
	}
	if len(a) < 10 {
		t.Fatalf("only %d tensors compared", len(a))
	}
}

func TestErrors(t *testing.T) {
	needGPU(t)
	for _, tc := range []struct {
		name, src, want string
	}{
		{"f64", "graph f\ninput %a: f32[3]\n%b = exp %a\ninput %d: f64[3]\n%e = exp %d\noutput %b, %e",
			"plan f: value %d is f64[3]; the GPU has no f64 (WGSL), compile the graph in f32"},
		{"too large", "graph big\nparam %w: f32[40000,40000]\n%y = sum %w\noutput %y",
			"plan big: value %w (f32[40000,40000], 6400000000 bytes) is larger than the GPU"},
		{"no kernel", "graph nk\ninput %a: i64[3,4]\n%y = prod %a {axes=[0]}\noutput %y",
			"step 0 (%y: i64[4] = prod %a {axes=[0], keepdims=false}): gpu backend has no prod kernel for i64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := gpu.New(plan(t, tc.src), gpu.Options{})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line starting %q", err, tc.want)
			}
		})
	}
	t.Run("label out of range", func(t *testing.T) {
		p := plan(t, "graph l\ninput %a: f32[4,3]\ninput %l: i64[4]\n%y = softmax_cross_entropy %a, %l\noutput %y")
		c, g := executors(t, p)
		a := randomTensor(rand.New(rand.NewPCG(1, 1)), ir.Type{DType: ir.F32, Shape: ir.Shape{4, 3}}, 0)
		l := kernels.New(ir.Type{DType: ir.I64, Shape: ir.Shape{4}})
		if err := kernels.SetFloat64s(l, []float64{0, 2, 7, 5}); err != nil {
			t.Fatal(err)
		}
		sameStepError(t, c, g, map[string]kernels.Tensor{"a": a, "l": l}, "label 7 at row 2 is outside [0,3)")
	})
}
