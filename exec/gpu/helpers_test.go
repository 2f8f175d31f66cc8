package gpu_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// gradTol is the bound of whole-step comparisons: a gradient or param on
// the GPU is within 1e-3 of the CPU's, relative to the larger of its
// magnitude and the tensor's largest magnitude (the GPU sums in other
// orders, and differences grow through the backward pass).
const gradTol = 1e-3

// compile parses src and compiles it with opts.
func compile(t testing.TB, src []byte, opts kiln.Options) *planner.Plan {
	t.Helper()
	g, err := ir.Parse("test.kir", src)
	return compileGraph(t, g, err, opts)
}

// compileGraph compiles g with opts, failing on err (from making g) or on
// a compile error.
func compileGraph(t testing.TB, g *ir.Graph, err error, opts kiln.Options) *planner.Plan {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	p, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// executors returns a CPU and a GPU executor of p with the same params.
func executors(t testing.TB, p *planner.Plan) (*cpu.Executor, *gpu.Executor) {
	t.Helper()
	c, err := cpu.New(p, cpu.Options{Seed: 3, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	g, err := gpu.New(p, gpu.Options{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	return c, g
}

type setter interface {
	Set(string, kernels.Tensor) error
}

// feed sets every input of p on both executors to the same random values.
func feed(t testing.TB, p *planner.Plan, rng *rand.Rand, labels int, xs ...setter) {
	t.Helper()
	for _, i := range p.Inputs {
		b := p.Buffers[i]
		in := randomTensor(rng, b.Type, labels)
		for _, x := range xs {
			if err := x.Set(b.Name, in); err != nil {
				t.Fatal(err)
			}
		}
	}
}

type getter interface {
	Get(string) (kernels.Tensor, error)
}

// compareTensor compares the tensor name on the GPU with the CPU's within
// gradTol of the CPU tensor's largest magnitude.
func compareTensor(t testing.TB, name string, c, g getter) {
	t.Helper()
	ct, err := c.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := g.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	want, got := kernels.Float64s(ct), kernels.Float64s(gt)
	scale := 0.0
	for _, v := range want {
		scale = max(scale, abs(v))
	}
	compare(t, name, got, want, gradTol, gradTol*scale)
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

// stepAll runs one step (number step, for the message) on each executor.
func stepAll(t testing.TB, step int, xs ...interface{ Step(context.Context) error }) {
	t.Helper()
	for _, x := range xs {
		if err := x.Step(context.Background()); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
	}
}

// compareOutputsAndGrads compares every output and gradient of p on the
// GPU with the CPU's (compareTensor).
func compareOutputsAndGrads(t testing.TB, p *planner.Plan, c, g getter) {
	t.Helper()
	for _, n := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
		compareTensor(t, n.Name, c, g)
	}
}

// compareParamsAndStates compares every param and state of p on the GPU
// with the CPU's (compareTensor).
func compareParamsAndStates(t testing.TB, p *planner.Plan, c, g getter) {
	t.Helper()
	for _, i := range append(append([]int(nil), p.Params...), p.States...) {
		compareTensor(t, p.Buffers[i].Name, c, g)
	}
}

// trainMatches runs steps training steps of p on both executors, fed the
// same inputs from rng, comparing the outputs (the loss) after each, then
// every param and state.
func trainMatches(t testing.TB, p *planner.Plan, c *cpu.Executor, g *gpu.Executor, rng *rand.Rand, labels, steps int) {
	t.Helper()
	for step := range steps {
		feed(t, p, rng, labels, c, g)
		stepAll(t, step, c, g)
		for _, o := range p.Outputs {
			compareTensor(t, o.Name, c, g)
		}
	}
	compareParamsAndStates(t, p, c, g)
}

// sameStepError sets inputs on both executors and runs one step on each:
// both must fail, with the same message, containing want (a data error
// the GPU reports as the CPU does).
func sameStepError(t testing.TB, c *cpu.Executor, g *gpu.Executor, inputs map[string]kernels.Tensor, want string) {
	t.Helper()
	var msgs []string
	for _, x := range []interface {
		setter
		Step(context.Context) error
	}{c, g} {
		for name, v := range inputs {
			if err := x.Set(name, v); err != nil {
				t.Fatal(err)
			}
		}
		err := x.Step(context.Background())
		if err == nil {
			t.Fatalf("no error, want one containing %q", want)
		}
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] {
		t.Errorf("GPU error %q, CPU error %q", msgs[1], msgs[0])
	}
	if !strings.Contains(msgs[1], want) {
		t.Errorf("GPU error %q does not contain %q", msgs[1], want)
	}
}
