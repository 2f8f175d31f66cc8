package main

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/kilnml/kiln/ir"
)

var update = flag.Bool("update", false, "rewrite automaton.kir")

// TestAutomatonKir checks that automaton.kir is what the generator writes
// (go test ./examples/lgca -update rewrites it), that it parses back to the
// same graph, and that its circuit has about 3,000 gates.
func TestAutomatonKir(t *testing.T) {
	g, err := Automaton.Build(ir.F32)
	if err != nil {
		t.Fatal(err)
	}
	want := kirText(g)
	if *update {
		if err := os.WriteFile("automaton.kir", want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("automaton.kir")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("automaton.kir differs from the generator's output; run go test ./examples/lgca -update")
	}
	back, err := ir.Parse("automaton.kir", got)
	if err != nil {
		t.Fatal(err)
	}
	if back.Format() != g.Format() {
		t.Error("automaton.kir does not parse back to the generated graph")
	}
	if n := Automaton.Gates(); n < 2800 || n > 3200 {
		t.Errorf("%d gates, want about 3,000", n)
	}
}
