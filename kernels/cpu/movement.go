package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildTranspose builds transpose {perm}: out[i0..] = x at the permuted
// index. Axes that stay adjacent and in order are copied as runs.
func buildTranspose[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[0].Shape
	perm, err := ir.Perm(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	xst := xs.Strides()
	src := make([]int, len(perm))
	for i, p := range perm {
		src[i] = xst[p]
	}
	return gatherFunc[T](newWalk(n.Out.Shape, src, nil)), nil
}

// buildBroadcastTo builds broadcast_to {shape}: x repeated along the
// broadcast axes.
func buildBroadcastTo[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	return gatherFunc[T](newWalk(n.Out.Shape, broadcastStrides(n.Args[0].Shape, n.Out.Shape), nil)), nil
}

// gatherFunc returns a Func that fills out, in order, from the strided view
// of its argument that w describes.
func gatherFunc[T kernels.Elem](w *walk) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		inner, ia := w.inner, w.ia
		w.each(func(oo, ao, _ int) {
			gatherRow(o[oo:oo+inner], x, ao, ia)
		})
		return nil
	}
}

// buildReshape builds reshape {shape}: a copy, since the row-major order of
// the elements does not change. The target shape was resolved by inference
// (ir.ReshapeTarget) and is n.Out's shape.
func buildReshape(*kernels.Node) (kernels.Func, error) {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		copy(out.Data, args[0].Data)
		return nil
	}, nil
}
