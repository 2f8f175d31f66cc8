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

// A 2-layer Kolmogorov-Arnold network [2, 5, 1] on batches of 64, as
// efficient-kan's KAN([2, 5, 1]) with its default grid: each layer is a
// base weight on silu(x) plus a cubic spline per edge. The loss (mse
// against the targets) is the first output, the prediction the second.
func ExampleBuilder_KANLinear() {
	b := frontends.NewBuilder("kan")
	x := b.Input("x", ir.F32, 64, 2)
	target := b.Input("y", ir.F32, 64)
	h := b.KANLinear("l1", x, 5, frontends.KANOptions{}) // [64, 5]
	out := b.KANLinear("l2", h, 1, frontends.KANOptions{})
	pred := b.Reshape(out, 64)
	b.Output(b.MSELoss(pred, target), pred)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range g.Values {
		if v.Op == ir.OpParam {
			fmt.Println(v.Name, v.Type, v.Attrs)
		}
	}
	fmt.Println(h.Type(), out.Type())
	// Output:
	// l1.base_weight f32[2,5] {init="uniform", scale=0.7071067811865475}
	// l1.spline_weight f32[16,5] {init="uniform", scale=0.07071067811865475}
	// l2.base_weight f32[5,1] {init="uniform", scale=0.4472135954999579}
	// l2.spline_weight f32[40,1] {init="uniform", scale=0.044721359549995794}
	// f32[64,5] f32[64,1]
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

// TestKANLinearErrors checks that a KAN layer's errors name the layer and
// the caller's line, not the builder's.
func TestKANLinearErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(b *frontends.Builder)
		want  string
	}{
		{"bad grid", func(b *frontends.Builder) {
			b.KANLinear("l1", b.Input("x", ir.F32, 4, 3), 2, frontends.KANOptions{GridMin: 1, GridMax: -1})
		}, "kan layer l1: bspline: expected finite grid_min < grid_max, found grid_min=1.0, grid_max=-1.0"},
		{"negative order", func(b *frontends.Builder) {
			b.KANLinear("l1", b.Input("x", ir.F32, 4, 3), 2, frontends.KANOptions{Order: -1})
		}, "kan layer l1: bspline: expected order >= 0"},
		{"no outputs", func(b *frontends.Builder) {
			b.KANLinear("l1", b.Input("x", ir.F32, 4, 3), 0, frontends.KANOptions{})
		}, "kan layer l1: expected at least 1 output, found 0"},
		{"scalar x", func(b *frontends.Builder) {
			b.KANLinear("l1", b.Input("x", ir.F32), 2, frontends.KANOptions{})
		}, "kan layer l1: expected x [..., in] of this builder, found f32[]"},
		{"integer x", func(b *frontends.Builder) {
			b.KANLinear("l1", b.Input("x", ir.I64, 4, 3), 2, frontends.KANOptions{})
		}, "kan layer l1: bspline: expected a float operand x (f32 or f64), found i64[4,3]"},
		{"same name twice", func(b *frontends.Builder) {
			x := b.Input("x", ir.F32, 4, 3)
			b.KANLinear("l1", b.KANLinear("l1", x, 3, frontends.KANOptions{}), 2, frontends.KANOptions{})
		}, "kan layer l1: param %l1.base_weight: duplicate value %l1.base_weight"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := frontends.NewBuilder("bad")
			tc.build(b)
			_, err := b.Build()
			if err == nil || !strings.HasPrefix(err.Error(), "builder_kan_test.go:") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Build = %v, want this file's line and %q", err, tc.want)
			}
		})
	}
}
