package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Comparisons, where and the logical ops. All broadcast under NumPy rules
// and walk their output in row-major order with the shared strided walk
// (where, which has three operands, with logicWalk3 below).

func init() {
	for _, op := range []ir.Op{ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual, ir.OpEqual, ir.OpNotEqual} {
		register(op, ir.Bool, logicBuildCompare)
	}
	registerAll(ir.OpWhere, logicBuildWhere[float32], logicBuildWhere[float64], logicBuildWhere[int32], logicBuildWhere[int64], logicBuildWhere[bool])
	register(ir.OpLogicalAnd, ir.Bool, logicBuildBinary)
	register(ir.OpLogicalOr, ir.Bool, logicBuildBinary)
	register(ir.OpLogicalNot, ir.Bool, logicBuildNot)
}

// logicBuildCompare builds a comparison; the kernel is keyed by its bool
// result, so it dispatches on the operands' dtype here. Comparisons follow
// IEEE 754 as PyTorch does: every comparison with a NaN is false except
// not_equal, which is true.
func logicBuildCompare(n *kernels.Node) (kernels.Func, error) {
	switch n.Op {
	case ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual, ir.OpEqual, ir.OpNotEqual:
	default:
		return nil, fmt.Errorf("%s is not a comparison", n.Op)
	}
	switch n.Args[0].DType {
	case ir.F32:
		return logicCompare[float32](n), nil
	case ir.F64:
		return logicCompare[float64](n), nil
	case ir.I32:
		return logicCompare[int32](n), nil
	case ir.I64:
		return logicCompare[int64](n), nil
	case ir.Bool:
		if n.Op == ir.OpEqual || n.Op == ir.OpNotEqual {
			return logicEquality[bool](n), nil
		}
	}
	return nil, fmt.Errorf("%s is not defined for %s", n.Op, n.Args[0])
}

// logicWalk returns the walk over the output of a binary broadcast node.
func logicWalk(n *kernels.Node) *walk {
	return newWalk(n.Out.Shape, broadcastStrides(n.Args[0].Shape, n.Out.Shape), broadcastStrides(n.Args[1].Shape, n.Out.Shape))
}

// logicCompare returns the Func of comparison n.Op over T.
func logicCompare[T number](n *kernels.Node) kernels.Func {
	op := n.Op
	if op == ir.OpEqual || op == ir.OpNotEqual {
		return logicEquality[T](n)
	}
	w := logicWalk(n)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[bool](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		inner, ia, ib := w.inner, w.ia, w.ib
		w.each(func(oo, ao, bo int) {
			row := o[oo : oo+inner]
			switch op {
			case ir.OpGreater:
				for j := range row {
					row[j] = a[ao] > b[bo]
					ao += ia
					bo += ib
				}
			case ir.OpGreaterEqual:
				for j := range row {
					row[j] = a[ao] >= b[bo]
					ao += ia
					bo += ib
				}
			case ir.OpLess:
				for j := range row {
					row[j] = a[ao] < b[bo]
					ao += ia
					bo += ib
				}
			default: // ir.OpLessEqual
				for j := range row {
					row[j] = a[ao] <= b[bo]
					ao += ia
					bo += ib
				}
			}
		})
		return nil
	}
}

// logicEquality returns the Func of equal or not_equal over T.
func logicEquality[T kernels.Elem](n *kernels.Node) kernels.Func {
	ne := n.Op == ir.OpNotEqual
	w := logicWalk(n)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[bool](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		inner, ia, ib := w.inner, w.ia, w.ib
		w.each(func(oo, ao, bo int) {
			row := o[oo : oo+inner]
			for j := range row {
				row[j] = (a[ao] == b[bo]) != ne
				ao += ia
				bo += ib
			}
		})
		return nil
	}
}

// logicBuildBinary builds logical_and or logical_or.
func logicBuildBinary(n *kernels.Node) (kernels.Func, error) {
	and := false
	switch n.Op {
	case ir.OpLogicalAnd:
		and = true
	case ir.OpLogicalOr:
	default:
		return nil, fmt.Errorf("%s is not logical_and or logical_or", n.Op)
	}
	w := logicWalk(n)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[bool](out), kernels.View[bool](args[0]), kernels.View[bool](args[1])
		inner, ia, ib := w.inner, w.ia, w.ib
		w.each(func(oo, ao, bo int) {
			row := o[oo : oo+inner]
			for j := range row {
				if and {
					row[j] = a[ao] && b[bo]
				} else {
					row[j] = a[ao] || b[bo]
				}
				ao += ia
				bo += ib
			}
		})
		return nil
	}, nil
}

// logicBuildNot builds logical_not.
func logicBuildNot(*kernels.Node) (kernels.Func, error) {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[bool](out), kernels.View[bool](args[0])
		x = x[:len(o)]
		for i, v := range x {
			o[i] = !v
		}
		return nil
	}, nil
}

// logicBuildWhere builds where(cond, a, b) for a and b of type T.
func logicBuildWhere[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	shape := n.Out.Shape
	w := newLogicWalk3(shape, [3][]int{
		broadcastStrides(n.Args[0].Shape, shape),
		broadcastStrides(n.Args[1].Shape, shape),
		broadcastStrides(n.Args[2].Shape, shape),
	})
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, c := kernels.View[T](out), kernels.View[bool](args[0])
		a, b := kernels.View[T](args[1]), kernels.View[T](args[2])
		inner, st := w.inner, w.in
		w.each(func(oo int, off [3]int) {
			co, ao, bo := off[0], off[1], off[2]
			row := o[oo : oo+inner]
			for j := range row {
				if c[co] {
					row[j] = a[ao]
				} else {
					row[j] = b[bo]
				}
				co += st[0]
				ao += st[1]
				bo += st[2]
			}
		})
		return nil
	}, nil
}

// logicWalk3 is walk for three strided operands: a row-major traversal of a
// contiguous output shape, with size-1 dimensions dropped and neighbours
// that are contiguous for every operand merged, as rows along the innermost
// remaining dimension.
type logicWalk3 struct {
	n, inner int
	in       [3]int   // operand strides along a row
	dims     []int    // the outer dimensions, outermost first
	st       [][3]int // operand strides along them
	idx      []int    // odometer scratch
}

// newLogicWalk3 plans the traversal of shape out, where operand k advances
// by s[k][i] along out's dimension i.
func newLogicWalk3(out ir.Shape, s [3][]int) *logicWalk3 {
	var dims []int
	var st [][3]int
	for i, d := range out {
		if d == 1 {
			continue
		}
		cur := [3]int{s[0][i], s[1][i], s[2][i]}
		if k := len(dims) - 1; k >= 0 && st[k] == [3]int{cur[0] * d, cur[1] * d, cur[2] * d} {
			dims[k] *= d
			st[k] = cur
			continue
		}
		dims = append(dims, d)
		st = append(st, cur)
	}
	w := &logicWalk3{n: out.NumElements(), inner: 1}
	if k := len(dims) - 1; k >= 0 {
		w.inner, w.in = dims[k], st[k]
		dims, st = dims[:k], st[:k]
	}
	w.dims, w.st = dims, st
	w.idx = make([]int, len(dims))
	return w
}

// each calls f for every row in order with the offset of its first element
// in the output and in each operand. It does nothing for an empty output.
func (w *logicWalk3) each(f func(o int, off [3]int)) {
	if w.n == 0 {
		return
	}
	idx := w.idx
	clear(idx)
	var off [3]int
	for o := 0; o < w.n; o += w.inner {
		f(o, off)
		for k := len(idx) - 1; k >= 0; k-- {
			idx[k]++
			for j := range off {
				off[j] += w.st[k][j]
			}
			if idx[k] < w.dims[k] {
				break
			}
			for j := range off {
				off[j] -= w.st[k][j] * w.dims[k]
			}
			idx[k] = 0
		}
	}
}
