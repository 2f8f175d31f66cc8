package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

var logicCompareOps = []ir.Op{ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual, ir.OpEqual, ir.OpNotEqual}

// logicBroadcastShapes are the broadcasting patterns the comparison, where
// and logical tests walk.
var logicBroadcastShapes = [][2][]int{
	{{2, 3}, {2, 3}},
	{{}, {4, 5}},
	{{4, 5}, {}},
	{{7, 3}, {3}},
	{{4, 1}, {4, 5}},
	{{3, 1}, {1, 4}},
	{{2, 1, 4}, {3, 1}},
	{{5, 1, 3, 1}, {1, 2, 1, 4}},
	{{2, 1, 3}, {2, 4, 3}},
	{{0, 3}, {3}},
	{{}, {}},
}

// TestCompareValues checks each comparison by hand on a row that holds
// less, equal and greater pairs, in every numeric dtype.
func TestCompareValues(t *testing.T) {
	a := []float64{1, 2, 3}
	b := []float64{2, 2, 2}
	want := map[ir.Op][]bool{
		ir.OpGreater:      {false, false, true},
		ir.OpGreaterEqual: {false, true, true},
		ir.OpLess:         {true, false, false},
		ir.OpLessEqual:    {true, true, false},
		ir.OpEqual:        {false, true, false},
		ir.OpNotEqual:     {true, false, true},
	}
	for _, op := range logicCompareOps {
		logicCheckCompare[float32](t, op, a, b, want[op])
		logicCheckCompare[float64](t, op, a, b, want[op])
		logicCheckCompare[int32](t, op, a, b, want[op])
		logicCheckCompare[int64](t, op, a, b, want[op])
	}
}

func logicCheckCompare[T number](t *testing.T, op ir.Op, a, b []float64, want []bool) {
	t.Helper()
	s := []int{len(a)}
	out := mustRun(t, op, nil, tensorOf(s, conv[T](a)), tensorOf(s, conv[T](b)))
	checkEqual(t, fmt.Sprintf("%s %s", op, kernels.DTypeOf[T]()), kernels.View[bool](out), want)
}

// TestCompareNaN checks IEEE 754 comparisons, as PyTorch: NaN is neither
// less than, greater than nor equal to anything, itself included, and
// not_equal is true for it; infinities compare as numbers.
func TestCompareNaN(t *testing.T) {
	a := []float64{nan, nan, 1, inf, ninf}
	b := []float64{nan, 1, nan, inf, 0}
	want := map[ir.Op][]bool{
		ir.OpGreater:      {false, false, false, false, false},
		ir.OpGreaterEqual: {false, false, false, true, false},
		ir.OpLess:         {false, false, false, false, true},
		ir.OpLessEqual:    {false, false, false, true, true},
		ir.OpEqual:        {false, false, false, true, false},
		ir.OpNotEqual:     {true, true, true, false, true},
	}
	for _, op := range logicCompareOps {
		logicCheckCompare[float32](t, op, a, b, want[op])
		logicCheckCompare[float64](t, op, a, b, want[op])
	}
}

// TestCompareBroadcast checks every comparison over the broadcasting
// patterns against an index-by-index reference, with small integers so
// that ties are common.
func TestCompareBroadcast(t *testing.T) {
	logicCompareBroadcast[float32](t)
	logicCompareBroadcast[float64](t)
	logicCompareBroadcast[int32](t)
	logicCompareBroadcast[int64](t)
}

func logicCompareBroadcast[T number](t *testing.T) {
	r := newRand(3)
	for _, sh := range logicBroadcastShapes {
		as, bs := ir.Shape(sh[0]), ir.Shape(sh[1])
		a, b := conv[T](make([]float64, as.NumElements())), conv[T](make([]float64, bs.NumElements()))
		for i := range a {
			a[i] = T(r.IntN(3))
		}
		for i := range b {
			b[i] = T(r.IntN(3))
		}
		for _, op := range logicCompareOps {
			out := mustRun(t, op, nil, tensorOf(as, a), tensorOf(bs, b))
			os := out.Type.Shape
			want := make([]bool, os.NumElements())
			for i := range want {
				idx := unravel(os, i)
				x, y := a[bcastIndex(as, idx)], b[bcastIndex(bs, idx)]
				switch op {
				case ir.OpGreater:
					want[i] = x > y
				case ir.OpGreaterEqual:
					want[i] = x >= y
				case ir.OpLess:
					want[i] = x < y
				case ir.OpLessEqual:
					want[i] = x <= y
				case ir.OpEqual:
					want[i] = x == y
				case ir.OpNotEqual:
					want[i] = x != y
				}
			}
			checkEqual(t, fmt.Sprintf("%s %s %v %v", op, kernels.DTypeOf[T](), as, bs), kernels.View[bool](out), want)
		}
	}
}

// TestEqualBool checks equal and not_equal on bool operands, with
// broadcasting, and that the ordering comparisons refuse bool operands.
func TestEqualBool(t *testing.T) {
	a := tensorOf([]int{2, 2}, []bool{true, false, true, false})
	b := tensorOf([]int{2}, []bool{true, true})
	checkEqual(t, "equal bool", kernels.View[bool](mustRun(t, ir.OpEqual, nil, a, b)), []bool{true, false, true, false})
	checkEqual(t, "not_equal bool", kernels.View[bool](mustRun(t, ir.OpNotEqual, nil, a, b)), []bool{false, true, false, true})
	for _, op := range []ir.Op{ir.OpGreater, ir.OpGreaterEqual, ir.OpLess, ir.OpLessEqual} {
		_, err := op.Info().Infer([]ir.Type{ir.TensorOf(ir.Bool, 2), ir.TensorOf(ir.Bool, 2)}, nil)
		if err == nil || !strings.Contains(err.Error(), "numeric") {
			t.Errorf("%s of bools: error %v, want one asking for numeric operands", op, err)
		}
	}
}

// TestLogicInferErrors checks that mismatched operands are refused with
// the types named.
func TestLogicInferErrors(t *testing.T) {
	f32, i32, bl := ir.TensorOf(ir.F32, 2), ir.TensorOf(ir.I32, 2), ir.TensorOf(ir.Bool, 2)
	tests := []struct {
		op   ir.Op
		args []ir.Type
		want string
	}{
		{ir.OpLess, []ir.Type{f32, i32}, "one dtype"},
		{ir.OpEqual, []ir.Type{f32, ir.TensorOf(ir.F32, 3)}, "do not broadcast"},
		{ir.OpWhere, []ir.Type{f32, f32, f32}, "bool cond"},
		{ir.OpWhere, []ir.Type{bl, f32, i32}, "one dtype"},
		{ir.OpWhere, []ir.Type{ir.TensorOf(ir.Bool, 3), f32, f32}, "do not broadcast"},
		{ir.OpLogicalAnd, []ir.Type{bl, f32}, "bool operands"},
		{ir.OpLogicalOr, []ir.Type{bl, ir.TensorOf(ir.Bool, 3)}, "do not broadcast"},
		{ir.OpLogicalNot, []ir.Type{i32}, "bool operand"},
	}
	for _, tc := range tests {
		_, err := tc.op.Info().Infer(tc.args, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.args[len(tc.args)-1].String()) {
			t.Errorf("%s%v: error %v, want one containing %q and the types", tc.op, tc.args, err, tc.want)
		}
	}
}

// TestWhere checks where by hand and over three-way broadcasting against an
// index-by-index reference, in every dtype.
func TestWhere(t *testing.T) {
	c := tensorOf([]int{3}, []bool{true, false, true})
	out := mustRun(t, ir.OpWhere, nil, c, tensorOf([]int{2, 3}, []float64{1, 2, 3, 4, 5, 6}), tensorOf([]int{}, []float64{-1}))
	checkEqual(t, "where", kernels.View[float64](out), []float64{1, -1, 3, 4, -1, 6})

	shapes := [][3][]int{
		{{2, 3}, {2, 3}, {2, 3}},
		{{}, {4}, {4}},
		{{4}, {}, {}},
		{{3, 1}, {1, 4}, {4}},
		{{2, 1, 4}, {3, 1}, {}},
		{{1, 3}, {2, 1}, {2, 3}},
		{{5, 1, 3, 1}, {1, 2, 1, 4}, {3, 1}},
		{{2, 3, 4}, {2, 3, 4}, {4}},
		{{0, 2}, {2}, {1, 2}},
		{{}, {}, {}},
	}
	logicWhere[float32](t, shapes)
	logicWhere[float64](t, shapes)
	logicWhere[int32](t, shapes)
	logicWhere[int64](t, shapes)
	logicWhere[bool](t, shapes)
}

func logicWhere[T kernels.Elem](t *testing.T, shapes [][3][]int) {
	r := newRand(11)
	val := func(n int) []T {
		v := make([]T, n)
		tn := tensorOf(ir.Shape{n}, v)
		f := make([]float64, n)
		for i := range f {
			f[i] = float64(r.IntN(19) - 9)
		}
		if err := kernels.SetFloat64s(tn, f); err != nil {
			t.Fatal(err)
		}
		return kernels.View[T](tn)
	}
	for _, sh := range shapes {
		cs, as, bs := ir.Shape(sh[0]), ir.Shape(sh[1]), ir.Shape(sh[2])
		c := make([]bool, cs.NumElements())
		for i := range c {
			c[i] = r.IntN(2) == 0
		}
		a, b := val(as.NumElements()), val(bs.NumElements())
		out := mustRun(t, ir.OpWhere, nil, tensorOf(cs, c), tensorOf(as, a), tensorOf(bs, b))
		os := out.Type.Shape
		want := make([]T, os.NumElements())
		for i := range want {
			idx := unravel(os, i)
			if c[bcastIndex(cs, idx)] {
				want[i] = a[bcastIndex(as, idx)]
			} else {
				want[i] = b[bcastIndex(bs, idx)]
			}
		}
		checkEqual(t, fmt.Sprintf("where %s %v %v %v", kernels.DTypeOf[T](), cs, as, bs), kernels.View[T](out), want)
	}
}

// TestLogical checks logical_and, logical_or and logical_not by hand and
// over the broadcasting patterns.
func TestLogical(t *testing.T) {
	a := tensorOf([]int{4}, []bool{false, false, true, true})
	b := tensorOf([]int{4}, []bool{false, true, false, true})
	checkEqual(t, "and", kernels.View[bool](mustRun(t, ir.OpLogicalAnd, nil, a, b)), []bool{false, false, false, true})
	checkEqual(t, "or", kernels.View[bool](mustRun(t, ir.OpLogicalOr, nil, a, b)), []bool{false, true, true, true})
	checkEqual(t, "not", kernels.View[bool](mustRun(t, ir.OpLogicalNot, nil, a)), []bool{true, true, false, false})
	checkEqual(t, "not scalar", kernels.View[bool](mustRun(t, ir.OpLogicalNot, nil, tensorOf([]int{}, []bool{true}))), []bool{false})
	checkEqual(t, "not empty", kernels.View[bool](mustRun(t, ir.OpLogicalNot, nil, tensorOf[bool]([]int{0, 3}, nil))), nil)

	r := newRand(5)
	for _, sh := range logicBroadcastShapes {
		as, bs := ir.Shape(sh[0]), ir.Shape(sh[1])
		x, y := make([]bool, as.NumElements()), make([]bool, bs.NumElements())
		for i := range x {
			x[i] = r.IntN(2) == 0
		}
		for i := range y {
			y[i] = r.IntN(2) == 0
		}
		for _, op := range []ir.Op{ir.OpLogicalAnd, ir.OpLogicalOr} {
			out := mustRun(t, op, nil, tensorOf(as, x), tensorOf(bs, y))
			os := out.Type.Shape
			want := make([]bool, os.NumElements())
			for i := range want {
				idx := unravel(os, i)
				p, q := x[bcastIndex(as, idx)], y[bcastIndex(bs, idx)]
				if op == ir.OpLogicalAnd {
					want[i] = p && q
				} else {
					want[i] = p || q
				}
			}
			checkEqual(t, fmt.Sprintf("%s %v %v", op, as, bs), kernels.View[bool](out), want)
		}
	}
}

// TestLogicWalk3 checks the three-operand walk's plan: merged contiguous
// dimensions, dropped size-1 ones, and a single row for equal shapes.
func TestLogicWalk3(t *testing.T) {
	s := ir.Shape{2, 3, 4}
	st := s.Strides()
	w := newLogicWalk3(s, [3][]int{st, st, st})
	if w.inner != 24 || len(w.dims) != 0 {
		t.Errorf("equal shapes: inner %d dims %v, want one row of 24", w.inner, w.dims)
	}
	bias := broadcastStrides(ir.Shape{4}, s)
	w = newLogicWalk3(s, [3][]int{st, bias, st})
	if w.inner != 4 || len(w.dims) != 1 || w.dims[0] != 6 || w.in != [3]int{1, 1, 1} {
		t.Errorf("bias: inner %d dims %v strides %v, want 6 rows of 4", w.inner, w.dims, w.in)
	}
	var rows [][4]int
	w.each(func(o int, off [3]int) { rows = append(rows, [4]int{o, off[0], off[1], off[2]}) })
	if len(rows) != 6 || rows[5] != [4]int{20, 20, 0, 20} {
		t.Errorf("bias rows %v", rows)
	}
}

// TestLogicDoNotAllocate checks that no Func of this family allocates per
// call.
func TestLogicDoNotAllocate(t *testing.T) {
	r := newRand(2)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	bools := func(dims ...int) kernels.Tensor {
		v := make([]bool, ir.Shape(dims).NumElements())
		for i := range v {
			v[i] = r.IntN(2) == 0
		}
		return tensorOf(dims, v)
	}
	tests := []struct {
		op   ir.Op
		args []kernels.Tensor
	}{
		{ir.OpGreater, []kernels.Tensor{f32(4, 5), f32(5)}},
		{ir.OpEqual, []kernels.Tensor{f32(2, 1, 4), f32(3, 1)}},
		{ir.OpNotEqual, []kernels.Tensor{bools(4, 5), bools(4, 1)}},
		{ir.OpWhere, []kernels.Tensor{bools(2, 1, 4), f32(3, 1), f32()}},
		{ir.OpLogicalAnd, []kernels.Tensor{bools(4, 5), bools(5)}},
		{ir.OpLogicalOr, []kernels.Tensor{bools(3, 1), bools(1, 4)}},
		{ir.OpLogicalNot, []kernels.Tensor{bools(4, 5)}},
	}
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			reduceOpsNoAllocs(t, tc.op, nil, tc.args)
		})
	}
}
