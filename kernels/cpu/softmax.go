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

// checkLabel returns an error when label l at position r is not a class.
func checkLabel[L integer](l L, r, classes int) error {
	if l < 0 || int64(l) >= int64(classes) {
		return fmt.Errorf("label %d at row %d is outside [0,%d)", l, r, classes)
	}
	return nil
}
