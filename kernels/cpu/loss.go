package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Loss kernels. Every loss computes its unreduced losses in T, one at a time
// in row-major order; "none" stores them, "sum" adds them in that order in T
// starting from zero, and "mean" divides that sum by their number (0/0 =
// NaN for no losses, as PyTorch's mean of nothing). softmax_cross_entropy
// and mse_loss are registered in cpu.go, the others here. The losses of
// rows (cross-entropy, nll) and of elements (bce) are computed split
// across the workers and then summed in order by one (lossRows).

func init() {
	for _, op := range []ir.Op{ir.OpL1Loss, ir.OpHuberLoss} {
		register(op, ir.F32, buildElemLoss[float32])
		register(op, ir.F64, buildElemLoss[float64])
	}
	for _, op := range []ir.Op{ir.OpBCELoss, ir.OpBCEWithLogits} {
		register(op, ir.F32, buildBCE[float32])
		register(op, ir.F64, buildBCE[float64])
	}
	register(ir.OpNLLLoss, ir.F32, buildNLL[float32])
	register(ir.OpNLLLoss, ir.F64, buildNLL[float64])
}

// lossReducer accumulates unreduced losses for one reduction.
type lossReducer[T float] struct {
	none, mean bool
	count      T
}

func newLossReducer[T float](attrs ir.Attrs, count int) (lossReducer[T], error) {
	r := lossReducer[T]{count: T(count)}
	switch s := attrs.Str("reduction", "mean"); s {
	case "mean":
		r.mean = true
	case "sum":
	case "none":
		r.none = true
	default:
		return r, fmt.Errorf(`reduction must be "mean", "sum" or "none", found %q`, s)
	}
	return r, nil
}

// lossRows returns the Func of a loss of one value per row (or element)
// of rows, each of rowWork units: vals writes the values of rows [lo, hi)
// into o[lo:hi], o being the output for "none" and scratch made here
// otherwise. The rows are split across par's workers (par.go), in ranges
// starting at multiples of align; the calling goroutine then adds the
// values in row order, so the sum is the sequential one for any number of
// workers. vals' error is the first bad row's.
func lossRows[T float](par kernels.Parallel, rows, rowWork, align int, red lossReducer[T], vals func(o []T, args []kernels.Tensor, lo, hi int) error) kernels.Func {
	var scratch []T
	if !red.none {
		scratch = make([]T, rows)
	}
	f := parRows(par, parParts(par, rows, rowWork), rows, align, func(_ int, out kernels.Tensor, args []kernels.Tensor, lo, hi int) error {
		if red.none {
			return vals(kernels.View[T](out), args, lo, hi)
		}
		return vals(scratch, args, lo, hi)
	})
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		if err := f(out, args); err != nil {
			return err
		}
		if !red.none {
			var s T
			for _, v := range scratch {
				s += v
			}
			red.finish(kernels.View[T](out), s)
		}
		return nil
	}
}

// finish stores the reduced sum s into o (for "mean" and "sum").
func (r lossReducer[T]) finish(o []T, s T) {
	if r.none {
		return
	}
	if r.mean {
		s /= r.count
	}
	o[0] = s
}

// buildMSE builds mse_loss(a, b): (a - b)^2 over the broadcast shape, each
// square rounded before it is added.
func buildMSE[T float](n *kernels.Node) (kernels.Func, error) { return buildElemLoss[T](n) }

// buildElemLoss builds mse_loss, l1_loss or huber_loss {delta}: a loss of
// d = a - b at every element of the broadcast shape, as PyTorch computes it
// in T: d*d; |d|; 0.5*|d|*|d| where |d| < delta, else delta*(|d| -
// 0.5*delta).
func buildElemLoss[T float](n *kernels.Node) (kernels.Func, error) {
	op := n.Op
	switch op {
	case ir.OpMSELoss, ir.OpL1Loss, ir.OpHuberLoss:
	default:
		return nil, fmt.Errorf("%s is not an elementwise loss", op)
	}
	shape, _ := ir.BroadcastShapes(n.Args[0].Shape, n.Args[1].Shape) // checked by inference
	red, err := newLossReducer[T](n.Attrs, shape.NumElements())
	if err != nil {
		return nil, err
	}
	w := newWalk(shape, broadcastStrides(n.Args[0].Shape, shape), broadcastStrides(n.Args[1].Shape, shape))
	delta := T(n.Attrs.Float("delta", 1))
	halfDelta := T(0.5 * delta)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		inner, ia, ib := w.inner, w.ia, w.ib
		var s T
		w.each(func(oo, ao, bo int) {
			for j := range inner {
				d := a[ao] - b[bo]
				var v T
				switch op {
				case ir.OpMSELoss:
					v = T(d * d)
				case ir.OpL1Loss:
					v = d
					if d < 0 {
						v = -d
					}
				default: // huber
					z := d
					if d < 0 {
						z = -d
					}
					if z < delta {
						v = T(T(0.5*z) * z)
					} else {
						v = T(delta * (z - halfDelta))
					}
				}
				if red.none {
					o[oo+j] = v
				} else {
					s += v
				}
				ao += ia
				bo += ib
			}
		})
		red.finish(o, s)
		return nil
	}, nil
}

// buildBCE builds bce_loss or bce_with_logits (input and target of one
// shape).
//
// bce_loss is PyTorch's (t - 1)*max(log1p(-x), -100) - t*max(log(x), -100),
// with the logs computed in float64, rounded to T and clamped in T; an input
// or target outside [0,1] (or NaN) is an error, as in PyTorch.
//
// bce_with_logits is (1 - t)*x + max(-x, 0) + log1p(exp(-|x|)) computed
// in float64 and rounded once: no term overflows, and for large |x| the
// result is exact up to rounding. It is PyTorch's form, so infinite logits
// give what PyTorch gives (x = +Inf, t = 0: +Inf, not Inf - Inf*0 = NaN).
func buildBCE[T float](n *kernels.Node) (kernels.Func, error) {
	logits := false
	switch n.Op {
	case ir.OpBCELoss:
	case ir.OpBCEWithLogits:
		logits = true
	default:
		return nil, fmt.Errorf("%s is not a binary cross-entropy", n.Op)
	}
	count := n.Args[0].Shape.NumElements()
	red, err := newLossReducer[T](n.Attrs, count)
	if err != nil {
		return nil, err
	}
	return lossRows(n.Par, count, 2*parCostExp, parAlign, red, func(o []T, args []kernels.Tensor, lo, hi int) error {
		x, t := kernels.View[T](args[0])[lo:hi], kernels.View[T](args[1])[lo:hi]
		o = o[lo:hi]
		for j, xv := range x {
			i := lo + j
			tv := t[j]
			var v T
			if logits {
				x64, t64 := float64(xv), float64(tv)
				v = T((1-t64)*x64 + math.Max(-x64, 0) + math.Log1p(math.Exp(-math.Abs(x64))))
			} else {
				if !(xv >= 0 && xv <= 1) {
					return fmt.Errorf("input %v at element %d is outside [0,1]", xv, i)
				}
				if !(tv >= 0 && tv <= 1) {
					return fmt.Errorf("target %v at element %d is outside [0,1]", tv, i)
				}
				lx := max(T(math.Log(float64(xv))), -100)
				l1x := max(T(math.Log1p(-float64(xv))), -100)
				v = T((tv-1)*l1x) - T(tv*lx)
			}
			o[j] = v
		}
		return nil
	}), nil
}

// buildNLL builds nll_loss(input [N,C], labels [N]): -input[n, labels[n]]
// per row. A label outside [0,C) is an error naming it and its row.
func buildNLL[T float](n *kernels.Node) (kernels.Func, error) {
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	red, err := newLossReducer[T](n.Attrs, rows)
	if err != nil {
		return nil, err
	}
	switch n.Args[1].DType {
	case ir.I32:
		return lossRows(n.Par, rows, 1, 1, red, nll[T, int32](classes)), nil
	case ir.I64:
		return lossRows(n.Par, rows, 1, 1, red, nll[T, int64](classes)), nil
	}
	return nil, fmt.Errorf("labels must be i32 or i64, found %s", n.Args[1])
}

// nll returns nll_loss's per-row losses of rows [lo, hi) for labels of
// type L.
func nll[T float, L integer](classes int) func(o []T, args []kernels.Tensor, lo, hi int) error {
	return func(o []T, args []kernels.Tensor, lo, hi int) error {
		x, labels := kernels.View[T](args[0]), kernels.View[L](args[1])
		for r := lo; r < hi; r++ {
			l := labels[r]
			if err := checkLabel(l, r, classes); err != nil {
				return err
			}
			o[r] = -x[r*classes+int(l)]
		}
		return nil
	}
}

// buildSoftmaxCE builds softmax_cross_entropy(logits [N,C], target): per
// row, with m the row's maximum and ls = log(sum(exp(row - m))) summed in
// index order,
//
//   - integer labels [N]: ls - (row[label] - m), which never overflows and
//     keeps the precision of small losses at large logits; a label outside
//     [0,C) is an error naming it and its row;
//   - probabilities [N,C]: -sum over c of target[c]*(row[c] - m - ls), the
//     products rounded to T and added in index order (0 for C = 0).
func buildSoftmaxCE[T float](n *kernels.Node) (kernels.Func, error) {
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	red, err := newLossReducer[T](n.Attrs, rows)
	if err != nil {
		return nil, err
	}
	switch n.Args[1].DType {
	case ir.I32:
		return lossRows(n.Par, rows, classes*parCostExp, 1, red, softmaxCE[T, int32](classes)), nil
	case ir.I64:
		return lossRows(n.Par, rows, classes*parCostExp, 1, red, softmaxCE[T, int64](classes)), nil
	case n.Out.DType:
		return lossRows(n.Par, rows, classes*parCostExp, 1, red, softmaxCEProbs[T](classes)), nil
	}
	return nil, fmt.Errorf("target must be i32 or i64 labels or %s probabilities, found %s", n.Out.DType, n.Args[1])
}

// softmaxLogSum returns the maximum of the non-empty row and the log of
// the sum of exp(row - max).
func softmaxLogSum[T float](row []T) (m, ls T) {
	m = rowMax(row)
	return m, T(math.Log(float64(expSum(0, row, m))))
}

// softmaxCE returns the cross-entropy's per-row losses of rows [lo, hi)
// for logits of type T and labels of type L.
func softmaxCE[T float, L integer](classes int) func(o []T, args []kernels.Tensor, lo, hi int) error {
	return func(o []T, args []kernels.Tensor, lo, hi int) error {
		x, labels := kernels.View[T](args[0]), kernels.View[L](args[1])
		for r := lo; r < hi; r++ {
			l := labels[r]
			if err := checkLabel(l, r, classes); err != nil {
				return err
			}
			row := x[r*classes : (r+1)*classes]
			m, ls := softmaxLogSum(row)
			o[r] = ls - (row[l] - m)
		}
		return nil
	}
}

// softmaxCEProbs returns the cross-entropy's per-row losses of rows [lo,
// hi) for probability targets.
func softmaxCEProbs[T float](classes int) func(o []T, args []kernels.Tensor, lo, hi int) error {
	return func(o []T, args []kernels.Tensor, lo, hi int) error {
		x, t := kernels.View[T](args[0]), kernels.View[T](args[1])
		for r := lo; r < hi; r++ {
			var acc T
			if classes > 0 {
				row, tr := x[r*classes:(r+1)*classes], t[r*classes:(r+1)*classes]
				m, ls := softmaxLogSum(row)
				for c, v := range row {
					acc += T(tr[c] * (v - m - ls))
				}
			}
			o[r] = -acc
		}
		return nil
	}
}
