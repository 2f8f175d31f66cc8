package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Kernels of the fused pattern ops (ir/ops_fused_patterns.go): softmax_grad,
// log_softmax_grad, max_grad and softmax_ce_grad. Each does, element for
// element and in the same order, the arithmetic of the ops it replaces, as
// their own kernels do it (products rounded to T before they are added,
// sums from zero in T in the sum kernel's order: rowSum's along a row,
// rowsum.go, index order down a column), so a
// fused graph gives the unfused results bit for bit; what changes is the
// number of passes over memory and of buffers written.

func init() {
	for _, op := range []ir.Op{ir.OpSoftmaxGrad, ir.OpLogSoftmaxGrad} {
		register(op, ir.F32, fusepatBuildSoftmaxGrad[float32])
		register(op, ir.F64, fusepatBuildSoftmaxGrad[float64])
	}
	register(ir.OpMaxGrad, ir.F32, fusepatBuildMaxGrad[float32])
	register(ir.OpMaxGrad, ir.F64, fusepatBuildMaxGrad[float64])
	register(ir.OpSoftmaxCEGrad, ir.F32, fusepatBuildSoftmaxCEGrad[float32])
	register(ir.OpSoftmaxCEGrad, ir.F64, fusepatBuildSoftmaxCEGrad[float64])
}

// fusepatBuildSoftmaxGrad builds softmax_grad(dy, y) {axis}, y * (dy -
// sum(dy*y)), or log_softmax_grad(dy, y) {axis}, dy - exp(y) * sum(dy), with
// the tensors viewed as [outer, n, inner] and n the axis. Per slice: one
// pass sums dy*y (each product rounded) or dy, along a row in rowSum's
// order (rowsum.go), down a column in index order; one pass writes the
// result. For the last axis the slices are contiguous rows;
// otherwise the Func sweeps the axis with all inner columns at once, the
// sums in scratch made here.
func fusepatBuildSoftmaxGrad[T float](n *kernels.Node) (kernels.Func, error) {
	logGrad := false
	switch n.Op {
	case ir.OpSoftmaxGrad:
	case ir.OpLogSoftmaxGrad:
		logGrad = true
	default:
		return nil, fmt.Errorf("%s is not softmax_grad or log_softmax_grad", n.Op)
	}
	ys := n.Out.Shape
	axis, err := ir.Axis(n.Attrs, len(ys))
	if err != nil {
		return nil, err
	}
	outer, dim, inner := ys[:axis].NumElements(), ys[axis], ys[axis+1:].NumElements()
	// Split across the workers by whole slices (par.go): each is computed
	// as in an unsplit call.
	parts := parParts(n.Par, outer, 3*dim*inner)
	if inner == 1 {
		diffs := make([][]T, parts) // each part's dy - s of a row
		for p := range diffs {
			diffs[p] = make([]T, dim)
		}
		// A large result is written with streaming stores (as
		// fused_elementwise's, fuseewStreamBytes): no line of it is read
		// before it is written.
		var mul func(out, a, b []T)
		if n.Out.Bytes() >= fuseewStreamBytes {
			mul = ewVecVecFunc[T](ir.OpMul, true)
		}
		return parRows(n.Par, parts, outer, fusepatBlock, func(part int, out kernels.Tensor, args []kernels.Tensor, r0, r1 int) error {
			o, dy, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
			if dim == 0 {
				return nil
			}
			lo, hi := r0*dim, r1*dim
			fusepatSoftmaxGradRows(o[lo:hi], dy[lo:hi], y[lo:hi], dim, logGrad, diffs[part], mul, nil)
			if mul != nil {
				storeFence()
			}
			return nil
		}), nil
	}
	sums := make([][]T, parts)
	for p := range sums {
		sums[p] = make([]T, inner)
	}
	return parRows(n.Par, parts, outer, 1, func(part int, out kernels.Tensor, args []kernels.Tensor, r0, r1 int) error {
		o, dy, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		sum := sums[part]
		for r := r0; r < r1; r++ {
			clear(sum)
			for k := range dim {
				at := (r*dim + k) * inner
				dr, yr := dy[at:at+inner], y[at:at+inner]
				if logGrad {
					for j, d := range dr {
						sum[j] += d
					}
					continue
				}
				for j, d := range dr {
					sum[j] += T(d * yr[j])
				}
			}
			for k := range dim {
				at := (r*dim + k) * inner
				or, dr, yr := o[at:at+inner], dy[at:at+inner], y[at:at+inner]
				for j, d := range dr {
					if logGrad {
						or[j] = d - T(exp(yr[j])*sum[j])
					} else {
						or[j] = yr[j] * (d - sum[j])
					}
				}
			}
		}
		return nil
	}), nil
}

// fusepatSoftmaxGradRows writes softmax_grad (or, with logGrad,
// log_softmax_grad) of the consecutive rows of length dim > 0 of dy and y
// into out, fusepatBlock rows at a time: their sums of dy*y (or dy)
// (fusepatRowSums), then each row (fusepatSoftmaxGradRow, with scratch
// diff of dim and mul as it takes them, or fusepatLogSoftmaxGradRow).
// ahead, when not nil, is called with each row's index before the row is
// written (a fused kernel's prefetching, rowAhead.row).
func fusepatSoftmaxGradRows[T float](out, dy, y []T, dim int, logGrad bool, diff []T, mul func(out, a, b []T), ahead func(row int)) {
	var sums [fusepatBlock]T
	rows := len(dy) / dim
	for r := 0; r < rows; r += fusepatBlock {
		k := min(fusepatBlock, rows-r)
		lo, hi := r*dim, (r+k)*dim
		if logGrad {
			fusepatRowSums(sums[:k], dy[lo:hi], nil, dim)
		} else {
			fusepatRowSums(sums[:k], dy[lo:hi], y[lo:hi], dim)
		}
		for j, s := range sums[:k] {
			if ahead != nil {
				ahead(r + j)
			}
			a, b := lo+j*dim, lo+(j+1)*dim
			if logGrad {
				fusepatLogSoftmaxGradRow(out[a:b], dy[a:b], y[a:b], s)
			} else {
				fusepatSoftmaxGradRow(out[a:b], dy[a:b], y[a:b], s, diff, mul)
			}
		}
	}
}

// fusepatBlock is the number of rows a softmax or softmax_grad kernel
// takes at a time: their sums first, then their results.
const fusepatBlock = 4

// fusepatRowSums sets sums[j] to the sum of row j of the len(sums)
// consecutive rows of length dim in dy, of dy*y (each product rounded to
// T) when y is non-nil, each in rowSum's order (rowsum.go), as the sum
// kernel adds a row.
func fusepatRowSums[T float](sums, dy, y []T, dim int) {
	for j := range sums {
		d := dy[j*dim : (j+1)*dim]
		if y == nil {
			sums[j] = rowSum(d)
		} else {
			sums[j] = rowDot(d, y[j*dim:(j+1)*dim])
		}
	}
}

// fusepatSoftmaxGradRow writes y * (dy - s) for one row whose sum of dy*y
// is s: dy - s into diff (as long as the row), then the products, each a
// vector call of sub's and mul's row code (the same IEEE operations, each
// rounded); mul, when not nil, is mul's row code with streaming stores.
// out may be dy's or y's memory.
func fusepatSoftmaxGradRow[T float](out, dy, y []T, s T, diff []T, mul func(out, a, b []T)) {
	diff = diff[:len(dy)]
	vecScalar(ir.OpSub, diff, dy, s)
	if mul != nil {
		mul(out[:len(dy)], y[:len(dy)], diff)
		return
	}
	vecVec(ir.OpMul, out[:len(dy)], y, diff)
}

// fusepatLogSoftmaxGradRow writes dy - exp(y) * s for one row whose sum of
// dy is s.
func fusepatLogSoftmaxGradRow[T float](out, dy, y []T, s T) {
	var buf [expBlock]T // exp(y), a vector call a block (out may be dy's memory)
	for i := 0; i < len(dy); i += expBlock {
		b := buf[:min(expBlock, len(dy)-i)]
		copy(b, y[i:])
		expRow(b)
		for j, e := range b {
			out[i+j] = dy[i+j] - T(e*s)
		}
	}
}

// fusepatBuildMaxGrad builds max_grad(dy, x, y) {axes, keepdims, min}, dy
// of y's shape or a scalar for every slice: for every slice of x over axes, one pass counts the elements equal to the
// slice's y (adding 1 in T, as the unfused sum of the 0/1 mask does), and
// one pass writes q*1 where x == y and q*0 elsewhere, q = dy/count. A NaN
// in the slice makes y NaN, which equals nothing: count 0, q = dy/0 and
// every element q*0 = NaN, as the unfused rule gives. Slices over trailing
// axes are contiguous rows; others are gathered through precomputed
// offsets.
func fusepatBuildMaxGrad[T float](n *kernels.Node) (kernels.Func, error) {
	xs := n.Args[1].Shape
	axes, err := ir.ReduceAxes(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	dyStep := 1 // 0: one scalar dy for every slice
	if len(n.Args[0].Shape) == 0 && len(n.Args[2].Shape) != 0 {
		dyStep = 0
	}
	trailing := true
	for i, ax := range axes {
		trailing = trailing && ax == len(xs)-len(axes)+i
	}
	if trailing {
		size := xs[len(xs)-len(axes):].NumElements()
		exact := size <= 1<<24 // every count up to size is exact in f32 and f64
		rows := n.Args[2].Shape.NumElements()
		parts := parParts(n.Par, rows, 2*size) // split by rows (par.go)
		return parRows(n.Par, parts, rows, 1, func(_ int, out kernels.Tensor, args []kernels.Tensor, r0, r1 int) error {
			o, dy, x, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
			for r := r0; r < r1; r++ {
				lo, hi := r*size, (r+1)*size
				fusepatMaxGradRow(o[lo:hi], x[lo:hi], y[r], dy[r*dyStep], exact)
			}
			return nil
		}), nil
	}
	bases, elems, err := reduceSlices(xs, n.Attrs)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, dy, x, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
		var one, zero T = 1, 0
		for r, b := range bases {
			yv := y[r]
			var count T
			for _, e := range elems {
				if x[b+e] == yv {
					count += one
				}
			}
			q := dy[r*dyStep] / count
			for _, e := range elems {
				if x[b+e] == yv {
					o[b+e] = q * one
				} else {
					o[b+e] = q * zero
				}
			}
		}
		return nil
	}, nil
}

// fusepatMaxGradRow writes the max/min gradient of one contiguous slice x
// whose result is yv and whose incoming gradient is d. With exact, the
// ties are counted in an int: the same number as adding 1 in T, since
// the slice is short enough (at most 2^24 elements) for every partial
// count to be exact in T. A single hit, the usual case, is remembered, so
// that the second pass only fills the row with q*0 and stores q*1 at the
// hit instead of comparing every element again.
func fusepatMaxGradRow[T float](out, x []T, yv, d T, exact bool) {
	var one, zero T = 1, 0
	var count T
	at := -1
	if exact {
		n := 0
		for i, v := range x {
			if v == yv {
				if n == 0 {
					at = i
				}
				n++
			}
		}
		count = T(n)
		if n != 1 {
			at = -1
		}
	} else {
		for _, v := range x {
			if v == yv {
				count += one
			}
		}
	}
	q := d / count
	hit, miss := q*one, q*zero
	out = out[:len(x)]
	if at >= 0 {
		fillRow(out, miss)
		out[at] = hit
		return
	}
	for i, v := range x {
		o := miss
		if v == yv {
			o = hit
		}
		out[i] = o
	}
}

// fusepatBuildSoftmaxCEGrad builds softmax_ce_grad(logits [N,C], target,
// dy) {reduction}: per row, softmax(logits) by the softmax kernel's two
// passes (softmaxStats, then softmaxNorm's division), finished in the
// second pass into (p - onehot)*scale for integer labels or (p*sum(target)
// - target)*scale for probabilities, scale = dy*(1/N) (mean), dy (sum) or
// dy[n] (none); without dy the scale is 1, and x*1 is x, so the result is
// the unscaled difference's bits. A label outside [0,C) is an error, as
// one_hot's.
func fusepatBuildSoftmaxCEGrad[T float](n *kernels.Node) (kernels.Func, error) {
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	var mode int
	switch r := n.Attrs.Str("reduction", "mean"); r {
	case "mean":
		mode = fusepatMean
	case "sum":
		mode = fusepatSum
	case "none":
		mode = fusepatNone
	default:
		return nil, fmt.Errorf(`reduction must be "mean", "sum" or "none", found %q`, r)
	}
	inv := T(1 / float64(max(rows, 1))) // the unfused rule's const, rounded to T
	noDy := len(n.Args) == 2
	scale := func(dy []T, r int) T {
		if noDy {
			return 1
		}
		switch mode {
		case fusepatMean:
			return dy[0] * inv
		case fusepatSum:
			return dy[0]
		}
		return dy[r]
	}
	// Split across the workers by rows (par.go).
	parts := parParts(n.Par, rows, classes*2*parCostExp)
	switch n.Args[1].DType {
	case ir.I32:
		return parRows(n.Par, parts, rows, 1, fusepatSoftmaxCELabels[T, int32](classes, scale)), nil
	case ir.I64:
		return parRows(n.Par, parts, rows, 1, fusepatSoftmaxCELabels[T, int64](classes, scale)), nil
	case n.Out.DType:
		return parRows(n.Par, parts, rows, 1, fusepatSoftmaxCEProbs[T](classes, scale)), nil
	}
	return nil, fmt.Errorf("target must be i32 or i64 labels or %s probabilities, found %s", n.Out.DType, n.Args[1])
}

// The reductions of softmax_ce_grad.
const (
	fusepatMean = iota
	fusepatSum
	fusepatNone
)

// fusepatSoftmaxCELabels returns softmax_ce_grad's code over rows [lo,
// hi) for labels of type L.
func fusepatSoftmaxCELabels[T float, L integer](classes int, scale func([]T, int) T) parRowsFunc {
	return func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, x, labels := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[L](args[1])
		var dy []T
		if len(args) > 2 {
			dy = kernels.View[T](args[2])
		}
		if classes == 0 {
			return nil
		}
		for r := lo; r < hi; r++ {
			l := labels[r]
			if err := checkLabel(l, r, classes); err != nil {
				return err
			}
			sc := scale(dy, r)
			or, xr := o[r*classes:(r+1)*classes], x[r*classes:(r+1)*classes]
			_, s := softmaxStats(or, xr)
			for c := range xr {
				p := or[c] / s
				if c == int(l) {
					p -= 1
				}
				or[c] = p * sc
			}
		}
		return nil
	}
}

// fusepatSoftmaxCEProbs returns softmax_ce_grad's code over rows [lo, hi)
// for probability targets.
func fusepatSoftmaxCEProbs[T float](classes int, scale func([]T, int) T) parRowsFunc {
	return func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, x, t := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		var dy []T
		if len(args) > 2 {
			dy = kernels.View[T](args[2])
		}
		if classes == 0 {
			return nil
		}
		for r := lo; r < hi; r++ {
			sc := scale(dy, r)
			or, xr, tr := o[r*classes:(r+1)*classes], x[r*classes:(r+1)*classes], t[r*classes:(r+1)*classes]
			var st T
			if len(t) == classes { // one row: the sum of a whole tensor (sum_all.go)
				st = rowSum(tr)
			} else {
				for _, v := range tr {
					st += v
				}
			}
			_, s := softmaxStats(or, xr)
			for c := range xr {
				p := or[c] / s
				or[c] = (T(p*st) - tr[c]) * sc
			}
		}
		return nil
	}
}
