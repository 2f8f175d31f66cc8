package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildReduce builds sum or mean {axes, keepdims}. keepdims changes only the
// result's shape, not its layout.
//
// The input is walked in row-major order, the walk coalescing axes into
// rows, and every output element starts from zero in T. A row whose axis
// is reduced is summed on its own in rowSum's order (rowsum.go: lanes of
// 16 in blocks of sumAllBlock) and added to its output element, the rows
// in the walk's order; a row whose axis is kept is added element by
// element into a row of outputs, so a sum over leading axes adds each
// output's inputs in index order. mean then divides by the number of
// reduced elements (0/0 = NaN when that number is 0). A sum of more than
// sumAllBlock elements into one output element splits its blocks across
// the workers (sum_all.go).
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
	div := T(count)
	if n.Out.Shape.NumElements() == 1 && count > sumAllBlock {
		return buildSumAll(n, count, mean, div), nil // sum_all.go
	}
	w := newWalk(xs, dst, nil)
	if f := splitReduce[T](n, xs, dst, w, mean, div); f != nil {
		return f, nil
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		clear(o)
		inner := w.inner
		if w.ia == 0 {
			reduceRows(w, o, x, 0, len(o))
		} else {
			w.each(func(xo, oo, _ int) {
				reduceAddRow(o, x[xo:xo+inner], oo)
			})
		}
		if mean {
			reduceDivide(o, div)
		}
		return nil
	}, nil
}

// reduceRows adds every row of the walk w (ia = 0: each row into one
// output element) whose output element lies in [lo, hi) into o, in the
// walk's order, each row summed on its own (rowSum).
func reduceRows[T number](w *walk, o, x []T, lo, hi int) {
	inner := w.inner
	w.each(func(xo, oo, _ int) {
		if oo >= lo && oo < hi {
			o[oo] += rowSum(x[xo : xo+inner])
		}
	})
}

// reduceSplitElems is the size (input elements) from which a sum or mean
// that keeps its innermost axis (a bias gradient: the sum over the batch)
// splits across the executor's workers; reduceSplitCols is the fewest
// columns of that axis a part takes, a multiple of 16 so that parts write
// separate cache lines. Parts that each read a narrower slice of every row
// are slower together than one worker reading whole rows (a sum over the
// rows of [2048,1024] f32: 0.14 ms on 1 worker, 0.22-0.26 ms split in
// two; [512,4096] 0.13 against 0.18), so a part takes at least 16K
// columns, 64 KiB of f32 a row ([64,65536]: 0.58 against 0.46 ms split).
var (
	reduceSplitElems = 1 << 15 // variables for the tests
	reduceSplitCols  = 1 << 14
)

// splitReduce returns the Func of buildReduce split across n.Par's
// workers, or nil when the reduction stays on one: it must be large enough
// and either sum each walk row into one output element (splitReduceRows)
// or keep the innermost axis (w.ia == 1, so each walk row adds into a row
// of outputs). Part p adds the columns [bounds[p], bounds[p+1]) of
// every row, in the walk's order, with a walk of its own: each output
// element is the sum of the same inputs in the same order as unsplit, so
// the bits do not depend on the number of parts.
func splitReduce[T number](n *kernels.Node, xs ir.Shape, dst []int, w *walk, mean bool, div T) kernels.Func {
	workers := kernels.Workers(n.Par)
	if workers < 2 || xs.NumElements() < reduceSplitElems {
		return nil
	}
	if w.ia == 0 {
		if f := splitReduceRowSums[T](n, w, mean, div); f != nil {
			return f
		}
		return splitReduceRows[T](n, xs, dst, mean, div)
	}
	if w.ia != 1 {
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
			reduceAddRow(o, x[xo+lo:xo+hi], oo+lo)
		})
	}
	return reduceSplitFunc(n.Par, parts, body, &o, &x, mean, div)
}

// splitReduceRows returns the Func of buildReduce split across n.Par's
// workers for a reduction whose walk rows are each summed into one output
// element (ia = 0, a bias gradient over N, H and W), or nil when it has
// fewer than two output elements per worker: part p sums the rows of the
// output elements [bounds[p], bounds[p+1]), walking every row in order
// and skipping the others, so each output element adds the same rows in
// the same order as unsplit.
func splitReduceRows[T number](n *kernels.Node, xs ir.Shape, dst []int, mean bool, div T) kernels.Func {
	outs := n.Out.Shape.NumElements()
	parts := min(kernels.Workers(n.Par), outs/2)
	if parts < 2 {
		return nil
	}
	bounds := make([]int, parts+1)
	walks := make([]*walk, parts)
	for p := range parts {
		bounds[p+1] = (p + 1) * outs / parts
		walks[p] = newWalk(xs, dst, nil)
	}
	var o, x []T
	body := func(p int) { reduceRows(walks[p], o, x, bounds[p], bounds[p+1]) }
	return reduceSplitFunc(n.Par, parts, body, &o, &x, mean, div)
}

// splitReduceRowSums returns the Func of buildReduce split across n.Par's
// workers for a reduction whose walk rows are each summed into one output
// element and that has several rows an element (a bias gradient over N, H
// and W: a row per image and channel), or nil when it has no more rows
// than outputs. Part p sums the rows [bounds[p], bounds[p+1]) of the
// input, a contiguous range, each alone (rowSum) into scratch; then the
// rows' sums are added into their output elements in the walk's order,
// as the unsplit loop adds them, so the bits do not depend on the number
// of parts. A part reads the part of the input that the same worker most
// often wrote (the kernel before cut its result in contiguous ranges too),
// where parts cut by output element would each read a slice of every
// image (on the CNN step of bench/cnn28.kir, a [64,32,28,28] bias
// gradient took longer on 2 workers that way than on 1).
func splitReduceRowSums[T number](n *kernels.Node, w *walk, mean bool, div T) kernels.Func {
	inner := w.inner
	rows := n.Args[0].Shape.NumElements() / max(inner, 1)
	if inner == 0 || rows <= n.Out.Shape.NumElements() {
		return nil
	}
	parts := parParts(n.Par, rows, inner)
	if parts < 2 {
		return nil
	}
	outOf := make([]int32, 0, rows) // the output element of each row
	w.each(func(_, oo, _ int) { outOf = append(outOf, int32(oo)) })
	bounds := parBounds(rows, parts, 1)
	sums := make([]T, rows)
	var x []T
	body := func(p int) {
		for r := bounds[p]; r < bounds[p+1]; r++ {
			sums[r] = rowSum(x[r*inner : (r+1)*inner])
		}
	}
	par := n.Par
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o := kernels.View[T](out)
		x = kernels.View[T](args[0])
		par.Run(parts, body)
		x = nil
		clear(o)
		for r, s := range sums {
			o[outOf[r]] += s
		}
		if mean {
			reduceDivide(o, div)
		}
		return nil
	}
}

// reduceSplitFunc returns the Func of a split sum or mean: it points *o
// and *x (which body reads) at the call's output and input, clears the
// output, runs body's parts on par and divides for mean.
func reduceSplitFunc[T number](par kernels.Parallel, parts int, body func(int), o, x *[]T, mean bool, div T) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		*o, *x = kernels.View[T](out), kernels.View[T](args[0])
		clear(*o)
		par.Run(parts, body)
		if mean {
			reduceDivide(*o, div)
		}
		*o, *x = nil, nil
		return nil
	}
}

// reduceAddRow adds row[i] into o[oo+i]: a row whose axis is kept, added
// into a row of sums. It is that summation of sum and mean, shared by their
// kernel and fused_reduce, so both add in the same order (a row whose axis
// is reduced is summed by rowSum, rowsum.go: reduceRows, and
// fuseewMachine.accumulate).
func reduceAddRow[T number](o, row []T, oo int) {
	dst := o[oo : oo+len(row)]
	vecVec(ir.OpAdd, dst, dst, row)
}

// reduceDivide divides every element of o by div: mean's last step.
func reduceDivide[T number](o []T, div T) {
	for i := range o {
		o[i] /= div
	}
}
