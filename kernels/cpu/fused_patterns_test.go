package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// fusepatSameBits fails unless got and want are the same bits element by
// element (so -0 differs from +0), any NaN matching any NaN.
func fusepatSameBits[T float](t testing.TB, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d elements, want %d", what, len(got), len(want))
	}
	bad := 0
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) && math.IsNaN(w) || math.Float64bits(g) == math.Float64bits(w) {
			continue
		}
		if bad < 5 {
			t.Errorf("%s: element %d = %v, want %v (bitwise)", what, i, g, w)
		}
		bad++
	}
	if bad > 5 {
		t.Errorf("%s: %d elements differ", what, bad)
	}
}

// fusepatScalar returns a rank-0 tensor holding v.
func fusepatScalar[T float](v float64) kernels.Tensor { return tensorOf([]int{}, []T{T(v)}) }

// fusepatUnfusedSoftmaxGrad runs the ops autodiff emits for softmax's
// gradient, each through its own kernel.
func fusepatUnfusedSoftmaxGrad(t *testing.T, dy, y kernels.Tensor, axis int) kernels.Tensor {
	t1 := mustRun(t, ir.OpMul, nil, dy, y)
	s := mustRun(t, ir.OpSum, ir.MakeAttrs("axes", ir.Ints(axis), "keepdims", ir.BoolAttr(true)), t1)
	return mustRun(t, ir.OpMul, nil, y, mustRun(t, ir.OpSub, nil, dy, s))
}

// fusepatUnfusedLogSoftmaxGrad runs the ops of log_softmax's gradient.
func fusepatUnfusedLogSoftmaxGrad(t *testing.T, dy, y kernels.Tensor, axis int) kernels.Tensor {
	s := mustRun(t, ir.OpSum, ir.MakeAttrs("axes", ir.Ints(axis), "keepdims", ir.BoolAttr(true)), dy)
	return mustRun(t, ir.OpSub, nil, dy, mustRun(t, ir.OpMul, nil, mustRun(t, ir.OpExp, nil, y), s))
}

// fusepatUnfusedMaxGrad runs the ops of max's (or min's) gradient for
// x reduced to y over attrs' axes.
func fusepatUnfusedMaxGrad[T float](t *testing.T, dy, x, y kernels.Tensor, attrs ir.Attrs) kernels.Tensor {
	axes, err := ir.ReduceAxes(attrs, len(x.Type.Shape))
	if err != nil {
		t.Fatal(err)
	}
	keep := ir.ReducedShape(x.Type.Shape, axes, true)
	reshape := ir.MakeAttrs("shape", ir.Ints(keep...))
	mask := mustRun(t, ir.OpEqual, nil, x, mustRun(t, ir.OpReshape, reshape, y))
	w := mustRun(t, ir.OpWhere, nil, mask, fusepatScalar[T](1), fusepatScalar[T](0))
	count := mustRun(t, ir.OpSum, ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(true)), w)
	dyk := dy
	if len(dy.Type.Shape) != 0 || len(keep) == 0 {
		dyk = mustRun(t, ir.OpReshape, reshape, dy)
	}
	q := mustRun(t, ir.OpDiv, nil, dyk, count)
	return mustRun(t, ir.OpMul, nil, q, w)
}

// fusepatUnfusedSoftmaxCEGrad runs the ops of softmax_cross_entropy's
// logits gradient, with dy scaled as the reduction says ("unscaled": the
// difference alone, as simplification leaves it for a scale of 1).
func fusepatUnfusedSoftmaxCEGrad[T float](t *testing.T, logits, target, dy kernels.Tensor, reduction string) kernels.Tensor {
	n, c := logits.Type.Shape[0], logits.Type.Shape[1]
	var scale kernels.Tensor
	switch reduction {
	case "mean":
		scale = mustRun(t, ir.OpMul, nil, dy, fusepatScalar[T](1/float64(n)))
	case "sum", "unscaled":
		scale = dy
	default:
		scale = mustRun(t, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(n, 1)), dy)
	}
	p := mustRun(t, ir.OpSoftmax, nil, logits)
	var d kernels.Tensor
	if target.Type.DType.IsInt() {
		oh := mustRun(t, ir.OpOneHot, ir.MakeAttrs("classes", ir.Int(c), "dtype", ir.String(logits.Type.DType.String())), target)
		d = mustRun(t, ir.OpSub, nil, p, oh)
	} else {
		st := mustRun(t, ir.OpSum, ir.MakeAttrs("axes", ir.Ints(1), "keepdims", ir.BoolAttr(true)), target)
		d = mustRun(t, ir.OpSub, nil, mustRun(t, ir.OpMul, nil, p, st), target)
	}
	if reduction == "unscaled" {
		return d
	}
	return mustRun(t, ir.OpMul, nil, d, scale)
}

// TestFusepatSoftmaxGradBitwise checks softmax_grad and log_softmax_grad
// against the unfused ops run through their own kernels, bit for bit,
// along every axis of several shapes, with y the (log_)softmax of random
// logits and random dy.
func TestFusepatSoftmaxGradBitwise(t *testing.T) {
	tests := []struct {
		shape []int
		axis  int
	}{
		{[]int{4, 7}, -1},
		{[]int{4, 7}, 0},
		{[]int{2, 3, 5}, 1},
		{[]int{2, 3, 5}, 2},
		{[]int{2, 3, 5}, 0},
		{[]int{6}, 0},
		{[]int{3, 1, 4}, 1},
		{[]int{8, 257}, 1},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%v/axis=%d", tc.shape, tc.axis), func(t *testing.T) {
			fusepatSoftmaxGradCase[float32](t, tc.shape, tc.axis)
			fusepatSoftmaxGradCase[float64](t, tc.shape, tc.axis)
		})
	}
}

func fusepatSoftmaxGradCase[T float](t *testing.T, shape []int, axis int) {
	r := newRand(uint64(len(shape)*100 + axis + 7))
	n := ir.Shape(shape).NumElements()
	x := randVals[T](r, n, false)
	for i := range x {
		x[i] *= 4
	}
	dy := tensorOf(shape, randVals[T](r, n, false))
	at := ir.MakeAttrs("axis", ir.Int(axis))
	ax := axis
	if ax < 0 {
		ax += len(shape)
	}
	y := mustRun(t, ir.OpSoftmax, at, tensorOf(shape, x))
	fusepatSameBits(t, "softmax_grad", kernels.View[T](mustRun(t, ir.OpSoftmaxGrad, at, dy, y)), kernels.View[T](fusepatUnfusedSoftmaxGrad(t, dy, y, ax)))
	ly := mustRun(t, ir.OpLogSoftmax, at, tensorOf(shape, x))
	fusepatSameBits(t, "log_softmax_grad", kernels.View[T](mustRun(t, ir.OpLogSoftmaxGrad, at, dy, ly)), kernels.View[T](fusepatUnfusedLogSoftmaxGrad(t, dy, ly, ax)))
}

// TestFusepatMaxGradBitwise checks max_grad against the unfused rule's ops
// bit for bit, for max and min over several axis sets, on integer-valued
// inputs (many ties), inputs with NaN, and dy holding 0, inf and NaN.
func TestFusepatMaxGradBitwise(t *testing.T) {
	tests := []struct {
		shape    []int
		axes     []int // nil: all axes
		keepdims bool
	}{
		{[]int{4, 9}, []int{1}, false},
		{[]int{4, 9}, []int{-1}, true},
		{[]int{4, 9}, []int{0}, false},
		{[]int{2, 3, 5}, []int{0, 2}, false},
		{[]int{2, 3, 5}, []int{1, 2}, true},
		{[]int{2, 3, 5}, nil, false},
		{[]int{2, 3, 5}, []int{}, false},
		{[]int{7}, []int{0}, false},
	}
	for _, tc := range tests {
		for _, min := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/axes=%v/keep=%v/min=%v", tc.shape, tc.axes, tc.keepdims, min), func(t *testing.T) {
				fusepatMaxGradCase[float32](t, tc.shape, tc.axes, tc.keepdims, min)
				fusepatMaxGradCase[float64](t, tc.shape, tc.axes, tc.keepdims, min)
			})
		}
	}
}

func fusepatMaxGradCase[T float](t *testing.T, shape, axes []int, keepdims, min bool) {
	r := newRand(uint64(len(shape)*10 + len(axes)))
	red := ir.MakeAttrs("keepdims", ir.BoolAttr(keepdims))
	if axes != nil {
		red = red.With("axes", ir.Ints(axes...))
	}
	op := ir.OpMax
	if min {
		op = ir.OpMin
	}
	n := ir.Shape(shape).NumElements()
	for _, variant := range []string{"ties", "random", "nan"} {
		x := randVals[T](r, n, variant != "random")
		if variant == "nan" {
			x[0], x[n/2] = T(math.NaN()), T(math.NaN())
		}
		xt := tensorOf(shape, x)
		y := mustRun(t, op, red, xt)
		m := y.Type.Shape.NumElements()
		d := randVals[T](r, m, false)
		if variant == "ties" && m >= 3 {
			d[0], d[1], d[2] = 0, T(math.Inf(1)), T(math.NaN())
		}
		dy := tensorOf(y.Type.Shape, d)
		attrs := red.With("min", ir.BoolAttr(min))
		got := mustRun(t, ir.OpMaxGrad, attrs, dy, xt, y)
		want := fusepatUnfusedMaxGrad[T](t, dy, xt, y, red)
		fusepatSameBits(t, variant, kernels.View[T](got), kernels.View[T](want))
		// A scalar dy (what simplification leaves of a constant one) is
		// every slice's dy.
		one := fusepatScalar[T](-2.5)
		got = mustRun(t, ir.OpMaxGrad, attrs, one, xt, y)
		want = fusepatUnfusedMaxGrad[T](t, one, xt, y, red)
		fusepatSameBits(t, variant+"/scalar dy", kernels.View[T](got), kernels.View[T](want))
	}
}

// TestFusepatMaxGradValues checks max_grad on hand-computed rows: ties share
// dy, a NaN slice is all NaN, min selects the smallest, and the elements
// that are not selected get (dy/n)*0, -0 for a negative dy.
func TestFusepatMaxGradValues(t *testing.T) {
	nan, negZero := math.NaN(), math.Copysign(0, -1)
	tests := []struct {
		name string
		x    []float64 // [2,4], reduced over axis 1
		dy   []float64
		min  bool
		want []float64
	}{
		{"max ties", []float64{1, 3, 3, 2, 5, 0, 0, 0}, []float64{6, 2}, false, []float64{0, 3, 3, 0, 2, 0, 0, 0}},
		{"min ties", []float64{1, 3, 3, 2, 5, 0, 0, 0}, []float64{6, 3}, true, []float64{6, 0, 0, 0, 0, 1, 1, 1}},
		{"nan slice", []float64{1, nan, 3, 2, -1, -1, -2, 4}, []float64{6, -4}, false, []float64{nan, nan, nan, nan, negZero, negZero, negZero, -4}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			op := ir.OpMax
			if tc.min {
				op = ir.OpMin
			}
			red := ir.MakeAttrs("axes", ir.Ints(1))
			x := tensorOf([]int{2, 4}, tc.x)
			y := mustRun(t, op, red, x)
			got := mustRun(t, ir.OpMaxGrad, red.With("min", ir.BoolAttr(tc.min)), tensorOf([]int{2}, tc.dy), x, y)
			fusepatSameBits(t, "f64", kernels.View[float64](got), tc.want)
		})
	}
}

// TestFusepatSoftmaxCEGradBitwise checks softmax_ce_grad against the
// unfused ops bit for bit, for both label dtypes and probability targets,
// every reduction, random logits and logits of ±1000.
func TestFusepatSoftmaxCEGradBitwise(t *testing.T) {
	for _, red := range []string{"mean", "sum", "none"} {
		for _, target := range []string{"i32", "i64", "probs"} {
			for _, extreme := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/extreme=%v", red, target, extreme), func(t *testing.T) {
					fusepatSoftmaxCECase[float32](t, red, target, extreme)
					fusepatSoftmaxCECase[float64](t, red, target, extreme)
				})
			}
		}
	}
}

func fusepatSoftmaxCECase[T float](t *testing.T, red, target string, extreme bool) {
	const n, c = 5, 9
	r := newRand(uint64(len(red) + len(target)))
	x := randVals[T](r, n*c, false)
	if extreme {
		for i := range x {
			x[i] = T(1000 * math.Copysign(1, float64(x[i])))
		}
		x[3] = 999
	}
	logits := tensorOf([]int{n, c}, x)
	var tg kernels.Tensor
	switch target {
	case "i32":
		tg = tensorOf([]int{n}, []int32{0, 8, 3, 3, 1})
	case "i64":
		tg = tensorOf([]int{n}, []int64{2, 0, 8, 5, 5})
	default:
		p := randVals[T](r, n*c, false)
		for i := range p {
			p[i] = T(math.Abs(float64(p[i])) / 8)
		}
		tg = tensorOf([]int{n, c}, p)
	}
	dy := fusepatScalar[T](-1.5)
	if red == "none" {
		dy = tensorOf([]int{n}, randVals[T](r, n, false))
	}
	got := mustRun(t, ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String(red)), logits, tg, dy)
	want := fusepatUnfusedSoftmaxCEGrad[T](t, logits, tg, dy, red)
	for _, v := range kernels.View[T](got) {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("non-finite gradient %v", v)
		}
	}
	fusepatSameBits(t, "softmax_ce_grad", kernels.View[T](got), kernels.View[T](want))
	if red == "sum" {
		// Without dy the scale is 1: the difference itself.
		got1 := mustRun(t, ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String(red)), logits, tg)
		want1 := fusepatUnfusedSoftmaxCEGrad[T](t, logits, tg, fusepatScalar[T](1), "unscaled")
		fusepatSameBits(t, "no dy", kernels.View[T](got1), kernels.View[T](want1))
	}
	if red == "none" {
		// dy [N,1] is the same per-row scale.
		dy2 := kernels.Tensor{Type: ir.TensorOf(dy.Type.DType, n, 1), Data: dy.Data}
		got2 := mustRun(t, ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String(red)), logits, tg, dy2)
		fusepatSameBits(t, "dy [N,1]", kernels.View[T](got2), kernels.View[T](want))
	}
}

// TestFusepatSoftmaxCEGradLabelRange checks that a label outside [0,C) is
// an error naming it, as one_hot's.
func TestFusepatSoftmaxCEGradLabelRange(t *testing.T) {
	for _, tc := range []struct {
		labels []int64
		want   string
	}{
		{[]int64{0, 3}, "label 3 at row 1 is outside [0,3)"},
		{[]int64{-1, 0}, "label -1 at row 0 is outside [0,3)"},
	} {
		_, err := run(t, ir.OpSoftmaxCEGrad, nil, tensorOf([]int{2, 3}, make([]float32, 6)), tensorOf([]int{2}, tc.labels), fusepatScalar[float32](1))
		if err == nil || err.Error() != tc.want {
			t.Errorf("labels %v: error %v, want %q", tc.labels, err, tc.want)
		}
	}
}

// TestFusepatFuncsDoNotAllocate checks that no fused pattern Func
// allocates per call.
func TestFusepatFuncsDoNotAllocate(t *testing.T) {
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](newRand(3), ir.Shape(dims).NumElements(), true))
	}
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{ir.OpSoftmaxGrad, nil, []kernels.Tensor{f32(3, 5), f32(3, 5)}},
		{ir.OpSoftmaxGrad, ir.MakeAttrs("axis", ir.Int(0)), []kernels.Tensor{f32(3, 5), f32(3, 5)}},
		{ir.OpLogSoftmaxGrad, ir.MakeAttrs("axis", ir.Int(0)), []kernels.Tensor{f32(3, 5), f32(3, 5)}},
		{ir.OpMaxGrad, ir.MakeAttrs("axes", ir.Ints(1)), []kernels.Tensor{f32(3), f32(3, 5), f32(3)}},
		{ir.OpMaxGrad, ir.MakeAttrs("axes", ir.Ints(0)), []kernels.Tensor{f32(5), f32(3, 5), f32(5)}},
		{ir.OpSoftmaxCEGrad, nil, []kernels.Tensor{f32(3, 5), tensorOf([]int{3}, []int64{0, 4, 2}), f32()}},
		{ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String("none")), []kernels.Tensor{f32(3, 5), f32(3, 5), f32(3)}},
	}
	for _, tc := range tests {
		n := node(t, tc.op, tc.attrs, typesOf(tc.args)...)
		f, err := Kernels.Build(n)
		if err != nil {
			t.Fatal(err)
		}
		out := emptyOf(n.Out)
		allocs := testing.AllocsPerRun(20, func() {
			if err := f(out, tc.args); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%s%s allocates %v times per call", tc.op, tc.attrs, allocs)
		}
	}
}

// TestFusepatEmptyShapes runs the fused ops on zero-size operands; none may
// panic.
func TestFusepatEmptyShapes(t *testing.T) {
	f32 := func(dims ...int) kernels.Tensor { return tensorOf[float32](dims, nil) }
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{ir.OpSoftmaxGrad, nil, []kernels.Tensor{f32(0, 3), f32(0, 3)}},
		{ir.OpLogSoftmaxGrad, ir.MakeAttrs("axis", ir.Int(0)), []kernels.Tensor{f32(0, 3), f32(0, 3)}},
		{ir.OpMaxGrad, ir.MakeAttrs("axes", ir.Ints(1)), []kernels.Tensor{f32(0), f32(0, 3), f32(0)}},
		{ir.OpSoftmaxCEGrad, nil, []kernels.Tensor{f32(0, 3), tensorOf[int32]([]int{0}, nil), f32()}},
		{ir.OpSoftmaxCEGrad, ir.MakeAttrs("reduction", ir.String("sum")), []kernels.Tensor{f32(2, 0), f32(2, 0), f32()}},
	}
	for _, tc := range tests {
		mustRun(t, tc.op, tc.attrs, tc.args...)
	}
}

// TestFusepatBuildRejectsBadNodes checks the fused ops' inference errors
// as the checked builders report them.
func TestFusepatBuildRejectsBadNodes(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"softmax_grad types", kernels.Node{Op: ir.OpSoftmaxGrad, Args: []ir.Type{f32(2, 3), f32(3, 2)}, Out: f32(3, 2)}, "expected dy of y's type"},
		{"softmax_grad axis", kernels.Node{Op: ir.OpSoftmaxGrad, Attrs: ir.MakeAttrs("axis", ir.Int(2)), Args: []ir.Type{f32(2, 3), f32(2, 3)}, Out: f32(2, 3)}, "axis 2 out of range"},
		{"max_grad y", kernels.Node{Op: ir.OpMaxGrad, Attrs: ir.MakeAttrs("axes", ir.Ints(1), "keepdims", ir.BoolAttr(false)), Args: []ir.Type{f32(2), f32(2, 3), f32(2, 1)}, Out: f32(2, 3)}, "expected y of type f32[2] (x f32[2,3] reduced) and dy of that type or a scalar"},
		{"ce dy", kernels.Node{Op: ir.OpSoftmaxCEGrad, Attrs: ir.MakeAttrs("reduction", ir.String("mean")), Args: []ir.Type{f32(2, 3), ir.TensorOf(ir.I64, 2), f32(2)}, Out: f32(2, 3)}, `reduction "mean" expects dy f32[]`},
		{"ce no dy", kernels.Node{Op: ir.OpSoftmaxCEGrad, Attrs: ir.MakeAttrs("reduction", ir.String("mean")), Args: []ir.Type{f32(2, 3), ir.TensorOf(ir.I64, 2)}, Out: f32(2, 3)}, `without dy the reduction must be "sum"`},
		{"ce labels", kernels.Node{Op: ir.OpSoftmaxCEGrad, Attrs: ir.MakeAttrs("reduction", ir.String("sum")), Args: []ir.Type{f32(2, 3), ir.TensorOf(ir.I64, 3), f32()}, Out: f32(2, 3)}, "expected integer labels [2]"},
		{"from", kernels.Node{Op: ir.OpSoftmaxGrad, Attrs: ir.MakeAttrs("axis", ir.Int(1), "from", ir.Ints(1)), Args: []ir.Type{f32(2, 3), f32(2, 3)}, Out: f32(2, 3)}, "from must be a list of strings"},
	}
	for _, tc := range tests {
		_, err := Kernels.Build(&tc.n)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// BenchmarkFusepatKernels times each fused kernel alone on [4096,1024] f32
// (go test ./kernels/cpu -run '^$' -bench Fusepat -benchtime 20x).
func BenchmarkFusepatKernels(b *testing.B) {
	const rows, cols = 4096, 1024
	r := newRand(1)
	x := tensorOf([]int{rows, cols}, randVals[float32](r, rows*cols, false))
	dy := tensorOf([]int{rows, cols}, randVals[float32](r, rows*cols, false))
	labels := make([]int64, rows)
	for i := range labels {
		labels[i] = int64(r.IntN(cols))
	}
	red := ir.MakeAttrs("axes", ir.Ints(1))
	y := mustRun(b, ir.OpSoftmax, nil, x)
	m := mustRun(b, ir.OpMax, red, x)
	tests := []struct {
		name  string
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{"softmax", ir.OpSoftmax, nil, []kernels.Tensor{x}},
		{"softmax_grad", ir.OpSoftmaxGrad, nil, []kernels.Tensor{dy, y}},
		{"log_softmax_grad", ir.OpLogSoftmaxGrad, nil, []kernels.Tensor{dy, y}},
		{"max", ir.OpMax, red, []kernels.Tensor{x}},
		{"max_grad", ir.OpMaxGrad, red, []kernels.Tensor{tensorOf([]int{rows}, randVals[float32](r, rows, false)), x, m}},
		{"softmax_ce_grad", ir.OpSoftmaxCEGrad, nil, []kernels.Tensor{x, tensorOf([]int{rows}, labels), fusepatScalar[float32](1)}},
	}
	for _, tc := range tests {
		b.Run(tc.name, func(b *testing.B) {
			n := node(b, tc.op, tc.attrs, typesOf(tc.args)...)
			f, err := Kernels.Build(n)
			if err != nil {
				b.Fatal(err)
			}
			out := emptyOf(n.Out)
			for range b.N {
				if err := f(out, tc.args); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
