package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

var update = flag.Bool("update", false, "rewrite automaton.kir")

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
		if *update {
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
