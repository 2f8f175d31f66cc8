package tests

import (
	"bytes"
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Tests of the logic-gate layer with fixed wiring and of the logic-gate
// cellular automaton (frontends.LogicAutomaton): gradients against central
// differences, the hard automaton against the relaxed one, learning the
// checkerboard, and the rollout under a memory budget.

func init() { gradCases = append(gradCases, lgcaGradCases...) }

// lgcaWiring is a fixed random wiring of gates gates over in inputs.
func lgcaWiring(in, gates int, seed uint64) frontends.LogicWiring {
	return frontends.RandomLogicWiring(in, gates, rand.New(rand.NewPCG(seed, 1)))
}

var lgcaGradCases = []gradCase{
	{name: "logic layer", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Sigmoid(p(b, "x", dt, 3, 7))
		return b.LogicLayer(x, lgcaWiring(7, 5, 1), p(b, "lg", dt, 5, 16))
	}},
	{name: "logic layer two deep, batch [2,3]", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		x := b.Sigmoid(p(b, "x", dt, 2, 3, 6))
		h := b.LogicLayer(x, lgcaWiring(6, 8, 2), p(b, "lg0", dt, 8, 16))
		return b.LogicLayer(h, lgcaWiring(8, 3, 3), p(b, "lg1", dt, 3, 16))
	}},
	{name: "logic layer gate reads one input twice", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		w := frontends.LogicWiring{In: 3, A: []int{0, 1, 2, 2}, B: []int{0, 2, 2, 1}}
		return b.LogicLayer(b.Sigmoid(p(b, "x", dt, 4, 3)), w, p(b, "lg", dt, 4, 16))
	}},
}

// lgcaTiny is a small automaton for the gradient check: 4×4 cells, 2
// channels, 3 steps, 2 perception kernels of 8+2+1 gates, an update network
// of 6 and 2 gates.
var lgcaTiny = frontends.LogicAutomaton{Height: 4, Width: 4, Channels: 2, Steps: 3, Kernels: 2,
	KernelLayers: []int{2, 1}, UpdateLayers: []int{6, 2}, Seed: 7, InitScale: 1, PassThrough: 2}

// TestLogicAutomatonGrad checks the gradient of the automaton's loss with
// respect to every gate's logits, through all 3 steps (the same params in
// every step, so the gradients of the steps add up), against central
// differences: in float64 with DESIGN.md's bound, and computed in float32
// against the same float64 reference with the float32 bound; and in
// float64 with the entropy term added to the loss, with and without the
// state clamped to [0,1] after each step (the relaxed states lie inside,
// where clip passes the gradient).
func TestLogicAutomatonGrad(t *testing.T) {
	sharpen := lgcaTiny
	sharpen.Entropy = 0.3
	clamp := sharpen
	clamp.ClampState = true
	for _, tc := range []struct {
		name string
		a    frontends.LogicAutomaton
		dt   ir.DType
	}{{"f64", lgcaTiny, ir.F64}, {"f32", lgcaTiny, ir.F32}, {"entropy f64", sharpen, ir.F64}, {"entropy clamped f64", clamp, ir.F64}} {
		dt := tc.dt
		t.Run(tc.name, func(t *testing.T) {
			g, err := tc.a.Build(dt)
			if err != nil {
				t.Fatal(err)
			}
			f := randomFeeds(g, 11, nil, nil)
			if len(f) != 5 {
				t.Fatalf("%d params, want 5 (3 perception layers, 2 update layers)", len(f))
			}
			tol := f64Tol
			if dt == ir.F32 {
				tol = f32Tol
			}
			checkGrads(t, g, f, tol)
		})
	}
}

// TestHardLogicLayerTruthTables runs HardLogicLayer on the four inputs
// (0,0), (0,1), (1,0), (1,1) with one gate of each of the 16 kinds and
// compares every output with the gate's truth table, written here as Go
// boolean expressions in logic_gate's order.
func TestHardLogicLayerTruthTables(t *testing.T) {
	ops := []func(a, b bool) bool{
		func(a, b bool) bool { return false },
		func(a, b bool) bool { return a && b },
		func(a, b bool) bool { return a && !b },
		func(a, b bool) bool { return a },
		func(a, b bool) bool { return !a && b },
		func(a, b bool) bool { return b },
		func(a, b bool) bool { return a != b },
		func(a, b bool) bool { return a || b },
		func(a, b bool) bool { return !(a || b) },
		func(a, b bool) bool { return a == b },
		func(a, b bool) bool { return !b },
		func(a, b bool) bool { return a || !b },
		func(a, b bool) bool { return !a },
		func(a, b bool) bool { return !a || b },
		func(a, b bool) bool { return !(a && b) },
		func(a, b bool) bool { return true },
	}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		b := frontends.NewBuilder("truth")
		// Gate g reads input 1 as a and input 0 as b: the wiring's order
		// matters for the asymmetric gates.
		w := frontends.LogicWiring{In: 2}
		gates := make([]int, 16)
		for g := range gates {
			w.A, w.B, gates[g] = append(w.A, 1), append(w.B, 0), g
		}
		x := b.Const(dt, []int{4, 2}, 0, 0, 1, 0, 0, 1, 1, 1) // rows (b, a)
		b.Output(b.Rename(b.HardLogicLayer(x, w, gates), "out"))
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		r := newRunner(t, g, kiln.Options{})
		r.run(nil)
		out := r.get("out")
		for row := range 4 {
			bv, av := row%2 == 1, row/2 == 1
			for op, f := range ops {
				want := 0.0
				if f(av, bv) {
					want = 1
				}
				if got := out[row*16+op]; got != want {
					t.Errorf("%s: gate %d (a=%v, b=%v) = %g, want %g", dt, op, av, bv, got, want)
				}
			}
		}
	}
}

// lgcaParams returns the values of every param of x by name.
func lgcaParams(t *testing.T, x *cpu.Executor) map[string][]float64 {
	t.Helper()
	out := map[string][]float64{}
	p := x.Plan()
	for _, i := range p.Params {
		name := p.Buffers[i].Name
		v, err := x.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = kernels.Float64s(v)
	}
	return out
}

// lgcaHardGrid runs the hard automaton of a with gates and returns its
// final grid.
func lgcaHardGrid(t *testing.T, a frontends.LogicAutomaton, gates map[string][]int) []float64 {
	t.Helper()
	g, err := a.BuildHard(ir.F32, gates)
	if err != nil {
		t.Fatal(err)
	}
	r := newRunner(t, g, kiln.Options{})
	r.run(nil)
	return r.get("grid")
}

// TestHardAutomatonMatchesRelaxed gives every gate of the relaxed automaton
// logits that select one gate exactly (0 for it, -10000 for the others:
// softmax is then exactly one-hot in float32) and checks that the hard
// automaton built from the same logits computes the same loss bit for bit,
// with a final grid of exact 0s and 1s.
func TestHardAutomatonMatchesRelaxed(t *testing.T) {
	a := lgcaTiny
	a.Steps = 5
	g, err := a.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	f := feeds{}
	for _, v := range g.Values {
		if v.Op != ir.OpParam {
			continue
		}
		vals := make([]float64, v.Type.Shape.NumElements())
		for k := range vals {
			vals[k] = -1e4
		}
		for gate := range v.Type.Shape[0] {
			vals[16*gate+rng.IntN(16)] = 0
		}
		f[v.Name] = vals
	}
	r := newRunner(t, g, kiln.Options{})
	r.run(f)
	soft := r.get("loss")[0]
	gates, err := a.HardGates(f)
	if err != nil {
		t.Fatal(err)
	}
	grid := lgcaHardGrid(t, a, gates)
	var hard float32
	for i, want := range a.Target() {
		d := float32(grid[i*a.Channels] - want)
		hard += d * d
	}
	ones := 0
	for i, v := range grid {
		if v != 0 && v != 1 {
			t.Fatalf("hard grid[%d] = %g, want 0 or 1", i, v)
		}
		ones += int(v)
	}
	if float64(hard) != soft {
		t.Errorf("relaxed loss with one-hot gates %g, hard loss %g", soft, hard)
	}
	if ones == 0 || ones == len(grid) {
		t.Errorf("the final grid is constant (%d ones of %d): the random gates should make a pattern", ones, len(grid))
	}
}

// lgcaReduced is the reduced automaton the learning test trains: 8×8
// cells, 8 channels, 8 steps, 4 perception kernels of 8+4+2+1 gates and an
// update network of 64+64+32+16+8 gates (244 gates).
var lgcaReduced = frontends.LogicAutomaton{Height: 8, Width: 8, Channels: 8, Steps: 8, Kernels: 4,
	KernelLayers: []int{4, 2, 1}, UpdateLayers: []int{64, 64, 32, 16, 8}, Seed: 1, InitScale: 1, PassThrough: 5}

// TestLogicAutomatonLearns trains the reduced automaton with Adam (lr 0.05,
// gradients clipped to ±100) through all 8 steps from the all-zero grid
// and checks that the hard automaton (each gate replaced by its most
// likely one) run from the same grid reproduces the 2×2 checkerboard on
// channel 0 on at least 95% of the cells within 400 training steps. (It
// reaches 100% at step 250; training is deterministic, so this is the same
// run on every machine and worker count.)
func TestLogicAutomatonLearns(t *testing.T) {
	a := lgcaReduced
	g, err := a.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	adam := optimizer(t, "adam", 0.05)
	adam.ClipGrad = 100
	r := newRunner(t, g, kiln.Options{Optimizer: adam})
	if err := r.x.Reset(1); err != nil {
		t.Fatal(err)
	}
	first, acc := 0.0, 0.0
	for step := 1; step <= 400; step++ {
		r.run(nil)
		if step == 1 {
			first = r.get("loss")[0]
		}
		if step%50 != 0 {
			continue
		}
		gates, err := a.HardGates(lgcaParams(t, r.x))
		if err != nil {
			t.Fatal(err)
		}
		acc, err = a.Accuracy(lgcaHardGrid(t, a, gates))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("step %d: loss %.4f, hard accuracy %.4f", step, r.get("loss")[0], acc)
		if acc >= 0.95 {
			if last := r.get("loss")[0]; !(last < first/4) {
				t.Errorf("loss %g -> %g: want it below a quarter", first, last)
			}
			return
		}
	}
	t.Errorf("hard accuracy %.4f after 400 steps, want >= 0.95", acc)
}

// TestLogicAutomatonBudget plans the 20-step rollout (a smaller grid and
// networks) under a memory budget halfway between the least peak
// recomputation reaches and keeping every activation, checks that the plan
// recomputes steps and its arena is below keep-all's, and that the loss and
// every gradient equal keep-all's bit for bit (recomputation repeats the
// same kernels on the same values).
func TestLogicAutomatonBudget(t *testing.T) {
	a := frontends.LogicAutomaton{Height: 6, Width: 6, Channels: 4, Steps: 20, Kernels: 2,
		KernelLayers: []int{2, 1}, UpdateLayers: []int{16, 8, 4}, Seed: 3, InitScale: 1, PassThrough: 3}
	g, err := a.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	base := kiln.Options{Grad: true, Checkpoint: "none"}
	keep, err := kiln.Compile(g, base)
	if err != nil {
		t.Fatal(err)
	}
	least := leastPeak(t, g, kiln.Options{Grad: true})
	budget := (least + keep.ArenaBytes) / 2
	var rep *checkpoint.Report
	opts := kiln.Options{Grad: true, MemoryBudget: budget, OnCheckpoint: func(r *checkpoint.Report) {
		if rep == nil {
			rep = r
		}
	}}
	ref, run := newRunner(t, g, base), newRunner(t, g, opts)
	p := run.x.Plan()
	clones := countClones(p)
	t.Logf("keep all %d bytes, least %d, budget %d: arena %d, %d values recomputed (%s)", keep.ArenaBytes, least, budget, p.ArenaBytes, clones, rep.Method)
	if clones == 0 {
		t.Errorf("nothing recomputed under the budget")
	}
	if p.ArenaBytes > budget || p.ArenaBytes >= keep.ArenaBytes {
		t.Errorf("arena %d, want at most the budget %d and below keep-all's %d", p.ArenaBytes, budget, keep.ArenaBytes)
	}
	f := randomFeeds(g, 5, nil, nil)
	ref.run(f)
	run.run(f)
	names := []string{"loss"}
	for _, gr := range p.Grads {
		names = append(names, gr.Name)
	}
	for _, n := range names {
		x, _ := ref.x.Get(n)
		y, err := run.x.Get(n)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x.Data, y.Data) {
			t.Errorf("%s differs from the plan that keeps every activation", n)
		}
	}
	if len(names) != 1+6 || !strings.HasPrefix(names[1], "grad/") {
		t.Errorf("gradients %v, want one per layer's logits", names[1:])
	}
}

// TestLogicAutomatonWorkers trains the reduced automaton for three steps on
// 1 and 3 workers and checks every param bit for bit.
func TestLogicAutomatonWorkers(t *testing.T) {
	g, err := lgcaReduced.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	adam := optimizer(t, "adam", 0.05)
	adam.ClipGrad = 100
	p, err := kiln.Compile(g, kiln.Options{Optimizer: adam})
	if err != nil {
		t.Fatal(err)
	}
	var params []map[string][]float64
	for _, w := range []int{1, 3} {
		x, err := cpu.New(p, cpu.Options{Seed: 1, Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if err := x.Step(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		params = append(params, lgcaParams(t, x))
		x.Close()
	}
	for name, v := range params[0] {
		for i := range v {
			if v[i] != params[1][name][i] {
				t.Fatalf("%s[%d]: %g on 1 worker, %g on 3", name, i, v[i], params[1][name][i])
			}
		}
	}
}

// TestLogicAutomatonEntropy checks the entropy term of the loss: with
// Entropy e the loss is the loss without it plus e times the summed
// entropy of every gate's softmax(logits) (the update layers' logits
// shifted by the pass-through), computed here in float64 from the same
// params, within 1e-12 relative.
func TestLogicAutomatonEntropy(t *testing.T) {
	plain, sharpen := lgcaTiny, lgcaTiny
	sharpen.Entropy = 0.25
	var losses []float64
	var f feeds
	for _, a := range []frontends.LogicAutomaton{plain, sharpen} {
		g, err := a.Build(ir.F64)
		if err != nil {
			t.Fatal(err)
		}
		if f == nil {
			f = randomFeeds(g, 4, nil, nil)
		}
		r := newRunner(t, g, kiln.Options{})
		r.run(f)
		losses = append(losses, r.get("loss")[0])
	}
	h := 0.0
	for name, v := range f {
		shift := 0.0
		if strings.HasPrefix(name, "update") {
			shift = lgcaTiny.PassThrough
		}
		for g := 0; g < len(v); g += 16 {
			l := slices.Clone(v[g : g+16])
			l[3] += shift
			m, z := slices.Max(l), 0.0
			for _, x := range l {
				z += math.Exp(x - m)
			}
			for _, x := range l {
				p := math.Exp(x-m) / z
				h -= p * math.Log(p)
			}
		}
	}
	want := losses[0] + sharpen.Entropy*h
	if math.Abs(losses[1]-want) > 1e-12*math.Abs(want) || h < 1 {
		t.Errorf("loss with entropy %.15g, want %.15g (loss %.15g + %g × entropy %.15g)", losses[1], want, losses[0], sharpen.Entropy, h)
	}
}

// TestLogicAutomatonClampState checks that ClampState clips each step's
// new state to [0,1] in the training graph (one clip per step) and that
// the hard automaton has none: its values are exact.
func TestLogicAutomatonClampState(t *testing.T) {
	a := lgcaTiny
	a.ClampState = true
	g, err := a.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	clips := 0
	for id, v := range g.Values {
		if v.Op == ir.OpClip {
			clips++
			if got := g.FormatValue(ir.ID(id)); !strings.Contains(got, "max=1") || !strings.Contains(got, "min=0") {
				t.Errorf("%s: want min=0, max=1", got)
			}
		}
	}
	if clips != a.Steps {
		t.Errorf("%d clips, want one per step (%d)", clips, a.Steps)
	}
	gates, err := a.HardGates(randomFeeds(g, 2, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	h, err := a.BuildHard(ir.F32, gates)
	if err != nil {
		t.Fatal(err)
	}
	for id, v := range h.Values {
		if v.Op == ir.OpClip {
			t.Errorf("the hard automaton clips: %s", h.FormatValue(ir.ID(id)))
		}
	}
}
