package cpu_test

import (
	"bytes"
	"context"
	"os"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// memoryModels are the example models and a small MLP with two hidden
// layers, which has a longer backward pass.
func memoryModels(t *testing.T) map[string]string {
	lin, err := os.ReadFile("../../examples/linreg/linreg.kir")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"digits/mlp": string(examples.DigitsMLP),
		"linreg":     string(lin),
		"mlp2": `graph mlp2
input %x: f32[16,12]
input %y: i64[16]
param %w1: f32[12,24]
param %b1: f32[24]
param %w2: f32[24,24]
param %b2: f32[24]
param %w3: f32[24,5]
%h1 = matmul %x, %w1
%a1 = add %h1, %b1
%r1 = tanh %a1
%h2 = matmul %r1, %w2
%a2 = add %h2, %b2
%r2 = relu %a2
%z = matmul %r2, %w3
%loss = softmax_cross_entropy %z, %y
output %loss
`,
	}
}

func memoryModes() map[string]kiln.Options {
	sgd, _ := passes.DefaultOptimizer("sgd")
	sgd.Momentum = 0.9
	adam, _ := passes.DefaultOptimizer("adam")
	return map[string]kiln.Options{
		"forward": {},
		"grad":    {Grad: true},
		"sgd":     {Optimizer: &sgd},
		"adam":    {Optimizer: &adam},
	}
}

var planVariants = map[string]planner.Options{
	"auto":               {},
	"memory":             {Schedule: planner.ScheduleMemory},
	"topo":               {Schedule: planner.ScheduleTopo},
	"memory, no inplace": {Schedule: planner.ScheduleMemory, NoInPlace: true},
	"topo, no inplace":   {Schedule: planner.ScheduleTopo, NoInPlace: true},
}

// feed sets every input to fixed values: floats varied, integers 0 or 1
// (a label valid for any number of classes).
func feed(t *testing.T, x *cpu.Executor) {
	t.Helper()
	p := x.Plan()
	for _, i := range p.Inputs {
		b := p.Buffers[i]
		v := make([]float64, b.Type.Shape.NumElements())
		for k := range v {
			if b.Type.DType.IsFloat() {
				v[k] = float64(k%7)/3 - 1
			} else {
				v[k] = float64(k % 2)
			}
		}
		tn := kernels.New(b.Type)
		if err := kernels.SetFloat64s(tn, v); err != nil {
			t.Fatal(err)
		}
		if err := x.Set(b.Name, tn); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMeasuredPeakMatchesPlan runs each model in each mode and plan
// variant for three steps and checks that the memory the executor saw in
// use matches the plan: its peak is the plan's lower bound and its high
// water the plan's arena. It also checks that every variant computes the
// same outputs, gradients, params and state, bit for bit: the schedule and
// in-place reuse change where values live, not what they are.
func TestMeasuredPeakMatchesPlan(t *testing.T) {
	for model, src := range memoryModels(t) {
		g, err := ir.Parse(model, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		for mode, opts := range memoryModes() {
			var want map[string][]byte
			var wantFrom string
			for variant, po := range planVariants {
				opts.Plan = po
				p, err := kiln.Compile(g, opts)
				if err != nil {
					t.Fatal(err)
				}
				if err := p.Check(); err != nil {
					t.Fatalf("%s %s %s: %v", model, mode, variant, err)
				}
				x, err := cpu.New(p, cpu.Options{Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				feed(t, x)
				for range 3 {
					if err := x.Step(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
				if x.PeakBytes() != p.LowerBound || x.HighWater() != p.ArenaBytes {
					t.Errorf("%s %s %s: measured peak %d bytes, high water %d; the plan's lower bound is %d, its arena %d",
						model, mode, variant, x.PeakBytes(), x.HighWater(), p.LowerBound, p.ArenaBytes)
				}
				got := map[string][]byte{}
				for _, n := range x.Names() {
					tn, _ := x.Get(n)
					got[n] = bytes.Clone(tn.Data)
				}
				if want == nil {
					want, wantFrom = got, variant
					continue
				}
				for n, w := range want {
					if !bytes.Equal(got[n], w) {
						t.Errorf("%s %s: %s differs between plans %q and %q", model, mode, n, wantFrom, variant)
					}
				}
			}
		}
	}
}

// TestMeasuredPeakResets checks that Reset clears the measurement and
// that a plan without kernel steps measures its inputs.
func TestMeasuredPeakResets(t *testing.T) {
	p := plan(t, ce, kiln.Options{})
	x, err := cpu.New(p, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if x.PeakBytes() != 0 || x.HighWater() != 0 {
		t.Errorf("before any step: peak %d, high water %d", x.PeakBytes(), x.HighWater())
	}
	set(t, x, "y", 0, 1)
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	if x.PeakBytes() != p.LowerBound {
		t.Errorf("peak %d, lower bound %d", x.PeakBytes(), p.LowerBound)
	}
	if err := x.Reset(0); err != nil {
		t.Fatal(err)
	}
	if x.PeakBytes() != 0 || x.HighWater() != 0 {
		t.Errorf("after Reset: peak %d, high water %d", x.PeakBytes(), x.HighWater())
	}
}
