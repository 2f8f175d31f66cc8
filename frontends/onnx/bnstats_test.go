package onnx_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// TestRunningStats trains the bnstats fixture (training-mode BatchNorm2d
// and BatchNorm1d with momentum 0.3) three SGD steps and checks the losses
// and every running statistic afterwards against PyTorch's module (f32:
// rtol 1e-5, atol 1e-6): the mean and the unbiased batch variance, mixed in
// with ONNX's momentum attribute.
func TestRunningStats(t *testing.T) { checkRunningStats(t, "cpu") }

// TestRunningStatsGPU is TestRunningStats on the GPU (WebGPU; f32).
func TestRunningStatsGPU(t *testing.T) {
	gputest.Need(t)
	checkRunningStats(t, "gpu")
}

func checkRunningStats(t *testing.T, device string) {
	m := importFixture(t, "bnstats")
	want := readTensors(t, fixture("bnstats.expected.safetensors"))
	var names []string
	for _, s := range m.States {
		names = append(names, s.Name)
	}
	if w := []string{"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"}; !slices.Equal(names, w) {
		t.Fatalf("states %v, want %v", names, w)
	}
	for _, p := range m.Params {
		if slices.Contains(names, p.Name) {
			t.Errorf("running statistic %q is a param", p.Name)
		}
	}
	opt, err := passes.DefaultOptimizer("sgd")
	if err != nil {
		t.Fatal(err)
	}
	opt.LR = 0.1
	x := newExecutor(t, "bnstats", m, kiln.Options{Grad: true, Optimizer: &opt, Device: device})
	for _, s := range m.States {
		if err := x.Set(s.Name, kernels.Tensor{Type: s.Type, Data: s.Data}); err != nil {
			t.Fatal(err)
		}
	}
	for step, w := range floats(want["sgd_losses"]) {
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		loss, err := x.Get("loss")
		if err != nil {
			t.Fatal(err)
		}
		if got := kernels.Float64s(loss)[0]; !close(got, w, 1e-4, 1e-7) {
			t.Errorf("step %d: loss %.7g, PyTorch %.7g", step, got, w)
		}
	}
	for _, name := range names {
		got, err := x.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		g, w := kernels.Float64s(got), floats(want["running/"+name])
		if len(g) != len(w) {
			t.Fatalf("%s: %d values, PyTorch %d", name, len(g), len(w))
		}
		for i := range w {
			if !close(g[i], w[i], 1e-5, 1e-6) {
				t.Errorf("%s[%d] = %.7g after 3 steps, PyTorch %.7g", name, i, g[i], w[i])
				break
			}
		}
	}
}

// TestRunningStatsEvaluation checks that the evaluation graph (the
// inference pass) leaves the running statistics alone: it has no updates.
func TestRunningStatsEvaluation(t *testing.T) {
	m := importFixture(t, "bnstats")
	if len(m.Graph.Updates) != 4 {
		t.Fatalf("the imported graph has %d updates, want 4 (two running statistics of two BatchNorms)", len(m.Graph.Updates))
	}
	g, err := kiln.Transform(m.Graph, kiln.Options{Inference: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Updates) != 0 {
		t.Errorf("the evaluation graph has %d updates, want none", len(g.Updates))
	}
	for _, v := range g.Values {
		if v.Op == ir.OpState {
			t.Errorf("the evaluation graph keeps state %%%s", v.Name)
		}
	}
}
