package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Splitting row-wise and elementwise kernels across the executor's workers.
//
// A kernel whose result is made of independent rows (softmax's, a norm's,
// a loss's per-row values) or elements (a unary op's) splits the rows into
// contiguous ranges, one per part, fixed in its builder from
// kernels.Workers(n.Par). Every row is computed by one part with the same
// code and in the same order as in an unsplit call, so the result is
// bitwise the same for any number of workers. A reduction across rows (a
// loss's sum over the batch) keeps its sequential order: the parts store
// the per-row values and the calling goroutine adds them in row order
// afterwards, as the unsplit kernel did.
//
// Small work stays on one worker: a part takes at least parMinWork units
// of work, a unit being about one cheap elementwise operation (a
// transcendental function counts parCostExp).

// parMinWork is the least work (in units of about one add) that a part
// takes: below twice this a kernel runs on the calling goroutine alone, so
// that waking a worker (microseconds) never costs more than it saves.
var parMinWork = 1 << 15 // a variable for the tests

// parCostExp is the work of one transcendental function in units of an
// add: about that of the float64 route through the math package (f64,
// erf, the exact gelu); vmath's f32 exp costs a few adds, so for it the
// estimate errs towards splitting.
const parCostExp = 16

// parAlign is the number of elements the bounds of an elementwise split
// are multiples of: 64 float32s are four cache lines, so parts never write
// the same line, and a multiple of every vector width, so a vectorized
// loop sees the same whole vectors and the same tail in a part as in an
// unsplit call.
const parAlign = 64

// parPartsPerWorker is how many parts per worker a large kernel splits
// into. Two steps of a plan often run at once (the loss beside the
// gradient); a worker that finishes its own step's parts helps with the
// other's still unclaimed ones (exec/cpu's pool), which it can only do if
// there are more parts than workers. On the softmax step (a loss and a
// softmax gradient side by side), 4 parts a worker against 1 took the
// 2-worker step from 6.2-6.5 to 4.8-5.4 ms. Cores do not run alike
// either: in a traced 2-worker softmax step one vCPU took 330-390 µs a
// part of fused_softmax, the other 560-630, and a worker done with its
// own block can only take what is left of the other's; 8 parts a worker
// against 4 took that step from 5.23-5.36 to 4.97-5.10 ms (three
// alternated rounds), the GPT and MLP steps 1-4% and 2-3% lower, the CNN
// step unchanged.
const parPartsPerWorker = 8

// parParts returns how many parts rows of rowWork units each split into:
// at most parPartsPerWorker per worker and one per row, and each at least
// parMinWork units; 1 when par has one worker.
func parParts(par kernels.Parallel, rows, rowWork int) int {
	w := kernels.Workers(par)
	if w < 2 || rows < 2 {
		return 1
	}
	return max(1, min(parPartsPerWorker*w, rows, rows*max(rowWork, 1)/parMinWork))
}

// parBounds returns parts+1 bounds splitting [0, rows) into parts nearly
// equal ranges, each starting at a multiple of align.
func parBounds(rows, parts, align int) []int {
	b := make([]int, parts+1)
	for p := 1; p < parts; p++ {
		b[p] = min(rows, roundUp(p*rows/parts, align))
	}
	b[parts] = rows
	return b
}

// parRowsFunc computes rows [lo, hi) of one call of a kernel as part part
// (its scratch is the part's own). It returns the error of the first bad
// row of its range.
type parRowsFunc func(part int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error

// parRows returns the Func that computes rows [0, rows) with f, split into
// parts ranges (starting at multiples of align) that run on par's workers;
// with one part f runs on the calling goroutine over all rows. Its error
// is that of the lowest part that failed: the first bad row, as an unsplit
// loop finds it.
func parRows(par kernels.Parallel, parts, rows, align int, f parRowsFunc) kernels.Func {
	if parts <= 1 {
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			return f(0, out, args, 0, rows)
		}
	}
	bounds := parBounds(rows, parts, align)
	errs := make([]error, parts)
	var (
		o kernels.Tensor
		a []kernels.Tensor
	)
	body := func(p int) { errs[p] = f(p, o, a, bounds[p], bounds[p+1]) }
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a = out, args
		par.Run(parts, body)
		o, a = kernels.Tensor{}, nil
		var err error
		for p, e := range errs {
			if err == nil {
				err = e
			}
			errs[p] = nil
		}
		return err
	}
}

// parUnary returns the Func of a unary elementwise kernel whose code is
// row, o[i] = f(x[i]), over count elements of cost units each, split into
// ranges of whole parAlign blocks across par's workers when large enough.
// row must compute each element alone (what every elementwise row
// function does), so any split gives the same bits.
func parUnary[T kernels.Elem](par kernels.Parallel, count, cost int, row func(o, x []T)) kernels.Func {
	parts := parParts(par, count, cost)
	return parRows(par, parts, count, parAlign, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		if lo < hi {
			row(kernels.View[T](out)[lo:hi], kernels.View[T](args[0])[lo:hi])
		}
		return nil
	})
}

// parBinary is parUnary for an elementwise kernel of two operands of the
// result's shape (a gradient: o[i] = f(dy[i], x[i])).
func parBinary[T kernels.Elem](par kernels.Parallel, count, cost int, row func(o, a, b []T)) kernels.Func {
	parts := parParts(par, count, cost)
	return parRows(par, parts, count, parAlign, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		if lo < hi {
			row(kernels.View[T](out)[lo:hi], kernels.View[T](args[0])[lo:hi], kernels.View[T](args[1])[lo:hi])
		}
		return nil
	})
}

// parTrailing wraps the builder b of a reduction of one operand over
// {axes}: when the axes are the operand's trailing ones (each leading
// index owns a contiguous slice of the operand and of the result) and the
// work is large, the leading rows split into parts, and each part runs a
// kernel that b builds for its rows alone (the operand reshaped to [1,
// ..., 1, rows, trailing...]) on its slices of the tensors. Each slice is
// then reduced by the very code and in the very order of an unsplit call.
// cost is the work per reduced element.
func parTrailing(b kernels.Builder, cost int) kernels.Builder {
	return func(n *kernels.Node) (kernels.Func, error) {
		xs := n.Args[0].Shape
		axes, err := ir.ReduceAxes(n.Attrs, len(xs))
		if err != nil || len(axes) == 0 || len(n.Args) != 1 {
			return b(n)
		}
		start := len(xs) - len(axes)
		for i, ax := range axes {
			if ax != start+i {
				return b(n)
			}
		}
		rows, count := xs[:start].NumElements(), xs[start:].NumElements()
		parts := parParts(n.Par, rows, count*cost)
		if parts < 2 {
			return b(n)
		}
		outRow := n.Out.Shape.NumElements() / rows
		inSize, outSize := n.Args[0].DType.Size(), n.Out.DType.Size()
		bounds := parBounds(rows, parts, 1)
		fs := make([]kernels.Func, parts)
		outs := make([]kernels.Tensor, parts)
		ins := make([][]kernels.Tensor, parts)
		for p := range fs {
			sub := make(ir.Shape, len(xs))
			for i := range sub {
				sub[i] = 1
			}
			sub[start-1] = bounds[p+1] - bounds[p]
			copy(sub[start:], xs[start:])
			in := ir.Type{DType: n.Args[0].DType, Shape: sub}
			out, err := n.Op.Info().Infer([]ir.Type{in}, n.Attrs)
			if err != nil {
				return nil, err
			}
			if fs[p], err = b(&kernels.Node{Op: n.Op, Attrs: n.Attrs, Args: []ir.Type{in}, Out: out, Step: n.Step}); err != nil {
				return nil, err
			}
			outs[p] = kernels.Tensor{Type: out}
			ins[p] = []kernels.Tensor{{Type: in}}
		}
		return parRows(n.Par, parts, rows, 1, func(p int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
			o, a := outs[p], ins[p]
			o.Data = out.Data[lo*outRow*outSize : hi*outRow*outSize]
			a[0].Data = args[0].Data[lo*count*inSize : hi*count*inSize]
			err := fs[p](o, a)
			a[0].Data = nil
			return err
		}), nil
	}
}

// parCopy returns the Func that copies its argument's size bytes into its
// output, in ranges of whole cache lines across par's workers when large
// (a byte is a quarter of a unit of work).
func parCopy(par kernels.Parallel, size int) kernels.Func {
	const line = 64
	parts := parParts(par, size/line, line/4)
	return parRows(par, parts, size, line, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		copy(out.Data[lo:hi], args[0].Data[lo:hi])
		return nil
	})
}

// parWalk returns the Func of a binary elementwise kernel over the walk w
// (its output and two broadcast operands) whose row code is row (out[j] =
// f(a[ao+j*ia], b[bo+j*ib])), split across par's workers, or nil when it
// stays on one: too little work (cost units per element), or a walk of
// more than one outer dimension. A walk of one row (equal shapes, a scalar
// operand) splits into ranges of whole parAlign blocks; a walk of rows (a
// bias add) splits into ranges of whole rows.
func parWalk[T number](par kernels.Parallel, w *walk, cost int, row func(out, a, b []T, ao, bo, ia, ib int)) kernels.Func {
	var rows, align, inner int
	switch len(w.dims) {
	case 0:
		rows, align, inner = w.n, parAlign, 1
	case 1:
		rows, align, inner = w.dims[0], 1, w.inner
	default:
		return nil
	}
	parts := parParts(par, rows, inner*cost)
	if parts < 2 {
		return nil
	}
	return parRows(par, parts, rows, align, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, a, b := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		if len(w.dims) == 0 {
			row(o[lo:hi], a, b, lo*w.ia, lo*w.ib, w.ia, w.ib)
			return nil
		}
		sa, sb := w.sa[0], w.sb[0]
		for r := lo; r < hi; r++ {
			row(o[r*inner:(r+1)*inner], a, b, r*sa, r*sb, w.ia, w.ib)
		}
		return nil
	})
}

// parGather returns the Func that copies the rows of a strided view of its
// argument (strides src along the output shape out, each row contiguous
// or one element: a transpose that keeps the innermost axis) into its
// output, split by whole rows across par's workers, or nil when it stays
// on one. Each part finds its first row with a cursor of its own.
func parGather[T kernels.Elem](par kernels.Parallel, out ir.Shape, src []int) kernels.Func {
	w := newWalk(out, src, nil)
	if w.n == 0 {
		return nil
	}
	rows, inner := w.n/w.inner, w.inner
	parts := parParts(par, rows, inner)
	if parts < 2 {
		return nil
	}
	curs := make([]fuseewCursor, parts)
	for p := range curs {
		curs[p] = newFuseewCursor(out, src)
	}
	return parRows(par, parts, rows, 1, func(p int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		c := &curs[p]
		c.seek(lo * inner)
		for r := lo; r < hi; r++ {
			gatherRow(o[r*inner:(r+1)*inner], x, c.row, c.ia)
			c.advance(inner)
		}
		return nil
	})
}
