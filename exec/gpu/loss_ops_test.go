package gpu_test

import (
	"context"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestLossKernelsMatchCPU checks the losses (each reduction; broadcast
// operands for the elementwise ones; more than 64 losses, summed by a
// workgroup) and softmax_grad and log_softmax_grad along the last and a
// middle axis.
func TestLossKernelsMatchCPU(t *testing.T) {
	needGPU(t)
	var cases []kernelCase
	for _, red := range []string{"mean", "sum", "none"} {
		for _, op := range []string{"mse_loss", "l1_loss", "huber_loss", "huber_loss {delta=0.7, reduction=\"R\"}"} {
			call := op
			if !strings.Contains(op, "{") {
				call += " {reduction=\"R\"}"
			}
			call = strings.Replace(strings.Replace(call, " {", " %a, %b {", 1), "R", red, 1)
			cases = append(cases, kernelCase{name: op + " " + red, src: "input %a: f32[5,1,33]\ninput %b: f32[3,33]\n%y = " + call + "\noutput %y", atol: 1e-4})
		}
		cases = append(cases,
			kernelCase{name: "bce " + red, src: "input %a: f32[9,13]\ninput %b: f32[9,13]\n%p = sigmoid %a\n%q = sigmoid %b\n%y = bce_loss %p, %q {reduction=\"" + red + "\"}\n%z = bce_with_logits %a, %q {reduction=\"" + red + "\"}\noutput %y, %z", atol: 1e-4},
			kernelCase{name: "nll " + red, src: "input %a: f32[70,9]\ninput %l: i64[70]\ninput %m: i32[70]\n%y = nll_loss %a, %l {reduction=\"" + red + "\"}\n%z = nll_loss %a, %m {reduction=\"" + red + "\"}\noutput %y, %z", labels: 9, atol: 1e-4},
		)
	}
	cases = append(cases,
		kernelCase{name: "softmax_grad", src: "input %d: f32[6,300]\ninput %a: f32[6,300]\n%y = softmax %a\n%g: f32[6,300] = softmax_grad %d, %y\n%l = log_softmax %a\n%h: f32[6,300] = log_softmax_grad %d, %l\noutput %g, %h", atol: 1e-5},
		kernelCase{name: "softmax_grad axis 1", src: "input %d: f32[5,3,7]\ninput %a: f32[5,3,7]\n%y = softmax %a {axis=1}\n%g: f32[5,3,7] = softmax_grad %d, %y {axis=1}\n%l = log_softmax %a {axis=1}\n%h: f32[5,3,7] = log_softmax_grad %d, %l {axis=1}\noutput %g, %h", atol: 1e-5},
	)
	runCases(t, cases)
}

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
