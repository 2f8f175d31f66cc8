package vmath_test

import (
	"fmt"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
)

func ExampleExp32() {
	x := []float32{0, 1, -1, 88.8, -104}
	y := make([]float32, len(x))
	vmath.Exp32(y, x)
	fmt.Println(y)
	// Output: [1 2.7182817 0.36787945 +Inf 0]
}

func ExampleLookup() {
	u, ok, err := vmath.Lookup(ir.OpGelu, ir.MakeAttrs("approximate", ir.String("tanh")))
	fmt.Println(ok, err)
	x := []float32{-1, 0, 1}
	u.F32(x, x) // in place
	fmt.Println(x)
	// Output:
	// true <nil>
	// [-0.15880802 0 0.841192]
}

func ExampleGeluExactGrad32() {
	x := []float32{-3, -1, 0, 1, 3}
	dy := []float32{1, 1, 1, 1, 2}
	g := make([]float32, len(x))
	vmath.GeluExactGrad32(g, dy, x)
	fmt.Println(g)
	// Output: [-0.011945647 -0.08331548 0.5 1.0833155 2.0238912]
}
