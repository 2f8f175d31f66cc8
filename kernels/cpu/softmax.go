package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildSoftmax builds softmax or log_softmax {axis}. The input is viewed as
// [outer, n, inner] with n the normalized axis, and each of the outer×inner
// slices is normalized in two passes (online softmax):
//
//  1. one pass keeps the running maximum m and the running sum s of
//     exp(x - m): an element above m rescales s by exp(m_old - x) and adds
//     1, any other adds exp(x - m). softmax also stores each exp(x_i - m_i),
//     taken against the maximum m_i current at element i.
//  2. one normalizing pass: softmax is e_i * exp(m_i - m) / s, where the
//     factor exp(m_i - m) changes only where the running maximum did (the
//     pass follows the maximum again from x), and is exactly 1 from the
//     slice's maximum on; log_softmax is x - m - log(s).
//
// No exp overflows (every argument is <= 0), so rows of ±1000 stay finite;
// every slice is summed in index order in T, so results are deterministic.
// -inf elements get 0 (leading ones too: softmaxShift); a NaN makes its
// whole slice NaN, as do a slice of only -inf and one with a +inf (the
// textbook formula, and PyTorch, compute exp(+inf - +inf) there: each new
// maximum v adds softmaxOne(v) to the sum, 1 for a finite v and NaN for
// +inf).
//
// For the last axis (inner = 1) the slices are contiguous rows. Otherwise
// the Func sweeps the axis with all inner columns at once, keeping the
// per-column state in scratch made here, so that memory is read in order;
// both paths do the same arithmetic in the same order. Large inputs split
// their slices across the workers by outer index (par.go), which changes
// no slice's arithmetic.
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
		return parRows(n.Par, parts, outer, 1, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
			o, x := kernels.View[T](out), kernels.View[T](args[0])
			for r := lo; r < hi; r++ {
				softmaxRow(o[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], logOut)
			}
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
			st.stats(ob, xb, dim, !logOut)
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
			st.normalize(ob, xb, dim)
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

// rowMax returns the largest element of a non-empty row.
func rowMax[T float](x []T) T {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}

// softmaxStats is pass 1 of the online softmax over the non-empty row x:
// it returns the maximum m and the sum s of exp(x - m), kept as a running
// maximum and a rescaled running sum. With store, out[i] receives
// exp(x[i] - m_i) for the running maximum m_i at i, which softmaxNorm
// rescales.
func softmaxStats[T float](out, x []T, store bool) (m, s T) {
	m, s = x[0], softmaxOne(x[0])
	if store {
		out[0] = s
	}
	for i := 1; i < len(x); i++ {
		v := x[i]
		if v > m {
			one := softmaxOne(v)
			s = T(s*exp(m-v)) + one
			m = v
			if store {
				out[i] = one
			}
			continue
		}
		e := exp(softmaxShift(v, m))
		s += e
		if store {
			out[i] = e
		}
	}
	return m, s
}

// softmaxOne returns exp(v - v), what a new running maximum v adds to the
// sum: 1, and NaN for +inf (+inf - +inf), which makes the slice NaN as the
// textbook formula and PyTorch do.
func softmaxOne[T float](v T) T {
	if v == T(math.Inf(1)) {
		return v - v
	}
	return 1
}

// softmaxShift returns v - m for an element v not above the running
// maximum m, except that -inf against a running maximum of -inf gives 0: a
// tie, which a larger element later rescales to exactly 0 (and a row of
// only -inf ends NaN in the normalizing pass, as the textbook formula
// gives). +inf against +inf stays NaN, as in the textbook formula.
func softmaxShift[T float](v, m T) T {
	d := v - m
	if d != d && v == m && v < 0 {
		return 0
	}
	return d
}

// softmaxNorm is pass 2 of the online softmax: it turns the values
// softmaxStats stored in out into softmax(x), given the row's maximum m and
// sum s. Element i becomes out[i]*exp(m_i - m)/s, following the running
// maximum m_i along x again; the factor is exactly 1 from the maximum on.
func softmaxNorm[T float](out, x []T, m, s T) {
	r := x[0]
	g := exp(r - m)
	for i, v := range x {
		if v > r {
			r = v
			g = exp(r - m)
		}
		out[i] = T(out[i]*g) / s
	}
}

// softmaxRow writes softmax (or log_softmax) of the non-empty row x to out
// in two passes: softmaxStats, then softmaxNorm (or x - m - log(s)).
func softmaxRow[T float](out, x []T, logOut bool) {
	m, s := softmaxStats(out, x, !logOut)
	if logOut {
		ls := T(math.Log(float64(s)))
		for i, v := range x {
			out[i] = v - m - ls
		}
		return
	}
	softmaxNorm(out, x, m, s)
}

// softmaxCols is the per-column state of the online softmax along a
// non-last axis: the slices are the columns of a [dim, inner] block, swept
// row by row. Its arithmetic per column is softmaxStats' and softmaxNorm's.
type softmaxCols[T float] struct {
	max, sum, run, fac []T
}

func newSoftmaxCols[T float](inner int) *softmaxCols[T] {
	return &softmaxCols[T]{make([]T, inner), make([]T, inner), make([]T, inner), make([]T, inner)}
}

// stats is softmaxStats for every column of the [dim, inner] block x.
func (c *softmaxCols[T]) stats(out, x []T, dim int, store bool) {
	inner := len(c.max)
	copy(c.max, x[:inner])
	for j, v := range x[:inner] {
		c.sum[j] = softmaxOne(v)
	}
	if store {
		copy(out[:inner], c.sum)
	}
	for k := 1; k < dim; k++ {
		xr, or := x[k*inner:(k+1)*inner], out[k*inner:(k+1)*inner]
		for j, v := range xr {
			m := c.max[j]
			if v > m {
				one := softmaxOne(v)
				c.sum[j] = T(c.sum[j]*exp(m-v)) + one
				c.max[j] = v
				if store {
					or[j] = one
				}
				continue
			}
			e := exp(softmaxShift(v, m))
			c.sum[j] += e
			if store {
				or[j] = e
			}
		}
	}
}

// normalize is softmaxNorm for every column of the [dim, inner] block.
func (c *softmaxCols[T]) normalize(out, x []T, dim int) {
	inner := len(c.max)
	for j := range inner {
		c.run[j] = x[j]
		c.fac[j] = exp(x[j] - c.max[j])
	}
	for k := range dim {
		xr, or := x[k*inner:(k+1)*inner], out[k*inner:(k+1)*inner]
		for j, v := range xr {
			if v > c.run[j] {
				c.run[j] = v
				c.fac[j] = exp(v - c.max[j])
			}
			or[j] = T(or[j]*c.fac[j]) / c.sum[j]
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
