package checkpoint

import "github.com/kilnml/kiln/ir"

// FLOPs returns the cost model's price of computing value id once: the
// floating-point operations of its op from the static shapes. Matrix
// products cost 2·M·N·K (per batch element), convolutions 2 per
// multiply-add (output elements × C_in/groups × kernel size, and the same
// for their gradients), the B-spline basis (order+1)² per output element,
// the logic gate 16 per output element, softmax-like normalizations and
// losses 4 per input element, layer and batch norm 8; the fuse pass's ops
// the sum of what they replace: fused_matmul its product plus one per
// output element and program instruction, fused_elementwise and
// fused_reduce one per element of their largest operand or result and
// instruction (and one more for the reduction); every other op
// (elementwise, reductions, data movement, constants) one per element of
// its largest operand or result; attention 2·(dh+dv)+4 per (query, key)
// pair it attends to (the lower triangle when causal) and attention_grad
// 6·dh+4·dv+8 per pair (it recomputes the scores and probabilities).
// Leaves cost nothing. kiln bench sums it
// over a plan's steps for the FLOPs per step.
func FLOPs(g *ir.Graph, id ir.ID) float64 {
	v := &g.Values[id]
	if v.Op.IsLeaf() {
		return 0
	}
	out := float64(v.Type.Shape.NumElements())
	elems := func(i int) float64 {
		if i >= len(v.Args) {
			return 0
		}
		return float64(g.Type(v.Args[i]).Shape.NumElements())
	}
	largest := out
	for i := range v.Args {
		largest = max(largest, elems(i))
	}
	instrs := func() float64 {
		if p, ok := v.Attrs.Get(ir.ProgramAttr); ok && p.Kind == ir.AttrList {
			return float64(max(len(p.L), 1))
		}
		return 1
	}
	switch v.Op {
	case ir.OpFusedMatmul:
		return 2*out*float64(matmulK(g, v)) + out*instrs()
	case ir.OpFusedElementwise:
		return largest * instrs()
	case ir.OpFusedReduce:
		return largest * (instrs() + 1)
	case ir.OpMatmul:
		return 2 * out * float64(matmulK(g, v))
	case ir.OpConv1d, ir.OpConv2d:
		w := g.Type(v.Args[1]).Shape
		perOut := float64(w.NumElements()) / float64(max(w[0], 1))
		return 2*out*perOut + out
	case ir.OpConvInputGrad:
		// dy [N, C_out, ...] with w [C_out, C_in/groups, k...]: the same
		// multiply-adds as the forward convolution.
		w := g.Type(v.Args[1]).Shape
		return 2 * elems(0) * float64(w.NumElements()) / float64(max(w[0], 1))
	case ir.OpConvWeightGrad:
		// x and dy give the weight [C_out, C_in/groups, k...]: one
		// multiply-add per output position of dy and weight element of
		// its output channel.
		w := v.Type.Shape
		return 2 * elems(1) * float64(w.NumElements()) / float64(max(w[0], 1))
	case ir.OpBspline:
		order := float64(v.Attrs.Int("order", 3))
		return out * (order + 1) * (order + 1)
	case ir.OpLogicGate:
		return 16 * out
	case ir.OpSoftmax, ir.OpLogSoftmax, ir.OpSoftmaxCrossEntropy, ir.OpNLLLoss, ir.OpLogSumExp, ir.OpBCELoss, ir.OpBCEWithLogits:
		return 4 * largest
	case ir.OpLayerNorm, ir.OpBatchNorm:
		return 8 * largest
	case ir.OpAttention, ir.OpAttentionGrad:
		q, k, vt := g.Type(v.Args[0]).Shape, g.Type(v.Args[1]).Shape, g.Type(v.Args[2]).Shape
		r := len(q)
		nt, ns, dh, dv := q[r-2], k[r-2], float64(q[r-1]), float64(vt[r-1])
		pairs := float64(nt * ns)
		if v.Attrs.Bool("causal", false) {
			pairs = 0
			for t := range nt {
				pairs += float64(min(t+1, ns))
			}
		}
		pairs *= float64(q[:r-2].NumElements())
		if v.Op == ir.OpAttention {
			return pairs * (2*(dh+dv) + 4)
		}
		return pairs * (6*dh + 4*dv + 8)
	}
	return largest
}

// matmulK returns the inner dimension of matmul or fused_matmul v: the last
// axis of a as the product reads it (transposed or not).
func matmulK(g *ir.Graph, v *ir.Value) int {
	a, _, err := ir.MatmulOperands(g.Type(v.Args[0]).Shape, g.Type(v.Args[1]).Shape, v.Attrs)
	if err != nil || len(a) == 0 {
		return 1
	}
	return a[len(a)-1]
}
