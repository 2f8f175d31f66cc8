package cpu

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildSoftmax builds softmax or log_softmax {axis}. The input is viewed as
// [outer, n, inner] with n the normalized axis, and each of the outer×inner
// slices is normalized in two passes: the maximum m, then exp(x - m) and
// its sum s in rowSum's order (softmaxStats; rowsum.go), then softmax is exp(x - m) / s
// and log_softmax x - m - log(s). No exp overflows (every argument is <=
// 0), so rows of ±1000 stay finite; a NaN, a +inf or a slice of only -inf
// makes the slice NaN, as PyTorch's.
//
// For the last axis (inner = 1) the slices are contiguous rows, whose
// exponentials are one vector call for f32. Otherwise the Func sweeps the
// axis with all inner columns at once, keeping the per-column state in
// scratch made here, so that memory is read in order; both paths do the
// same arithmetic in the same order (the sums in rowSum's, rowsum.go). Large inputs split their slices
// across the workers by outer index (par.go), which changes no slice's
// arithmetic.
func buildSoftmax[T float](n *kernels.Node) (kernels.Func, error) {
	logOut := false
	switch n.Op {
	case ir.OpSoftmax:
	case ir.OpLogSoftmax:
		logOut = true
	default:
		return nil, fmt.Errorf("%s is not softmax or log_softmax", n.Op)
	}
	xs := n.Args[0].Shape
	axis, err := ir.Axis(n.Attrs, len(xs))
	if err != nil {
		return nil, err
	}
	outer := xs[:axis].NumElements()
	dim := xs[axis]
	inner := xs[axis+1:].NumElements()
	if outer*dim*inner == 0 {
		return func(kernels.Tensor, []kernels.Tensor) error { return nil }, nil
	}
	// Split across the workers by rows (the outer slices); each row is
	// normalized as in an unsplit call (par.go).
	parts := parParts(n.Par, outer, dim*inner*parCostExp)
	if inner == 1 {
		sm := softmaxStreamer[T](n.Out, dim, logOut, parts)
		return parRows(n.Par, parts, outer, fusepatBlock, func(part int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
			o, x := kernels.View[T](out), kernels.View[T](args[0])
			if sm != nil {
				sm.rows(part, o[lo*dim:hi*dim], x[lo*dim:hi*dim], dim)
				return nil
			}
			softmaxRows(o[lo*dim:hi*dim], x[lo*dim:hi*dim], dim, logOut, nil)
			return nil
		}), nil
	}
	sts := make([]*softmaxCols[T], parts)
	for p := range sts {
		sts[p] = newSoftmaxCols[T](inner)
	}
	return parRows(n.Par, parts, outer, 1, func(part int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		st := sts[part]
		for r := lo; r < hi; r++ {
			xb := x[r*dim*inner : (r+1)*dim*inner]
			ob := o[r*dim*inner : (r+1)*dim*inner]
			st.stats(ob, xb, dim)
			if logOut {
				for j, s := range st.sum {
					st.sum[j] = T(math.Log(float64(s)))
				}
				for k := range dim {
					xr, or := xb[k*inner:(k+1)*inner], ob[k*inner:(k+1)*inner]
					for j, v := range xr {
						or[j] = v - st.max[j] - st.sum[j]
					}
				}
				continue
			}
			st.normalize(ob, dim)
		}
		return nil
	}), nil
}

// exp returns e^x in T: for float32 vmath's, the exp op's own code (so a
// fused softmax pattern matches its unfused ops bit for bit), for float64
// math.Exp.
func exp[T float](x T) T {
	if p, ok := any(&x).(*float32); ok {
		return T(vmath.Exp32Scalar(*p))
	}
	return T(math.Exp(float64(x)))
}

// rowMax returns the largest element of a non-empty row: the first of
// the largest ones, and x[0] when x[0] is NaN (later NaNs are passed
// over). Eight lanes, each starting at x[0], keep the maxima of every
// eighth element, so that their compares overlap; the lanes' maximum is
// the row's, the same value the sequential loop finds. Where ties of
// different bits can matter (a maximum of ±0) or x[0] is NaN, the
// sequential loop decides.
func rowMax[T float](x []T) T {
	if len(x) < 32 {
		return rowMaxSeq(x)
	}
	if f, ok := any(x).([]float32); ok && rowMaxAsm {
		// The same lanes as vectors (rowmax_amd64.s), the rest in order.
		k := len(f) &^ 7
		m := rowMaxF32(unsafe.Pointer(&f[0]), k)
		for _, v := range f[k:] {
			if v > m {
				m = v
			}
		}
		if m == 0 {
			return rowMaxSeq(x)
		}
		return T(m)
	}
	m0 := x[0]
	m1, m2, m3, m4, m5, m6, m7 := m0, m0, m0, m0, m0, m0, m0
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		if v[0] > m0 {
			m0 = v[0]
		}
		if v[1] > m1 {
			m1 = v[1]
		}
		if v[2] > m2 {
			m2 = v[2]
		}
		if v[3] > m3 {
			m3 = v[3]
		}
		if v[4] > m4 {
			m4 = v[4]
		}
		if v[5] > m5 {
			m5 = v[5]
		}
		if v[6] > m6 {
			m6 = v[6]
		}
		if v[7] > m7 {
			m7 = v[7]
		}
	}
	for _, v := range x[i:] {
		if v > m0 {
			m0 = v
		}
	}
	m := m0
	for _, v := range [...]T{m1, m2, m3, m4, m5, m6, m7} {
		if v > m {
			m = v
		}
	}
	if m == 0 || m != m {
		return rowMaxSeq(x)
	}
	return m
}

// rowMaxSeq is rowMax's sequential loop.
func rowMaxSeq[T float](x []T) T {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// softmaxStats is pass 1 of the softmax over the non-empty row x: it
// returns the maximum m (NaN when x[0] is) and the sum s of exp(x - m),
// added in rowSum's order, and leaves exp(x[i] - m) in out[i], which
// softmaxNorm divides by s (log_softmax only reads m and s). The
// exponentials of an f32 row are one vector call of vmath's exp, bitwise
// the exp op's own code. A NaN, a +inf (inf - inf) or a row of only -inf
// (-inf - -inf) makes s, and so the whole row, NaN, as the textbook
// formula and PyTorch give; a -inf element below a finite maximum gets 0.
func softmaxStats[T float](out, x []T) (m, s T) {
	m = softmaxExp(out, x)
	return m, rowSum(out[:len(x)])
}

// softmaxExp is softmaxStats without the sum: it returns the maximum m of
// the non-empty row x and leaves exp(x[i] - m) in out[i]; the difference
// is one vector call of sub's own row code (the same IEEE subtraction).
func softmaxExp[T float](out, x []T) T {
	m := rowMax(x)
	out = out[:len(x)]
	vecScalar(ir.OpSub, out, x, m)
	expRow(out)
	return m
}

// softmaxRows writes softmax (or log_softmax) of the rows of length dim of
// x to out, as softmaxRow does each (the same bits), up to fusepatBlock
// rows at a time: their exponentials first, then their sums
// (fusepatRowSums), then their results. ahead, when not nil, is called
// with each row's index before its exponentials (a fused kernel's
// prefetching, rowAhead.row).
func softmaxRows[T float](out, x []T, dim int, logOut bool, ahead func(row int)) {
	var ms, ss [fusepatBlock]T
	for r := 0; r < len(x)/dim; r += fusepatBlock {
		k := min(fusepatBlock, len(x)/dim-r)
		o, xb := out[r*dim:(r+k)*dim], x[r*dim:(r+k)*dim]
		for j := range k {
			if ahead != nil {
				ahead(r + j)
			}
			ms[j] = softmaxExp(o[j*dim:(j+1)*dim], xb[j*dim:(j+1)*dim])
		}
		fusepatRowSums(ss[:k], o, nil, dim)
		for j := range k {
			softmaxFinish(o[j*dim:(j+1)*dim], xb[j*dim:(j+1)*dim], ms[j], ss[j], logOut)
		}
	}
}

// expRow sets x[i] = e^x[i]: vmath's vector exp for float32 (bitwise its
// scalar exp, as the exp op computes it), math.Exp for float64.
func expRow[T float](x []T) {
	if f, ok := any(x).([]float32); ok {
		vmath.Exp32(f, f)
		return
	}
	for i, v := range x {
		x[i] = exp(v)
	}
}

// expBlock is the length of the stack buffer through which expSum and
// fusepatLogSoftmaxGradRow take their exponentials as vector calls.
const expBlock = 64

// expSum returns s plus exp(v - m) for each v of row, added in index
// order, each exponential bitwise exp's, computed expBlock at a time by
// one vector call.
func expSum[T float](s T, row []T, m T) T {
	var buf [expBlock]T
	for i := 0; i < len(row); i += expBlock {
		b := buf[:min(expBlock, len(row)-i)]
		for j := range b {
			b[j] = row[i+j] - m
		}
		expRow(b)
		for _, e := range b {
			s += e
		}
	}
	return s
}

// softmaxStream is softmax over the last axis of a large output
// (fuseewStreamBytes or more: its reader finds it in memory, not in the
// cache) written with streaming stores, so that no line of the output is
// read before it is written: the exponentials of fusepatBlock rows go
// into scratch of the part's own, and the division writes them out by
// div, div's row code with streaming stores. The arithmetic is
// softmaxRows'.
type softmaxStream[T float] struct {
	bufs [][]T
	div  func(out, a []T, s T)
}

// softmaxStreamer returns the streaming softmax of parts parts for an
// output of type out and rows of dim, or nil where it does not apply:
// log_softmax, a small output, rows too long for the scratch (64Ki
// elements), or no streaming loops (no AVX2).
func softmaxStreamer[T float](out ir.Type, dim int, logOut bool, parts int) *softmaxStream[T] {
	div := ewVecScalarFunc[T](ir.OpDiv, true)
	if logOut || out.Bytes() < fuseewStreamBytes || dim > 1<<16 || div == nil {
		return nil
	}
	sm := &softmaxStream[T]{bufs: make([][]T, parts), div: div}
	for p := range sm.bufs {
		sm.bufs[p] = make([]T, fusepatBlock*dim)
	}
	return sm
}

// rows is softmaxRows over part's rows.
func (sm *softmaxStream[T]) rows(part int, out, x []T, dim int) {
	sm.rowsUnfenced(part, out, x, dim, nil)
	storeFence()
}

// rowsUnfenced is rows without the fence after the streaming stores, for
// a caller that writes its part in several calls and fences once; ahead
// is softmaxRows'.
func (sm *softmaxStream[T]) rowsUnfenced(part int, out, x []T, dim int, ahead func(row int)) {
	var ms, ss [fusepatBlock]T
	buf := sm.bufs[part]
	for r := 0; r < len(x)/dim; r += fusepatBlock {
		k := min(fusepatBlock, len(x)/dim-r)
		xb, e := x[r*dim:(r+k)*dim], buf[:k*dim]
		for j := range k {
			if ahead != nil {
				ahead(r + j)
			}
			ms[j] = softmaxExp(e[j*dim:(j+1)*dim], xb[j*dim:(j+1)*dim])
		}
		fusepatRowSums(ss[:k], e, nil, dim)
		for j := range k {
			sm.div(out[(r+j)*dim:(r+j+1)*dim], e[j*dim:(j+1)*dim], ss[j])
		}
	}
}

// softmaxNorm is pass 2: it divides the exponentials softmaxStats left in
// out by their sum s (one vector call of div's row code).
func softmaxNorm[T float](out []T, s T) {
	vecScalar(ir.OpDiv, out, out, s)
}

// softmaxRow writes softmax (or log_softmax) of the non-empty row x to out
// in two passes: softmaxStats, then softmaxFinish.
func softmaxRow[T float](out, x []T, logOut bool) {
	m, s := softmaxStats(out, x)
	softmaxFinish(out, x, m, s, logOut)
}

// softmaxFinish is softmax's pass 2 over the row x whose maximum is m and
// sum of exponentials (left in out) s: softmaxNorm, or for log_softmax x
// - m - log(s), each difference rounded, by vector calls of sub's row code.
func softmaxFinish[T float](out, x []T, m, s T, logOut bool) {
	out = out[:len(x)]
	if logOut {
		ls := T(math.Log(float64(s)))
		vecScalar(ir.OpSub, out, x, m)
		vecScalar(ir.OpSub, out, out, ls)
		return
	}
	softmaxNorm(out, s)
}

// softmaxCols is the per-column state of the softmax along a non-last
// axis: the slices are the columns of a [dim, inner] block, swept row by
// row. Its arithmetic per column is softmaxStats' and softmaxNorm's, in the
// same order (the scalar exp is bitwise the vector one, and colSums sums
// each column in rowSum's order).
type softmaxCols[T float] struct {
	max, sum, lanes []T
}

func newSoftmaxCols[T float](inner int) *softmaxCols[T] {
	return &softmaxCols[T]{make([]T, inner), make([]T, inner), make([]T, laneCount*inner)}
}

// stats is softmaxStats for every column of the [dim, inner] block x.
func (c *softmaxCols[T]) stats(out, x []T, dim int) {
	inner := len(c.max)
	copy(c.max, x[:inner])
	for k := 1; k < dim; k++ {
		for j, v := range x[k*inner : (k+1)*inner] {
			if v > c.max[j] {
				c.max[j] = v
			}
		}
	}
	for k := range dim {
		xr, or := x[k*inner:(k+1)*inner], out[k*inner:(k+1)*inner]
		for j, v := range xr {
			or[j] = exp(v - c.max[j])
		}
	}
	colSums(c.sum, out, dim, c.lanes)
}

// colSums sets sums[j] to the sum of column j of the [dim, len(sums)]
// block x in rowSum's order (rowsum.go), all columns at once: per block of
// sumAllBlock rows, row k is added into lane k mod 16 of every column (a
// vector add of rows into lanes, scratch of laneCount*len(sums)), the
// lanes are folded in halves, and the block's last rows (fewer than 16)
// are added in order.
func colSums[T float](sums, x []T, dim int, lanes []T) {
	inner := len(sums)
	clear(sums)
	for lo := 0; lo < dim; lo += sumAllBlock {
		hi := min(lo+sumAllBlock, dim)
		full := lo + (hi-lo)&^(laneCount-1)
		clear(lanes)
		for k := lo; k < full; k++ {
			l := (k - lo) % laneCount
			ln := lanes[l*inner : (l+1)*inner]
			vecVec(ir.OpAdd, ln, ln, x[k*inner:(k+1)*inner])
		}
		for w := laneCount / 2; w >= 1; w /= 2 {
			for l := range w {
				a := lanes[l*inner : (l+1)*inner]
				vecVec(ir.OpAdd, a, a, lanes[(l+w)*inner:(l+w+1)*inner])
			}
		}
		bs := lanes[:inner]
		for k := full; k < hi; k++ {
			vecVec(ir.OpAdd, bs, bs, x[k*inner:(k+1)*inner])
		}
		vecVec(ir.OpAdd, sums, sums, bs)
	}
}

// normalize is softmaxNorm for every column of the [dim, inner] block.
func (c *softmaxCols[T]) normalize(out []T, dim int) {
	inner := len(c.max)
	for k := range dim {
		or := out[k*inner : (k+1)*inner]
		for j, e := range or {
			or[j] = e / c.sum[j]
		}
	}
}

// checkLabel returns an error when label l at position r is not a class.
func checkLabel[L integer](l L, r, classes int) error {
	if l < 0 || int64(l) >= int64(classes) {
		return fmt.Errorf("label %d at row %d is outside [0,%d)", l, r, classes)
	}
	return nil
}
