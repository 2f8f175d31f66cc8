package passes

import (
	"github.com/kilnml/kiln/ir"
)

// Canonicalize rewrites forward patterns into the one op whose backward the
// fuse pass knows, before autodiff sees them: nll_loss(log_softmax(x,
// axis=1), labels) becomes softmax_cross_entropy(x, labels) with the same
// reduction, in place on the nll_loss value (same id and name), when the
// log_softmax has no other use. The loss is the same function; its
// backward becomes softmax_cross_entropy's, (softmax(x) - onehot(labels))
// scaled per the reduction, which fuse turns into one softmax_ce_grad
// kernel instead of the one_hot, scale and log_softmax backward ops. The
// log_softmax values it frees are removed. It also puts attention in
// place of softmax(q·kᵀ·scale + mask)·v (canonicalizeAttention), and
// moves a relu below the max-pooling of its result (canonicalizePoolRelu).
func Canonicalize(g *ir.Graph) error {
	if err := canonicalizeAttention(g); err != nil {
		return err
	}
	if err := canonicalizePoolRelu(g); err != nil {
		return err
	}
	pinned := g.RootMask()
	users := g.Users()
	keep := make([]bool, len(g.Values))
	for i := range keep {
		keep[i] = true
	}
	removed := false
	for i := range g.Values {
		v := &g.Values[i]
		if v.Op != ir.OpNLLLoss {
			continue
		}
		ls := v.Args[0]
		lv := &g.Values[ls]
		if lv.Op != ir.OpLogSoftmax || pinned[ls] || len(users[ls]) != 1 {
			continue
		}
		if ax, err := ir.Axis(lv.Attrs, len(lv.Type.Shape)); err != nil || ax != 1 {
			continue
		}
		attrs := ir.MakeAttrs("reduction", ir.String(v.Attrs.Str("reduction", "mean")))
		args := []ir.ID{lv.Args[0], v.Args[1]}
		ty, attrs, err := g.Infer(ir.OpSoftmaxCrossEntropy, attrs, args)
		if err != nil || !ty.Equal(v.Type) {
			continue
		}
		v.Op, v.Args, v.Attrs = ir.OpSoftmaxCrossEntropy, args, attrs
		keep[ls], removed = false, true
	}
	if removed {
		g.Retain(keep)
	}
	return nil
}
