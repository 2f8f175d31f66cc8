package wgsl

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// nnNodes parses a graph and returns the kernel node of each value that is
// not an input, in order.
func nnNodes(t *testing.T, src string) []*kernels.Node {
	t.Helper()
	g, err := ir.Parse("test.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var ns []*kernels.Node
	for _, v := range g.Values {
		if v.Op == ir.OpInput {
			continue
		}
		args := make([]ir.Type, len(v.Args))
		for i, a := range v.Args {
			args[i] = g.Values[a].Type
		}
		ns = append(ns, &kernels.Node{Op: v.Op, Attrs: v.Attrs, Args: args, Out: v.Type})
	}
	return ns
}

// TestNNKernelsShape checks what the device tests cannot see: every kernel
// of the family binds at most 8 buffers (WebGPU's default per stage), binds
// only operands it has, and dropout (alone) binds the step count; a
// bspline beyond the GPU's order is refused with an error naming it.
func TestNNKernelsShape(t *testing.T) {
	ns := nnNodes(t, `graph k
input %x: f32[2,3,9,9]
input %w: f32[4,3,3,3]
input %b: f32[4]
input %g: f32[3]
input %l: f32[9,16]
%c = conv2d %x, %w, %b {padding=[1,1]}
%ci = conv_input_grad %c, %w {padding=[1,1], input_shape=[2,3,9,9]}
%cw = conv_weight_grad %x, %c {padding=[1,1], weight_shape=[4,3,3,3]}
%m = max_pool2d %x {kernel=[2,2]}
%mg = max_pool2d_grad %m, %x {kernel=[2,2]}
%ms = max_pool2d_select %x, %x {kernel=[2,2]}
%a = avg_pool2d %x {kernel=[3,3], padding=[1,1]}
%ag = avg_pool2d_grad %a {kernel=[3,3], padding=[1,1], input_shape=[2,3,9,9]}
%ln = layer_norm %x {axes=[1,2,3]}
%bn = batch_norm %x, %g, %g
%d = dropout %x {p=0.5, seed=3}
%s = bspline %x {order=3, derivative=2}
%lg = logic_gate %x, %x, %l
output %c, %ci, %cw, %m, %mg, %ms, %a, %ag, %ln, %bn, %d, %s, %lg
`)
	for _, n := range ns {
		k, err := Build(n)
		if err != nil {
			t.Fatalf("%s: %v", n.Op, err)
		}
		if len(k.Dispatches) == 0 {
			t.Fatalf("%s: no dispatch", n.Op)
		}
		steps := 0
		for _, d := range k.Dispatches {
			if len(d.Bind) > 8 {
				t.Errorf("%s binds %d buffers", n.Op, len(d.Bind))
			}
			for _, o := range d.Bind {
				switch {
				case o.Kind == Arg && o.Index >= len(n.Args),
					o.Kind == Scratch && o.Index >= len(k.Scratch),
					o.Kind == Data && o.Index >= len(k.Data):
					t.Errorf("%s binds %v, which it does not have", n.Op, o)
				case o.Kind == StepNo:
					steps++
				}
			}
			if !strings.Contains(d.Source, "fn main(") {
				t.Errorf("%s: no entry point in\n%s", n.Op, d.Source)
			}
		}
		if want := map[bool]int{true: 1, false: 0}[n.Op == ir.OpDropout]; steps != want {
			t.Errorf("%s binds the step count %d times, want %d", n.Op, steps, want)
		}
	}
	big := nnNodes(t, "graph b\ninput %x: f32[3]\n%s = bspline %x {order=33}\noutput %s")[0]
	_, err := Build(big)
	if want := "bspline: order 33: the GPU computes B-splines of order at most 32"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
