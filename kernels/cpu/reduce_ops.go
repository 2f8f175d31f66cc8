package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Reductions beyond sum and mean: max, min, prod, logsumexp, var, std,
// argmax, argmin, and prod's gradient ops prod_exclusive and
// prod_exclusive_grad.
//
// The folds use sum's traversal (reduceWalk): the input is walked in
// row-major order and each element is combined into its output element, so
// each output sees its slice in row-major order of the reduced axes, and
// every result is what a plain loop over the elements in index order
// computes, in the element type. Reductions over trailing axes split their
// leading rows across the workers when large (parTrailing).

func init() {
	for _, op := range []ir.Op{ir.OpMax, ir.OpMin, ir.OpProd} {
		register(op, ir.F32, parTrailing(reduceBuildFold[float32], 1))
		register(op, ir.F64, parTrailing(reduceBuildFold[float64], 1))
		register(op, ir.I32, parTrailing(reduceBuildFold[int32], 1))
		register(op, ir.I64, parTrailing(reduceBuildFold[int64], 1))
	}
	register(ir.OpLogSumExp, ir.F32, parTrailing(reduceBuildLogSumExp[float32], parCostExp))
	register(ir.OpLogSumExp, ir.F64, parTrailing(reduceBuildLogSumExp[float64], parCostExp))
	for _, op := range []ir.Op{ir.OpVar, ir.OpStd} {
		register(op, ir.F32, parTrailing(reduceBuildVar[float32], 3))
		register(op, ir.F64, parTrailing(reduceBuildVar[float64], 3))
	}
	register(ir.OpArgmax, ir.I64, parTrailing(reduceBuildArg, 1))
	register(ir.OpArgmin, ir.I64, parTrailing(reduceBuildArg, 1))
	register(ir.OpProdExclusive, ir.F32, reduceBuildProdExclusive[float32])
	register(ir.OpProdExclusive, ir.F64, reduceBuildProdExclusive[float64])
	register(ir.OpProdExclusiveGrad, ir.F32, reduceBuildProdExclusiveGrad[float32])
	register(ir.OpProdExclusiveGrad, ir.F64, reduceBuildProdExclusiveGrad[float64])
}

// reduceWalk plans the traversal of x (shape xs) reducing {axes} of attrs
// as buildReduce does: a walk over x whose operand offsets are those of the
// output element each input element belongs to (stride 0 along the
// reduced axes). It also returns the number of reduced elements per output
// element. A row of the walk either folds into one output element (w.ia ==
// 0) or adds element-wise into a row of outputs (w.ia == 1).
func reduceWalk(xs ir.Shape, attrs ir.Attrs) (*walk, int, error) {
	axes, err := ir.ReduceAxes(attrs, len(xs))
	if err != nil {
		return nil, 0, err
	}
	dst := ir.ReducedShape(xs, axes, true).Strides()
	count := 1
	for _, ax := range axes {
		dst[ax] = 0
		count *= xs[ax]
	}
	return newWalk(xs, dst, nil), count, nil
}

// reduceLowest and reduceHighest return the identities of max and min: the
// infinities for floats, the extreme values for integers.
func reduceLowest[T number]() T {
	var z T
	switch any(z).(type) {
	case int32:
		return T(any(int32(math.MinInt32)).(int32))
	case int64:
		return T(any(int64(math.MinInt64)).(int64))
	}
	return T(math.Inf(-1))
}

func reduceHighest[T number]() T {
	var z T
	switch any(z).(type) {
	case int32:
		return T(any(int32(math.MaxInt32)).(int32))
	case int64:
		return T(any(int64(math.MaxInt64)).(int64))
	}
	return T(math.Inf(1))
}

// reduceBuildFold builds max, min or prod {axes, keepdims}. Every output
// starts at the identity (-inf or the lowest integer for max, +inf or the
// highest for min, 1 for prod) and the slice is folded in row-major order.
// max and min propagate NaN: once a NaN is met the result stays NaN, as
// torch.amax and torch.amin. ir's inference rejects max and min over an
// axis of size 0, so the identity never shows; prod over no elements is 1.
// Integer products wrap.
func reduceBuildFold[T number](n *kernels.Node) (kernels.Func, error) {
	op := n.Op
	var init T
	switch op {
	case ir.OpMax:
		init = reduceLowest[T]()
	case ir.OpMin:
		init = reduceHighest[T]()
	case ir.OpProd:
		init = 1
	default:
		return nil, fmt.Errorf("%s is not max, min or prod", op)
	}
	w, _, err := reduceWalk(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		for i := range o {
			o[i] = init
		}
		inner, ia := w.inner, w.ia
		w.each(func(xo, oo, _ int) {
			row := x[xo : xo+inner]
			if ia == 0 {
				o[oo] = reduceFoldRow(op, o[oo], row)
				return
			}
			dst := o[oo : oo+inner]
			switch op {
			case ir.OpMax:
				for i, v := range row {
					if v > dst[i] || v != v {
						dst[i] = v
					}
				}
			case ir.OpMin:
				for i, v := range row {
					if v < dst[i] || v != v {
						dst[i] = v
					}
				}
			default:
				for i, v := range row {
					dst[i] *= v
				}
			}
		})
		return nil
	}, nil
}

// reduceFoldRow folds row into acc in order with max, min (both keeping a
// NaN once met) or prod.
func reduceFoldRow[T number](op ir.Op, acc T, row []T) T {
	switch op {
	case ir.OpMax:
		for _, v := range row {
			if v > acc || v != v {
				acc = v
			}
		}
	case ir.OpMin:
		for _, v := range row {
			if v < acc || v != v {
				acc = v
			}
		}
	default:
		for _, v := range row {
			acc *= v
		}
	}
	return acc
}

// reduceBuildLogSumExp builds logsumexp {axes, keepdims} in two passes, as
// torch.logsumexp: m = max of the slice (NaN if it holds one), replaced by
// 0 where it is infinite, then m + log(sum(exp(x - m))) with the sum in
// row-major order in T. No exp overflows; a slice of -inf gives -inf, one
// holding +inf gives +inf, and a slice of no elements gives log(0) = -inf.
func reduceBuildLogSumExp[T float](n *kernels.Node) (kernels.Func, error) {
	w, _, err := reduceWalk(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	m := make([]T, n.Out.Shape.NumElements())
	lowest := T(math.Inf(-1))
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		for i := range m {
			m[i] = lowest
		}
		inner, ia := w.inner, w.ia
		w.each(func(xo, oo, _ int) {
			row := x[xo : xo+inner]
			if ia == 0 {
				m[oo] = reduceFoldRow(ir.OpMax, m[oo], row)
				return
			}
			dst := m[oo : oo+inner]
			for i, v := range row {
				if v > dst[i] || v != v {
					dst[i] = v
				}
			}
		})
		for i, v := range m {
			if math.IsInf(float64(v), 0) {
				m[i] = 0
			}
		}
		clear(o)
		w.each(func(xo, oo, _ int) {
			row := x[xo : xo+inner]
			if ia == 0 {
				o[oo] = expSum(o[oo], row, m[oo])
				return
			}
			dst, mr := o[oo:oo+inner], m[oo:oo+inner]
			for i, v := range row {
				dst[i] += exp(v - mr[i])
			}
		})
		for i, s := range o {
			o[i] = T(math.Log(float64(s))) + m[i]
		}
		return nil
	}, nil
}

// reduceBuildVar builds var or std {axes, keepdims, correction} in two
// passes: the mean (the sum in row-major order in T, divided by N), then
// the sum of (x - mean)^2 in the same order, each square rounded before it
// is added, divided by max(0, N - correction) as torch.var does. A divisor
// of 0 gives inf, or NaN (0/0) where the sum is 0, which includes every
// slice of no elements. std is the square root of var.
func reduceBuildVar[T float](n *kernels.Node) (kernels.Func, error) {
	isStd := false
	switch n.Op {
	case ir.OpVar:
	case ir.OpStd:
		isStd = true
	default:
		return nil, fmt.Errorf("%s is not var or std", n.Op)
	}
	w, count, err := reduceWalk(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	mean := make([]T, n.Out.Shape.NumElements())
	cnt := T(count)
	div := T(math.Max(0, float64(count)-n.Attrs.Float("correction", 1)))
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		inner, ia := w.inner, w.ia
		clear(mean)
		w.each(func(xo, oo, _ int) {
			row := x[xo : xo+inner]
			if ia == 0 {
				s := mean[oo]
				for _, v := range row {
					s += v
				}
				mean[oo] = s
				return
			}
			dst := mean[oo : oo+inner]
			for i, v := range row {
				dst[i] += v
			}
		})
		for i := range mean {
			mean[i] /= cnt
		}
		clear(o)
		w.each(func(xo, oo, _ int) {
			row := x[xo : xo+inner]
			if ia == 0 {
				s, mv := o[oo], mean[oo]
				for _, v := range row {
					d := v - mv
					s += T(d * d)
				}
				o[oo] = s
				return
			}
			dst, mr := o[oo:oo+inner], mean[oo:oo+inner]
			for i, v := range row {
				d := v - mr[i]
				dst[i] += T(d * d)
			}
		})
		for i := range o {
			o[i] /= div
			if isStd {
				o[i] = T(math.Sqrt(float64(o[i])))
			}
		}
		return nil
	}, nil
}

// reduceBuildArg builds argmax or argmin {axes, keepdims} for any numeric
// input; the result is i64. Each output element gets the position, counted
// row-major over the reduced axes, of the first element of its slice that
// no later element beats: ties keep the first, and a NaN beats every number
// (the first NaN wins), as torch.argmax and torch.argmin. Since the walk
// visits each slice in row-major order, the position of an element is the
// number of elements of its slice visited before it. ir's inference rejects
// an axis of size 0, so every output element is written.
func reduceBuildArg(n *kernels.Node) (kernels.Func, error) {
	isMax := false
	switch n.Op {
	case ir.OpArgmax:
		isMax = true
	case ir.OpArgmin:
	default:
		return nil, fmt.Errorf("%s is not argmax or argmin", n.Op)
	}
	w, _, err := reduceWalk(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	nOut := n.Out.Shape.NumElements()
	switch n.Args[0].DType {
	case ir.F32:
		return reduceArg[float32](w, nOut, isMax), nil
	case ir.F64:
		return reduceArg[float64](w, nOut, isMax), nil
	case ir.I32:
		return reduceArg[int32](w, nOut, isMax), nil
	case ir.I64:
		return reduceArg[int64](w, nOut, isMax), nil
	}
	return nil, fmt.Errorf("expected a numeric operand, found %s", n.Args[0])
}

// reduceArg returns the argmax (isMax) or argmin Func for inputs of type T.
func reduceArg[T number](w *walk, nOut int, isMax bool) kernels.Func {
	best := make([]T, nOut)
	seen := make([]int64, nOut)
	// beats reports whether v replaces the best value b so far.
	beats := func(v, b T) bool {
		if v != v {
			return b == b
		}
		if isMax {
			return v > b
		}
		return v < b
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[int64](out), kernels.View[T](args[0])
		clear(seen)
		inner, ia := w.inner, w.ia
		w.each(func(xo, oo, _ int) {
			row := x[xo : xo+inner]
			if ia == 0 {
				k, b, at := seen[oo], best[oo], o[oo]
				for _, v := range row {
					if k == 0 || beats(v, b) {
						b, at = v, k
					}
					k++
				}
				seen[oo], best[oo], o[oo] = k, b, at
				return
			}
			for i, v := range row {
				j := oo + i
				if k := seen[j]; k == 0 || beats(v, best[j]) {
					best[j], o[j] = v, k
				}
				seen[j]++
			}
		})
		return nil
	}
}

// reduceSlices returns, for reducing {axes} of attrs over shape xs, the
// offset in x of the first element of every slice (in row-major order of
// the kept axes) and the offsets within a slice of its elements (in
// row-major order of the reduced axes).
func reduceSlices(xs ir.Shape, attrs ir.Attrs) (bases, elems []int, err error) {
	axes, err := ir.ReduceAxes(attrs, len(xs))
	if err != nil {
		return nil, nil, err
	}
	st := xs.Strides()
	var ks, kst, rs, rst []int
	j := 0
	for i, d := range xs {
		if j < len(axes) && axes[j] == i {
			rs, rst = append(rs, d), append(rst, st[i])
			j++
			continue
		}
		ks, kst = append(ks, d), append(kst, st[i])
	}
	return offsets(ks, kst), offsets(rs, rst), nil
}

// reduceBuildProdExclusive builds prod_exclusive {axes}: every element of a
// slice is replaced by the product of the others, prefix (in row-major
// order) times suffix (multiplied from the end), with no division, so zeros
// are exact: a slice with one zero gives the product of the rest at the
// zero and 0 elsewhere.
func reduceBuildProdExclusive[T float](n *kernels.Node) (kernels.Func, error) {
	bases, elems, err := reduceSlices(n.Args[0].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		for _, b := range bases {
			p := T(1)
			for _, e := range elems {
				o[b+e] = p
				p *= x[b+e]
			}
			s := T(1)
			for k := len(elems) - 1; k >= 0; k-- {
				e := b + elems[k]
				o[e] *= s
				s *= x[e]
			}
		}
		return nil
	}, nil
}

// reduceBuildProdExclusiveGrad builds prod_exclusive_grad(dy, x) {axes}:
// out[j] = sum over i != j of dy[i] times the product of x[k], k not in
// {i, j}, within each slice. That is the first-order coefficient in t of
// the exclusive product of the dual numbers x[k] + t dy[k], computed like
// prod_exclusive with prefix and suffix products of dual numbers (each
// product rounded before it is added): O(n) per slice, no division, exact
// at zeros.
func reduceBuildProdExclusiveGrad[T float](n *kernels.Node) (kernels.Func, error) {
	bases, elems, err := reduceSlices(n.Args[1].Shape, n.Attrs)
	if err != nil {
		return nil, err
	}
	pa := make([]T, len(elems)) // prefix products, value part
	pb := make([]T, len(elems)) // prefix products, t part
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, dy, x := kernels.View[T](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		for _, b := range bases {
			a, d := T(1), T(0)
			for k, e := range elems {
				pa[k], pb[k] = a, d
				xv, dv := x[b+e], dy[b+e]
				a, d = a*xv, T(a*dv)+T(d*xv)
			}
			a, d = 1, 0
			for k := len(elems) - 1; k >= 0; k-- {
				e := b + elems[k]
				o[e] = T(pa[k]*d) + T(pb[k]*a)
				xv, dv := x[e], dy[e]
				a, d = a*xv, T(a*dv)+T(d*xv)
			}
		}
		return nil
	}, nil
}
