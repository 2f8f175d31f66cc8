package tests

import (
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// kanLayerNet is one KAN layer in -> out on a param x [batch, in], with the
// loss sum(r * y) for an input r [batch, out]: r is the upstream gradient
// of y.
func kanLayerNet(tb testing.TB, dt ir.DType, batch, in, out int, o frontends.KANOptions) *ir.Graph {
	tb.Helper()
	b := frontends.NewBuilder("kan_layer")
	x := b.Param("x", dt, batch, in)
	r := b.Input("r", dt, batch, out)
	y := b.KANLinear("l1", x, out, o)
	b.Output(b.Sum(b.Mul(r, y), nil, false))
	g, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}
