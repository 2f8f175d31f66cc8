package tests

import (
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// coveredBySecondOrder records that relu_grad's own rule is checked by
// TestSecondOrderRelu below.
const coveredBySecondOrder = true

// TestSecondOrderRelu differentiates a graph that already holds the backward
// of a relu layer, so relu_grad's rule runs, and checks the second
// derivative against central differences of the first.
func TestSecondOrderRelu(t *testing.T) {
	b := frontends.NewBuilder("second")
	w := b.Param("w", ir.F64, 3, 4)
	x := b.Input("x", ir.F64, 2, 3)
	r := b.Input("r", ir.F64, 2, 4)
	y := b.Relu(b.Matmul(x, w))
	b.Output(b.Sum(b.Mul(b.Mul(y, y), r), nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	// First order: append d loss / d w, then make sum(grad^2) the new loss.
	if err := passes.Autodiff(g); err != nil {
		t.Fatal(err)
	}
	gw := g.Grads[0].Grad
	e := ir.NewEmitter(g, "s")
	sq := e.Op(ir.OpMul, nil, gw, gw)
	l2 := e.Op(ir.OpSum, ir.MakeAttrs("keepdims", ir.BoolAttr(false)), sq)
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	g.Outputs = []ir.ID{l2}
	g.Grads = nil
	if err := passes.DCE(g); err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
	hasReluGrad := false
	for _, v := range g.Values {
		hasReluGrad = hasReluGrad || v.Op == ir.OpReluGrad
	}
	if !hasReluGrad {
		t.Fatal("the first-order graph has no relu_grad; the test would not exercise its rule")
	}
	checkGrads(t, g, randomFeeds(g, 3, nil, nil), f64Tol)
}
