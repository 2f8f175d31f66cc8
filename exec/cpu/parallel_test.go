package cpu_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/passes"
)

// mlp is a training step with several independent branches, so that
// workers have steps to run side by side.
const mlp = `graph mlp
input %x: f32[8,16]
input %y: i64[8]
param %w1: f32[16,32]
param %b1: f32[32]
param %w2: f32[32,10]
param %b2: f32[10]
%h = matmul %x, %w1
%a = add %h, %b1
%r = relu %a
%z = matmul %r, %w2
%logits = add %z, %b2
%loss = softmax_cross_entropy %logits, %y
output %loss
`

func TestStepAllocatesNothing(t *testing.T) {
	opt, _ := passes.DefaultOptimizer("adam")
	p := plan(t, mlp, kiln.Options{Optimizer: &opt})
	for _, w := range []int{1, 2, 4} {
		x, err := cpu.New(p, cpu.Options{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		set(t, x, "y", 1, 2, 3, 4, 5, 6, 7, 8)
		ctx := context.Background()
		if n := testing.AllocsPerRun(20, func() {
			if err := x.Step(ctx); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%d workers: Step allocates %v times", w, n)
		}
		x.Close()
	}
}

func TestParallelKernelErrorNamesTheStep(t *testing.T) {
	for _, w := range []int{2, 3} {
		x, err := cpu.New(plan(t, ce, kiln.Options{Grad: true}), cpu.Options{Workers: w})
		if err != nil {
			t.Fatal(err)
		}
		set(t, x, "y", 1, 7)
		err = x.Step(context.Background())
		if err == nil || !strings.Contains(err.Error(), "softmax_cross_entropy") || !strings.Contains(err.Error(), "7") {
			t.Errorf("%d workers: a label outside [0,3): %v", w, err)
		}
		// The executor runs again once the data is fixed.
		set(t, x, "y", 1, 2)
		if err := x.Step(context.Background()); err != nil {
			t.Errorf("%d workers: after an error: %v", w, err)
		}
		x.Close()
	}
}

func TestParallelCancelledStepStops(t *testing.T) {
	x, err := cpu.New(plan(t, ce, kiln.Options{Grad: true}), cpu.Options{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.Step(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Step on a cancelled context = %v, want context.Canceled", err)
	}
	if err := x.Step(context.Background()); err != nil {
		t.Errorf("Step after a cancelled one: %v", err)
	}
}

func TestCloseStopsTheWorkers(t *testing.T) {
	before := runtime.NumGoroutine()
	x, err := cpu.New(plan(t, mlp, kiln.Options{Grad: true}), cpu.Options{Workers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if x.Workers() != 4 {
		t.Errorf("Workers() = %d, want 4", x.Workers())
	}
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	x.Close()
	x.Close()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before New", n, before)
	}
}

func TestDefaultWorkersIsNumCPU(t *testing.T) {
	x, err := cpu.New(plan(t, ce, kiln.Options{}), cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if x.Workers() != runtime.NumCPU() {
		t.Errorf("Workers() = %d, want runtime.NumCPU() = %d", x.Workers(), runtime.NumCPU())
	}
}
