package frontends_test

import (
	"fmt"
	"log"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// A logic-gate network of two layers with fixed random wiring over 6
// inputs: 8 gates, then 2.
func ExampleBuilder_LogicLayer() {
	rng := rand.New(rand.NewPCG(1, 2))
	w0 := frontends.RandomLogicWiring(6, 8, rng)
	w1 := frontends.RandomLogicWiring(8, 2, rng)
	b := frontends.NewBuilder("logic")
	x := b.Input("x", ir.F32, 32, 6)
	h := b.LogicLayer(x, w0, b.ParamInit("l0", ir.F32, []int{8, 16}, "normal", 1))
	y := b.LogicLayer(h, w1, b.ParamInit("l1", ir.F32, []int{2, 16}, "normal", 1))
	b.Output(y)
	if _, err := b.Build(); err != nil {
		log.Fatal(err)
	}
	fmt.Println(h.Type(), y.Type())
	// Output: f32[32,8] f32[32,2]
}

// The reduced automaton of kiln's learning test: its circuit, its graph's
// params and the hard automaton built from gates chosen by argmax.
func ExampleLogicAutomaton() {
	a := frontends.LogicAutomaton{Height: 8, Width: 8, Channels: 8, Steps: 8, Kernels: 4,
		KernelLayers: []int{4, 2, 1}, UpdateLayers: []int{64, 64, 32, 16, 8}, Seed: 1, InitScale: 1, PassThrough: 5}
	g, err := a.Build(ir.F32)
	if err != nil {
		log.Fatal(err)
	}
	params := map[string][]float64{}
	for _, id := range g.IDsOf(ir.OpParam) {
		v := g.Value(id)
		fmt.Println(v.Name, v.Type)
		params[v.Name] = make([]float64, v.Type.Shape.NumElements()) // all logits 0
	}
	gates, err := a.HardGates(params)
	if err != nil {
		log.Fatal(err)
	}
	// Equal logits: the perception gates take the first gate (false), the
	// update gates the pass-through bias's gate 3 (a).
	fmt.Println(a.Gates(), "gates;", gates["perceive0"][0], gates["update0"][0])
	hard, err := a.BuildHard(ir.F32, gates)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(hard.Type(hard.Outputs[0]))
	// Output:
	// perceive0.logits f32[32,16]
	// perceive1.logits f32[16,16]
	// perceive2.logits f32[8,16]
	// perceive3.logits f32[4,16]
	// update0.logits f32[64,16]
	// update1.logits f32[64,16]
	// update2.logits f32[32,16]
	// update3.logits f32[16,16]
	// update4.logits f32[8,16]
	// 244 gates; 0 3
	// f32[8,8,8]
}

// TestRandomLogicWiring checks difflogic's wiring: the same rng state gives
// the same wiring; every input is read when there are at least half as
// many gates as inputs, and every input is read at most ⌈2·gates/in⌉ times.
func TestRandomLogicWiring(t *testing.T) {
	for _, tc := range []struct{ in, gates int }{{9, 8}, {8, 4}, {136, 256}, {256, 128}, {5, 1}, {7, 100}} {
		w := frontends.RandomLogicWiring(tc.in, tc.gates, rand.New(rand.NewPCG(4, 5)))
		again := frontends.RandomLogicWiring(tc.in, tc.gates, rand.New(rand.NewPCG(4, 5)))
		if !slices.Equal(w.A, again.A) || !slices.Equal(w.B, again.B) {
			t.Errorf("%+v: two wirings from one seed differ", tc)
		}
		if err := w.Check(); err != nil {
			t.Errorf("%+v: %v", tc, err)
		}
		if w.Gates() != tc.gates || w.In != tc.in {
			t.Errorf("%+v: %d gates over %d inputs", tc, w.Gates(), w.In)
		}
		reads := make([]int, tc.in)
		for g := range w.A {
			reads[w.A[g]]++
			reads[w.B[g]]++
		}
		most := (2*tc.gates + tc.in - 1) / tc.in
		for i, n := range reads {
			if (2*tc.gates >= tc.in && n == 0) || n > most {
				t.Errorf("%+v: input %d read %d times (at most %d, at least once)", tc, i, n, most)
			}
		}
	}
}

func TestLogicGateArgmax(t *testing.T) {
	row := func(vals map[int]float64) []float64 {
		r := make([]float64, 16)
		for i, v := range vals {
			r[i] = v
		}
		return r
	}
	logits := slices.Concat(row(map[int]float64{7: 2, 9: 1}), row(nil), row(map[int]float64{0: -1, 15: 3, 14: 3}), row(map[int]float64{5: math.Inf(1)}))
	got, err := frontends.LogicGateArgmax(logits)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{7, 0, 14, 5}; !slices.Equal(got, want) {
		t.Errorf("argmax %v, want %v (the first of equal largest)", got, want)
	}
	for _, tc := range []struct {
		logits []float64
		msg    string
	}{
		{make([]float64, 17), "expected [G,16] (a multiple of 16 values), found 17 values"},
		{slices.Concat(row(nil), row(map[int]float64{4: math.NaN()})), "gate 1 has a NaN logit (index 4)"},
	} {
		if _, err := frontends.LogicGateArgmax(tc.logits); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("got %v, want an error containing %q", err, tc.msg)
		}
	}
}

// TestHardGatesPassThrough checks that HardGates adds the pass-through bias
// to the update layers' gate 3 (as the training graph does) and not to the
// perception layers'.
func TestHardGatesPassThrough(t *testing.T) {
	a := frontends.LogicAutomaton{Height: 2, Width: 2, Channels: 1, Steps: 1, Kernels: 1,
		UpdateLayers: []int{1}, InitScale: 1, PassThrough: 2}
	lg := make([]float64, 16)
	lg[6], lg[3] = 1.5, 0 // xor leads by 1.5; the bias of 2 makes gate 3 lead
	params := map[string][]float64{"perceive0.logits": slices.Repeat(lg, 8), "update0.logits": lg}
	gates, err := a.HardGates(params)
	if err != nil {
		t.Fatal(err)
	}
	if gates["perceive0"][0] != 6 || gates["update0"][0] != 3 {
		t.Errorf("perception gate %d (want 6), update gate %d (want 3)", gates["perceive0"][0], gates["update0"][0])
	}
	delete(params, "update0.logits")
	if _, err := a.HardGates(params); err == nil || !strings.Contains(err.Error(), "no values for param update0.logits") {
		t.Errorf("got %v", err)
	}
	params["update0.logits"] = lg[:8]
	if _, err := a.HardGates(params); err == nil || !strings.Contains(err.Error(), "param update0.logits: expected 16 values ([1,16]), found 8") {
		t.Errorf("got %v", err)
	}
}

func TestLogicBuilderErrors(t *testing.T) {
	ok := frontends.LogicWiring{In: 3, A: []int{0, 1}, B: []int{2, 2}}
	tests := []struct {
		name  string
		build func(b *frontends.Builder)
		msg   string
	}{
		{"uneven wiring", func(b *frontends.Builder) {
			b.LogicLayer(b.Input("x", ir.F32, 4, 3), frontends.LogicWiring{In: 3, A: []int{0, 1}, B: []int{2}}, b.Param("l", ir.F32, 2, 16))
		}, "expected as many b inputs as a inputs, found 1 and 2"},
		{"index out of range", func(b *frontends.Builder) {
			b.LogicLayer(b.Input("x", ir.F32, 4, 3), frontends.LogicWiring{In: 3, A: []int{0, 3}, B: []int{2, 1}}, b.Param("l", ir.F32, 2, 16))
		}, "gate 1 reads input 3, expected an input in [0, 3)"},
		{"input width", func(b *frontends.Builder) {
			b.LogicLayer(b.Input("x", ir.F32, 4, 5), ok, b.Param("l", ir.F32, 2, 16))
		}, "expected an input [..., 3] for a wiring over 3 inputs, found f32[4,5]"},
		{"logits shape", func(b *frontends.Builder) {
			b.LogicLayer(b.Input("x", ir.F32, 4, 3), ok, b.Param("l", ir.F32, 3, 16))
		}, "expected logits [2,16]"},
		{"hard gate count", func(b *frontends.Builder) {
			b.HardLogicLayer(b.Input("x", ir.F32, 4, 3), ok, []int{1})
		}, "expected 2 gate choices for 2 gates, found 1"},
		{"hard gate kind", func(b *frontends.Builder) {
			b.HardLogicLayer(b.Input("x", ir.F32, 4, 3), ok, []int{1, 16})
		}, "gate 1 is 16, expected a gate in [0, 16)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := frontends.NewBuilder("bad")
			tc.build(b)
			_, err := b.Build()
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), "builder_logic_test.go:") {
				t.Errorf("got %v, want an error at the caller containing %q", err, tc.msg)
			}
		})
	}
}

func TestLogicAutomatonErrors(t *testing.T) {
	good := frontends.LogicAutomaton{Height: 4, Width: 4, Channels: 2, Steps: 2, Kernels: 1, KernelLayers: []int{2}, UpdateLayers: []int{4, 2}}
	tests := []struct {
		name   string
		change func(a *frontends.LogicAutomaton)
		msg    string
	}{
		{"empty grid", func(a *frontends.LogicAutomaton) { a.Width = 0 }, "expected a grid of at least 1×1×1, found 4×0×2"},
		{"no steps", func(a *frontends.LogicAutomaton) { a.Steps = 0 }, "expected at least 1 step, found 0"},
		{"no kernels", func(a *frontends.LogicAutomaton) { a.Kernels = 0 }, "expected at least 1 perception kernel, found 0"},
		{"last layer", func(a *frontends.LogicAutomaton) { a.UpdateLayers = []int{4, 3} }, "expected update layers ending in 2 gates (the channels), found [4 3]"},
		{"empty layer", func(a *frontends.LogicAutomaton) { a.KernelLayers = []int{0} }, "expected layers of at least 1 gate"},
		{"init scale", func(a *frontends.LogicAutomaton) { a.InitScale = -1 }, "expected InitScale >= 0, found -1"},
		{"entropy", func(a *frontends.LogicAutomaton) { a.Entropy = -0.5 }, "expected Entropy >= 0, found -0.5"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := good
			a.KernelLayers, a.UpdateLayers = slices.Clone(good.KernelLayers), slices.Clone(good.UpdateLayers)
			tc.change(&a)
			if _, err := a.Build(ir.F32); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("Build: got %v, want %q", err, tc.msg)
			}
			if _, err := a.BuildHard(ir.F32, nil); err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("BuildHard: got %v, want %q", err, tc.msg)
			}
		})
	}
	if _, err := good.BuildHard(ir.F32, map[string][]int{}); err == nil || !strings.Contains(err.Error(), "expected 8 gates for layer perceive0, found 0") {
		t.Errorf("BuildHard without gates: got %v", err)
	}
	if _, err := good.Accuracy(make([]float64, 5)); err == nil || !strings.Contains(err.Error(), "expected a grid of 4×4×2 values, found 5") {
		t.Errorf("Accuracy: got %v", err)
	}
	grid := make([]float64, 4*4*2)
	for i, v := range good.Target() {
		grid[2*i] = v
	}
	grid[0] = 0.4 // target 1: wrong
	grid[2] = 0.6 // target 1: right
	if acc, err := good.Accuracy(grid); err != nil || acc != 15.0/16 {
		t.Errorf("Accuracy = %v, %v; want 15/16", acc, err)
	}
}
