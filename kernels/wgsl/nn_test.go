package wgsl

import (
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

// nnGraph has a node of every op of the convolution, pooling,
// normalization, dropout, KAN and logic-gate family (whose device cases
// are exec/gpu's nnCases).
const nnGraph = `graph k
input %x: f32[2,3,9,9]
input %w: f32[4,3,3,3]
input %b: f32[4]
input %g: f32[3]
input %l: f32[9,16]
input %x1: f32[2,3,9]
input %w1: f32[4,3,3]
%c = conv2d %x, %w, %b {padding=[1,1]}
%c1 = conv1d %x1, %w1 {padding=[1]}
%ci = conv_input_grad %c, %w {padding=[1,1], input_shape=[2,3,9,9]}
%cw = conv_weight_grad %x, %c {padding=[1,1], weight_shape=[4,3,3,3]}
%m = max_pool2d %x {kernel=[2,2]}
%mg = max_pool2d_grad %m, %x {kernel=[2,2]}
%ms = max_pool2d_select %x, %x {kernel=[2,2]}
%a = avg_pool2d %x {kernel=[3,3], padding=[1,1]}
%ag = avg_pool2d_grad %a {kernel=[3,3], padding=[1,1], input_shape=[2,3,9,9]}
%ln = layer_norm %x {axes=[1,2,3]}
%lng = layer_norm_grad %x, %x {axes=[2,3]}
%bn = batch_norm %x, %g, %g
%d = dropout %x {p=0.5, seed=3}
%s = bspline %x {order=3, derivative=2}
%lg = logic_gate %x, %x, %l
output %c, %c1, %ci, %cw, %m, %mg, %ms, %a, %ag, %ln, %lng, %bn, %d, %s, %lg
`

// TestNNKernelsShape: a bspline beyond the GPU's order is refused with an
// error naming it (the shape of every kernel of the family is checked by
// TestEveryBuilderGenerates).
func TestNNKernelsShape(t *testing.T) {
	big := nnNodes(t, "graph b\ninput %x: f32[3]\n%s = bspline %x {order=33}\noutput %s")[0]
	_, err := Build(big)
	if want := "bspline: order 33: the GPU computes B-splines of order at most 32"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
