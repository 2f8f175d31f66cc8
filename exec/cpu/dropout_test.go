package cpu_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/kernels"
)

// TestDropoutMaskFollowsTheStep checks the step count the executor gives
// kernels: each step draws a new dropout mask, and after Reset the steps
// repeat their masks.
func TestDropoutMaskFollowsTheStep(t *testing.T) {
	const src = `graph drop
input %x: f32[64]
%y = dropout %x {p=0.5, seed=4}
output %y
`
	x, err := cpu.New(plan(t, src, kiln.Options{}), cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ones := make([]float64, 64)
	for i := range ones {
		ones[i] = 1
	}
	mask := func() string {
		t.Helper()
		set(t, x, "x", ones...)
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		y, err := x.Get("y")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(kernels.Float64s(y))
	}
	m0, m1 := mask(), mask()
	if m0 == m1 {
		t.Errorf("steps 0 and 1 drew the same mask %s", m0)
	}
	if err := x.Reset(0); err != nil {
		t.Fatal(err)
	}
	if again := mask(); again != m0 {
		t.Errorf("step 0 after Reset drew %s, want %s", again, m0)
	}
	if again := mask(); again != m1 {
		t.Errorf("step 1 after Reset drew %s, want %s", again, m1)
	}
	// A restored step count repeats that step's mask.
	if n := x.StepCount(); n != 2 {
		t.Errorf("step count %d after two steps, want 2", n)
	}
	if err := x.SetStepCount(1); err != nil {
		t.Fatal(err)
	}
	if again := mask(); again != m1 {
		t.Errorf("step 1 after SetStepCount(1) drew %s, want %s", again, m1)
	}
	if err := x.SetStepCount(-1); err == nil {
		t.Error("SetStepCount(-1) gave no error")
	}
}
