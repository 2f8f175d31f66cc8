package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// sumAllReference is the order sum_all.go promises: the run of all
// elements summed as refRowSum writes it out.
func sumAllReference[T number](x []T) T { return refRowSum(x) }

// TestSumAllOrder checks sum and mean into one element, with and without
// axes and keepdims, of sizes around the block and of many blocks (whole
// groups of four and a rest), against sumAllReference, bit for bit, on 1,
// 2, 3 and 7 workers (every block count splitting).
func TestSumAllOrder(t *testing.T) {
	defer func(v int) { parMinWork = v }(parMinWork)
	parMinWork = 1
	tests := []struct {
		shape []int
		axes  []int // nil: all
	}{
		{[]int{4096}, nil},
		{[]int{4097}, nil},
		{[]int{3, 5000}, nil},
		{[]int{1, 20000}, []int{1}},
		{[]int{20000, 1}, []int{0}},
		{[]int{17, 4096}, []int{0, 1}},
		{[]int{9, 7, 301}, nil},
	}
	for _, tc := range tests {
		for _, keep := range []bool{false, true} {
			attrs := ir.MakeAttrs("keepdims", ir.BoolAttr(keep))
			if tc.axes != nil {
				attrs = attrs.With("axes", ir.Ints(tc.axes...))
			}
			t.Run(fmt.Sprintf("%v%s", tc.shape, attrs), func(t *testing.T) {
				sumAllCase[float32](t, ir.OpSum, tc.shape, attrs)
				sumAllCase[float64](t, ir.OpSum, tc.shape, attrs)
				sumAllCase[int32](t, ir.OpSum, tc.shape, attrs)
				sumAllCase[int64](t, ir.OpSum, tc.shape, attrs)
				sumAllCase[float32](t, ir.OpMean, tc.shape, attrs)
				sumAllCase[float64](t, ir.OpMean, tc.shape, attrs)
			})
		}
	}
}

func sumAllCase[T number](t *testing.T, op ir.Op, shape []int, attrs ir.Attrs) {
	t.Helper()
	xs := ir.Shape(shape)
	x := randVals[T](newRand(uint64(xs.NumElements())), xs.NumElements(), false)
	want := sumAllReference(x)
	if op == ir.OpMean {
		want /= T(len(x))
	}
	in := tensorOf(shape, x)
	for _, w := range []int{1, 2, 3, 7} {
		got := buildWith(t, goPool(w), op, attrs, in)
		checkEqual(t, fmt.Sprintf("%s %s on %d workers", op, got.Type, w), kernels.View[T](got), []T{want})
	}
}

// TestSumAllFusedReduce checks fused_reduce of a product into one element
// against the unfused mul and sum, bit for bit, on 1, 2, 3 and 7 workers.
func TestSumAllFusedReduce(t *testing.T) {
	defer func(v int) { parMinWork = v }(parMinWork)
	parMinWork = 1
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		for _, shape := range [][]int{{4097}, {3, 5000}, {17, 4096}, {9, 7, 301}} {
			r := newRand(5)
			a, b := fuseewRandom(r, ir.TensorOf(dt, shape...)), fuseewRandom(r, ir.TensorOf(dt, shape...))
			p := mustRun(t, ir.OpMul, nil, a, b)
			for _, op := range []ir.Op{ir.OpSum, ir.OpMean} {
				want := mustRun(t, op, nil, p)
				attrs := fuseewProgram("t0 = mul i0, i1").With("op", ir.String(op.String()))
				for _, w := range []int{1, 2, 3, 7} {
					got := buildWith(t, goPool(w), ir.OpFusedReduce, attrs, a, b)
					fuseewSame(t, fmt.Sprintf("%s %s %v on %d workers", op, dt, shape, w), got, want)
				}
			}
		}
	}
}

// TestSumAllFusedPatterns checks the fused patterns whose sum covers a
// whole tensor of more than one block (softmax_grad and log_softmax_grad
// of one slice, softmax_ce_grad's target sum over a batch of one) against
// their unfused ops, bit for bit.
func TestSumAllFusedPatterns(t *testing.T) {
	for _, tc := range []struct {
		shape []int
		axis  int
	}{{[]int{1, 9000}, 1}, {[]int{9000}, 0}, {[]int{9000, 1}, 0}} {
		t.Run(fmt.Sprint(tc.shape), func(t *testing.T) {
			fusepatSoftmaxGradCase[float32](t, tc.shape, tc.axis)
			fusepatSoftmaxGradCase[float64](t, tc.shape, tc.axis)
		})
	}
	r := newRand(9)
	const c = 9000
	logits := tensorOf([]int{1, c}, randVals[float32](r, c, false))
	tg := tensorOf([]int{1, c}, randVals[float32](r, c, false))
	dy := fusepatScalar[float32](0.75)
	got := mustRun(t, ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String("sum")), logits, tg, dy)
	want := fusepatUnfusedSoftmaxCEGrad[float32](t, logits, tg, dy, "sum")
	fusepatSameBits(t, "softmax_ce_grad", kernels.View[float32](got), kernels.View[float32](want))
}
