package tests

import (
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
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
	squaredGradLoss(t, g)
	hasReluGrad := false
	for _, v := range g.Values {
		hasReluGrad = hasReluGrad || v.Op == ir.OpReluGrad
	}
	if !hasReluGrad {
		t.Fatal("the first-order graph has no relu_grad; the test would not exercise its rule")
	}
	checkGrads(t, g, randomFeeds(g, 3, nil, nil), f64Tol)
}
