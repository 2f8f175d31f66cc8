package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// Reduced logic-gate automata: lgcaSmall has 6×6 cells, 4 channels, 5
// steps; lgcaReduced is the one tests/lgca_test.go trains (8×8 cells, 8
// channels, 8 steps, 244 gates).
var (
	lgcaSmall = frontends.LogicAutomaton{Height: 6, Width: 6, Channels: 4, Steps: 5, Kernels: 2,
		KernelLayers: []int{2, 1}, UpdateLayers: []int{16, 8, 4}, Seed: 3, InitScale: 1, PassThrough: 3}
	lgcaReduced = frontends.LogicAutomaton{Height: 8, Width: 8, Channels: 8, Steps: 8, Kernels: 4,
		KernelLayers: []int{4, 2, 1}, UpdateLayers: []int{64, 64, 32, 16, 8}, Seed: 1, InitScale: 1, PassThrough: 5}
)

// lgcaKir writes the automaton a as .kir text to a temporary file.
func lgcaKir(t *testing.T, a frontends.LogicAutomaton) string {
	t.Helper()
	g, err := a.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, "lgca.kir", g.Format())
}

// stepLosses returns the losses of kiln train's step lines.
func stepLosses(t *testing.T, out string) []float64 {
	t.Helper()
	var l []float64
	for _, m := range trainStepLine.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		l = append(l, v)
	}
	return l
}

// TestTrainLogicAutomaton trains a reduced automaton with the example's
// recipe (kiln train -optimizer adam -lr 0.05 -clip-grad 100, no inputs):
// the loss falls below two thirds of the first within 200 steps (16.0 to 9.6) and -save writes every
// layer's logits.
func TestTrainLogicAutomaton(t *testing.T) {
	model := lgcaKir(t, lgcaReduced)
	save := filepath.Join(t.TempDir(), "lgca.safetensors")
	r := runKiln(t, "train", model, "-steps", "200", "-optimizer", "adam", "-lr", "0.05", "-clip-grad", "100", "-save", save)
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "model logic_automaton: 9 params", "no inputs: 200 training steps", "final loss ")
	l := stepLosses(t, r.stdout)
	if len(l) < 2 || !(l[len(l)-1] < 2*l[0]/3) {
		t.Errorf("losses %v: want the last below two thirds of the first:\n%s", l, r.stdout)
	}
	ts, _, err := safetensors.ReadFile(save)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 9 {
		t.Errorf("%d tensors saved, want the 9 layers' logits", len(ts))
	}
}

// TestTrainLogicAutomatonGPU trains the small automaton for 5 steps on
// the GPU and on the CPU: every step's loss agrees within 1e-3 relative.
func TestTrainLogicAutomatonGPU(t *testing.T) {
	if _, err := gpu.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI has no GPU adapter (install mesa-vulkan-drivers): %v", err)
		}
		t.Skipf("skipped: no GPU adapter on this machine (%v)", err)
	}
	model := lgcaKir(t, lgcaSmall)
	var losses [][]float64
	for _, dev := range []string{"cpu", "gpu"} {
		r := runKiln(t, "train", model, "-device", dev, "-steps", "5", "-optimizer", "adam", "-lr", "0.05", "-clip-grad", "100")
		r.want(t, 0)
		losses = append(losses, stepLosses(t, r.stdout))
	}
	if len(losses[0]) != 5 || len(losses[1]) != 5 {
		t.Fatalf("step losses: cpu %v, gpu %v; want 5 each", losses[0], losses[1])
	}
	for i, c := range losses[0] {
		if g := losses[1][i]; math.Abs(g-c) > 1e-3*math.Abs(c) {
			t.Errorf("step %d: loss %g on the GPU, %g on the CPU", i+1, g, c)
		}
	}
}
