package cpu_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

func plan(t *testing.T, src string, opts kiln.Options) *planner.Plan {
	t.Helper()
	g, err := ir.Parse("t.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := kiln.Compile(g, opts)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const ce = `graph ce
input %x: f32[2,3]
input %y: i64[2]
param %w: f32[3,3]
%z = matmul %x, %w
%loss = softmax_cross_entropy %z, %y
output %loss
`

func set(t *testing.T, x *cpu.Executor, name string, v ...float64) {
	t.Helper()
	tn, err := x.Get(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := kernels.SetFloat64s(tn, v); err != nil {
		t.Fatal(err)
	}
}

func TestKernelErrorNamesTheStep(t *testing.T) {
	x, err := cpu.New(plan(t, ce, kiln.Options{}), cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set(t, x, "y", 1, 7)
	err = x.Step(context.Background())
	if err == nil {
		t.Fatal("a label outside [0,3) ran without error")
	}
	for _, want := range []string{"softmax_cross_entropy", "%loss", "7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestCancelledStepStops(t *testing.T) {
	x, err := cpu.New(plan(t, ce, kiln.Options{Grad: true}), cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := x.Step(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Step on a cancelled context = %v, want context.Canceled", err)
	}
}

func TestSetChecksNamesAndTypes(t *testing.T) {
	x, err := cpu.New(plan(t, ce, kiln.Options{Grad: true}), cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		t    kernels.Tensor
		want string
	}{
		{"x", kernels.New(ir.TensorOf(ir.F32, 3, 2)), `tensor "x": expected f32[2,3], found f32[3,2]`},
		{"x", kernels.New(ir.TensorOf(ir.F64, 2, 3)), `tensor "x": expected f32[2,3], found f64[2,3]`},
		{"nosuch", kernels.New(ir.TensorOf(ir.F32)), `plan ce has no tensor "nosuch" (it has: grad/w, loss, w, x, y)`},
		{"loss", kernels.New(ir.TensorOf(ir.F32)), `tensor "loss" is an output of plan ce; it cannot be set`},
	}
	for _, tc := range tests {
		err := x.Set(tc.name, tc.t)
		if err == nil || err.Error() != tc.want {
			t.Errorf("Set(%s, %s) = %v, want %q", tc.name, tc.t.Type, err, tc.want)
		}
	}
}

func TestCheckNaNNamesTheStep(t *testing.T) {
	src := `graph g
input %x: f64[3]
%l = log %x
%s = sum %l
output %s
`
	x, err := cpu.New(plan(t, src, kiln.Options{O0: true}), cpu.Options{CheckNaN: true}) // unfused: the log is a step
	if err != nil {
		t.Fatal(err)
	}
	set(t, x, "x", 1, -1, 2)
	err = x.Step(context.Background())
	if err == nil || !strings.Contains(err.Error(), "%l: f64[3] = log %x") || !strings.Contains(err.Error(), "element 1") {
		t.Errorf("got %v, want the log step named with element 1", err)
	}
	// Without the switch the NaN flows through.
	y, _ := cpu.New(plan(t, src, kiln.Options{O0: true}), cpu.Options{})
	set(t, y, "x", 1, -1, 2)
	if err := y.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, _ := y.Get("s")
	if v := kernels.Float64s(out)[0]; !math.IsNaN(v) {
		t.Errorf("sum of logs with a negative = %v, want NaN", v)
	}
}

// TestResetRepeatsInitialValues checks that the same seed gives the same
// params and another seed other params.
func TestResetRepeatsInitialValues(t *testing.T) {
	p := plan(t, ce, kiln.Options{Grad: true})
	a, _ := cpu.New(p, cpu.Options{Seed: 3})
	b, _ := cpu.New(p, cpu.Options{Seed: 3})
	c, _ := cpu.New(p, cpu.Options{Seed: 4})
	wa, _ := a.Get("w")
	wb, _ := b.Get("w")
	wc, _ := c.Get("w")
	if string(wa.Data) != string(wb.Data) {
		t.Error("the same seed gave different params")
	}
	if string(wa.Data) == string(wc.Data) {
		t.Error("different seeds gave the same params")
	}
	const fanIn, fanOut = 3, 3 // glorot for [3,3]
	limit := math.Sqrt(6.0 / (fanIn + fanOut))
	for _, v := range kernels.Float64s(wa) {
		if math.Abs(v) > limit || v == 0 {
			t.Errorf("glorot value %v outside (0, %v]", v, limit)
		}
	}
}

// TestArenaIsShared checks that buffers really share arena memory: the plan
// places a dead value's buffer under a later one, and the results stay right.
func TestArenaIsShared(t *testing.T) {
	src := `graph chain
input %x: f64[64]
%a = exp %x
%b = neg %a
%c = tanh %b
%d = sigmoid %c
output %d
`
	p := plan(t, src, kiln.Options{O0: true}) // unfused: four buffers to share
	var sum int64
	for _, b := range p.Buffers {
		sum += b.Size
	}
	if p.ArenaBytes >= sum {
		t.Fatalf("arena %d bytes for %d bytes of buffers: nothing shared, the test proves nothing", p.ArenaBytes, sum)
	}
	x, _ := cpu.New(p, cpu.Options{})
	in := make([]float64, 64)
	for i := range in {
		in[i] = float64(i)/32 - 1
	}
	set(t, x, "x", in...)
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, _ := x.Get("d")
	for i, v := range kernels.Float64s(out) {
		want := 1 / (1 + math.Exp(-math.Tanh(-math.Exp(in[i]))))
		if math.Abs(v-want) > 1e-15 {
			t.Fatalf("d[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestInputsSurviveSteps sets the inputs once and steps three times: the
// arena must not reuse an input's memory, so every step gives the same loss.
func TestInputsSurviveSteps(t *testing.T) {
	src := `graph linreg
input %x: f64[4,3]
input %t: f64[4]
param %w: f64[3]
%p = matmul %x, %w
%loss = mse_loss %p, %t
output %loss
`
	x, err := cpu.New(plan(t, src, kiln.Options{}), cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	set(t, x, "x", 1, 2, 3, 0, 1, -1, 2, 0, 1, -1, 1, 0)
	set(t, x, "t", 1, 2, 3, 4)
	set(t, x, "w", 0.5, -0.25, 0.125)
	for i := 0; i < 3; i++ {
		if err := x.Step(context.Background()); err != nil {
			t.Fatal(err)
		}
		l, _ := x.Get("loss")
		if got := kernels.Float64s(l)[0]; got != 8.02734375 {
			t.Fatalf("step %d: loss %v, want 8.02734375", i, got)
		}
	}
}
