package passes

import "github.com/kilnml/kiln/ir"

// Softmax fusion, part of elementwise fusion (fuse_elementwise.go): a
// softmax or log_softmax over the last axis takes the elementwise group
// that only it reads as its prologue (fused_softmax: the group's result,
// a tensor of the softmax's size, is never stored), and a softmax_grad or
// log_softmax_grad over the last axis that only an elementwise group reads
// becomes that group's input i0, computed by the group's kernel
// (fused_softmax_grad: the gradient is never stored). The groups follow the
// rules of elementwise fusion; softmax_grad and log_softmax_grad are made
// by fusePatterns, which runs first.

// softmaxLastAxis reports whether value id is softmax or log_softmax
// (softmaxes) or softmax_grad or log_softmax_grad (grads) over the last
// axis of a float tensor of rank 1 or more: the slices the fused kernels
// take as contiguous rows.
func (f *fuseewState) softmaxLastAxis(id ir.ID, grads bool) bool {
	v := &f.g.Values[id]
	switch v.Op {
	case ir.OpSoftmax, ir.OpLogSoftmax:
		if grads {
			return false
		}
	case ir.OpSoftmaxGrad, ir.OpLogSoftmaxGrad:
		if !grads {
			return false
		}
	default:
		return false
	}
	rank := len(v.Type.Shape)
	axis, err := ir.Axis(v.Attrs, rank)
	return err == nil && rank > 0 && axis == rank-1 && v.Type.DType.IsFloat()
}

// prologueOp returns the fused op and attributes of reduction or softmax s
// with the prologue program prog, replacing the values from.
func prologueOp(sv *ir.Value, prog ir.EwProgram, from ir.AttrValue) (ir.Op, ir.Attrs) {
	attrs := ir.MakeAttrs(ir.ProgramAttr, prog.Attr(), ir.FromAttr, from)
	switch sv.Op {
	case ir.OpSoftmax:
		return ir.OpFusedSoftmax, attrs
	case ir.OpLogSoftmax:
		return ir.OpFusedSoftmax, attrs.With("log", ir.BoolAttr(true))
	}
	attrs = attrs.With("op", ir.String(sv.Op.String()))
	for _, a := range sv.Attrs {
		attrs = attrs.With(a.Key, a.Value)
	}
	return ir.OpFusedReduce, attrs
}

// softmaxGradEpilogue fuses the group grp rooted at root, whose input
// inputs[0] is the softmax_grad or log_softmax_grad sg that only the group
// reads, into fused_softmax_grad(dy, y, inputs[1:]...) with program prog.
func (f *fuseewState) softmaxGradEpilogue(root, sg ir.ID, grp *fuseewGroup, inputs []ir.ID, prog ir.EwProgram) error {
	g := f.g
	sv := &g.Values[sg]
	from := g.Provenance(append([]ir.ID{sg}, fuseewSorted(grp.members)...)...)
	attrs := ir.MakeAttrs(ir.ProgramAttr, prog.Attr(), ir.FromAttr, from)
	if sv.Op == ir.OpLogSoftmaxGrad {
		attrs = attrs.With("log", ir.BoolAttr(true))
	}
	args := append([]ir.ID{sv.Args[0], sv.Args[1]}, inputs[1:]...)
	f.taken[sg] = true
	return f.rewrite(root, ir.OpFusedSoftmaxGrad, attrs, args, grp)
}
