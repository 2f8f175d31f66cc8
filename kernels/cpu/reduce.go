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
	default: // 1: the innermost axis is kept
		dst := o[oo : oo+len(row)]
		for i, v := range row {
			dst[i] += v
		}
	}
}

// reduceDivide divides every element of o by div: mean's last step.
func reduceDivide[T number](o []T, div T) {
	for i := range o {
		o[i] /= div
	}
}
