package tests

import (
	"math"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// Gradient checks of fused attention (ir/ops_attention.go). The mask is an
// input or a constant: attention gives its mask no gradient.

func init() { gradCases = append(gradCases, attentionGradCases...) }

func attentionAttrs(scale float64, causal bool) ir.Attrs {
	return ir.MakeAttrs("scale", ir.Float(scale), "causal", ir.BoolAttr(causal))
}

var attentionGradCases = []gradCase{
	{name: "attention", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpAttention, attentionAttrs(0.5, false), p(b, "q", dt, 2, 2, 3, 4), p(b, "k", dt, 2, 2, 5, 4), p(b, "v", dt, 2, 2, 5, 3))
	}},
	{name: "attention causal", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpAttention, attentionAttrs(0.7, true), p(b, "q", dt, 2, 4, 3), p(b, "k", dt, 2, 4, 3), p(b, "v", dt, 2, 4, 3))
	}},
	{name: "attention additive mask input", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		return b.Op(ir.OpAttention, attentionAttrs(0.5, false), p(b, "q", dt, 2, 3, 2), p(b, "k", dt, 2, 4, 2), p(b, "v", dt, 2, 4, 2), b.Input("m", dt, 3, 4))
	}},
	{name: "attention causal padding mask", build: func(b *frontends.Builder, dt ir.DType) frontends.Value {
		inf := math.Inf(-1)
		mask := b.Const(dt, []int{2, 1, 1, 4}, 0, 0, 0, 0, 0, 0, inf, inf)
		return b.Op(ir.OpAttention, attentionAttrs(0.5, true), p(b, "q", dt, 2, 2, 4, 3), p(b, "k", dt, 2, 2, 4, 3), p(b, "v", dt, 2, 2, 4, 2), mask)
	}},
}
