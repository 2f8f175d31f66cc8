package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels of the shape and data movement family (ir/ops_movement.go).
//
// The pure moves (squeeze, unsqueeze, flip, concat, stack, slice, pad and
// the indexed reads gather, index_select, embedding) exist for every dtype;
// the indexed sums (scatter_add, index_add) for the numeric ones. Reads that
// follow an index check it first and return an error naming the op, the
// position in the index, the value and the bound; PyTorch rejects negative
// indices in all of these ops, and so does kiln.
//
// scatter_add and index_add are deterministic: each output element is its
// x element plus its contributions added one at a time, left to right, in
// increasing position of the contributing index element (row-major over
// index for scatter_add, increasing i for index_add), in the element type.
// A backend without atomics gets the same numbers by gathering, for each
// output element, its sources in that order.

func init() {
	for _, op := range []ir.Op{ir.OpSqueeze, ir.OpUnsqueeze} {
		// A squeeze or unsqueeze keeps the row-major order: a copy.
		registerAll(op, buildReshape, buildReshape, buildReshape, buildReshape, buildReshape)
	}
	registerAll(ir.OpFlip, buildFlipMove[float32], buildFlipMove[float64], buildFlipMove[int32], buildFlipMove[int64], buildFlipMove[bool])
	for _, dt := range []ir.DType{ir.F32, ir.F64, ir.I32, ir.I64, ir.Bool} {
		register(ir.OpConcat, dt, buildConcatMove)
		register(ir.OpStack, dt, buildConcatMove)
	}
	registerAll(ir.OpSlice, buildSliceMove[float32], buildSliceMove[float64], buildSliceMove[int32], buildSliceMove[int64], buildSliceMove[bool])
	registerAll(ir.OpPad, buildPadMove[float32], buildPadMove[float64], buildPadMove[int32], buildPadMove[int64], buildPadMove[bool])
	registerAll(ir.OpGather, buildGatherMove[float32], buildGatherMove[float64], buildGatherMove[int32], buildGatherMove[int64], buildGatherMove[bool])
	registerAll(ir.OpIndexSelect, buildSelectMove[float32], buildSelectMove[float64], buildSelectMove[int32], buildSelectMove[int64], buildSelectMove[bool])
	registerAll(ir.OpEmbedding, buildSelectMove[float32], buildSelectMove[float64], buildSelectMove[int32], buildSelectMove[int64], buildSelectMove[bool])
	for _, op := range []ir.Op{ir.OpScatterAdd, ir.OpIndexAdd} {
		register(op, ir.F32, buildIndexedAddMove[float32])
		register(op, ir.F64, buildIndexedAddMove[float64])
		register(op, ir.I32, buildIndexedAddMove[int32])
		register(op, ir.I64, buildIndexedAddMove[int64])
	}
}

// moveStrided returns a Func that fills out, in order, from the strided
// view of its argument that w describes, starting at element base. Strides
// may be negative (flip).
func moveStrided[T kernels.Elem](w *walk, base int) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		inner, ia := w.inner, w.ia
		w.each(func(oo, ao, _ int) {
			gatherRow(o[oo:oo+inner], x, base+ao, ia)
		})
		return nil
	}
}

// buildFlipMove builds flip {axes}: a strided read of x that starts at the
// last element of each flipped axis and walks it backwards.
func buildFlipMove[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[0].Shape
	axes, err := ir.ReduceAxes(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	st := xs.Strides()
	base := 0
	for _, ax := range axes {
		if xs[ax] > 0 {
			base += (xs[ax] - 1) * st[ax]
		}
		st[ax] = -st[ax]
	}
	return moveStrided[T](newWalk(xs, st, nil), base), nil
}

// buildSliceMove builds slice {axis, start, end, step}: a strided read of x
// from start with the axis stride times step.
func buildSliceMove[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	base, st, err := ir.SliceView(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	return moveStrided[T](newWalk(n.Out.Shape, st, nil), base), nil
}

// buildConcatMove builds concat and stack {axis}, for any dtype, as byte
// copies: for each index of the axes before axis, each argument in turn
// contributes one contiguous block (its slice of that index) to the
// result's contiguous block.
func buildConcatMove(n *kernels.Node) (kernels.Func, error) {
	os := n.Out.Shape
	axis, err := ir.Axis(n.Attrs, len(os))
	if err != nil {
		return nil, err
	}
	outer := os[:axis].NumElements()
	inner := os[axis+1:].NumElements() * n.Out.DType.Size()
	chunks := make([]int, len(n.Args))
	for i, a := range n.Args {
		chunks[i] = inner // stack: one index of the new axis
		if n.Op == ir.OpConcat {
			chunks[i] *= a.Shape[axis]
		}
	}
	row := os[axis] * inner
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		for k := range outer {
			off := k * row
			for i, c := range chunks {
				copy(out.Data[off:off+c], args[i].Data[k*c:(k+1)*c])
				off += c
			}
		}
		return nil
	}, nil
}

// moveValueOf converts pad's fill value to T: integers truncate toward
// zero, bool is v != 0.
func moveValueOf[T kernels.Elem](v float64) T {
	var z T
	switch p := any(&z).(type) {
	case *float32:
		*p = float32(v)
	case *float64:
		*p = v
	case *int32:
		*p = int32(v)
	case *int64:
		*p = int64(v)
	case *bool:
		*p = v != 0
	}
	return z
}

// buildPadMove builds pad {pads, value}: the result is filled with value
// (unless x covers it) and the part of x that survives the crops is copied
// to its place: along axis i, x index j lands at j + before[i] and survives
// when 0 <= j + before[i] < size + before[i] + after[i].
func buildPadMove[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	xs, os := n.Args[0].Shape, n.Out.Shape
	before, after, err := ir.PadWidths(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	value := moveValueOf[T](n.Attrs.Float("value", 0))
	xst, ost := xs.Strides(), os.Strides()
	region := make(ir.Shape, len(xs))
	xbase, obase, full := 0, 0, true
	for i, d := range xs {
		lo, hi := max(0, -before[i]), min(d, d+after[i])
		region[i] = max(0, hi-lo)
		xbase += lo * xst[i]
		obase += (lo + before[i]) * ost[i]
		full = full && region[i] == os[i]
	}
	w := newWalk(region, ost, xst)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		if !full {
			for i := range o {
				o[i] = value
			}
		}
		inner, ia, ib := w.inner, w.ia, w.ib
		w.each(func(_, ao, bo int) {
			oo, xo := obase+ao, xbase+bo
			if ia == 1 && ib == 1 {
				copy(o[oo:oo+inner], x[xo:xo+inner])
				return
			}
			for j := range inner {
				o[oo+j*ia] = x[xo+j*ib]
			}
		})
		return nil
	}, nil
}

// buildGatherMove builds gather {axis} for index dtype i32 or i64.
func buildGatherMove[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	switch n.Args[1].DType {
	case ir.I32:
		return gatherMove[T, int32](n)
	case ir.I64:
		return gatherMove[T, int64](n)
	}
	return nil, fmt.Errorf("index must be i32 or i64, found %s", n.Args[1])
}

// gatherMove walks index (and the result, of the same shape) in row-major
// order together with x's offset of the same position with the axis
// coordinate 0; the index value times x's axis stride completes it.
func gatherMove[T kernels.Elem, I integer](n *kernels.Node) (kernels.Func, error) {
	xs, is := n.Args[0].Shape, n.Args[1].Shape
	axis, err := ir.Axis(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	st := xs.Strides()
	step, size := st[axis], xs[axis]
	st[axis] = 0
	w := newWalk(is, st, nil)
	op := n.Op
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x, idx := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[I](args[1])
		inner, ia := w.inner, w.ia
		var err error
		w.each(func(io, ao, _ int) {
			if err != nil {
				return
			}
			for j, k := range idx[io : io+inner] {
				if k < 0 || int64(k) >= int64(size) {
					err = kernels.IndexError(op, "index", is, io+j, int64(k), axis, size)
					return
				}
				o[io+j] = x[ao+j*ia+int(k)*step]
			}
		})
		return err
	}, nil
}

// moveRows describes x as [outer, size, inner] around the indexed axis:
// index_select and index_add on axis, embedding on axis 0 of the table.
type moveRows struct {
	op                 ir.Op
	axis               int
	outer, size, inner int
	is                 ir.Shape // the index's shape, for errors
}

func newMoveRows(n *kernels.Node) (moveRows, error) {
	xs := n.Args[0].Shape
	axis := 0
	if n.Op != ir.OpEmbedding {
		var err error
		if axis, err = ir.Axis(n.Attrs, len(xs)); err != nil {
			return moveRows{}, err
		}
	}
	return moveRows{n.Op, axis, xs[:axis].NumElements(), xs[axis], xs[axis+1:].NumElements(), n.Args[1].Shape}, nil
}

// moveCheckRows returns the error for the first index outside [0, size).
func moveCheckRows[I integer](r *moveRows, idx []I) error {
	for i, k := range idx {
		if k < 0 || int64(k) >= int64(r.size) {
			what := "index"
			if r.op == ir.OpEmbedding {
				what = "indices"
			}
			return kernels.IndexError(r.op, what, r.is, i, int64(k), r.axis, r.size)
		}
	}
	return nil
}

// buildSelectMove builds index_select {axis} and embedding: for every
// outer index a and every i, the result's block (a, i) is x's block
// (a, index[i]).
func buildSelectMove[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	r, err := newMoveRows(n)
	if err != nil {
		return nil, err
	}
	m := n.Args[1].Shape.NumElements()
	switch n.Args[1].DType {
	case ir.I32:
		return selectMove[T, int32](r, n.Par, m), nil
	case ir.I64:
		return selectMove[T, int64](r, n.Par, m), nil
	}
	return nil, fmt.Errorf("index must be i32 or i64, found %s", n.Args[1])
}

// selectMove returns the Func of index_select or embedding for m indices
// of type I: the indices are checked first, then the result's blocks
// (a, i), in row-major order, are copied in ranges of whole blocks across
// par's workers (par.go).
func selectMove[T kernels.Elem, I integer](r moveRows, par kernels.Parallel, m int) kernels.Func {
	inner := r.inner
	rows := r.outer * m
	f := parRows(par, parParts(par, rows, inner), rows, 1, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, x, idx := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[I](args[1])
		for b := lo; b < hi; b++ {
			a, i := b/m, b%m
			src := (a*r.size + int(idx[i])) * inner
			copy(o[b*inner:(b+1)*inner], x[src:src+inner])
		}
		return nil
	})
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		if err := moveCheckRows(&r, kernels.View[I](args[1])); err != nil {
			return err
		}
		return f(out, args)
	}
}

// buildIndexedAddMove builds scatter_add and index_add {axis}, for index
// dtype i32 or i64.
func buildIndexedAddMove[T number](n *kernels.Node) (kernels.Func, error) {
	i64 := false
	switch n.Args[1].DType {
	case ir.I32:
	case ir.I64:
		i64 = true
	default:
		return nil, fmt.Errorf("index must be i32 or i64, found %s", n.Args[1])
	}
	if n.Op == ir.OpScatterAdd {
		if i64 {
			return scatterAddMove[T, int64](n)
		}
		return scatterAddMove[T, int32](n)
	}
	r, err := newMoveRows(n)
	if err != nil {
		return nil, err
	}
	m := n.Args[1].Shape.NumElements()
	if i64 {
		return indexAddMove[T, int64](r, n.Par, m), nil
	}
	return indexAddMove[T, int32](r, n.Par, m), nil
}

// scatterAddMove copies x to the result, then walks index in row-major
// order together with the result's offset of the same position with the
// axis coordinate 0 and src's offset of the same position, adding each src
// element where its index points. Each result element therefore receives
// its contributions in increasing (row-major) position of index.
func scatterAddMove[T number, I integer](n *kernels.Node) (kernels.Func, error) {
	xs, is, ss := n.Args[0].Shape, n.Args[1].Shape, n.Args[2].Shape
	axis, err := ir.Axis(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	st := xs.Strides()
	step, size := st[axis], xs[axis]
	st[axis] = 0
	w := newWalk(is, st, ss.Strides())
	op := n.Op
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		idx, src := kernels.View[I](args[1]), kernels.View[T](args[2])
		copy(o, x)
		inner, ia, ib := w.inner, w.ia, w.ib
		var err error
		w.each(func(io, ao, bo int) {
			if err != nil {
				return
			}
			for j, k := range idx[io : io+inner] {
				if k < 0 || int64(k) >= int64(size) {
					err = kernels.IndexError(op, "index", is, io+j, int64(k), axis, size)
					return
				}
				o[ao+j*ia+int(k)*step] += src[bo+j*ib]
			}
		})
		return err
	}, nil
}

// indexAddMove copies x to the result, then for every outer index a and
// i = 0, 1, ... in turn adds src's block (a, i) to the result's block
// (a, index[i]), so each result element receives its contributions in
// increasing i. Large blocks split by columns across par's workers
// (par.go): part p copies and adds the columns [lo, hi) of every block,
// in the same order.
func indexAddMove[T number, I integer](r moveRows, par kernels.Parallel, m int) kernels.Func {
	inner := r.inner
	const align = 16 // a cache line of f32
	parts := min(parParts(par, r.outer*max(m, r.size), inner), inner/align)
	f := parRows(par, max(parts, 1), inner, align, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		idx, src := kernels.View[I](args[1]), kernels.View[T](args[2])
		for b := 0; b < len(o); b += inner {
			copy(o[b+lo:b+hi], x[b+lo:b+hi])
		}
		for a := range r.outer {
			for i, k := range idx {
				dst := o[(a*r.size+int(k))*inner:][lo:hi]
				s := src[(a*m+i)*inner:][lo:hi]
				for j, v := range s {
					dst[j] += v
				}
			}
		}
		return nil
	})
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		if err := moveCheckRows(&r, kernels.View[I](args[1])); err != nil {
			return err
		}
		return f(out, args)
	}
}
