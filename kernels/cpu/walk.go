package cpu

import "github.com/kilnml/kiln/ir"

// walk is a row-major traversal of a contiguous output shape together with
// up to two strided operands, planned once per node. Dimensions of size 1
// are dropped and neighbours that are contiguous for every operand are
// merged, so that the traversal is a sequence of rows along the innermost
// remaining dimension. The common cases collapse to a single loop: equal
// shapes and a scalar operand give one row; a bias add [N,C]+[C] gives N
// rows with the bias offset fixed at 0; reducing trailing (or leading) axes
// gives rows that sum into one element (or add into one row).
type walk struct {
	n      int   // elements of the output
	inner  int   // length of a row
	ia, ib int   // operand strides along a row
	dims   []int // the outer dimensions, outermost first
	sa, sb []int // operand strides along them
	idx    []int // odometer scratch for each
}

// newWalk plans the traversal of shape out, where operand a advances by
// sa[i] and operand b by sb[i] along out's dimension i (0 where it is
// broadcast). sb may be nil for a single operand.
func newWalk(out ir.Shape, sa, sb []int) *walk {
	if sb == nil {
		sb = make([]int, len(out))
	}
	var dims, as, bs []int
	for i, d := range out {
		if d == 1 {
			continue
		}
		if k := len(dims) - 1; k >= 0 && as[k] == sa[i]*d && bs[k] == sb[i]*d {
			dims[k] *= d
			as[k], bs[k] = sa[i], sb[i]
			continue
		}
		dims = append(dims, d)
		as = append(as, sa[i])
		bs = append(bs, sb[i])
	}
	w := &walk{n: out.NumElements(), inner: 1}
	if k := len(dims) - 1; k >= 0 {
		w.inner, w.ia, w.ib = dims[k], as[k], bs[k]
		dims, as, bs = dims[:k], as[:k], bs[:k]
	}
	w.dims, w.sa, w.sb = dims, as, bs
	w.idx = make([]int, len(dims))
	return w
}

// each calls f for every row in order with the offsets of its first element
// in the output and in each operand. It does nothing for an empty output.
func (w *walk) each(f func(o, a, b int)) {
	if w.n == 0 {
		return
	}
	switch len(w.dims) {
	case 0:
		f(0, 0, 0)
		return
	case 1:
		sa, sb := w.sa[0], w.sb[0]
		for r := range w.dims[0] {
			f(r*w.inner, r*sa, r*sb)
		}
		return
	}
	idx := w.idx
	clear(idx)
	a, b := 0, 0
	for o := 0; o < w.n; o += w.inner {
		f(o, a, b)
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k]++
			a += w.sa[k]
			b += w.sb[k]
			if idx[k] < w.dims[k] {
				break
			}
			a -= w.sa[k] * w.dims[k]
			b -= w.sb[k] * w.dims[k]
			idx[k] = 0
		}
	}
}

// broadcastStrides returns the strides of a row-major tensor of shape in
// along each dimension of out, to which in broadcasts under NumPy rules: 0
// along the leading dimensions in lacks and wherever in has size 1.
func broadcastStrides(in, out ir.Shape) []int {
	st := make([]int, len(out))
	inSt := in.Strides()
	off := len(out) - len(in)
	for i := range in {
		if in[i] != 1 {
			st[off+i] = inSt[i]
		}
	}
	return st
}

// offsets returns, for every index of shape in row-major order, the sum of
// index times stride: the element offsets of a strided view.
func offsets(shape ir.Shape, strides []int) []int {
	out := make([]int, 0, shape.NumElements())
	w := newWalk(shape, strides, nil)
	w.each(func(_, a, _ int) {
		for j := range w.inner {
			out = append(out, a+j*w.ia)
		}
	})
	return out
}

// gatherRow copies n elements of src, starting at offset a with stride s,
// to out; with stride 0, one value broadcast along the row (fillRow).
func gatherRow[T any](out, src []T, a, s int) {
	switch s {
	case 1:
		copy(out, src[a:a+len(out)])
	case 0:
		fillRow(out, src[a])
	default:
		for i := range out {
			out[i] = src[a]
			a += s
		}
	}
}

// fillRow sets every element of out to v: the first 16 one by one, then
// by doubling the filled prefix with copy, which moves vectors. Storing
// every element one by one (the compiler does not vectorize the loop) was
// 60% of fused_elementwise's time on a layer norm's backward with values
// of a row broadcast over rows of 256 (BenchmarkFusedElementwiseRowBroadcast:
// 1.02 -> 0.49 ms).
func fillRow[T any](out []T, v T) {
	n := min(len(out), 16)
	for i := range n {
		out[i] = v
	}
	for k := n; k < len(out); k *= 2 {
		copy(out[k:], out[:k])
	}
}
