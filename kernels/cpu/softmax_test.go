package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// softmaxRef returns softmax and log_softmax of x (shape xs) along axis, in
// float64 by the textbook formulas with the max subtracted.
func softmaxRef(xs ir.Shape, x []float64, axis int) (sm, lsm []float64) {
	sm = make([]float64, len(x))
	lsm = make([]float64, len(x))
	st := xs.Strides()
	for i := range x {
		idx := unravel(xs, i)
		if idx[axis] != 0 {
			continue
		}
		m := math.Inf(-1)
		for k := range xs[axis] {
			m = math.Max(m, x[i+k*st[axis]])
		}
		s := 0.0
		for k := range xs[axis] {
			s += math.Exp(x[i+k*st[axis]] - m)
		}
		for k := range xs[axis] {
			j := i + k*st[axis]
			sm[j] = math.Exp(x[j]-m) / s
			lsm[j] = x[j] - m - math.Log(s)
		}
	}
	return sm, lsm
}

// TestSoftmaxValues checks softmax and log_softmax on a hand-computed row and
// on random tensors along every axis. Tolerance: rel 1e-6 (f32) or 1e-12
// (f64) of the float64 reference; log_softmax's is relative to
// max(1, |want|), since log(sum) near log(1) cannot keep relative precision.
func TestSoftmaxValues(t *testing.T) {
	x := []float64{1, 2, 3}
	sm := []float64{0.09003057317038046, 0.24472847105479764, 0.6652409557748218}
	lsm := []float64{-2.4076059644443806, -1.4076059644443804, -0.4076059644443804}
	checkNear(t, "softmax f32", kernels.View[float32](mustRun(t, ir.OpSoftmax, nil, tensorOf([]int{3}, conv[float32](x)))), sm, relF32, 0)
	checkNear(t, "softmax f64", kernels.View[float64](mustRun(t, ir.OpSoftmax, nil, tensorOf([]int{3}, x))), sm, relF64, 0)
	checkNear(t, "log_softmax f32", kernels.View[float32](mustRun(t, ir.OpLogSoftmax, nil, tensorOf([]int{3}, conv[float32](x)))), lsm, relF32, 0)
	checkNear(t, "log_softmax f64", kernels.View[float64](mustRun(t, ir.OpLogSoftmax, nil, tensorOf([]int{3}, x))), lsm, relF64, 0)

	tests := []struct {
		shape []int
		axis  int
	}{
		{[]int{4, 7}, -1},
		{[]int{4, 7}, 0},
		{[]int{2, 3, 5}, 0},
		{[]int{2, 3, 5}, 1},
		{[]int{2, 3, 5}, 2},
		{[]int{2, 3, 5}, -2},
		{[]int{3, 1, 4}, 1},
		{[]int{6}, 0},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/axis=%d", tc.shape, tc.axis), func(t *testing.T) {
			softmaxRandom[float32](t, tc.shape, tc.axis)
			softmaxRandom[float64](t, tc.shape, tc.axis)
		})
	}
}

func softmaxRandom[T float](t *testing.T, shape []int, axis int) {
	t.Helper()
	xs := ir.Shape(shape)
	x := randVals[T](newRand(uint64(axis+10)), xs.NumElements(), false)
	for i := range x {
		x[i] *= 3
	}
	ax := axis
	if ax < 0 {
		ax += len(xs)
	}
	sm, lsm := softmaxRef(xs, f64s(x), ax)
	attrs := ir.MakeAttrs("axis", ir.Int(axis))
	checkNear(t, "softmax", kernels.View[T](mustRun(t, ir.OpSoftmax, attrs, tensorOf(xs, x))), sm, rel[T](), 0)
	checkNear(t, "log_softmax", kernels.View[T](mustRun(t, ir.OpLogSoftmax, attrs, tensorOf(xs, x))), lsm, rel[T](), rel[T]())
}

// TestSoftmaxExtreme checks that rows of ±1000, where exp(x) overflows,
// stay finite and correct on the last axis and on the first.
func TestSoftmaxExtreme(t *testing.T) {
	x := []float64{
		1000, 0, -1000,
		1000, 1000, 999,
		-1000, -1000, -999,
		-1000, 1000, -1000,
	} // [4,3]
	sm, lsm := softmaxRef(ir.Shape{4, 3}, x, 1)
	sm0, lsm0 := softmaxRef(ir.Shape{4, 3}, x, 0)
	for _, axis := range []int{1, 0} {
		wantSM, wantLSM := sm, lsm
		if axis == 0 {
			wantSM, wantLSM = sm0, lsm0
		}
		attrs := ir.MakeAttrs("axis", ir.Int(axis))
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			var gotSM, gotLSM []float64
			if dt == ir.F32 {
				gotSM = f64s(kernels.View[float32](mustRun(t, ir.OpSoftmax, attrs, tensorOf([]int{4, 3}, conv[float32](x)))))
				gotLSM = f64s(kernels.View[float32](mustRun(t, ir.OpLogSoftmax, attrs, tensorOf([]int{4, 3}, conv[float32](x)))))
			} else {
				gotSM = f64s(kernels.View[float64](mustRun(t, ir.OpSoftmax, attrs, tensorOf([]int{4, 3}, x))))
				gotLSM = f64s(kernels.View[float64](mustRun(t, ir.OpLogSoftmax, attrs, tensorOf([]int{4, 3}, x))))
			}
			r := relF64
			if dt == ir.F32 {
				r = relF32
			}
			for i := range x {
				if math.IsNaN(gotSM[i]) || math.IsInf(gotSM[i], 0) || math.IsNaN(gotLSM[i]) || math.IsInf(gotLSM[i], 0) {
					t.Fatalf("%s axis %d: element %d not finite: softmax %v, log_softmax %v", dt, axis, i, gotSM[i], gotLSM[i])
				}
			}
			checkNear(t, fmt.Sprintf("softmax %s axis %d", dt, axis), gotSM, wantSM, r, 0)
			checkNear(t, fmt.Sprintf("log_softmax %s axis %d", dt, axis), gotLSM, wantLSM, r, r)
		}
	}
	// Spot values: softmax(1000, 1000, 999) = (1, 1, 1/e) / (2 + 1/e).
	if w := 1 / (2 + math.Exp(-1)); math.Abs(sm[3]-w) > 1e-15 {
		t.Fatalf("reference softmax = %v, want %v", sm[3], w)
	}
}

// ceRef is softmax_cross_entropy by its definition in float64.
func ceRef(x []float64, labels []int, c int) float64 {
	total := 0.0
	for r, l := range labels {
		row := x[r*c : (r+1)*c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		total += m + math.Log(s) - row[l]
	}
	return total / float64(len(labels))
}

// TestSoftmaxCrossEntropy compares the loss with the float64 formula for
// both label dtypes, on random logits and on logits of ±1000. Tolerance:
// rel 1e-6 (f32) or 1e-12 (f64), relative to max(1, |want|) for the
// near-zero losses at ±1000.
func TestSoftmaxCrossEntropy(t *testing.T) {
	testCE[float32, int32](t)
	testCE[float32, int64](t)
	testCE[float64, int32](t)
	testCE[float64, int64](t)
}

func testCE[T float, L integer](t *testing.T) {
	name := fmt.Sprintf("%s/%s", kernels.DTypeOf[T](), kernels.DTypeOf[L]())
	r := newRand(11)
	const n, c = 6, 10
	x := randVals[T](r, n*c, false)
	labels := []int{0, 9, 3, 3, 7, 1}
	extreme := []float64{
		1000, -1000, 0, // label 0: loss ~ 0
		1000, -1000, 0, // label 1: loss 2000
		-1000, -1000, -1000, // label 2: log 3
		-1000, 1000, 999, // label 2: 1 + log(1 + e)
	}
	extremeLabels := []int{0, 1, 2, 2}
	tests := []struct {
		name   string
		x      []float64
		c      int
		labels []int
	}{
		{"random", f64s(x), c, labels},
		{"±1000", extreme, 3, extremeLabels},
		{"one row", []float64{0.5, -0.5}, 2, []int{1}},
	}
	for _, tc := range tests {
		t.Run(name+"/"+tc.name, func(t *testing.T) {
			lab := make([]L, len(tc.labels))
			for i, l := range tc.labels {
				lab[i] = L(l)
			}
			rows := len(tc.labels)
			out := mustRun(t, ir.OpSoftmaxCrossEntropy, nil, tensorOf([]int{rows, tc.c}, conv[T](tc.x)), tensorOf([]int{rows}, lab))
			want := ceRef(f64s(conv[T](tc.x)), tc.labels, tc.c)
			if !out.Type.Equal(ir.TensorOf(kernels.DTypeOf[T]())) {
				t.Fatalf("result type %s", out.Type)
			}
			checkNear(t, "loss", kernels.View[T](out), []float64{want}, rel[T](), rel[T]())
		})
	}
	t.Run(name+"/label out of range", func(t *testing.T) {
		for _, tc := range []struct {
			labels []L
			want   string
		}{
			{[]L{0, 1, 2, 12}, "label 12 at row 3 is outside [0,10)"},
			{[]L{-1, 1, 2, 3}, "label -1 at row 0 is outside [0,10)"},
			{[]L{0, 10, 2, 3}, "label 10 at row 1 is outside [0,10)"},
		} {
			_, err := run(t, ir.OpSoftmaxCrossEntropy, nil, tensorOf([]int{4, 10}, make([]T, 40)), tensorOf([]int{4}, tc.labels))
			if err == nil || err.Error() != tc.want {
				t.Errorf("labels %v: error %v, want %q", tc.labels, err, tc.want)
			}
		}
	})
}

// TestMSELoss checks mse_loss on hand-computed values and against a float64
// reference under broadcasting in each argument. Tolerance: rel 1e-6 (f32)
// or 1e-12 (f64).
func TestMSELoss(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6}
	out := mustRun(t, ir.OpMSELoss, nil, tensorOf([]int{2, 3}, a), tensorOf([]int{3}, []float64{1, 1, 1}))
	checkNear(t, "hand f64", kernels.View[float64](out), []float64{55.0 / 6}, relF64, 0)
	out = mustRun(t, ir.OpMSELoss, nil, tensorOf([]int{2, 3}, conv[float32](a)), tensorOf([]int{2, 3}, conv[float32](a)))
	checkEqual(t, "hand f32", kernels.View[float32](out), []float32{0})

	shapes := [][2][]int{
		{{4, 5}, {4, 5}},
		{{4, 5}, {}},
		{{}, {4, 5}},
		{{4, 5}, {5}},
		{{4, 1}, {1, 5}},
		{{2, 4, 5}, {4, 1}},
		{{3}, {2, 1, 3}},
	}
	for _, sh := range shapes {
		t.Run(fmt.Sprintf("%v/%v", sh[0], sh[1]), func(t *testing.T) {
			mseRandom[float32](t, sh[0], sh[1])
			mseRandom[float64](t, sh[0], sh[1])
		})
	}
}

func mseRandom[T float](t *testing.T, as, bs ir.Shape) {
	t.Helper()
	r := newRand(5)
	a := randVals[T](r, as.NumElements(), false)
	b := randVals[T](r, bs.NumElements(), false)
	os, _ := ir.BroadcastShapes(as, bs)
	s := 0.0
	for i := range os.NumElements() {
		idx := unravel(os, i)
		d := float64(a[bcastIndex(as, idx)]) - float64(b[bcastIndex(bs, idx)])
		s += d * d
	}
	want := s / float64(os.NumElements())
	out := mustRun(t, ir.OpMSELoss, nil, tensorOf(as, a), tensorOf(bs, b))
	checkNear(t, out.Type.String(), kernels.View[T](out), []float64{want}, rel[T](), 0)
}

// TestSoftmaxOnlineLongRows checks the softmax on long rows: random rows,
// increasing rows (the maximum at the end) and decreasing ones (at the
// start), against the float64 reference (rel 1e-5 for f32, whose sum over
// 1000 terms rounds more than a 7-element row's; 1e-12 for f64).
// Softmax along axis 0 of the transposed data, the column path, must give
// the same bits as the row path.
func TestSoftmaxOnlineLongRows(t *testing.T) {
	const rows, dim = 3, 1000
	r := newRand(21)
	x := make([]float64, rows*dim)
	for i := range dim {
		x[i] = 6 * (r.Float64() - 0.5)
		x[dim+i] = float64(i) / 50
		x[2*dim+i] = -float64(i) / 50
	}
	sm, lsm := softmaxRef(ir.Shape{rows, dim}, x, 1)
	xt := make([]float64, len(x)) // [dim, rows]
	for i := range rows {
		for k := range dim {
			xt[k*rows+i] = x[i*dim+k]
		}
	}
	for _, logOut := range []bool{false, true} {
		op, want := ir.OpSoftmax, sm
		if logOut {
			op, want = ir.OpLogSoftmax, lsm
		}
		t.Run(op.String(), func(t *testing.T) {
			got32 := kernels.View[float32](mustRun(t, op, nil, tensorOf([]int{rows, dim}, conv[float32](x))))
			checkNear(t, "f32", got32, want, 1e-5, 1e-5)
			got64 := kernels.View[float64](mustRun(t, op, nil, tensorOf([]int{rows, dim}, x)))
			checkNear(t, "f64", got64, want, relF64, relF64)
			col := kernels.View[float64](mustRun(t, op, ir.MakeAttrs("axis", ir.Int(0)), tensorOf([]int{dim, rows}, xt)))
			for i := range rows {
				for k := range dim {
					if a, b := col[k*rows+i], got64[i*dim+k]; math.Float64bits(a) != math.Float64bits(b) {
						t.Fatalf("row %d element %d: column path %v, row path %v", i, k, a, b)
					}
				}
			}
		})
	}
}

// TestSoftmaxDeterministic checks that two runs, and the row and column
// paths, give the same bits, and that softmax rows of non-finite values follow the textbook formula
// (and PyTorch): a NaN or a +inf makes the row NaN, -inf elements get 0.
func TestSoftmaxDeterministic(t *testing.T) {
	inf := math.Inf(1)
	x := []float64{
		-inf, 0, 1, -inf,
		1, math.NaN(), 2, 3,
		inf, 0, inf, 1,
		-inf, -inf, -inf, 5,
		0, 1, inf, 2,
	}
	a := kernels.View[float64](mustRun(t, ir.OpSoftmax, nil, tensorOf([]int{5, 4}, x)))
	b := kernels.View[float64](mustRun(t, ir.OpSoftmax, nil, tensorOf([]int{5, 4}, x)))
	for i := range a {
		if math.Float64bits(a[i]) != math.Float64bits(b[i]) && !(math.IsNaN(a[i]) && math.IsNaN(b[i])) {
			t.Fatalf("element %d: %v then %v", i, a[i], b[i])
		}
	}
	xt := make([]float64, 20)
	for i := range 5 {
		for k := range 4 {
			xt[k*5+i] = x[i*4+k]
		}
	}
	col := kernels.View[float64](mustRun(t, ir.OpSoftmax, ir.MakeAttrs("axis", ir.Int(0)), tensorOf([]int{4, 5}, xt)))
	for i := range 5 {
		for k := range 4 {
			if c, r := col[k*5+i], a[i*4+k]; math.Float64bits(c) != math.Float64bits(r) && !(math.IsNaN(c) && math.IsNaN(r)) {
				t.Fatalf("row %d element %d: column path %v, row path %v", i, k, c, r)
			}
		}
	}
	e := math.E
	want := []float64{0, 1 / (1 + e), e / (1 + e), 0, math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), math.NaN(), 0, 0, 0, 1,
		math.NaN(), math.NaN(), math.NaN(), math.NaN()}
	checkNear(t, "softmax", a, want, relF64, 0)
}
