package examples_test

import (
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// TestExamplesCompile compiles every example model for training.
func TestExamplesCompile(t *testing.T) {
	files := map[string][]byte{examples.DigitsMLPFile: examples.DigitsMLP}
	for _, name := range []string{"linreg/linreg.kir", "digits/cnn.kir", "transformer/reverse.kir", "kan/kan.kir", "lgca/automaton.kir"} {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		files["examples/"+name] = src
	}
	for name, src := range files {
		g, err := ir.Parse(name, src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kiln.Compile(g, kiln.Options{Grad: true, Debug: passes.Debug{Check: true}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestLinregInputs checks that the kiln grad example file of docs/COMMANDS.md holds
// exactly the inputs and params of linreg.kir (go test ./examples -update
// writes it).
func TestLinregInputs(t *testing.T) {
	const path = "linreg/inputs.safetensors"
	if golden.Update() {
		x := []float64{1, 2, 3, 0, 1, -1, 2, 0, 1, -1, 1, 0}
		tt := []float64{1, 2, 3, 4}
		w := []float64{0.5, -0.25, 0.125}
		var ts []safetensors.Tensor
		for _, e := range []struct {
			name  string
			shape ir.Shape
			v     []float64
		}{{"x", ir.Shape{4, 3}, x}, {"t", ir.Shape{4}, tt}, {"w", ir.Shape{3}, w}} {
			tn, err := safetensors.FromFloat64(e.name, ir.F32, e.shape, e.v)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, tn)
		}
		if err := safetensors.WriteFile(path, ts, nil); err != nil {
			t.Fatal(err)
		}
	}
	ts, _, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"t": "f32[4]", "w": "f32[3]", "x": "f32[4,3]"}
	if len(ts) != len(want) {
		t.Fatalf("%d tensors, want %d", len(ts), len(want))
	}
	for _, tn := range ts {
		if want[tn.Name] != tn.Type.String() {
			t.Errorf("tensor %s: %s, want %s", tn.Name, tn.Type, want[tn.Name])
		}
	}
}
