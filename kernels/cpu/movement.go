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
	w := newWalk(n.Out.Shape, src, nil)
	if w.ia <= 1 || len(w.dims) == 0 {
		if f := parGather[T](n.Par, n.Out.Shape, src); f != nil {
			return f, nil // split across the workers by rows (par.go)
		}
		return gatherFunc[T](w), nil // rows read contiguous memory (or one row)
	}
	return transposeTiled[T](w, n.Par), nil
}

// transposeTile is the side of the tiles transposeTiled copies: 16 rows of
// the output by 16 of their elements.
const transposeTile = 16

// transposeSplitElems is the size (elements) from which a transpose splits
// its output rows across the executor's workers.
var transposeSplitElems = 1 << 16 // a variable for the tests

// transposeTiled returns the Func of a transpose whose output rows read x
// with a stride (w.ia > 1), copying tiles of 16 rows by 16 elements. When
// the 16 rows' offsets in x are neighbours (a matrix transpose), a tile
// reads 16 runs of 16 contiguous elements of x into a scratch tile and
// writes 16 contiguous runs of the output from it, so that neither side
// makes strided accesses, which with a power-of-two stride would all fall
// into one set of the cache. Other rows are copied element by element, a
// tile at a time. A large output is split into ranges of whole tiles of
// rows, one per worker, each with its scratch tile; every element is a
// copy, so the result is the same for any split.
func transposeTiled[T kernels.Elem](w *walk, par kernels.Parallel) kernels.Func {
	const tile = transposeTile
	offs := make([]int, 0, w.n/w.inner)
	w.each(func(_, a, _ int) { offs = append(offs, a) })
	rows, inner, ia := len(offs), w.inner, w.ia
	parts := 1
	if w.n >= transposeSplitElems {
		parts = min(kernels.Workers(par), (rows+tile-1)/tile)
	}
	bounds := make([]int, parts+1)
	for p := range parts {
		bounds[p+1] = min(rows, roundUp((p+1)*rows/parts, tile))
	}
	bounds[parts] = rows
	// dense[g]: the rows of tile g (rows g·16 ..) are 16 neighbours in x.
	dense := make([]bool, (rows+tile-1)/tile)
	for g := range dense {
		r0 := g * tile
		dense[g] = r0+tile <= rows
		for r := r0 + 1; dense[g] && r < r0+tile; r++ {
			dense[g] = offs[r] == offs[r0]+(r-r0)
		}
	}
	bufs := make([][]T, parts)
	for p := range bufs {
		bufs[p] = make([]T, tile*tile)
	}
	var o, x []T
	body := func(p int) {
		buf := bufs[p]
		for r0 := bounds[p]; r0 < bounds[p+1]; r0 += tile {
			r1 := min(r0+tile, bounds[p+1])
			for c0 := 0; c0 < inner; c0 += tile {
				c1 := min(c0+tile, inner)
				if dense[r0/tile] {
					for c := c0; c < c1; c++ {
						a := offs[r0] + c*ia
						copy(buf[(c-c0)*tile:(c-c0+1)*tile], x[a:a+tile])
					}
					for r := range tile {
						row := o[(r0+r)*inner+c0 : (r0+r)*inner+c1]
						for c := range row {
							row[c] = buf[c*tile+r]
						}
					}
					continue
				}
				for r := r0; r < r1; r++ {
					row, a := o[r*inner+c0:r*inner+c1], offs[r]+c0*ia
					for c := range row {
						row[c] = x[a]
						a += ia
					}
				}
			}
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x = kernels.View[T](out), kernels.View[T](args[0])
		kernels.Run(par, parts, body)
		o, x = nil, nil
		return nil
	}
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
// (ir.ReshapeTarget) and is n.Out's shape. A large copy splits into
// ranges of bytes across the workers (parCopy). A result that the memory
// plan put in its argument's memory (planner.Buffer.Alias) already holds
// its bytes: nothing is copied.
func buildReshape(n *kernels.Node) (kernels.Func, error) {
	cp := parCopy(n.Par, n.Out.Bytes())
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		if len(out.Data) > 0 && len(args[0].Data) > 0 && &out.Data[0] == &args[0].Data[0] {
			return nil
		}
		return cp(out, args)
	}, nil
}
