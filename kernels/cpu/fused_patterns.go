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
// sums in index order from zero in T, exp in float64 rounded once), so a
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
// pass sums dy*y (each product rounded) or dy in index order, one pass
// writes the result. For the last axis the slices are contiguous rows;
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
	if inner == 1 {
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			o, dy, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
			for r := range outer {
				lo, hi := r*dim, (r+1)*dim
				if logGrad {
					fusepatLogSoftmaxGradRow(o[lo:hi], dy[lo:hi], y[lo:hi])
				} else {
					fusepatSoftmaxGradRow(o[lo:hi], dy[lo:hi], y[lo:hi])
				}
			}
			return nil
		}, nil
	}
	sum := make([]T, inner)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, dy, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		for r := range outer {
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
	}, nil
}

// fusepatSoftmaxGradRow writes y * (dy - sum(dy*y)) for one row.
func fusepatSoftmaxGradRow[T float](out, dy, y []T) {
	var s T
	for i, d := range dy {
		s += T(d * y[i])
	}
	for i, d := range dy {
		out[i] = y[i] * (d - s)
	}
}

// fusepatLogSoftmaxGradRow writes dy - exp(y) * sum(dy) for one row.
func fusepatLogSoftmaxGradRow[T float](out, dy, y []T) {
	var s T
	for _, d := range dy {
		s += d
	}
	for i, d := range dy {
		out[i] = d - T(exp(y[i])*s)
	}
}

// fusepatBuildMaxGrad builds max_grad(dy, x, y) {axes, keepdims, min}: for
// every slice of x over axes, one pass counts the elements equal to the
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
	trailing := true
	for i, ax := range axes {
		trailing = trailing && ax == len(xs)-len(axes)+i
	}
	if trailing {
		size := xs[len(xs)-len(axes):].NumElements()
		return func(out kernels.Tensor, args []kernels.Tensor) error {
			o, dy, x, y := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
			for r, yv := range y {
				lo, hi := r*size, (r+1)*size
				fusepatMaxGradRow(o[lo:hi], x[lo:hi], yv, dy[r])
			}
			return nil
		}, nil
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
			q := dy[r] / count
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
// whose result is yv and whose incoming gradient is d.
func fusepatMaxGradRow[T float](out, x []T, yv, d T) {
	var one, zero T = 1, 0
	var count T
	for _, v := range x {
		if v == yv {
			count += one
		}
	}
	q := d / count
	hit, miss := q*one, q*zero
	for i, v := range x {
		if v == yv {
			out[i] = hit
		} else {
			out[i] = miss
		}
	}
}

// fusepatBuildSoftmaxCEGrad builds softmax_ce_grad(logits [N,C], target,
// dy) {reduction}: per row, softmax(logits) by the softmax kernel's two
// passes (softmaxStats, then softmaxNorm's arithmetic), finished in the
// second pass into (p - onehot)*scale for integer labels or (p*sum(target)
// - target)*scale for probabilities, scale = dy*(1/N) (mean), dy (sum) or
// dy[n] (none). A label outside [0,C) is an error, as one_hot's.
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
	scale := func(dy []T, r int) T {
		switch mode {
		case fusepatMean:
			return dy[0] * inv
		case fusepatSum:
			return dy[0]
		}
		return dy[r]
	}
	switch n.Args[1].DType {
	case ir.I32:
		return fusepatSoftmaxCELabels[T, int32](rows, classes, scale), nil
	case ir.I64:
		return fusepatSoftmaxCELabels[T, int64](rows, classes, scale), nil
	case n.Out.DType:
		return fusepatSoftmaxCEProbs[T](rows, classes, scale), nil
	}
	return nil, fmt.Errorf("target must be i32 or i64 labels or %s probabilities, found %s", n.Out.DType, n.Args[1])
}

// The reductions of softmax_ce_grad.
const (
	fusepatMean = iota
	fusepatSum
	fusepatNone
)

// fusepatSoftmaxCELabels returns softmax_ce_grad's Func for labels of type L.
func fusepatSoftmaxCELabels[T float, L integer](rows, classes int, scale func([]T, int) T) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x, labels, dy := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[L](args[1]), kernels.View[T](args[2])
		if classes == 0 {
			return nil
		}
		for r := range rows {
			l := labels[r]
			if err := checkLabel(l, r, classes); err != nil {
				return err
			}
			sc := scale(dy, r)
			or, xr := o[r*classes:(r+1)*classes], x[r*classes:(r+1)*classes]
			m, s := softmaxStats(or, xr, true)
			run := xr[0]
			g := exp(run - m)
			for c, v := range xr {
				if v > run {
					run = v
					g = exp(run - m)
				}
				p := T(or[c]*g) / s
				if c == int(l) {
					p -= 1
				}
				or[c] = p * sc
			}
		}
		return nil
	}
}

// fusepatSoftmaxCEProbs returns softmax_ce_grad's Func for probability
// targets.
func fusepatSoftmaxCEProbs[T float](rows, classes int, scale func([]T, int) T) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x, t, dy := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
		if classes == 0 {
			return nil
		}
		for r := range rows {
			sc := scale(dy, r)
			or, xr, tr := o[r*classes:(r+1)*classes], x[r*classes:(r+1)*classes], t[r*classes:(r+1)*classes]
			var st T
			for _, v := range tr {
				st += v
			}
			m, s := softmaxStats(or, xr, true)
			run := xr[0]
			g := exp(run - m)
			for c, v := range xr {
				if v > run {
					run = v
					g = exp(run - m)
				}
				p := T(or[c]*g) / s
				or[c] = (T(p*st) - tr[c]) * sc
			}
		}
		return nil
	}
}
