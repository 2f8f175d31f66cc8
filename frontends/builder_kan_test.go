package frontends_test

import (
	"fmt"
	"log"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// A Kolmogorov-Arnold layer as efficient-kan's KANLinear computes its spline
// part: cubic B-spline bases of each of 3 inputs on the default grid,
// flattened and mixed by a weight per (input, basis) and output; and a
// layer of 2 difflogic gates over 4 inputs.
func ExampleBuilder_BSpline() {
	b := frontends.NewBuilder("kan")
	x := b.Input("x", ir.F32, 8, 3)
	bases := b.BSpline(x, -1, 1, 5, 3) // [8, 3, 8]
	w := b.Param("w", ir.F32, 3*8, 4)
	y := b.Matmul(b.Reshape(bases, 8, 3*8), w)

	a := b.Input("a", ir.F32, 8, 2)
	c := b.Input("c", ir.F32, 8, 2)
	gates := b.LogicGate(a, c, b.Param("logits", ir.F32, 2, 16))
	b.Output(y, gates)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(bases.Type(), y.Type(), gates.Type())
	fmt.Println(g.Value(bases.ID()).Attrs)
	// Output:
	// f32[8,3,8] f32[8,4] f32[8,2]
	// {derivative=0, grid_max=1.0, grid_min=-1.0, grid_size=5, order=3}
}

func TestBuilderKanErrors(t *testing.T) {
	b := frontends.NewBuilder("bad")
	x := b.Input("x", ir.F32, 4)
	b.BSplineDerivative(x, -1, 1, 5, 3, 4)
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "builder_kan_test.go") || !strings.Contains(err.Error(), "expected derivative in [0, order=3], found 4") {
		t.Errorf("Build = %v, want the caller's line and the derivative error", err)
	}
	b = frontends.NewBuilder("bad")
	a := b.Input("a", ir.F32, 3, 4)
	b.LogicGate(a, a, b.Input("l", ir.F32, 3, 16))
	if _, err := b.Build(); err == nil || !strings.Contains(err.Error(), "expected logits [4,16]") {
		t.Errorf("Build = %v, want the logits shape error", err)
	}
}
