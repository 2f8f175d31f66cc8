package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// reduceOpsAttrs returns {axes, keepdims}; nil axes are left absent (all).
func reduceOpsAttrs(axes []int, keep bool) ir.Attrs {
	a := ir.MakeAttrs("keepdims", ir.BoolAttr(keep))
	if axes != nil {
		a = a.With("axes", ir.Ints(axes...))
	}
	return a
}

var (
	nan  = math.NaN()
	inf  = math.Inf(1)
	ninf = math.Inf(-1)
)

// reduceOpsCase is one hand-checked reduction: op over x with attrs gives
// want of shape shape.
type reduceOpsCase struct {
	op    ir.Op
	axes  []int
	keep  bool
	shape []int
	want  []float64
}

// TestReduceOpsValues checks max, min, prod, argmax and argmin by hand in
// every dtype they take, over one axis, several axes, all axes and with
// keepdims. Integer-valued inputs make every result exact.
func TestReduceOpsValues(t *testing.T) {
	// x23 = [[3, -1, 3], [0, 2, -4]]: a tie for the max in row 0.
	x23 := []float64{3, -1, 3, 0, 2, -4}
	c23 := []reduceOpsCase{
		{ir.OpMax, nil, false, []int{}, []float64{3}},
		{ir.OpMax, []int{0}, false, []int{3}, []float64{3, 2, 3}},
		{ir.OpMax, []int{1}, false, []int{2}, []float64{3, 2}},
		{ir.OpMax, []int{-1}, true, []int{2, 1}, []float64{3, 2}},
		{ir.OpMax, nil, true, []int{1, 1}, []float64{3}},
		{ir.OpMin, nil, false, []int{}, []float64{-4}},
		{ir.OpMin, []int{0}, false, []int{3}, []float64{0, -1, -4}},
		{ir.OpMin, []int{1}, true, []int{2, 1}, []float64{-1, -4}},
		{ir.OpProd, nil, false, []int{}, []float64{0}},
		{ir.OpProd, []int{0}, false, []int{3}, []float64{0, -2, -12}},
		{ir.OpProd, []int{1}, false, []int{2}, []float64{-9, 0}},
		{ir.OpProd, []int{0, 1}, true, []int{1, 1}, []float64{0}},
		// torch.argmax(x) flattens: the first 3 is at 0; along dim 1 row 0
		// ties at 0 and 2 and the first wins.
		{ir.OpArgmax, nil, false, []int{}, []float64{0}},
		{ir.OpArgmax, []int{1}, false, []int{2}, []float64{0, 1}},
		{ir.OpArgmax, []int{0}, true, []int{1, 3}, []float64{0, 1, 0}},
		{ir.OpArgmin, nil, false, []int{}, []float64{5}},
		{ir.OpArgmin, []int{1}, false, []int{2}, []float64{1, 2}},
		{ir.OpArgmin, []int{0}, false, []int{3}, []float64{1, 0, 1}},
	}
	// x223 = [[[1, 7, 3], [9, 0, 5]], [[7, 2, 8], [4, 9, 6]]]. Over axes
	// [0, 2] the position in a slice is i0*3 + i2.
	x223 := []float64{1, 7, 3, 9, 0, 5, 7, 2, 8, 4, 9, 6}
	c223 := []reduceOpsCase{
		{ir.OpMax, []int{0, 2}, false, []int{2}, []float64{8, 9}},
		{ir.OpMax, []int{0, 2}, true, []int{1, 2, 1}, []float64{8, 9}},
		{ir.OpMin, []int{0, 2}, false, []int{2}, []float64{1, 0}},
		{ir.OpMax, []int{1, 2}, false, []int{2}, []float64{9, 9}},
		{ir.OpMin, []int{0, 1}, false, []int{3}, []float64{1, 0, 3}},
		{ir.OpProd, []int{0, 2}, false, []int{2}, []float64{2352, 0}},
		{ir.OpProd, []int{2, 0}, true, []int{1, 2, 1}, []float64{2352, 0}},
		{ir.OpArgmax, []int{0, 2}, false, []int{2}, []float64{5, 0}}, // 9 ties at 0 and 4
		{ir.OpArgmin, []int{0, 2}, false, []int{2}, []float64{0, 1}},
		{ir.OpArgmax, []int{1, 2}, false, []int{2}, []float64{3, 4}},
		{ir.OpArgmin, []int{-1, -2}, true, []int{2, 1, 1}, []float64{4, 1}},
		{ir.OpArgmax, []int{0, 1}, false, []int{3}, []float64{1, 3, 2}},
		{ir.OpArgmax, nil, false, []int{}, []float64{3}},
		{ir.OpArgmin, nil, true, []int{1, 1, 1}, []float64{4}},
	}
	for _, set := range []struct {
		shape []int
		x     []float64
		cases []reduceOpsCase
	}{{[]int{2, 3}, x23, c23}, {[]int{2, 2, 3}, x223, c223}} {
		for _, tc := range set.cases {
			attrs := reduceOpsAttrs(tc.axes, tc.keep)
			t.Run(fmt.Sprintf("%s%v%s", tc.op, set.shape, attrs), func(t *testing.T) {
				reduceOpsCheck[float32](t, tc.op, attrs, set.shape, set.x, tc.shape, tc.want)
				reduceOpsCheck[float64](t, tc.op, attrs, set.shape, set.x, tc.shape, tc.want)
				reduceOpsCheck[int32](t, tc.op, attrs, set.shape, set.x, tc.shape, tc.want)
				reduceOpsCheck[int64](t, tc.op, attrs, set.shape, set.x, tc.shape, tc.want)
			})
		}
	}
}

// reduceOpsCheck runs op on x converted to T and compares the result
// exactly: as T, or as i64 for argmax and argmin.
func reduceOpsCheck[T number](t *testing.T, op ir.Op, attrs ir.Attrs, shape []int, x []float64, wantShape []int, want []float64) {
	t.Helper()
	out := mustRun(t, op, attrs, tensorOf(shape, conv[T](x)))
	if !out.Type.Shape.Equal(wantShape) {
		t.Fatalf("%s: shape %s, want %v", op, out.Type, wantShape)
	}
	if op == ir.OpArgmax || op == ir.OpArgmin {
		checkEqual(t, fmt.Sprintf("%s of %s", op, kernels.DTypeOf[T]()), kernels.View[int64](out), conv[int64](want))
		return
	}
	checkEqual(t, out.Type.String(), kernels.View[T](out), conv[T](want))
}

// TestReduceOpsNaN checks that max and min propagate NaN (torch.amax,
// torch.amin) and that argmax and argmin return the first NaN, which
// PyTorch treats as larger (argmax) and smaller (argmin) than any number.
// Both traversal paths are covered: a slice folded into one element (axis
// 1) and rows folded element-wise (axis 0).
func TestReduceOpsNaN(t *testing.T) {
	// [[1, nan, 3, nan], [nan, 2, 0, 5]]
	x := []float64{1, nan, 3, nan, nan, 2, 0, 5}
	tests := []reduceOpsCase{
		{ir.OpMax, []int{1}, false, []int{2}, []float64{nan, nan}},
		{ir.OpMin, []int{1}, false, []int{2}, []float64{nan, nan}},
		{ir.OpMax, []int{0}, false, []int{4}, []float64{nan, nan, 3, nan}},
		{ir.OpMin, []int{0}, false, []int{4}, []float64{nan, nan, 0, nan}},
		{ir.OpArgmax, []int{1}, false, []int{2}, []float64{1, 0}},
		{ir.OpArgmin, []int{1}, false, []int{2}, []float64{1, 0}},
		{ir.OpArgmax, []int{0}, false, []int{4}, []float64{1, 0, 0, 0}},
		{ir.OpArgmin, []int{0}, false, []int{4}, []float64{1, 0, 1, 0}},
		{ir.OpArgmax, nil, false, []int{}, []float64{1}},
		{ir.OpArgmin, nil, false, []int{}, []float64{1}},
	}
	for _, tc := range tests {
		attrs := reduceOpsAttrs(tc.axes, tc.keep)
		t.Run(fmt.Sprintf("%s%s", tc.op, attrs), func(t *testing.T) {
			reduceOpsCheck[float32](t, tc.op, attrs, []int{2, 4}, x, tc.shape, tc.want)
			reduceOpsCheck[float64](t, tc.op, attrs, []int{2, 4}, x, tc.shape, tc.want)
		})
	}
	// A NaN after the max still wins, and a NaN before it stays.
	reduceOpsCheck[float64](t, ir.OpMax, nil, []int{3}, []float64{5, 7, nan}, []int{}, []float64{nan})
	reduceOpsCheck[float64](t, ir.OpMax, nil, []int{3}, []float64{nan, 7, 9}, []int{}, []float64{nan})
	reduceOpsCheck[float32](t, ir.OpArgmax, nil, []int{4}, []float64{5, 7, nan, nan}, []int{}, []float64{2})
	// Infinities are ordinary extremes.
	reduceOpsCheck[float64](t, ir.OpMax, nil, []int{3}, []float64{ninf, ninf, ninf}, []int{}, []float64{ninf})
	reduceOpsCheck[float64](t, ir.OpArgmax, nil, []int{3}, []float64{ninf, ninf, ninf}, []int{}, []float64{0})
	reduceOpsCheck[float64](t, ir.OpArgmin, nil, []int{3}, []float64{inf, 1, ninf}, []int{}, []float64{2})
}

// TestReduceOpsIntegerLimits checks that the integer identities of max and
// min never show: slices holding only the extreme values.
func TestReduceOpsIntegerLimits(t *testing.T) {
	out := mustRun(t, ir.OpMax, nil, tensorOf([]int{2}, []int32{math.MinInt32, math.MinInt32}))
	checkEqual(t, "max i32", kernels.View[int32](out), []int32{math.MinInt32})
	out = mustRun(t, ir.OpMin, nil, tensorOf([]int{2}, []int64{math.MaxInt64, math.MaxInt64}))
	checkEqual(t, "min i64", kernels.View[int64](out), []int64{math.MaxInt64})
	out = mustRun(t, ir.OpArgmin, nil, tensorOf([]int{3}, []int64{math.MaxInt64, math.MaxInt64, math.MaxInt64}))
	checkEqual(t, "argmin i64", kernels.View[int64](out), []int64{0})
	// Integer products wrap: 65536^2 = 2^32 is 0 in i32.
	out = mustRun(t, ir.OpProd, nil, tensorOf([]int{2}, []int32{65536, 65536}))
	checkEqual(t, "prod i32", kernels.View[int32](out), []int32{0})
}

// TestLogSumExpValues checks logsumexp by hand, at ±1000 where a naive
// log(sum(exp(x))) overflows to inf or underflows to -inf, and at the
// infinities and NaN as torch.logsumexp: a slice of -inf gives -inf (the
// max is taken as 0, so no inf - inf), +inf gives +inf, NaN gives NaN.
func TestLogSumExpValues(t *testing.T) {
	ln2, ln3 := math.Log(2), math.Log(3)
	tests := []struct {
		x    []float64
		want float64
	}{
		{[]float64{0, 0}, ln2},
		{[]float64{1, 2, 3}, 3 + math.Log(1+math.Exp(-1)+math.Exp(-2))},
		{[]float64{1000, 1000}, 1000 + ln2},
		{[]float64{-1000, -1000, -1000}, -1000 + ln3},
		{[]float64{1000, -1000}, 1000},
		{[]float64{-1000, 1000, 999}, 1000 + math.Log1p(math.Exp(-1))},
		{[]float64{ninf, ninf}, ninf},
		{[]float64{ninf, 2}, 2},
		{[]float64{inf, 2}, inf},
		{[]float64{inf, ninf}, inf},
		{[]float64{nan, 2}, nan},
		{[]float64{5}, 5},
	}
	for _, tc := range tests {
		s := []int{len(tc.x)}
		got32 := kernels.View[float32](mustRun(t, ir.OpLogSumExp, nil, tensorOf(s, conv[float32](tc.x))))
		checkNear(t, fmt.Sprintf("logsumexp f32 %v", tc.x), got32, []float64{tc.want}, relF32, 0)
		got64 := kernels.View[float64](mustRun(t, ir.OpLogSumExp, nil, tensorOf(s, tc.x)))
		checkNear(t, fmt.Sprintf("logsumexp f64 %v", tc.x), got64, []float64{tc.want}, relF64, 0)
	}
	// Over axis 0 of [[1000, -1000], [1000, -1000]] (the row path) and
	// with keepdims over axis 1.
	x := []float64{1000, -1000, 1000, -1000}
	out := mustRun(t, ir.OpLogSumExp, reduceOpsAttrs([]int{0}, false), tensorOf([]int{2, 2}, x))
	checkNear(t, "logsumexp axis 0", kernels.View[float64](out), []float64{1000 + ln2, -1000 + ln2}, relF64, 0)
	out = mustRun(t, ir.OpLogSumExp, reduceOpsAttrs([]int{1}, true), tensorOf([]int{2, 2}, conv[float32](x)))
	checkNear(t, "logsumexp axis 1 f32", kernels.View[float32](out), []float64{1000, 1000}, relF32, 0)
}

// TestVarStdValues checks var and std by hand with correction 0, 1, a
// fractional one and ones that leave no degrees of freedom, where
// torch.var divides by max(0, N - correction) = 0: inf, or NaN for 0/0.
func TestVarStdValues(t *testing.T) {
	x := []float64{1, 2, 3, 4} // mean 2.5, sum of squares 5
	tests := []struct {
		c    float64
		want float64
	}{
		{1, 5.0 / 3}, {0, 1.25}, {0.5, 5 / 3.5}, {-1, 1}, {4, inf}, {5, inf},
	}
	for _, tc := range tests {
		attrs := ir.MakeAttrs("correction", ir.Float(tc.c))
		for _, op := range []ir.Op{ir.OpVar, ir.OpStd} {
			want := tc.want
			if op == ir.OpStd {
				want = math.Sqrt(want)
			}
			got32 := kernels.View[float32](mustRun(t, op, attrs, tensorOf([]int{4}, conv[float32](x))))
			checkNear(t, fmt.Sprintf("%s f32 correction %v", op, tc.c), got32, []float64{want}, relF32, 0)
			got64 := kernels.View[float64](mustRun(t, op, attrs, tensorOf([]int{4}, x)))
			checkNear(t, fmt.Sprintf("%s f64 correction %v", op, tc.c), got64, []float64{want}, relF64, 0)
		}
	}
	// One element with correction 1, and a constant pair with correction
	// 2: 0/0.
	out := mustRun(t, ir.OpVar, nil, tensorOf([]int{1}, []float64{7}))
	checkNear(t, "var of one", kernels.View[float64](out), []float64{nan}, 0, 0)
	out = mustRun(t, ir.OpStd, ir.MakeAttrs("correction", ir.Int(2)), tensorOf([]int{2}, []float32{2, 2}))
	checkNear(t, "std of a constant pair, correction 2", kernels.View[float32](out), []float64{nan}, 0, 0)
	// Over axes: [[1, 2, 3], [4, 6, 8]].
	y := []float64{1, 2, 3, 4, 6, 8}
	out = mustRun(t, ir.OpVar, ir.MakeAttrs("axes", ir.Ints(1)), tensorOf([]int{2, 3}, y))
	checkNear(t, "var axis 1", kernels.View[float64](out), []float64{1, 4}, relF64, 0)
	out = mustRun(t, ir.OpVar, ir.MakeAttrs("axes", ir.Ints(0), "correction", ir.Float(0), "keepdims", ir.BoolAttr(true)), tensorOf([]int{2, 3}, conv[float32](y)))
	checkNear(t, "var axis 0 correction 0", kernels.View[float32](out), []float64{2.25, 4, 6.25}, relF32, 0)
	out = mustRun(t, ir.OpStd, ir.MakeAttrs("axes", ir.Ints(0, 1)), tensorOf([]int{2, 3}, y))
	checkNear(t, "std all axes", kernels.View[float64](out), []float64{math.Sqrt(34.0 / 5)}, relF64, 0)
}

// reduceOpsSlices returns, for x of shape xs reduced over axes, the flat
// indices of each output element's slice in row-major order of the reduced
// axes, outputs in row-major order of the kept axes.
func reduceOpsSlices(xs ir.Shape, axes []int) [][]int {
	keep := ir.ReducedShape(xs, axes, true)
	slices := make([][]int, keep.NumElements())
	for i := range xs.NumElements() {
		idx := unravel(xs, i)
		j := 0
		for k, d := range keep {
			if d == 1 {
				continue
			}
			j = j*d + idx[k]
		}
		slices[j] = append(slices[j], i)
	}
	return slices
}

// TestReduceOpsReference checks every reduction over many shapes and axis
// sets, with and without keepdims, against a reference that visits each
// slice in row-major order. max, min, prod (folded in T from the identity,
// as the kernels promise), argmax and argmin must match exactly; logsumexp,
// var and std are compared with a float64 computation within rel 1e-6
// (f32) or 1e-12 (f64), plus as much absolute error as the sums of |terms|
// allow.
func TestReduceOpsReference(t *testing.T) {
	tests := []struct {
		shape []int
		axes  []int // nil: absent (all)
	}{
		{[]int{2, 3, 4}, nil},
		{[]int{2, 3, 4}, []int{0}},
		{[]int{2, 3, 4}, []int{1}},
		{[]int{2, 3, 4}, []int{2}},
		{[]int{2, 3, 4}, []int{0, 2}},
		{[]int{2, 3, 4}, []int{1, 2}},
		{[]int{2, 3, 4}, []int{-3, -2}},
		{[]int{3, 1, 5, 2}, []int{1, 3}},
		{[]int{3, 1, 5, 2}, []int{0, 2}},
		{[]int{4, 1, 6}, []int{1}},
		{[]int{37, 29}, []int{0}},
		{[]int{5}, []int{}},
		{[]int{}, nil},
	}
	for _, tc := range tests {
		for _, keep := range []bool{false, true} {
			attrs := reduceOpsAttrs(tc.axes, keep)
			t.Run(fmt.Sprintf("%v%s", tc.shape, attrs), func(t *testing.T) {
				reduceOpsReference[float32](t, tc.shape, attrs)
				reduceOpsReference[float64](t, tc.shape, attrs)
				reduceOpsReference[int32](t, tc.shape, attrs)
				reduceOpsReference[int64](t, tc.shape, attrs)
			})
		}
	}
}

func reduceOpsReference[T number](t *testing.T, shape []int, attrs ir.Attrs) {
	t.Helper()
	xs := ir.Shape(shape)
	dt := kernels.DTypeOf[T]()
	r := newRand(uint64(len(shape)) + 100)
	x := randVals[T](r, xs.NumElements(), false)
	if !dt.IsFloat() {
		// Small integers with ties; products of up to 58 of them stay
		// within i64 only if most are ±1, which is fine: both sides wrap
		// alike.
		for i := range x {
			x[i] = T(r.IntN(5) - 2)
		}
	}
	axes, err := ir.ReduceAxes(attrs, len(xs))
	if err != nil {
		t.Fatal(err)
	}
	slices := reduceOpsSlices(xs, axes)
	ops := []ir.Op{ir.OpMax, ir.OpMin, ir.OpProd, ir.OpArgmax, ir.OpArgmin}
	if dt.IsFloat() {
		ops = append(ops, ir.OpLogSumExp, ir.OpVar, ir.OpStd)
	}
	for _, op := range ops {
		out := mustRun(t, op, attrs, tensorOf(xs, x))
		what := fmt.Sprintf("%s %s", op, out.Type)
		switch op {
		case ir.OpMax, ir.OpMin, ir.OpProd:
			want := make([]T, len(slices))
			for j, s := range slices {
				acc := T(1)
				switch op {
				case ir.OpMax:
					acc = reduceLowest[T]()
				case ir.OpMin:
					acc = reduceHighest[T]()
				}
				for _, i := range s {
					switch {
					case op == ir.OpMax && x[i] > acc, op == ir.OpMin && x[i] < acc:
						acc = x[i]
					case op == ir.OpProd:
						acc *= x[i]
					}
				}
				want[j] = acc
			}
			checkEqual(t, what, kernels.View[T](out), want)
		case ir.OpArgmax, ir.OpArgmin:
			want := make([]int64, len(slices))
			for j, s := range slices {
				for k, i := range s {
					if op == ir.OpArgmax && x[i] > x[s[want[j]]] || op == ir.OpArgmin && x[i] < x[s[want[j]]] {
						want[j] = int64(k)
					}
				}
			}
			checkEqual(t, what, kernels.View[int64](out), want)
		default:
			want := make([]float64, len(slices))
			abs := make([]float64, len(slices))
			for j, s := range slices {
				v := f64s(x)
				switch op {
				case ir.OpLogSumExp:
					m := math.Inf(-1)
					for _, i := range s {
						m = math.Max(m, v[i])
					}
					sum := 0.0
					for _, i := range s {
						sum += math.Exp(v[i] - m)
					}
					want[j] = m + math.Log(sum)
					abs[j] = float64(len(s)) * rel[T]() * (math.Abs(m) + 1)
				default:
					mean, ss := 0.0, 0.0
					for _, i := range s {
						mean += v[i]
					}
					mean /= float64(len(s))
					for _, i := range s {
						ss += (v[i] - mean) * (v[i] - mean)
					}
					want[j] = ss / math.Max(0, float64(len(s))-1)
					abs[j] = 4 * float64(len(s)) * rel[T]()
					if op == ir.OpStd {
						want[j] = math.Sqrt(want[j])
						abs[j] = math.Sqrt(abs[j])
					}
				}
			}
			got := kernels.View[T](out)
			for j := range want {
				checkNear(t, fmt.Sprintf("%s[%d]", what, j), got[j:j+1], want[j:j+1], rel[T](), abs[j])
			}
		}
	}
}

// TestReduceOpsEmptyAndScalar runs every reduction on rank-0 inputs, on
// explicit empty axes (no reduction) and on zero-size shapes that ir's
// inference accepts: prod of nothing is 1, logsumexp -inf (log 0), var and
// std NaN, as torch.prod, torch.logsumexp and torch.var.
func TestReduceOpsEmptyAndScalar(t *testing.T) {
	f64 := func(dims []int, v ...float64) kernels.Tensor {
		if v == nil {
			v = make([]float64, ir.Shape(dims).NumElements())
		}
		return tensorOf(dims, v)
	}
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		x     kernels.Tensor
		want  []float64
	}{
		{ir.OpMax, nil, f64([]int{}, 2.5), []float64{2.5}},
		{ir.OpMin, reduceOpsAttrs(nil, true), f64([]int{}, 2.5), []float64{2.5}},
		{ir.OpProd, nil, f64([]int{}, 2.5), []float64{2.5}},
		{ir.OpLogSumExp, nil, f64([]int{}, 2.5), []float64{2.5}},
		{ir.OpVar, nil, f64([]int{}, 2.5), []float64{nan}},
		{ir.OpVar, ir.MakeAttrs("correction", ir.Float(0)), f64([]int{}, 2.5), []float64{0}},
		{ir.OpStd, ir.MakeAttrs("correction", ir.Float(0)), f64([]int{}, 2.5), []float64{0}},
		{ir.OpArgmax, nil, f64([]int{}, 2.5), []float64{0}},
		{ir.OpArgmin, nil, f64([]int{}, 2.5), []float64{0}},
		// Explicit empty axes reduce nothing.
		{ir.OpMax, reduceOpsAttrs([]int{}, false), f64([]int{3}, 1, -2, 3), []float64{1, -2, 3}},
		{ir.OpProd, reduceOpsAttrs([]int{}, false), f64([]int{3}, 1, -2, 3), []float64{1, -2, 3}},
		{ir.OpLogSumExp, reduceOpsAttrs([]int{}, false), f64([]int{3}, 1, -2, 3), []float64{1, -2, 3}},
		{ir.OpArgmin, reduceOpsAttrs([]int{}, false), f64([]int{3}, 1, -2, 3), []float64{0, 0, 0}},
		// Zero-size results.
		{ir.OpMax, reduceOpsAttrs([]int{1}, false), f64([]int{0, 3}), []float64{}},
		{ir.OpArgmax, reduceOpsAttrs([]int{1}, true), f64([]int{0, 3}), []float64{}},
		{ir.OpMin, reduceOpsAttrs([]int{0}, false), f64([]int{2, 0}), []float64{}},
		{ir.OpLogSumExp, reduceOpsAttrs([]int{0}, false), f64([]int{2, 0}), []float64{}},
		// Reductions over nothing.
		{ir.OpProd, nil, f64([]int{0}), []float64{1}},
		{ir.OpProd, reduceOpsAttrs([]int{1}, false), f64([]int{2, 0}), []float64{1, 1}},
		{ir.OpLogSumExp, nil, f64([]int{0, 2}), []float64{ninf}},
		{ir.OpLogSumExp, reduceOpsAttrs([]int{0}, true), f64([]int{0, 2}), []float64{ninf, ninf}},
		{ir.OpVar, nil, f64([]int{0}), []float64{nan}},
		{ir.OpStd, reduceOpsAttrs([]int{1}, false), f64([]int{3, 0}), []float64{nan, nan, nan}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s%s%s", tc.op, tc.attrs, tc.x.Type), func(t *testing.T) {
			for _, dt := range []ir.DType{ir.F64, ir.F32} {
				x := tc.x
				if dt == ir.F32 {
					x = tensorOf(tc.x.Type.Shape, conv[float32](kernels.Float64s(tc.x)))
				}
				out := mustRun(t, tc.op, tc.attrs, x)
				checkNear(t, out.Type.String(), kernels.Float64s(out), tc.want, 0, 0)
			}
		})
	}
}

// TestReduceOpsRejectEmptyExtremes checks that max, min, argmax and argmin
// over an axis of size 0 are refused by inference (and so never reach a
// kernel), as PyTorch refuses them.
func TestReduceOpsRejectEmptyExtremes(t *testing.T) {
	for _, op := range []ir.Op{ir.OpMax, ir.OpMin, ir.OpArgmax, ir.OpArgmin} {
		for _, tc := range []struct {
			shape []int
			attrs ir.Attrs
		}{
			{[]int{0}, nil},
			{[]int{3, 0}, reduceOpsAttrs([]int{1}, false)},
			{[]int{0, 0}, reduceOpsAttrs([]int{-2}, true)},
		} {
			canon, err := ir.Canonical(op, tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			_, err = op.Info().Infer([]ir.Type{ir.TensorOf(ir.F32, tc.shape...)}, canon)
			if err == nil || !strings.Contains(err.Error(), "size 0") {
				t.Errorf("%s%s of f32%v: error %v, want one about an axis of size 0", op, tc.attrs, tc.shape, err)
			}
		}
	}
}

// TestProdExclusive checks prod_exclusive by hand with no, one and two
// zeros in a slice, and against the direct product of the other elements
// on random shapes. With integer-valued inputs both are exact.
func TestProdExclusive(t *testing.T) {
	// [[2, 3, 4], [0, 5, 6], [0, 5, 0]] over axis 1.
	x := []float64{2, 3, 4, 0, 5, 6, 0, 5, 0}
	want := []float64{12, 8, 6, 30, 0, 0, 0, 0, 0}
	attrs := ir.MakeAttrs("axes", ir.Ints(1))
	checkEqual(t, "f32", kernels.View[float32](mustRun(t, ir.OpProdExclusive, attrs, tensorOf([]int{3, 3}, conv[float32](x)))), conv[float32](want))
	checkEqual(t, "f64", kernels.View[float64](mustRun(t, ir.OpProdExclusive, attrs, tensorOf([]int{3, 3}, x))), want)
	// Over axis 0: columns (2, 0, 0), (3, 5, 5), (4, 6, 0).
	want0 := []float64{0, 25, 0, 0, 15, 0, 0, 15, 24}
	checkEqual(t, "axis 0", kernels.View[float64](mustRun(t, ir.OpProdExclusive, ir.MakeAttrs("axes", ir.Ints(0)), tensorOf([]int{3, 3}, x))), want0)

	for _, tc := range []struct {
		shape []int
		axes  []int
	}{
		{[]int{2, 3, 4}, nil}, {[]int{2, 3, 4}, []int{0, 2}}, {[]int{2, 3, 4}, []int{1}},
		{[]int{5}, []int{}}, {[]int{}, nil}, {[]int{0, 3}, []int{1}}, {[]int{3, 0}, []int{1}},
	} {
		xs := ir.Shape(tc.shape)
		var attrs ir.Attrs
		if tc.axes != nil {
			attrs = ir.MakeAttrs("axes", ir.Ints(tc.axes...))
		}
		axes, _ := ir.ReduceAxes(attrs, len(xs))
		r := newRand(uint64(xs.NumElements()))
		v := make([]float64, xs.NumElements())
		for i := range v {
			v[i] = float64(r.IntN(5) - 2)
		}
		want := make([]float64, len(v))
		for _, s := range reduceOpsSlices(xs, axes) {
			for _, i := range s {
				p := 1.0
				for _, k := range s {
					if k != i {
						p *= v[k]
					}
				}
				want[i] = p
			}
		}
		what := fmt.Sprintf("prod_exclusive %v%s", xs, attrs)
		checkEqual(t, what, kernels.View[float64](mustRun(t, ir.OpProdExclusive, attrs, tensorOf(xs, v))), want)
		checkEqual(t, what, kernels.View[float32](mustRun(t, ir.OpProdExclusive, attrs, tensorOf(xs, conv[float32](v)))), conv[float32](want))
	}
}

// TestProdExclusiveGrad checks prod_exclusive_grad(dy, x) by hand, at zeros,
// and against the direct sum over i != j of dy[i] times the product of the
// rest, with integer-valued inputs so that both are exact.
func TestProdExclusiveGrad(t *testing.T) {
	tests := []struct {
		x, dy, want []float64
	}{
		{[]float64{2, 3, 4}, []float64{1, 1, 1}, []float64{7, 6, 5}},
		{[]float64{2, 3, 4}, []float64{1, 10, 100}, []float64{340, 204, 23}},
		{[]float64{0, 3, 0}, []float64{1, 1, 1}, []float64{3, 0, 3}},
		{[]float64{0, 3, 5}, []float64{1, 2, 4}, []float64{22, 5, 3}},
		{[]float64{7}, []float64{3}, []float64{0}},
	}
	for _, tc := range tests {
		s := []int{len(tc.x)}
		got := mustRun(t, ir.OpProdExclusiveGrad, nil, tensorOf(s, tc.dy), tensorOf(s, tc.x))
		checkEqual(t, fmt.Sprintf("f64 x=%v dy=%v", tc.x, tc.dy), kernels.View[float64](got), tc.want)
		got = mustRun(t, ir.OpProdExclusiveGrad, nil, tensorOf(s, conv[float32](tc.dy)), tensorOf(s, conv[float32](tc.x)))
		checkEqual(t, fmt.Sprintf("f32 x=%v dy=%v", tc.x, tc.dy), kernels.View[float32](got), conv[float32](tc.want))
	}
	for _, tc := range []struct {
		shape []int
		axes  []int
	}{
		{[]int{2, 3, 4}, nil}, {[]int{2, 3, 4}, []int{0, 2}}, {[]int{2, 3, 4}, []int{-1}},
		{[]int{4}, []int{}}, {[]int{}, nil}, {[]int{2, 0}, []int{0}},
	} {
		xs := ir.Shape(tc.shape)
		var attrs ir.Attrs
		if tc.axes != nil {
			attrs = ir.MakeAttrs("axes", ir.Ints(tc.axes...))
		}
		axes, _ := ir.ReduceAxes(attrs, len(xs))
		r := newRand(uint64(xs.NumElements()) + 5)
		x, dy := make([]float64, xs.NumElements()), make([]float64, xs.NumElements())
		for i := range x {
			x[i], dy[i] = float64(r.IntN(5)-2), float64(r.IntN(7)-3)
		}
		want := make([]float64, len(x))
		for _, s := range reduceOpsSlices(xs, axes) {
			for _, j := range s {
				for _, i := range s {
					if i == j {
						continue
					}
					p := dy[i]
					for _, k := range s {
						if k != i && k != j {
							p *= x[k]
						}
					}
					want[j] += p
				}
			}
		}
		what := fmt.Sprintf("prod_exclusive_grad %v%s", xs, attrs)
		checkEqual(t, what, kernels.View[float64](mustRun(t, ir.OpProdExclusiveGrad, attrs, tensorOf(xs, dy), tensorOf(xs, x))), want)
		checkEqual(t, what, kernels.View[float32](mustRun(t, ir.OpProdExclusiveGrad, attrs, tensorOf(xs, conv[float32](dy)), tensorOf(xs, conv[float32](x)))), conv[float32](want))
	}
}

// TestReduceOpsDoNotAllocate checks that no Func of this family allocates
// per call.
func TestReduceOpsDoNotAllocate(t *testing.T) {
	r := newRand(9)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	two := reduceOpsAttrs([]int{0, 2}, false)
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{ir.OpMax, two, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpMin, reduceOpsAttrs([]int{2}, true), []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpProd, nil, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpLogSumExp, two, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpVar, two, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpStd, nil, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpArgmax, two, []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpArgmin, reduceOpsAttrs([]int{1}, false), []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpProdExclusive, ir.MakeAttrs("axes", ir.Ints(1)), []kernels.Tensor{f32(2, 3, 4)}},
		{ir.OpProdExclusiveGrad, nil, []kernels.Tensor{f32(2, 3, 4), f32(2, 3, 4)}},
	}
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			reduceOpsNoAllocs(t, tc.op, tc.attrs, tc.args)
		})
	}
}

// reduceOpsNoAllocs builds op for args and fails if a call allocates.
func reduceOpsNoAllocs(t *testing.T, op ir.Op, attrs ir.Attrs, args []kernels.Tensor) {
	t.Helper()
	n := node(t, op, attrs, typesOf(args)...)
	f, err := Kernels.Build(n)
	if err != nil {
		t.Fatal(err)
	}
	out := emptyOf(n.Out)
	allocs := testing.AllocsPerRun(20, func() {
		if err := f(out, args); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%s allocates %v times per call", op, allocs)
	}
}
