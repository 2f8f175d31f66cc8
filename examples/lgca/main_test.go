package main

import (
	"bytes"
	"github.com/kilnml/kiln/internal/golden"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// TestAutomatonKir checks that automaton.kir and sharpen.kir are what the
// generator writes (go test ./examples/lgca -update rewrites them), that
// they parse back to the same graphs, and that the circuit has about 3,000
// gates.
func TestAutomatonKir(t *testing.T) {
	for _, tc := range []struct {
		path string
		a    frontends.LogicAutomaton
	}{{"automaton.kir", Automaton}, {"sharpen.kir", Sharpen(1e-4)}} {
		g, err := tc.a.Build(ir.F32)
		if err != nil {
			t.Fatal(err)
		}
		want := kirText(tc.a, g)
		if golden.Update() {
			if err := os.WriteFile(tc.path, want, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s differs from the generator's output; run go test ./examples/lgca -update", tc.path)
		}
		back, err := ir.Parse(tc.path, got)
		if err != nil {
			t.Fatal(err)
		}
		if back.Format() != g.Format() {
			t.Errorf("%s does not parse back to the generated graph", tc.path)
		}
	}
	if n := Automaton.Gates(); n < 2800 || n > 3200 {
		t.Errorf("%d gates, want about 3,000", n)
	}
}

// TestEvaluate writes params whose argmax gates are all "a" (pass-through)
// and checks -eval's report: the hard automaton then keeps the all-zero
// grid, so channel 0 matches the target on its zero cells, half of them.
func TestEvaluate(t *testing.T) {
	g, err := Automaton.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, v := range g.Values {
		if v.Op != ir.OpParam {
			continue
		}
		vals := make([]float64, v.Type.Shape.NumElements())
		for k := range vals {
			if k%16 == 3 {
				vals[k] = 1
			}
		}
		tn, err := safetensors.FromFloat64(v.Name, ir.F32, v.Type.Shape, vals)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tn)
	}
	path := filepath.Join(t.TempDir(), "p.safetensors")
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := evaluate(&out, Automaton, path); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1+Automaton.Height || !strings.HasPrefix(lines[0], "hard accuracy 0.5000 (128 of 256 cells)") {
		t.Fatalf("report:\n%s", out.String())
	}
	if lines[1] != "xx..xx..xx..xx.." {
		t.Errorf("first row %q, want the target's ones marked wrong", lines[1])
	}
	if err := evaluate(&out, Automaton, filepath.Join(t.TempDir(), "none.safetensors")); err == nil {
		t.Error("no error for a missing file")
	}
}
