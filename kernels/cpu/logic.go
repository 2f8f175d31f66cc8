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
	f := logicCompareRow[T](op)
	w := logicWalk(n)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[bool](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		w.each(func(oo, ao, bo int) {
			f(o[oo:oo+w.inner], a, b, ao, bo, w.ia, w.ib)
		})
		return nil
	}
}

// logicCompareRow returns the row code of greater, greater_equal, less or
// less_equal (less_equal for any other op), o[j] = a[ao+j*ia] > b[bo+j*ib],
// shared by their kernels and the fused elementwise interpreter.
func logicCompareRow[T number](op ir.Op) func(o []bool, a, b []T, ao, bo, ia, ib int) {
	switch op {
	case ir.OpGreater:
		return func(o []bool, a, b []T, ao, bo, ia, ib int) {
			for j := range o {
				o[j] = a[ao] > b[bo]
				ao += ia
				bo += ib
			}
		}
	case ir.OpGreaterEqual:
		return func(o []bool, a, b []T, ao, bo, ia, ib int) {
			for j := range o {
				o[j] = a[ao] >= b[bo]
				ao += ia
				bo += ib
			}
		}
	case ir.OpLess:
		return func(o []bool, a, b []T, ao, bo, ia, ib int) {
			for j := range o {
				o[j] = a[ao] < b[bo]
				ao += ia
				bo += ib
			}
		}
	}
	return func(o []bool, a, b []T, ao, bo, ia, ib int) {
		for j := range o {
			o[j] = a[ao] <= b[bo]
			ao += ia
			bo += ib
		}
	}
}

// logicEquality returns the Func of equal or not_equal over T.
func logicEquality[T kernels.Elem](n *kernels.Node) kernels.Func {
	ne := n.Op == ir.OpNotEqual
	w := logicWalk(n)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, a, b := kernels.View[bool](out), kernels.View[T](args[0]), kernels.View[T](args[1])
		w.each(func(oo, ao, bo int) {
			logicEqualityRow(ne, o[oo:oo+w.inner], a, b, ao, bo, w.ia, w.ib)
		})
		return nil
	}
}

// logicEqualityRow computes one row of equal (or, with ne, not_equal),
// o[j] = a[ao+j*ia] == b[bo+j*ib]: their code, shared by their kernels and
// the fused elementwise interpreter.
func logicEqualityRow[T kernels.Elem](ne bool, o []bool, a, b []T, ao, bo, ia, ib int) {
	for j := range o {
		o[j] = (a[ao] == b[bo]) != ne
		ao += ia
		bo += ib
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
		w.each(func(oo, ao, bo int) {
			logicAndOrRow(and, o[oo:oo+w.inner], a, b, ao, bo, w.ia, w.ib)
		})
		return nil
	}, nil
}

// logicAndOrRow computes one row of logical_and (or, without and,
// logical_or): their code, shared by their kernels and the fused
// elementwise interpreter.
func logicAndOrRow(and bool, o, a, b []bool, ao, bo, ia, ib int) {
	for j := range o {
		if and {
			o[j] = a[ao] && b[bo]
		} else {
			o[j] = a[ao] || b[bo]
		}
		ao += ia
		bo += ib
	}
}

// logicBuildNot builds logical_not.
func logicBuildNot(*kernels.Node) (kernels.Func, error) {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		logicNotRow(kernels.View[bool](out), kernels.View[bool](args[0]))
		return nil
	}, nil
}

// logicNotRow computes o[i] = !x[i]: logical_not's code, shared by its
// kernel and the fused elementwise interpreter.
func logicNotRow(o, x []bool) {
	for i, v := range x[:len(o)] {
		o[i] = !v
	}
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
		w.each(func(oo int, off [3]int) {
			logicWhereRow(o[oo:oo+w.inner], c, a, b, off, w.in)
		})
		return nil
	}, nil
}

// logicWhereRow computes one row of where, o[j] = c[off[0]+j*st[0]] ?
// a[off[1]+j*st[1]] : b[off[2]+j*st[2]]: where's code, shared by its kernel
// and the fused elementwise interpreter.
func logicWhereRow[T kernels.Elem](o []T, c []bool, a, b []T, off, st [3]int) {
	co, ao, bo := off[0], off[1], off[2]
	for j := range o {
		if c[co] {
			o[j] = a[ao]
		} else {
			o[j] = b[bo]
		}
		co += st[0]
		ao += st[1]
		bo += st[2]
	}
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
