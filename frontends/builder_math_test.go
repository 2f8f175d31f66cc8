package frontends_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// TestBuilderMath checks that each math method appends its op with the
// right attributes, and that a bad call is reported at the caller's line.
func TestBuilderMath(t *testing.T) {
	b := frontends.NewBuilder("math")
	x := b.Input("x", ir.F32, 2, 3)
	v := b.Input("v", ir.F32, 3)
	tests := []struct {
		got   frontends.Value
		op    ir.Op
		attrs string
	}{
		{b.Abs(x), ir.OpAbs, ""}, {b.Sign(x), ir.OpSign, ""}, {b.Rsqrt(x), ir.OpRsqrt, ""},
		{b.Square(x), ir.OpSquare, ""}, {b.Reciprocal(x), ir.OpReciprocal, ""}, {b.Log2(x), ir.OpLog2, ""},
		{b.Log10(x), ir.OpLog10, ""}, {b.Log1p(x), ir.OpLog1p, ""}, {b.Expm1(x), ir.OpExpm1, ""},
		{b.Sin(x), ir.OpSin, ""}, {b.Cos(x), ir.OpCos, ""}, {b.Erf(x), ir.OpErf, ""},
		{b.Floor(x), ir.OpFloor, ""}, {b.Ceil(x), ir.OpCeil, ""}, {b.Round(x), ir.OpRound, ""},
		{b.Clip(x, -1, 2), ir.OpClip, "{max=2.0, min=-1.0}"},
		{b.ClipMin(x, 0), ir.OpClip, "{min=0.0}"},
		{b.ClipMax(x, 1), ir.OpClip, "{max=1.0}"},
		{b.Pow(x, v), ir.OpPow, ""},
		{b.PowScalar(x, 3), ir.OpPow, "{exponent=3.0}"},
		{b.Maximum(x, v), ir.OpMaximum, ""}, {b.Minimum(v, x), ir.OpMinimum, ""},
		{b.FloorDiv(x, v), ir.OpFloorDiv, ""}, {b.Mod(v, x), ir.OpMod, ""},
	}
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		val := g.Value(tc.got.ID())
		if val.Op != tc.op || val.Attrs.String() != tc.attrs || !val.Type.Equal(ir.TensorOf(ir.F32, 2, 3)) {
			t.Errorf("%s: got %s%s: %s", tc.op, val.Op, val.Attrs, val.Type)
		}
	}

	b = frontends.NewBuilder("bad")
	x = b.Input("x", ir.F32, 2)
	_, _, line, _ := runtime.Caller(0)
	b.Clip(x, 1, 0) // line + 1
	want := fmt.Sprintf("builder_math_test.go:%d: clip: min 1.0 is greater than max 0.0", line+1)
	if _, err := b.Build(); err == nil || err.Error() != want {
		t.Errorf("Build = %v, want %q", err, want)
	}
}
