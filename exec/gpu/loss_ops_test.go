package gpu_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestBCEOutOfRange checks that bce_loss reports an input outside [0,1].
func TestBCEOutOfRange(t *testing.T) {
	needGPU(t)
	p := plan(t, "graph b\ninput %x: f32[4]\ninput %t: f32[4]\n%y = bce_loss %x, %t\noutput %y")
	c, g := executors(t, p)
	x := kernels.New(ir.Type{DType: ir.F32, Shape: ir.Shape{4}})
	if err := kernels.SetFloat64s(x, []float64{0.5, 0.25, 1.5, 0}); err != nil {
		t.Fatal(err)
	}
	for _, e := range []interface {
		setter
		Step(context.Context) error
	}{c, g} {
		for _, name := range []string{"x", "t"} {
			if err := e.Set(name, x); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Step(context.Background()); err == nil {
		t.Fatal("the CPU took an input outside [0,1]")
	}
	err := g.Step(context.Background())
	if err == nil || !strings.Contains(err.Error(), "at element 2 is outside [0,1]") || !strings.Contains(err.Error(), "bce_loss") {
		t.Fatalf("GPU error %v, want one naming bce_loss and element 2", err)
	}
}
