package cpu

import (
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// cumsum and trilu (ir/ops_array.go). cumsum adds along its axis one
// element at a time, in order (from the end when reverse), in the element
// type; the GPU kernel adds in the same order, so the two agree bit for bit
// and the result does not depend on the number of workers.

func init() {
	register(ir.OpCumsum, ir.F32, buildCumsum[float32])
	register(ir.OpCumsum, ir.F64, buildCumsum[float64])
	register(ir.OpCumsum, ir.I32, buildCumsum[int32])
	register(ir.OpCumsum, ir.I64, buildCumsum[int64])
	registerAll(ir.OpTrilu, buildTrilu[float32], buildTrilu[float64], buildTrilu[int32], buildTrilu[int64], buildTrilu[bool])
}

// axisSplit returns the sizes before, along and after axis of shape s.
func axisSplit(s ir.Shape, axis int) (outer, n, inner int) {
	return s[:axis].NumElements(), s[axis], s[axis+1:].NumElements()
}

func buildCumsum[T number](n *kernels.Node) (kernels.Func, error) {
	axis, err := ir.Axis(n.Attrs, len(n.Out.Shape))
	if err != nil {
		return nil, err
	}
	outer, m, inner := axisSplit(n.Out.Shape, axis)
	excl, rev := n.Attrs.Bool("exclusive", false), n.Attrs.Bool("reverse", false)
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		for a := range outer {
			for c := range inner {
				base := a*m*inner + c
				var s T
				for k := range m {
					i := k
					if rev {
						i = m - 1 - k
					}
					e := base + i*inner
					if excl {
						o[e] = s
						s += x[e]
					} else {
						s += x[e]
						o[e] = s
					}
				}
			}
		}
		return nil
	}, nil
}

func buildTrilu[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	s := n.Out.Shape
	r := len(s)
	rows, cols := s[r-2], s[r-1]
	mats := s[:r-2].NumElements()
	keep := make([]bool, rows*cols)
	for i := range rows {
		for j := range cols {
			keep[i*cols+j] = ir.TriluKeeps(n.Attrs, i, j)
		}
	}
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[T](args[0])
		var z T
		for m := range mats {
			off := m * rows * cols
			for e, k := range keep {
				if k {
					o[off+e] = x[off+e]
				} else {
					o[off+e] = z
				}
			}
		}
		return nil
	}, nil
}
