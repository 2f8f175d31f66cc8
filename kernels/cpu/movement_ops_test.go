package cpu

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// moveVals converts float64 values to T: a plain conversion for numbers
// (the values used are whole), v != 0 for bool. Data movement commutes
// with this map, so one table of float64 cases checks every dtype.
func moveVals[T kernels.Elem](v []float64) []T {
	out := make([]T, len(v))
	for i, f := range v {
		switch p := any(&out[i]).(type) {
		case *float32:
			*p = float32(f)
		case *float64:
			*p = f
		case *int32:
			*p = int32(f)
		case *int64:
			*p = int64(f)
		case *bool:
			*p = f != 0
		}
	}
	return out
}

// moveArg is one argument of a moveCase: data converted to the dtype under
// test, or (idx set) an integer index tensor.
type moveArg struct {
	shape []int
	vals  []float64
	idx   ir.DType // I32 or I64 for an index; 0 for data
}

func moveData(shape []int, v ...float64) moveArg { return moveArg{shape: shape, vals: v} }
func moveIdx32(shape []int, v ...float64) moveArg {
	return moveArg{shape: shape, vals: v, idx: ir.I32}
}
func moveIdx64(shape []int, v ...float64) moveArg {
	return moveArg{shape: shape, vals: v, idx: ir.I64}
}

func (a moveArg) tensor(dt ir.DType) kernels.Tensor {
	switch dt {
	case ir.F32:
		return tensorOf(a.shape, moveVals[float32](a.vals))
	case ir.F64:
		return tensorOf(a.shape, moveVals[float64](a.vals))
	case ir.I32:
		return tensorOf(a.shape, moveVals[int32](a.vals))
	case ir.I64:
		return tensorOf(a.shape, moveVals[int64](a.vals))
	}
	return tensorOf(a.shape, moveVals[bool](a.vals))
}

// moveCase is a hand-checked forward value: op on args gives want, of
// shape shape.
type moveCase struct {
	name  string
	op    ir.Op
	attrs ir.Attrs
	args  []moveArg
	shape []int
	want  []float64
}

// runMoveCases runs every case in every dtype the op has a kernel for and
// compares the result exactly.
func runMoveCases(t *testing.T, cases []moveCase) {
	t.Helper()
	for _, tc := range cases {
		for _, dt := range allDTypes {
			if !Kernels.Has(tc.op, dt) {
				continue
			}
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				args := make([]kernels.Tensor, len(tc.args))
				for i, a := range tc.args {
					d := dt
					if a.idx != 0 {
						d = a.idx
					}
					args[i] = a.tensor(d)
				}
				out := mustRun(t, tc.op, tc.attrs, args...)
				if !out.Type.Shape.Equal(tc.shape) {
					t.Fatalf("shape %s, want %v", out.Type.Shape, tc.shape)
				}
				want := moveArg{shape: tc.shape, vals: tc.want}.tensor(dt)
				if string(out.Data) != string(want.Data) {
					t.Errorf("got %v, want %v", kernels.Float64s(out), kernels.Float64s(want))
				}
			})
		}
	}
}

func moveAxes(name string, v ...int) ir.Attrs { return ir.MakeAttrs(name, ir.Ints(v...)) }
func moveAxis(v int) ir.Attrs                 { return ir.MakeAttrs("axis", ir.Int(v)) }

// moveIota returns 1, 2, ..., n as float64 (no zero, so that bool keeps some
// information only where a case puts zeros itself).
func moveIota(n int) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = float64(i + 1)
	}
	return v
}

func TestSqueezeUnsqueezeMove(t *testing.T) {
	x := moveData([]int{1, 3, 1, 2}, 1, 0, 2, 3, 0, 4)
	runMoveCases(t, []moveCase{
		{"squeeze all", ir.OpSqueeze, nil, []moveArg{x}, []int{3, 2}, []float64{1, 0, 2, 3, 0, 4}},
		{"squeeze one", ir.OpSqueeze, moveAxes("axes", 2), []moveArg{x}, []int{1, 3, 2}, []float64{1, 0, 2, 3, 0, 4}},
		{"squeeze negative", ir.OpSqueeze, moveAxes("axes", -4), []moveArg{x}, []int{3, 1, 2}, []float64{1, 0, 2, 3, 0, 4}},
		// torch.squeeze(x, dim) leaves a dim whose size is not 1 alone.
		{"squeeze keeps size 3", ir.OpSqueeze, moveAxes("axes", 0, 1), []moveArg{x}, []int{3, 1, 2}, []float64{1, 0, 2, 3, 0, 4}},
		{"squeeze scalar", ir.OpSqueeze, moveAxes("axes", 0), []moveArg{moveData(nil, 5)}, []int{}, []float64{5}},
		{"squeeze nothing", ir.OpSqueeze, nil, []moveArg{moveData([]int{2, 0})}, []int{2, 0}, nil},
		{"unsqueeze front", ir.OpUnsqueeze, moveAxes("axes", 0), []moveArg{moveData([]int{2}, 1, 2)}, []int{1, 2}, []float64{1, 2}},
		{"unsqueeze back", ir.OpUnsqueeze, moveAxes("axes", -1), []moveArg{moveData([]int{2}, 1, 2)}, []int{2, 1}, []float64{1, 2}},
		{"unsqueeze several", ir.OpUnsqueeze, moveAxes("axes", 3, 0, -1), []moveArg{moveData([]int{2, 1}, 1, 0)}, []int{1, 2, 1, 1, 1}, []float64{1, 0}},
		{"unsqueeze scalar", ir.OpUnsqueeze, moveAxes("axes", 0, 1), []moveArg{moveData(nil, 7)}, []int{1, 1}, []float64{7}},
		{"unsqueeze empty", ir.OpUnsqueeze, moveAxes("axes", 1), []moveArg{moveData([]int{0, 3})}, []int{0, 1, 3}, nil},
	})
}

func TestFlipMove(t *testing.T) {
	x := moveData([]int{2, 3}, 1, 2, 3, 4, 0, 6)
	y := moveData([]int{2, 2, 2}, moveIota(8)...)
	runMoveCases(t, []moveCase{
		{"axis 0", ir.OpFlip, moveAxes("axes", 0), []moveArg{x}, []int{2, 3}, []float64{4, 0, 6, 1, 2, 3}},
		{"axis 1", ir.OpFlip, moveAxes("axes", -1), []moveArg{x}, []int{2, 3}, []float64{3, 2, 1, 6, 0, 4}},
		{"both", ir.OpFlip, moveAxes("axes", 1, 0), []moveArg{x}, []int{2, 3}, []float64{6, 0, 4, 3, 2, 1}},
		{"none", ir.OpFlip, moveAxes("axes"), []moveArg{x}, []int{2, 3}, []float64{1, 2, 3, 4, 0, 6}},
		{"outer and inner of 3", ir.OpFlip, moveAxes("axes", 0, 2), []moveArg{y}, []int{2, 2, 2}, []float64{6, 5, 8, 7, 2, 1, 4, 3}},
		{"middle", ir.OpFlip, moveAxes("axes", 1), []moveArg{y}, []int{2, 2, 2}, []float64{3, 4, 1, 2, 7, 8, 5, 6}},
		{"size 1 axis", ir.OpFlip, moveAxes("axes", 0), []moveArg{moveData([]int{1, 3}, 1, 2, 3)}, []int{1, 3}, []float64{1, 2, 3}},
		{"scalar", ir.OpFlip, moveAxes("axes"), []moveArg{moveData(nil, 4)}, []int{}, []float64{4}},
		{"empty", ir.OpFlip, moveAxes("axes", 0, 1), []moveArg{moveData([]int{0, 3})}, []int{0, 3}, nil},
	})
}

func TestConcatStackMove(t *testing.T) {
	// Three arguments along the middle axis of [2,_,2].
	a := moveData([]int{2, 1, 2}, 1, 2, 3, 4)
	b := moveData([]int{2, 2, 2}, 5, 6, 7, 8, 9, 10, 11, 12)
	c := moveData([]int{2, 1, 2}, 13, 0, 15, 16)
	p := moveData([]int{2, 2}, 1, 2, 3, 4)
	q := moveData([]int{2, 2}, 5, 6, 7, 8)
	r := moveData([]int{2, 2}, 9, 0, 11, 12)
	runMoveCases(t, []moveCase{
		{"concat middle of three", ir.OpConcat, moveAxis(1), []moveArg{a, b, c}, []int{2, 4, 2},
			[]float64{1, 2, 5, 6, 7, 8, 13, 0, 3, 4, 9, 10, 11, 12, 15, 16}},
		{"concat negative axis", ir.OpConcat, moveAxis(-2), []moveArg{a, b, c}, []int{2, 4, 2},
			[]float64{1, 2, 5, 6, 7, 8, 13, 0, 3, 4, 9, 10, 11, 12, 15, 16}},
		{"concat axis 0 default", ir.OpConcat, nil, []moveArg{p, q}, []int{4, 2}, []float64{1, 2, 3, 4, 5, 6, 7, 8}},
		{"concat last", ir.OpConcat, moveAxis(1), []moveArg{p, q}, []int{2, 4}, []float64{1, 2, 5, 6, 3, 4, 7, 8}},
		{"concat one", ir.OpConcat, nil, []moveArg{p}, []int{2, 2}, []float64{1, 2, 3, 4}},
		{"concat with empty", ir.OpConcat, moveAxis(1), []moveArg{moveData([]int{2, 0}), p}, []int{2, 2}, []float64{1, 2, 3, 4}},
		{"concat all empty", ir.OpConcat, moveAxis(1), []moveArg{moveData([]int{0, 1}), moveData([]int{0, 2})}, []int{0, 3}, nil},
		{"stack middle of three", ir.OpStack, moveAxis(1), []moveArg{p, q, r}, []int{2, 3, 2},
			[]float64{1, 2, 5, 6, 9, 0, 3, 4, 7, 8, 11, 12}},
		{"stack front default", ir.OpStack, nil, []moveArg{p, q, r}, []int{3, 2, 2},
			[]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 11, 12}},
		{"stack last negative", ir.OpStack, moveAxis(-1), []moveArg{p, q, r}, []int{2, 2, 3},
			[]float64{1, 5, 9, 2, 6, 0, 3, 7, 11, 4, 8, 12}},
		{"stack scalars", ir.OpStack, nil, []moveArg{moveData(nil, 3), moveData(nil, 0), moveData(nil, 4)}, []int{3}, []float64{3, 0, 4}},
		{"stack empty", ir.OpStack, moveAxis(1), []moveArg{moveData([]int{0}), moveData([]int{0})}, []int{0, 2}, nil},
	})
}

func TestSliceMove(t *testing.T) {
	x := moveData([]int{5}, 1, 2, 3, 4, 5) // x[i] = i+1
	slice := func(start, end *int, step int) ir.Attrs {
		a := ir.MakeAttrs("step", ir.Int(step))
		if start != nil {
			a = a.With("start", ir.Int(*start))
		}
		if end != nil {
			a = a.With("end", ir.Int(*end))
		}
		return a
	}
	i := func(v int) *int { return &v }
	// Python: x = [0,1,2,3,4]; the wants are x[s] + 1 for each slice s.
	tests := []struct {
		py         string
		start, end *int
		step       int
		want       []float64
	}{
		{"1:4", i(1), i(4), 1, []float64{2, 3, 4}},
		{"-2:", i(-2), nil, 1, []float64{4, 5}},
		{":-1", nil, i(-1), 1, []float64{1, 2, 3, 4}},
		{"-10:10 (clamped)", i(-10), i(10), 1, []float64{1, 2, 3, 4, 5}},
		{"3:1 (empty)", i(3), i(1), 1, nil},
		{"7: (start past the end)", i(7), nil, 1, nil},
		{"5:", i(5), nil, 1, nil},
		{"-6:", i(-6), nil, 1, []float64{1, 2, 3, 4, 5}},
		{":0", nil, i(0), 1, nil},
		{"-1:-3", i(-1), i(-3), 1, nil},
		{"2:-2", i(2), i(-2), 1, []float64{3}},
		{"::2", nil, nil, 2, []float64{1, 3, 5}},
		{"1::3", i(1), nil, 3, []float64{2, 5}},
		{"-4:-1:2", i(-4), i(-1), 2, []float64{2, 4}},
		{"::3", nil, nil, 3, []float64{1, 4}},
		{"4:100:2", i(4), i(100), 2, []float64{5}},
		{"::10", nil, nil, 10, []float64{1}},
	}
	var cases []moveCase
	for _, tc := range tests {
		cases = append(cases, moveCase{"x[" + tc.py + "]", ir.OpSlice, slice(tc.start, tc.end, tc.step), []moveArg{x}, []int{len(tc.want)}, tc.want})
	}
	// A middle axis of [2,5,2]: y[a][i][b] = 10a + 2i + b + 1 ... taken as
	// y[:, 1::2, :].
	y := make([]float64, 20)
	for k := range y {
		y[k] = float64(k + 1)
	}
	mid := ir.MakeAttrs("axis", ir.Int(1), "start", ir.Int(1), "step", ir.Int(2))
	cases = append(cases,
		moveCase{"y[:,1::2]", ir.OpSlice, mid, []moveArg{moveData([]int{2, 5, 2}, y...)}, []int{2, 2, 2}, []float64{3, 4, 7, 8, 13, 14, 17, 18}},
		moveCase{"y[:,:,-1]", ir.OpSlice, ir.MakeAttrs("axis", ir.Int(-1), "start", ir.Int(-1)), []moveArg{moveData([]int{2, 5, 2}, y...)}, []int{2, 5, 1},
			[]float64{2, 4, 6, 8, 10, 12, 14, 16, 18, 20}},
		moveCase{"y[3:] on axis 0", ir.OpSlice, ir.MakeAttrs("start", ir.Int(3)), []moveArg{moveData([]int{2, 5, 2}, y...)}, []int{0, 5, 2}, nil},
		moveCase{"empty axis", ir.OpSlice, ir.MakeAttrs("axis", ir.Int(1), "start", ir.Int(1), "end", ir.Int(3)), []moveArg{moveData([]int{0, 4})}, []int{0, 2}, nil},
	)
	runMoveCases(t, cases)
}

func TestPadMove(t *testing.T) {
	x := moveData([]int{2, 3}, 1, 2, 3, 4, 5, 6)
	pad := func(value float64, pads ...int) ir.Attrs {
		return ir.MakeAttrs("pads", ir.Ints(pads...), "value", ir.Float(value))
	}
	runMoveCases(t, []moveCase{
		// F.pad(x, (1, 2)) pads the LAST axis: 1 before, 2 after.
		{"last axis", ir.OpPad, pad(0, 1, 2), []moveArg{x}, []int{2, 6}, []float64{0, 1, 2, 3, 0, 0, 0, 4, 5, 6, 0, 0}},
		// F.pad(x, (0, 0, 1, 0), value=9): one row of 9 before.
		{"first axis with value", ir.OpPad, pad(9, 0, 0, 1, 0), []moveArg{x}, []int{3, 3}, []float64{9, 9, 9, 1, 2, 3, 4, 5, 6}},
		{"both axes", ir.OpPad, pad(0, 1, 0, 0, 1), []moveArg{x}, []int{3, 4}, []float64{0, 1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0}},
		// Negative pads crop, as in PyTorch: F.pad(x, (-1, 1)) drops the
		// first column and adds a zero column at the end.
		{"crop left pad right", ir.OpPad, pad(0, -1, 1), []moveArg{x}, []int{2, 3}, []float64{2, 3, 0, 5, 6, 0}},
		{"crop both axes", ir.OpPad, pad(0, -1, -1, 0, -1), []moveArg{x}, []int{1, 1}, []float64{2}},
		{"crop to nothing", ir.OpPad, pad(0, -2, -1), []moveArg{x}, []int{2, 0}, nil},
		{"crop all and pad", ir.OpPad, pad(7, -3, 2), []moveArg{x}, []int{2, 2}, []float64{7, 7, 7, 7}},
		{"no pads", ir.OpPad, pad(0), []moveArg{x}, []int{2, 3}, []float64{1, 2, 3, 4, 5, 6}},
		{"scalar", ir.OpPad, pad(0), []moveArg{moveData(nil, 3)}, []int{}, []float64{3}},
		{"empty input", ir.OpPad, pad(4, 1, 1), []moveArg{moveData([]int{2, 0})}, []int{2, 2}, []float64{4, 4, 4, 4}},
		{"empty rows", ir.OpPad, pad(4, 1, 1), []moveArg{moveData([]int{0, 2})}, []int{0, 4}, nil},
		{"3-D middle", ir.OpPad, pad(5, 0, 0, 1, 0), []moveArg{moveData([]int{2, 1, 2}, 1, 2, 3, 4)}, []int{2, 2, 2}, []float64{5, 5, 1, 2, 5, 5, 3, 4}},
	})

	// The value converts to the element type: truncation toward zero for
	// integers, as torch casts the fill value; nonzero is true for bool.
	v := ir.MakeAttrs("pads", ir.Ints(1, 0), "value", ir.Float(-1.7))
	checkEqual(t, "i32 fill", kernels.View[int32](mustRun(t, ir.OpPad, v, tensorOf([]int{1}, []int32{5}))), []int32{-1, 5})
	checkEqual(t, "i64 fill", kernels.View[int64](mustRun(t, ir.OpPad, v, tensorOf([]int{1}, []int64{5}))), []int64{-1, 5})
	checkEqual(t, "f32 fill", kernels.View[float32](mustRun(t, ir.OpPad, v, tensorOf([]int{1}, []float32{5}))), []float32{-1.7, 5})
	checkEqual(t, "bool fill", kernels.View[bool](mustRun(t, ir.OpPad, v, tensorOf([]int{1}, []bool{false}))), []bool{true, false})
}

func TestGatherMove(t *testing.T) {
	// torch.gather(t, 1, [[0,0],[1,0]]) with t = [[1,2],[3,4]] is
	// [[1,1],[4,3]] (the example of the PyTorch docs).
	tt := moveData([]int{2, 2}, 1, 2, 3, 4)
	x := moveData([]int{3, 2}, 1, 2, 3, 0, 5, 6)
	runMoveCases(t, []moveCase{
		{"docs axis 1", ir.OpGather, moveAxis(1), []moveArg{tt, moveIdx64([]int{2, 2}, 0, 0, 1, 0)}, []int{2, 2}, []float64{1, 1, 4, 3}},
		{"docs axis -1 i32", ir.OpGather, moveAxis(-1), []moveArg{tt, moveIdx32([]int{2, 2}, 0, 0, 1, 0)}, []int{2, 2}, []float64{1, 1, 4, 3}},
		// out[i][j] = x[index[i][j]][j]; index may be longer than x along
		// the axis and shorter elsewhere.
		{"axis 0", ir.OpGather, moveAxis(0), []moveArg{x, moveIdx64([]int{4, 1}, 2, 0, 2, 1)}, []int{4, 1}, []float64{5, 1, 5, 3}},
		{"axis 0 both columns", ir.OpGather, moveAxis(0), []moveArg{x, moveIdx32([]int{2, 2}, 1, 2, 0, 0)}, []int{2, 2}, []float64{3, 6, 1, 2}},
		{"smaller index", ir.OpGather, moveAxis(1), []moveArg{x, moveIdx64([]int{2, 1}, 1, 1)}, []int{2, 1}, []float64{2, 0}},
		{"empty index", ir.OpGather, moveAxis(0), []moveArg{x, moveIdx64([]int{0, 2})}, []int{0, 2}, nil},
		{"empty x axis", ir.OpGather, moveAxis(1), []moveArg{moveData([]int{2, 0}), moveIdx64([]int{2, 0})}, []int{2, 0}, nil},
		{"1-D", ir.OpGather, moveAxis(0), []moveArg{moveData([]int{3}, 7, 8, 9), moveIdx32([]int{4}, 2, 2, 0, 1)}, []int{4}, []float64{9, 9, 7, 8}},
	})
}

func TestIndexSelectEmbeddingMove(t *testing.T) {
	x := moveData([]int{3, 2}, 1, 2, 3, 0, 5, 6)
	runMoveCases(t, []moveCase{
		{"rows", ir.OpIndexSelect, moveAxis(0), []moveArg{x, moveIdx64([]int{4}, 2, 0, 2, 1)}, []int{4, 2}, []float64{5, 6, 1, 2, 5, 6, 3, 0}},
		{"columns i32", ir.OpIndexSelect, moveAxis(-1), []moveArg{x, moveIdx32([]int{3}, 1, 1, 0)}, []int{3, 3}, []float64{2, 2, 1, 0, 0, 3, 6, 6, 5}},
		{"middle axis", ir.OpIndexSelect, moveAxis(1), []moveArg{moveData([]int{2, 3, 2}, moveIota(12)...), moveIdx64([]int{2}, 2, 0)}, []int{2, 2, 2},
			[]float64{5, 6, 1, 2, 11, 12, 7, 8}},
		// A scalar index selects one slice and keeps the axis, as
		// torch.index_select does with a 0-d index.
		{"scalar index", ir.OpIndexSelect, moveAxis(0), []moveArg{x, moveIdx64(nil, 1)}, []int{1, 2}, []float64{3, 0}},
		{"empty index", ir.OpIndexSelect, moveAxis(0), []moveArg{x, moveIdx64([]int{0})}, []int{0, 2}, nil},
		{"empty x", ir.OpIndexSelect, moveAxis(1), []moveArg{moveData([]int{0, 3}), moveIdx64([]int{2}, 2, 0)}, []int{0, 2}, nil},
		// F.embedding(indices, table): table rows at each index.
		{"embedding 2-D indices", ir.OpEmbedding, nil, []moveArg{moveData([]int{4, 2}, 1, 2, 3, 4, 5, 0, 7, 8), moveIdx64([]int{2, 2}, 1, 3, 1, 0)}, []int{2, 2, 2},
			[]float64{3, 4, 7, 8, 3, 4, 1, 2}},
		{"embedding i32 1-D", ir.OpEmbedding, nil, []moveArg{moveData([]int{3, 1}, 4, 5, 6), moveIdx32([]int{3}, 2, 2, 0)}, []int{3, 1}, []float64{6, 6, 4}},
		{"embedding scalar index", ir.OpEmbedding, nil, []moveArg{moveData([]int{3, 2}, 1, 2, 3, 4, 5, 6), moveIdx64(nil, 2)}, []int{2}, []float64{5, 6}},
		{"embedding empty indices", ir.OpEmbedding, nil, []moveArg{moveData([]int{3, 2}, 1, 2, 3, 4, 5, 6), moveIdx64([]int{2, 0})}, []int{2, 0, 2}, nil},
		{"embedding empty rows", ir.OpEmbedding, nil, []moveArg{moveData([]int{3, 0}), moveIdx64([]int{2}, 0, 2)}, []int{2, 0}, nil},
	})
}

func TestScatterAddIndexAddMove(t *testing.T) {
	ones := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	runMoveCases(t, []moveCase{
		// torch.zeros(3,5).scatter_add(0, [[0,1,2,0,0]], torch.ones(2,5)),
		// the example of the PyTorch docs: src's second row is unused.
		{"docs one row", ir.OpScatterAdd, moveAxis(0), []moveArg{moveData([]int{3, 5}, make([]float64, 15)...), moveIdx64([]int{1, 5}, 0, 1, 2, 0, 0), moveData([]int{2, 5}, ones(10)...)},
			[]int{3, 5}, []float64{1, 0, 0, 1, 1, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}},
		{"docs two rows", ir.OpScatterAdd, moveAxis(0), []moveArg{moveData([]int{3, 5}, make([]float64, 15)...), moveIdx32([]int{2, 5}, 0, 1, 2, 0, 0, 0, 1, 2, 2, 2), moveData([]int{2, 5}, ones(10)...)},
			[]int{3, 5}, []float64{2, 0, 0, 1, 1, 0, 2, 0, 0, 0, 0, 0, 2, 1, 1}},
		// Along axis 1 with x nonzero: out[i][index[i][j]] += src[i][j].
		{"axis 1 onto x", ir.OpScatterAdd, moveAxis(-1), []moveArg{moveData([]int{2, 3}, 1, 2, 3, 4, 5, 6), moveIdx64([]int{2, 2}, 2, 2, 0, 1), moveData([]int{2, 3}, 10, 20, 99, 30, 40, 99)},
			[]int{2, 3}, []float64{1, 2, 33, 34, 45, 6}},
		{"empty index", ir.OpScatterAdd, moveAxis(0), []moveArg{moveData([]int{2}, 1, 2), moveIdx64([]int{0}), moveData([]int{3}, 4, 5, 6)}, []int{2}, []float64{1, 2}},
		{"empty x", ir.OpScatterAdd, moveAxis(0), []moveArg{moveData([]int{2, 0}), moveIdx64([]int{1, 0}), moveData([]int{1, 0})}, []int{2, 0}, nil},
		// torch.ones(5,3).index_add_(0, [0,4,2], [[1,2,3],[4,5,6],[7,8,9]]),
		// the example of the PyTorch docs.
		{"docs index_add", ir.OpIndexAdd, moveAxis(0), []moveArg{moveData([]int{5, 3}, ones(15)...), moveIdx64([]int{3}, 0, 4, 2), moveData([]int{3, 3}, moveIota(9)...)},
			[]int{5, 3}, []float64{2, 3, 4, 1, 1, 1, 8, 9, 10, 1, 1, 1, 5, 6, 7}},
		{"repeated index axis 1", ir.OpIndexAdd, moveAxis(1), []moveArg{moveData([]int{2, 2}, 1, 2, 3, 4), moveIdx32([]int{3}, 1, 1, 0), moveData([]int{2, 3}, 10, 20, 30, 40, 50, 60)},
			[]int{2, 2}, []float64{31, 32, 63, 94}},
		{"scalar index", ir.OpIndexAdd, moveAxis(0), []moveArg{moveData([]int{2, 1}, 1, 2), moveIdx64(nil, 1), moveData([]int{1, 1}, 5)}, []int{2, 1}, []float64{1, 7}},
		{"empty index_add", ir.OpIndexAdd, moveAxis(0), []moveArg{moveData([]int{2, 1}, 1, 2), moveIdx64([]int{0}), moveData([]int{0, 1})}, []int{2, 1}, []float64{1, 2}},
	})
}

// TestIndexedAddOrder pins the order of summation: an f32 element gets its
// contributions one at a time in increasing source position. With
// contributions 1, 1e8, -1e8 that is ((x+1)+1e8)-1e8 = 0 in float32 (1e8+1
// rounds to 1e8), whereas another order could give 1.
func TestIndexedAddOrder(t *testing.T) {
	x := tensorOf([]int{1}, []float32{0})
	src := tensorOf([]int{3}, []float32{1, 1e8, -1e8})
	idx := tensorOf([]int{3}, []int64{0, 0, 0})
	for _, op := range []ir.Op{ir.OpScatterAdd, ir.OpIndexAdd} {
		out := mustRun(t, op, moveAxis(0), x, idx, src)
		checkEqual(t, op.String(), kernels.View[float32](out), []float32{0})
	}
	src = tensorOf([]int{3}, []float32{1e8, -1e8, 1})
	for _, op := range []ir.Op{ir.OpScatterAdd, ir.OpIndexAdd} {
		out := mustRun(t, op, moveAxis(0), x, idx, src)
		checkEqual(t, op.String()+" reordered", kernels.View[float32](out), []float32{1})
	}
}

// TestGatherScatterAddRandom checks gather and scatter_add on random shapes
// and axes against naive loops over every index position in increasing
// order (so float sums must agree bitwise), and that they are adjoint:
// sum(gather(x) * g) = sum(x * scatter_add(0, g)).
func TestGatherScatterAddRandom(t *testing.T) {
	testGatherScatterRandom[float32, int32](t, 1)
	testGatherScatterRandom[float64, int64](t, 2)
	testGatherScatterRandom[int32, int64](t, 3)
	testGatherScatterRandom[int64, int32](t, 4)
}

func testGatherScatterRandom[T number, I integer](t *testing.T, seed uint64) {
	r := newRand(seed)
	for trial := range 30 {
		rank := 1 + r.IntN(3)
		xs := make(ir.Shape, rank)
		is := make(ir.Shape, rank)
		ss := make(ir.Shape, rank)
		for d := range xs {
			xs[d] = 1 + r.IntN(4)
			is[d] = r.IntN(xs[d] + 1)
			ss[d] = is[d] + r.IntN(2)
		}
		axis := r.IntN(rank)
		is[axis] = r.IntN(6)
		ss[axis] = is[axis] + r.IntN(2)
		x := randVals[T](r, xs.NumElements(), false)
		src := randVals[T](r, ss.NumElements(), false)
		idx := make([]I, is.NumElements())
		for i := range idx {
			idx[i] = I(r.IntN(xs[axis]))
		}
		name := fmt.Sprintf("%s/%d/x%s/index%s/src%s/axis%d", kernels.DTypeOf[T](), trial, xs, is, ss, axis)
		at := moveAxis(axis)
		if r.IntN(2) == 0 {
			at = moveAxis(axis - rank)
		}
		xt, it, st := tensorOf(xs, x), tensorOf(is, idx), tensorOf(ss, src)
		gathered := kernels.View[T](mustRun(t, ir.OpGather, at, xt, it))
		scattered := kernels.View[T](mustRun(t, ir.OpScatterAdd, at, xt, it, st))

		wantG := make([]T, len(idx))
		wantS := append([]T(nil), x...)
		xst, sst := xs.Strides(), ss.Strides()
		for p := range idx {
			pos := unravel(is, p)
			xo, so := 0, 0
			for d, i := range pos {
				so += i * sst[d]
				if d == axis {
					i = int(idx[p])
				}
				xo += i * xst[d]
			}
			wantG[p] = x[xo]
			wantS[xo] += src[so]
		}
		checkEqual(t, name+" gather", gathered, wantG)
		checkEqual(t, name+" scatter_add", scattered, wantS)
	}
}

// TestMoveIndexErrors checks that an index out of range, negative ones
// included (PyTorch rejects them in all these ops), is an error naming the
// op, the position, the value and the bound.
func TestMoveIndexErrors(t *testing.T) {
	f := func(dims []int) kernels.Tensor {
		return tensorOf(dims, make([]float64, ir.Shape(dims).NumElements()))
	}
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
		want  string
	}{
		{ir.OpGather, moveAxis(1), []kernels.Tensor{f([]int{2, 3}), tensorOf([]int{2, 2}, []int64{0, 1, 2, 3})}, "gather: index[1,1] = 3 is out of range for axis 1 of size 3"},
		{ir.OpGather, moveAxis(0), []kernels.Tensor{f([]int{2, 3}), tensorOf([]int{1, 2}, []int32{0, -1})}, "gather: index[0,1] = -1 is out of range for axis 0 of size 2"},
		{ir.OpGather, moveAxis(0), []kernels.Tensor{f([]int{0, 3}), tensorOf([]int{1, 1}, []int32{0})}, "index[0,0] = 0 is out of range for axis 0 of size 0"},
		{ir.OpIndexSelect, moveAxis(1), []kernels.Tensor{f([]int{2, 3}), tensorOf([]int{3}, []int64{0, 3, 1})}, "index_select: index[1] = 3 is out of range for axis 1 of size 3"},
		{ir.OpIndexSelect, moveAxis(0), []kernels.Tensor{f([]int{0, 3}), tensorOf([]int{1}, []int64{-1})}, "index_select: index[0] = -1 is out of range for axis 0 of size 0"},
		{ir.OpEmbedding, nil, []kernels.Tensor{f([]int{4, 2}), tensorOf([]int{2, 2}, []int32{0, 1, 2, 4})}, "embedding: indices[1,1] = 4 is out of range for axis 0 of size 4"},
		{ir.OpEmbedding, nil, []kernels.Tensor{f([]int{4, 2}), tensorOf([]int{}, []int64{-2})}, "embedding: indices[] = -2 is out of range"},
		{ir.OpScatterAdd, moveAxis(0), []kernels.Tensor{f([]int{2, 3}), tensorOf([]int{1, 3}, []int64{1, 2, 0}), f([]int{1, 3})}, "scatter_add: index[0,1] = 2 is out of range for axis 0 of size 2"},
		{ir.OpIndexAdd, moveAxis(0), []kernels.Tensor{f([]int{2, 3}), tensorOf([]int{2}, []int32{-1, 0}), f([]int{2, 3})}, "index_add: index[0] = -1 is out of range for axis 0 of size 2"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			_, err := run(t, tc.op, tc.attrs, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestMoveInferErrors checks that inference (which every builder runs
// first) rejects what the ops do not define, saying what it expected.
func TestMoveInferErrors(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	i64 := func(dims ...int) ir.Type { return ir.TensorOf(ir.I64, dims...) }
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []ir.Type
		want  string
	}{
		{ir.OpSqueeze, moveAxes("axes", 2), []ir.Type{f32(1, 2)}, "axis 2 out of range for rank 2"},
		{ir.OpSqueeze, moveAxes("axes", 1), []ir.Type{f32()}, "expected 0 or -1"},
		{ir.OpUnsqueeze, moveAxes("axes", 0, -3), []ir.Type{f32(2)}, "repeated"},
		{ir.OpUnsqueeze, moveAxes("axes", 2), []ir.Type{f32(2)}, "axis 2 out of range for rank 2"},
		{ir.OpFlip, moveAxes("axes", 0, 0), []ir.Type{f32(2)}, "repeated"},
		{ir.OpConcat, nil, []ir.Type{f32(2, 3), f32(2, 4)}, "equal dims except on axis 0"},
		{ir.OpConcat, nil, []ir.Type{f32(2, 3), ir.TensorOf(ir.F64, 2, 3)}, "dtype f32 and rank 2"},
		{ir.OpConcat, nil, []ir.Type{f32(), f32()}, "rank >= 1"},
		{ir.OpStack, nil, []ir.Type{f32(2), f32(3)}, "operands of one type"},
		{ir.OpStack, moveAxis(2), []ir.Type{f32(2), f32(2)}, "axis 2 out of range for rank 2"},
		{ir.OpSlice, ir.MakeAttrs("step", ir.Int(0)), []ir.Type{f32(3)}, "step must be at least 1"},
		{ir.OpSlice, ir.MakeAttrs("step", ir.Int(-1)), []ir.Type{f32(3)}, "step must be at least 1"},
		{ir.OpSlice, nil, []ir.Type{f32()}, "rank >= 1"},
		{ir.OpPad, moveAxes("pads", 1), []ir.Type{f32(3)}, "even length"},
		{ir.OpPad, moveAxes("pads", 1, 1, 1, 1), []ir.Type{f32(3)}, "even length <= 2"},
		{ir.OpPad, moveAxes("pads", -2, -2), []ir.Type{f32(3)}, "size -1"},
		{ir.OpGather, moveAxis(0), []ir.Type{f32(2, 3), i64(2)}, "index of x's rank 2"},
		{ir.OpGather, moveAxis(0), []ir.Type{f32(2, 3), i64(1, 4)}, "at most x's except on axis 0"},
		{ir.OpGather, moveAxis(0), []ir.Type{f32(2, 3), f32(1, 3)}, "integer (i32 or i64) index"},
		{ir.OpIndexSelect, moveAxis(0), []ir.Type{f32(2, 3), i64(1, 1)}, "1-D (or scalar) index"},
		{ir.OpEmbedding, nil, []ir.Type{f32(4), i64(2)}, "table of rank 2"},
		{ir.OpEmbedding, nil, []ir.Type{f32(4, 2), ir.TensorOf(ir.Bool, 2)}, "integer (i32 or i64) indices"},
		{ir.OpScatterAdd, moveAxis(0), []ir.Type{f32(2, 3), i64(1, 3), f32(1, 2)}, "at most src's"},
		{ir.OpScatterAdd, moveAxis(0), []ir.Type{ir.TensorOf(ir.Bool, 2), i64(1), ir.TensorOf(ir.Bool, 2)}, "numeric x and src"},
		{ir.OpIndexAdd, moveAxis(1), []ir.Type{f32(2, 3), i64(2), f32(2, 3)}, "expected src of shape [2,2]"},
		{ir.OpIndexAdd, moveAxis(0), []ir.Type{f32(2, 3), i64(2), ir.TensorOf(ir.F64, 2, 3)}, "one dtype"},
	}
	for _, tc := range tests {
		t.Run(tc.op.String()+"/"+tc.want, func(t *testing.T) {
			canon, err := ir.Canonical(tc.op, tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			_, err = tc.op.Info().Infer(tc.args, canon)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Infer = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestMoveBuildRejectsBadNodes checks the variadic ops' registration checks.
func TestMoveBuildRejectsBadNodes(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"no args", kernels.Node{Op: ir.OpConcat, Out: f32(2)}, "takes at least 1"},
		{"wrong result", kernels.Node{Op: ir.OpConcat, Attrs: moveAxis(0), Args: []ir.Type{f32(2), f32(3)}, Out: f32(4)}, "does not match"},
		{"negative dim", kernels.Node{Op: ir.OpStack, Attrs: moveAxis(0), Args: []ir.Type{f32(-1)}, Out: f32(1, -1)}, "negative"},
		{"bad stack", kernels.Node{Op: ir.OpStack, Attrs: moveAxis(0), Args: []ir.Type{f32(2), f32(3)}, Out: f32(2, 2)}, "one type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Kernels.Build(&tc.n)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Build = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestMoveFuncsDoNotAllocate checks that no Func of this family allocates
// per call.
func TestMoveFuncsDoNotAllocate(t *testing.T) {
	r := newRand(11)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	idx := tensorOf([]int{3, 2}, []int64{0, 1, 3, 2, 1, 1})
	row := tensorOf([]int{4}, []int32{3, 0, 0, 2})
	tests := []allocCase{
		{ir.OpSqueeze, nil, []kernels.Tensor{f32(4, 1, 5)}},
		{ir.OpUnsqueeze, moveAxes("axes", 1), []kernels.Tensor{f32(4, 5)}},
		{ir.OpFlip, moveAxes("axes", 0, 2), []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpConcat, moveAxis(1), []kernels.Tensor{f32(2, 3, 4), f32(2, 1, 4), f32(2, 2, 4)}},
		{ir.OpStack, moveAxis(1), []kernels.Tensor{f32(3, 4), f32(3, 4)}},
		{ir.OpSlice, ir.MakeAttrs("axis", ir.Int(1), "start", ir.Int(1), "step", ir.Int(2)), []kernels.Tensor{f32(3, 5, 2)}},
		{ir.OpPad, moveAxes("pads", 1, -1, 2, 0), []kernels.Tensor{f32(3, 4)}},
		{ir.OpGather, moveAxis(0), []kernels.Tensor{f32(4, 2), idx}},
		{ir.OpIndexSelect, moveAxis(0), []kernels.Tensor{f32(4, 5), row}},
		{ir.OpEmbedding, nil, []kernels.Tensor{f32(4, 5), idx}},
		{ir.OpScatterAdd, moveAxis(0), []kernels.Tensor{f32(4, 2), idx, f32(3, 2)}},
		{ir.OpIndexAdd, moveAxis(0), []kernels.Tensor{f32(4, 5), row, f32(4, 5)}},
	}
	checkNoAllocs(t, tests)
}
