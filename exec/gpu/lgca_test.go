package gpu_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/kernels/wgsl"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// lgca is a small logic-gate cellular automaton for the GPU tests: 6×6
// cells, 4 channels, 5 steps from the all-zero grid, 2 perception kernels
// of 8+2+1 gates and an update network of 16+8+4 gates.
var lgca = frontends.LogicAutomaton{Height: 6, Width: 6, Channels: 4, Steps: 5, Kernels: 2,
	KernelLayers: []int{2, 1}, UpdateLayers: []int{16, 8, 4}, Seed: 3, InitScale: 1, PassThrough: 3}

// lgcaAdam is the example's optimizer: Adam, lr 0.05, every gradient
// element clipped to ±100.
var lgcaAdam = passes.OptimizerConfig{Kind: "adam", LR: 0.05, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, ClipGrad: 100}

func lgcaPlan(t testing.TB, a frontends.LogicAutomaton, opts kiln.Options) *planner.Plan {
	t.Helper()
	g, err := a.Build(ir.F32)
	return compileGraph(t, g, err, opts)
}

// TestLogicAutomatonGradientsMatchCPU runs the automaton's rollout and
// backpropagation through all its steps on the GPU and on the CPU from the
// same params and compares the loss and the gradient of every layer's
// logits within gradTol (1e-3 relative to the larger of the element's and
// the tensor's largest magnitude on the CPU).
func TestLogicAutomatonGradientsMatchCPU(t *testing.T) {
	needGPU(t)
	p := lgcaPlan(t, lgca, kiln.Options{Grad: true})
	c, g := executors(t, p)
	stepAll(t, 0, c, g)
	if len(p.Grads) != 6 {
		t.Fatalf("%d gradients, want 6 (3 perception layers, 3 update layers)", len(p.Grads))
	}
	compareOutputsAndGrads(t, p, c, g)
	// The gradients must not be trivially zero, or the comparison says
	// nothing.
	for _, n := range p.Grads {
		v, err := c.Get(n.Name)
		if err != nil {
			t.Fatal(err)
		}
		nz := 0
		for _, f := range kernels.Float64s(v) {
			if f != 0 {
				nz++
			}
		}
		if nz == 0 {
			t.Errorf("%s is all zero on the CPU", n.Name)
		}
	}
}

// TestLogicAutomatonTrainingMatchesCPU trains the automaton for 4 steps
// with Adam and clipping on the GPU and on the CPU and compares the loss of
// every step, then every param and Adam moment, within gradTol; then runs
// the same 4 steps on a second GPU executor and checks every param, state
// and output bit for bit.
func TestLogicAutomatonTrainingMatchesCPU(t *testing.T) {
	needGPU(t)
	opt := lgcaAdam
	p := lgcaPlan(t, lgca, kiln.Options{Optimizer: &opt})
	c, g := executors(t, p)
	const steps = 4
	for step := range steps {
		for _, x := range []interface{ Step(context.Context) error }{c, g} {
			if err := x.Step(context.Background()); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
		}
		compareTensor(t, "loss", c, g)
	}
	if len(p.Params) != 6 || len(p.States) == 0 {
		t.Fatalf("%d params and %d states, want 6 params and Adam's moments", len(p.Params), len(p.States))
	}
	compareParamsAndStates(t, p, c, g)
	g2, err := gpu.New(p, gpu.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer g2.Close()
	for range steps {
		if err := g2.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	names := g.Names()
	if len(names) < 2*len(p.Params) {
		t.Fatalf("only %d tensors to compare", len(names))
	}
	for _, name := range names {
		a, err := g.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := g2.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if string(a.Data) != string(b.Data) {
			t.Errorf("%s differs between two GPU runs of the same plan", name)
		}
	}
}

// TestLogicAutomatonPlanOnGPU checks how the automaton's training step runs
// on the GPU without running it: the backward of the wiring (index_select)
// is index_add, which runs in gather form (the consumer lists built with
// integer atomics, then one thread per result element adding in a fixed
// order), no kernel of the plan declares a float atomic (WGSL has none),
// and every dispatch covers all cells at once: a grid with 4 times as many
// cells has a plan of as many steps and kernels of as many dispatches.
func TestLogicAutomatonPlanOnGPU(t *testing.T) {
	opt := lgcaAdam
	dispatches := func(a frontends.LogicAutomaton) (int, int) {
		p := lgcaPlan(t, a, kiln.Options{Optimizer: &opt})
		n, indexAdds := 0, 0
		for s, st := range p.Steps {
			if st.Kind == planner.Copy {
				n++
				continue
			}
			types := make([]ir.Type, len(st.Args))
			for j, arg := range st.Args {
				types[j] = p.Buffers[arg].Type
			}
			k, err := wgsl.Build(&kernels.Node{Op: st.Op, Attrs: st.Attrs, Args: types, Out: p.Buffers[st.Out].Type})
			if err != nil {
				t.Fatalf("step %d: %v", s, err)
			}
			n += len(k.Dispatches)
			for _, d := range k.Dispatches {
				for _, decl := range strings.Split(d.Source, "atomic<")[1:] {
					if !strings.HasPrefix(decl, "u32>") && !strings.HasPrefix(decl, "i32>") {
						t.Errorf("step %d (%s) declares atomic<%.10s", s, st.Op, decl)
					}
				}
			}
			if st.Op == ir.OpIndexAdd {
				indexAdds++
				if len(k.Dispatches) < 2 {
					t.Errorf("step %d: index_add in %d dispatch, want the gather form's several", s, len(k.Dispatches))
				}
			}
		}
		if indexAdds == 0 {
			t.Errorf("no index_add in the training step: the wiring's backward is expected there")
		}
		return len(p.Steps), n
	}
	big := lgca
	big.Height, big.Width = 2*lgca.Height, 2*lgca.Width
	s1, d1 := dispatches(lgca)
	s2, d2 := dispatches(big)
	t.Logf("%d plan steps, %d dispatches per training step", s1, d1)
	if s1 != s2 || d1 != d2 {
		t.Errorf("%d×%d grid: %d plan steps, %d dispatches; %d×%d: %d and %d, want the same",
			lgca.Height, lgca.Width, s1, d1, big.Height, big.Width, s2, d2)
	}
}
