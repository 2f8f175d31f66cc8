package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildSoftmax builds softmax or log_softmax {axis}. The input is viewed as
// [outer, n, inner] with n the normalized axis. Each of the outer×inner
// slices is shifted by its maximum before exp, so no exp overflows:
// softmax = exp(x - max) / sum, log_softmax = x - max - log(sum), with sum
// the sum of exp(x - max) along the axis in index order.
//
// For the last axis (inner = 1) the slices are contiguous rows. Otherwise
// the Func sweeps the axis with all inner columns at once, keeping the
// per-column max and sum in scratch made here, so that memory is read in
// order; both paths do the same arithmetic in the same order.
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
	if inner == 1 {
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			o, x := kernels.View[T](out), kernels.View[T](args[0])
			for r := range outer {
				softmaxRow(o[r*dim:(r+1)*dim], x[r*dim:(r+1)*dim], logOut)
			}
			return nil
		}, nil
	}
	mx := make([]T, inner)
	sm := make([]T, inner)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		for r := range outer {
			xb := x[r*dim*inner : (r+1)*dim*inner]
			ob := o[r*dim*inner : (r+1)*dim*inner]
			copy(mx, xb[:inner])
			for k := 1; k < dim; k++ {
				for j, v := range xb[k*inner : (k+1)*inner] {
					if v > mx[j] {
						mx[j] = v
					}
				}
			}
			clear(sm)
			for k := range dim {
				xr, or := xb[k*inner:(k+1)*inner], ob[k*inner:(k+1)*inner]
				for j, v := range xr {
					e := exp(v - mx[j])
					if !logOut {
						or[j] = e
					}
					sm[j] += e
				}
			}
			if logOut {
				for j, s := range sm {
					sm[j] = T(math.Log(float64(s)))
				}
				for k := range dim {
					xr, or := xb[k*inner:(k+1)*inner], ob[k*inner:(k+1)*inner]
					for j, v := range xr {
						or[j] = v - mx[j] - sm[j]
					}
				}
			} else {
				for k := range dim {
					or := ob[k*inner : (k+1)*inner]
					for j := range or {
						or[j] /= sm[j]
					}
				}
			}
		}
		return nil
	}, nil
}

// exp returns e^x in T.
func exp[T float](x T) T { return T(math.Exp(float64(x))) }

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

// softmaxRow writes softmax (or log_softmax) of the non-empty row x to out.
func softmaxRow[T float](out, x []T, logOut bool) {
	m := rowMax(x)
	var s T
	if logOut {
		for _, v := range x {
			s += exp(v - m)
		}
		ls := T(math.Log(float64(s)))
		for i, v := range x {
			out[i] = v - m - ls
		}
		return
	}
	for i, v := range x {
		e := exp(v - m)
		out[i] = e
		s += e
	}
	for i := range out {
		out[i] /= s
	}
}

// buildSoftmaxCE builds softmax_cross_entropy(logits [N,C], labels [N]): the
// mean over rows of logsumexp(row) - row[label]. Each row's loss is computed
// as log(sum(exp(row - max))) - (row[label] - max), which never overflows
// and keeps the precision of small losses at large logits. Row losses are
// added in row order in T; N = 0 gives 0/0 = NaN, the mean of nothing.
func buildSoftmaxCE[T float](n *kernels.Node) (kernels.Func, error) {
	rows, classes := n.Args[0].Shape[0], n.Args[0].Shape[1]
	switch n.Args[1].DType {
	case ir.I32:
		return softmaxCE[T, int32](rows, classes), nil
	case ir.I64:
		return softmaxCE[T, int64](rows, classes), nil
	}
	return nil, fmt.Errorf("labels must be i32 or i64, found %s", n.Args[1])
}

// softmaxCE returns the cross-entropy Func for logits of type T and
// labels of type L.
func softmaxCE[T float, L integer](rows, classes int) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		x, labels := kernels.View[T](args[0]), kernels.View[L](args[1])
		var total T
		for r := range rows {
			l := labels[r]
			if err := checkLabel(l, r, classes); err != nil {
				return err
			}
			row := x[r*classes : (r+1)*classes]
			m := rowMax(row)
			var s T
			for _, v := range row {
				s += exp(v - m)
			}
			total += T(math.Log(float64(s))) - (row[l] - m)
		}
		kernels.View[T](out)[0] = total / T(rows)
		return nil
	}
}

// checkLabel returns an error when label l at position r is not a class.
func checkLabel[L integer](l L, r, classes int) error {
	if l < 0 || int64(l) >= int64(classes) {
		return fmt.Errorf("label %d at row %d is outside [0,%d)", l, r, classes)
	}
	return nil
}

// buildMSE builds mse_loss(a, b): the mean of (a-b)^2 over the broadcast
// shape, summed in row-major order of that shape in T, each square rounded
// before it is added. An empty shape gives 0/0 = NaN.
func buildMSE[T float](n *kernels.Node) (kernels.Func, error) {
	shape, _ := ir.BroadcastShapes(n.Args[0].Shape, n.Args[1].Shape) // checked by inference
	w := newWalk(shape, broadcastStrides(n.Args[0].Shape, shape), broadcastStrides(n.Args[1].Shape, shape))
	count := T(shape.NumElements())
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		a, b := kernels.View[T](args[0]), kernels.View[T](args[1])
		inner, ia, ib := w.inner, w.ia, w.ib
		var s T
		w.each(func(_, ao, bo int) {
			for range inner {
				d := a[ao] - b[bo]
				s += T(d * d)
				ao += ia
				bo += ib
			}
		})
		kernels.View[T](out)[0] = s / count
		return nil
	}, nil
}
