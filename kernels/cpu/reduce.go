package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildReduce builds sum or mean {axes, keepdims}. keepdims changes only the
// result's shape, not its layout.
//
// The input is walked in row-major order and each element is added to its
// output element, so every output element is the sum of its inputs in
// increasing index order, accumulated in T (float32 for f32: exactly what a
// plain loop "out[j] += x[i]" over float32 values computes) and starting
// from zero. The walk coalesces axes, which gives the fast paths: reducing
// contiguous trailing axes is one sequential sum per output element, and
// reducing leading axes adds whole input rows into the output row. mean
// then divides by the number of reduced elements (0/0 = NaN when that
// number is 0).
func buildReduce[T number](n *kernels.Node) (kernels.Func, error) {
	mean := false
	switch n.Op {
	case ir.OpSum:
	case ir.OpMean:
		if !n.Out.DType.IsFloat() {
			return nil, fmt.Errorf("mean is defined for floats only, found %s", n.Out.DType)
		}
		mean = true
	default:
		return nil, fmt.Errorf("%s is not a reduction", n.Op)
	}
	xs := n.Args[0].Shape
	axes, err := ir.ReduceAxes(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	// Strides of the output along each input axis: 0 on the reduced ones.
	dst := ir.ReducedShape(xs, axes, true).Strides()
	count := 1
	for _, ax := range axes {
		dst[ax] = 0
		count *= xs[ax]
	}
	w := newWalk(xs, dst, nil)
	div := T(count)
	if f := splitReduce[T](n, xs, dst, w, mean, div); f != nil {
		return f, nil
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		clear(o)
		inner, ia := w.inner, w.ia
		w.each(func(xo, oo, _ int) {
			reduceAddRow(o, x[xo:xo+inner], oo, ia)
		})
		if mean {
			reduceDivide(o, div)
		}
		return nil
	}, nil
}

// reduceSplitElems is the size (input elements) from which a sum or mean
// that keeps its innermost axis (a bias gradient: the sum over the batch)
// splits across the executor's workers; reduceSplitCols is the fewest
// columns of that axis a part takes, a multiple of 16 so that parts write
// separate cache lines.
var (
	reduceSplitElems = 1 << 15 // variables for the tests
	reduceSplitCols  = 64
)

// splitReduce returns the Func of buildReduce split across n.Par's
// workers, or nil when the reduction stays on one: it must keep the
// innermost axis (w.ia == 1, so each walk row adds into a row of outputs)
// and be large enough. Part p adds the columns [bounds[p], bounds[p+1]) of
// every row, in the walk's order, with a walk of its own: each output
// element is the sum of the same inputs in the same order as unsplit, so
// the bits do not depend on the number of parts.
func splitReduce[T number](n *kernels.Node, xs ir.Shape, dst []int, w *walk, mean bool, div T) kernels.Func {
	workers := kernels.Workers(n.Par)
	if w.ia != 1 || workers < 2 || xs.NumElements() < reduceSplitElems {
		return nil
	}
	parts := min(workers, w.inner/reduceSplitCols)
	if parts < 2 {
		return nil
	}
	bounds := make([]int, parts+1)
	walks := make([]*walk, parts)
	for p := range parts {
		bounds[p] = min(w.inner, roundUp(p*w.inner/parts, 16))
		walks[p] = newWalk(xs, dst, nil)
	}
	bounds[parts] = w.inner
	var o, x []T
	body := func(p int) {
		lo, hi := bounds[p], bounds[p+1]
		walks[p].each(func(xo, oo, _ int) {
			reduceAddRow(o, x[xo+lo:xo+hi], oo+lo, 1)
		})
	}
	par := n.Par
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x = kernels.View[T](out), kernels.View[T](args[0])
		clear(o)
		par.Run(parts, body)
		if mean {
			reduceDivide(o, div)
		}
		o, x = nil, nil
		return nil
	}
}

// reduceAddRow adds the elements of row, in order, into o: all into o[oo]
// when ia is 0 (the row's axis is reduced), else row[i] into o[oo+i] (the
// row's axis is kept). It is the summation of sum and mean, shared by their
// kernel and fused_reduce, so both add in the same order.
func reduceAddRow[T number](o, row []T, oo, ia int) {
	switch ia {
	case 0:
		s := o[oo]
		for _, v := range row {
			s += v
		}
		o[oo] = s
	default: // 1: the innermost axis is kept: dst[i] = dst[i] + row[i]
		dst := o[oo : oo+len(row)]
		vecVec(ir.OpAdd, dst, dst, row)
	}
}

// reduceDivide divides every element of o by div: mean's last step.
func reduceDivide[T number](o []T, div T) {
	for i := range o {
		o[i] /= div
	}
}
