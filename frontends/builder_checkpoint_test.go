package frontends_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

func marked(g *ir.Graph) string {
	var names []string
	for _, id := range g.Recompute {
		names = append(names, g.Values[id].Name)
	}
	return strings.Join(names, " ")
}

// TestCheckpoint checks that a region's values, except its result and its
// params, become recompute marks, and that the marks survive the .kir text.
func TestCheckpoint(t *testing.T) {
	b := frontends.NewBuilder("ck")
	x := b.Input("x", ir.F32, 4, 3)
	y := b.Checkpoint(func() frontends.Value {
		h := b.Rename(b.Matmul(x, b.Param("w", ir.F32, 3, 3)), "h")
		return b.Rename(b.Relu(b.Rename(b.Tanh(h), "t")), "r")
	})
	b.Output(b.Sum(y, nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := marked(g); got != "h t" {
		t.Errorf("marks %q, want \"h t\"", got)
	}
	g2, err := ir.Parse("ck.kir", []byte(g.Format()))
	if err != nil {
		t.Fatal(err)
	}
	if got := marked(g2); got != "h t" {
		t.Errorf("marks after a round trip through .kir: %q", got)
	}
	if !strings.Contains(g.Format(), "\nrecompute %h, %t\n") {
		t.Errorf("no recompute statement in\n%s", g.Format())
	}
}

// TestCheckpointSequential splits 6 layers into 3 segments: the first two
// are checkpointed (their inner values marked, their outputs kept), the
// last runs as usual.
func TestCheckpointSequential(t *testing.T) {
	b := frontends.NewBuilder("seq")
	x := b.Input("x", ir.F32, 2, 2)
	var layers []func(frontends.Value) frontends.Value
	for i := range 6 {
		layers = append(layers, func(h frontends.Value) frontends.Value {
			return b.Rename(b.Tanh(h), fmt.Sprintf("l%d", i))
		})
	}
	out := b.CheckpointSequential(x, 3, layers...)
	b.Output(b.Sum(out, nil, false))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := marked(g); got != "l0 l2" {
		t.Errorf("marks %q, want \"l0 l2\" (l1 and l3 end the checkpointed segments, l4 and l5 form the last)", got)
	}
	if out.Name() != "l5" {
		t.Errorf("result %s, want l5", out.Name())
	}
	b2 := frontends.NewBuilder("one")
	x2 := b2.Input("x", ir.F32, 2)
	if got := b2.CheckpointSequential(x2, 4); got.Name() != "x" {
		t.Errorf("no layers: got %s, want the input back", got.Name())
	}
}
