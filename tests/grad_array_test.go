package tests

import (
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// Gradient checks of the array ops (ir/ops_array.go) against central
// differences in float64, with DESIGN.md's bounds.

func init() { gradCases = append(gradCases, arrayGradCases...) }

// castTo appends cast {dtype=dt} of x.
func castTo(b *frontends.Builder, x frontends.Value, dt ir.DType) frontends.Value {
	return b.Op(ir.OpCast, ir.MakeAttrs("dtype", ir.String(dt.String())), x)
}

var arrayGradCases = []gradCase{
	{name: "cast through f64 and back", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return castTo(b, b.Tanh(castTo(b, p(b, "a", dt, 3, 4), ir.F64)), dt)
	}},
	{name: "cast to i32 stops the gradient", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		// d/da a*trunc(3a) is trunc(3a) away from the kinks.
		a := p(b, "a", dt, 2, 5)
		three := b.Const(dt, nil, 3)
		return b.Mul(a, castTo(b, castTo(b, b.Mul(a, three), ir.I32), dt))
	}},
	{name: "cumsum middle axis", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpCumsum, ir.MakeAttrs("axis", ir.Int(1)), p(b, "a", dt, 2, 4, 3))
	}},
	{name: "cumsum exclusive reverse", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpCumsum, ir.MakeAttrs("axis", ir.Int(-1), "exclusive", ir.BoolAttr(true), "reverse", ir.BoolAttr(true)), p(b, "a", dt, 3, 5))
	}},
	{name: "cumsum exclusive", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpCumsum, ir.MakeAttrs("axis", ir.Int(0), "exclusive", ir.BoolAttr(true)), p(b, "a", dt, 4, 2))
	}},
	{name: "triu k=1 batched", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpTrilu, ir.MakeAttrs("k", ir.Int(1)), p(b, "a", dt, 2, 3, 4))
	}},
	{name: "tril k=-1", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpTrilu, ir.MakeAttrs("upper", ir.BoolAttr(false), "k", ir.Int(-1)), p(b, "a", dt, 4, 3))
	}},
}

// TestSecondOrderArray differentiates the first-order gradient graphs of
// the array ops, so that the rules of the ops their gradients are made of
// run on values that depend on the param, and checks the second
// derivative against central differences of the first, in float64.
func TestSecondOrderArray(t *testing.T) {
	tests := []struct {
		name  string
		shape []int
		build func(b *frontends.Builder, w frontends.Value) frontends.Value
	}{
		// Between f32 and f64 the rounding to f32 is far above the f64
		// bounds of central differences (TestGradients checks that rule in
		// f32); here the gradient graph holds the casts that stop it and
		// an identity cast.
		{"cast", []int{3, 2}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			k := castTo(b, castTo(b, b.Mul(w, b.Const(ir.F64, nil, 3)), ir.I32), ir.F64)
			return castTo(b, b.Mul(b.Tanh(w), k), ir.F64)
		}},
		{"cumsum and trilu", []int{3, 4}, func(b *frontends.Builder, w frontends.Value) frontends.Value {
			c := b.Op(ir.OpCumsum, ir.MakeAttrs("axis", ir.Int(1), "reverse", ir.BoolAttr(true)), w)
			return b.Op(ir.OpTrilu, ir.MakeAttrs("upper", ir.BoolAttr(false)), b.Mul(c, b.Tanh(w)))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := frontends.NewBuilder("second")
			w := b.Param("w", ir.F64, tc.shape...)
			v := tc.build(b, w)
			r := b.Input("r", ir.F64, v.Type().Shape...)
			b.Output(b.Sum(b.Mul(b.Mul(v, v), r), nil, false))
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			squaredGradLoss(t, g)
			checkGrads(t, g, randomFeeds(g, 5, nil, nil), f64Tol)
		})
	}
}
