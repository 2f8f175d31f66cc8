package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestReduceValues checks hand-computed sums and means.
func TestReduceValues(t *testing.T) {
	x := []float64{1, 2, 3, 4, 5, 6} // [2,3]
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		shape []int
		want  []float64
	}{
		{ir.OpSum, nil, []int{}, []float64{21}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints(0)), []int{3}, []float64{5, 7, 9}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints(-1)), []int{2}, []float64{6, 15}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints(1), "keepdims", ir.BoolAttr(true)), []int{2, 1}, []float64{6, 15}},
		{ir.OpSum, ir.MakeAttrs("keepdims", ir.BoolAttr(true)), []int{1, 1}, []float64{21}},
		{ir.OpSum, ir.MakeAttrs("axes", ir.Ints()), []int{2, 3}, x},
		{ir.OpMean, nil, []int{}, []float64{3.5}},
		{ir.OpMean, ir.MakeAttrs("axes", ir.Ints(1)), []int{2}, []float64{2, 5}},
		{ir.OpMean, ir.MakeAttrs("axes", ir.Ints(0), "keepdims", ir.BoolAttr(true)), []int{1, 3}, []float64{2.5, 3.5, 4.5}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s%s", tc.op, tc.attrs), func(t *testing.T) {
			reduceValues[float32](t, tc.op, tc.attrs, x, tc.shape, tc.want)
			reduceValues[float64](t, tc.op, tc.attrs, x, tc.shape, tc.want)
			if tc.op == ir.OpSum {
				reduceValues[int32](t, tc.op, tc.attrs, x, tc.shape, tc.want)
				reduceValues[int64](t, tc.op, tc.attrs, x, tc.shape, tc.want)
			}
		})
	}
}

func reduceValues[T number](t *testing.T, op ir.Op, attrs ir.Attrs, x []float64, shape []int, want []float64) {
	t.Helper()
	out := mustRun(t, op, attrs, tensorOf([]int{2, 3}, conv[T](x)))
	if !out.Type.Shape.Equal(shape) {
		t.Fatalf("%s: shape %s, want %v", out.Type, out.Type.Shape, shape)
	}
	checkEqual(t, out.Type.String(), kernels.View[T](out), conv[T](want))
}

// TestReduceOrder checks sum and mean over many axis sets, with and without
// keepdims, against a plain loop over the input in index order that adds
// each run of reduced trailing elements, summed as refRowSum writes out,
// to its output element in T. The kernels promise exactly that order, so
// float results must be bitwise equal.
func TestReduceOrder(t *testing.T) {
	tests := []struct {
		shape []int
		axes  []int // nil: absent (all)
	}{
		{[]int{2, 3, 4}, nil},
		{[]int{2, 3, 4}, []int{0}},
		{[]int{2, 3, 4}, []int{1}},
		{[]int{2, 3, 4}, []int{2}},
		{[]int{2, 3, 4}, []int{-1}},
		{[]int{2, 3, 4}, []int{0, 2}},
		{[]int{2, 3, 4}, []int{0, 1}},
		{[]int{2, 3, 4}, []int{1, 2}},
		{[]int{2, 3, 4}, []int{2, -3}},
		{[]int{3, 1, 5, 2}, []int{1, 3}},
		{[]int{3, 1, 5, 2}, []int{0, 2}},
		{[]int{4, 1, 6}, []int{1}},
		{[]int{1000}, []int{0}},
		{[]int{37, 29}, []int{0}},
		// Rows summed into distinct outputs four at a time (a bias
		// gradient over N, H and W), the queue full, part full and
		// flushed by a repeated output.
		{[]int{3, 6, 5}, []int{0, 2}},
		{[]int{2, 5, 7, 3}, []int{0, 2, 3}},
		{[]int{4, 9, 33}, []int{0, 2}},
		{[]int{5, 3, 17}, []int{0, 2}},
		// Runs long enough for lanes, and longer than a block.
		{[]int{4, 100}, []int{1}},
		{[]int{3, 40, 50}, []int{0, 2}},
		{[]int{3, 7, 20}, []int{1, 2}},
		{[]int{2, 5000}, []int{1}},
		{[]int{5}, []int{}},
		{[]int{}, nil},
		{[]int{}, []int{}},
	}
	for _, tc := range tests {
		for _, keep := range []bool{false, true} {
			attrs := ir.MakeAttrs("keepdims", ir.BoolAttr(keep))
			if tc.axes != nil {
				attrs = attrs.With("axes", ir.Ints(tc.axes...))
			}
			t.Run(fmt.Sprintf("%v%s", tc.shape, attrs), func(t *testing.T) {
				reduceOrder[float32](t, ir.OpSum, tc.shape, attrs)
				reduceOrder[float64](t, ir.OpSum, tc.shape, attrs)
				reduceOrder[int32](t, ir.OpSum, tc.shape, attrs)
				reduceOrder[int64](t, ir.OpSum, tc.shape, attrs)
				reduceOrder[float32](t, ir.OpMean, tc.shape, attrs)
				reduceOrder[float64](t, ir.OpMean, tc.shape, attrs)
			})
		}
	}
}

func reduceOrder[T number](t *testing.T, op ir.Op, shape []int, attrs ir.Attrs) {
	t.Helper()
	xs := ir.Shape(shape)
	x := randVals[T](newRand(uint64(len(shape))), xs.NumElements(), false)
	out := mustRun(t, op, attrs, tensorOf(xs, x))

	axes, err := ir.ReduceAxes(attrs, len(xs))
	if err != nil {
		t.Fatal(err)
	}
	keep := ir.ReducedShape(xs, axes, true)
	reduced := make([]bool, len(xs))
	count := 1
	for _, ax := range axes {
		reduced[ax] = true
		count *= xs[ax]
	}
	// A run: the elements of the trailing axes that are reduced (or of
	// size 1), summed on its own (refRowSum) into its output element.
	run := 1
	for k := len(xs) - 1; k >= 0 && (reduced[k] || xs[k] == 1); k-- {
		run *= xs[k]
	}
	want := make([]T, keep.NumElements())
	for i := 0; i < len(x); i += max(run, 1) {
		v := refRowSum(x[i:min(i+max(run, 1), len(x))])
		idx := unravel(xs, i)
		for k := range idx {
			if reduced[k] {
				idx[k] = 0
			}
		}
		j := 0
		for k, d := range keep {
			j = j*d + idx[k]
		}
		want[j] += v
	}
	if op == ir.OpMean {
		for j := range want {
			want[j] /= T(count)
		}
	}
	checkEqual(t, fmt.Sprintf("%s %s", op, out.Type), kernels.View[T](out), want)
}
