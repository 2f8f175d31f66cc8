package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

func reduction(r string) ir.Attrs { return ir.MakeAttrs("reduction", ir.String(r)) }

// lossCase is a loss on given arguments with its unreduced values; the
// test derives "sum" and "mean" from them.
type lossCase struct {
	name  string
	op    ir.Op
	attrs ir.Attrs
	args  []lossArg
	none  []float64 // the unreduced losses, in the result's shape
}

// lossArg is one argument: a float tensor (converted to the dtype under
// test) or integer labels.
type lossArg struct {
	shape  []int
	vals   []float64
	labels []int64
}

func (a lossArg) tensor(dt ir.DType) kernels.Tensor {
	switch {
	case a.labels != nil:
		return tensorOf(a.shape, a.labels)
	case dt == ir.F32:
		return tensorOf(a.shape, conv[float32](a.vals))
	}
	return tensorOf(a.shape, a.vals)
}

// TestLossValues checks every loss under each reduction against
// hand-computed values (simple binary fractions, exact in f32) or values
// computed with mpmath at 50 digits from PyTorch's formulas. Tolerance: rel
// 1e-6 (f32) or 1e-12 (f64); "sum" and "mean" are checked against the sum
// of the reference losses.
func TestLossValues(t *testing.T) {
	d := []lossArg{{[]int{4}, []float64{0.5, -1, 2, 3}, nil}, {[]int{4}, []float64{1, 1, 1, 1}, nil}} // a - b = -0.5, -2, 1, 2
	tests := []lossCase{
		{"mse", ir.OpMSELoss, nil, d, []float64{0.25, 4, 1, 4}},
		{"l1", ir.OpL1Loss, nil, d, []float64{0.5, 2, 1, 2}},
		// |d| = 1 = delta is on the linear side (torch: z < delta ?
		// quadratic : linear); both sides give 0.5 there.
		{"huber", ir.OpHuberLoss, nil, d, []float64{0.125, 1.5, 0.5, 1.5}},
		{"huber delta", ir.OpHuberLoss, ir.MakeAttrs("delta", ir.Float(0.5)), d, []float64{0.125, 0.875, 0.375, 0.875}},
		{"mse broadcast", ir.OpMSELoss, nil, []lossArg{{[]int{2, 1}, []float64{1, -1}, nil}, {[]int{3}, []float64{0, 1, 3}, nil}},
			[]float64{1, 0, 4, 1, 4, 16}},
		{"l1 broadcast scalar", ir.OpL1Loss, nil, []lossArg{{[]int{}, []float64{1}, nil}, {[]int{2, 2}, []float64{0, 1, 3, -0.5}, nil}},
			[]float64{1, 0, 2, 1.5}},
		{"huber broadcast", ir.OpHuberLoss, nil, []lossArg{{[]int{2, 2}, []float64{0, 1, 3, -0.5}, nil}, {[]int{2, 1}, []float64{0.5, 0}, nil}},
			[]float64{0.125, 0.125, 2.5, 0.125}},
		// torch: -(t log x + (1-t) log(1-x)), logs clamped at -100, so
		// x = 0 against t = 1 costs 100, not inf.
		{"bce", ir.OpBCELoss, nil, []lossArg{
			{[]int{2, 4}, []float64{0.25, 0.5, 0.9, 0.3, 0, 1, 0, 1}, nil},
			{[]int{2, 4}, []float64{1, 0.5, 0, 0.8, 0, 1, 1, 0}, nil}},
			[]float64{1.3862943611198906, 0.69314718055994531, 2.3025850929940457, 1.0345132322484953, 0, 0, 100, 100}},
		// max(x,0) - x t + log1p(exp(-|x|)); at ±1000 the true losses are
		// e^-1000 (0 in floats) and 1000.
		{"bce_with_logits", ir.OpBCEWithLogits, nil, []lossArg{
			{[]int{8}, []float64{0, 2, -3, 1000, -1000, 1000, -1000, 0.5}, nil},
			{[]int{8}, []float64{0.5, 1, 0, 1, 0, 0, 1, 0.25}, nil}},
			[]float64{0.69314718055994531, 0.1269280110429725, 0.048587351573742059, 0, 0, 1000, 1000, 0.84907698418010668}},
		{"nll", ir.OpNLLLoss, nil, []lossArg{
			{[]int{3, 4}, []float64{-1, -2, -3, -4, -0.5, -0.25, -8, -1, -3, -2, -1, -0.125}, nil},
			{[]int{3}, nil, []int64{1, 0, 3}}},
			[]float64{2, 0.5, 0.125}},
		// -sum(target * log_softmax(logits)) per row; the second row has
		// logits ±1000.
		{"softmax_cross_entropy probabilities", ir.OpSoftmaxCrossEntropy, nil, []lossArg{
			{[]int{2, 3}, []float64{1, 2, 3, 1000, -1000, 0}, nil},
			{[]int{2, 3}, []float64{0.2, 0.3, 0.5, 0.5, 0, 0.5}, nil}},
			[]float64{1.1076059644443803, 500}},
		{"softmax_cross_entropy labels", ir.OpSoftmaxCrossEntropy, nil, []lossArg{
			{[]int{2, 3}, []float64{1, 2, 3, 1000, -1000, 0}, nil},
			{[]int{2}, nil, []int64{2, 0}}},
			[]float64{0.4076059644443803, 0}},
	}
	for _, tc := range tests {
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			t.Run(fmt.Sprintf("%s/%s", tc.name, dt), func(t *testing.T) {
				args := make([]kernels.Tensor, len(tc.args))
				for i, a := range tc.args {
					args[i] = a.tensor(dt)
				}
				sum := 0.0
				for _, v := range tc.none {
					sum += v
				}
				for _, r := range []struct {
					red  string
					want []float64
				}{
					{"none", tc.none},
					{"sum", []float64{sum}},
					{"mean", []float64{sum / float64(len(tc.none))}},
				} {
					out := mustRun(t, tc.op, tc.attrs.With("reduction", ir.String(r.red)), args...)
					if r.red == "none" {
						ws, _ := ir.BroadcastShapes(tc.args[0].shape, tc.args[1].shape)
						if tc.args[1].labels != nil || tc.op == ir.OpSoftmaxCrossEntropy {
							ws = ir.Shape{tc.args[0].shape[0]}
						}
						if !out.Type.Shape.Equal(ws) {
							t.Fatalf("none: result %s, want shape %s", out.Type, ws)
						}
					} else if len(out.Type.Shape) != 0 {
						t.Fatalf("%s: result %s, want a scalar", r.red, out.Type)
					}
					if dt == ir.F32 {
						checkNear(t, r.red, kernels.View[float32](out), r.want, relF32, 0)
					} else {
						checkNear(t, r.red, kernels.View[float64](out), r.want, relF64, 0)
					}
				}
			})
		}
	}
}

// TestLossDefaultIsMean checks that a loss without attributes averages.
func TestLossDefaultIsMean(t *testing.T) {
	out := mustRun(t, ir.OpL1Loss, nil, tensorOf([]int{2}, []float64{1, -3}), tensorOf([]int{}, []float64{0}))
	checkEqual(t, "l1 default", kernels.View[float64](out), []float64{2})
}

// TestElemLossRandom compares mse, l1 and huber with float64 references
// under broadcasting in each argument and every reduction.
func TestElemLossRandom(t *testing.T) {
	shapes := [][2][]int{{{4, 5}, {4, 5}}, {{4, 5}, {}}, {{}, {4, 5}}, {{4, 1}, {1, 5}}, {{2, 4, 5}, {4, 1}}, {{3}, {2, 1, 3}}}
	for _, sh := range shapes {
		for _, op := range []ir.Op{ir.OpMSELoss, ir.OpL1Loss, ir.OpHuberLoss} {
			t.Run(fmt.Sprintf("%s/%v/%v", op, sh[0], sh[1]), func(t *testing.T) {
				elemLossRandom[float32](t, op, sh[0], sh[1])
				elemLossRandom[float64](t, op, sh[0], sh[1])
			})
		}
	}
}

func elemLossRandom[T float](t *testing.T, op ir.Op, as, bs ir.Shape) {
	t.Helper()
	r := newRand(17)
	a := randVals[T](r, as.NumElements(), false)
	b := randVals[T](r, bs.NumElements(), false)
	os, _ := ir.BroadcastShapes(as, bs)
	const delta = 0.75
	none := make([]float64, os.NumElements())
	sum := 0.0
	for i := range none {
		idx := unravel(os, i)
		d := float64(a[bcastIndex(as, idx)]) - float64(b[bcastIndex(bs, idx)])
		switch z := math.Abs(d); op {
		case ir.OpMSELoss:
			none[i] = d * d
		case ir.OpL1Loss:
			none[i] = z
		case ir.OpHuberLoss:
			if z < delta {
				none[i] = 0.5 * z * z
			} else {
				none[i] = delta * (z - 0.5*delta)
			}
		}
		sum += none[i]
	}
	var attrs ir.Attrs
	if op == ir.OpHuberLoss {
		attrs = ir.MakeAttrs("delta", ir.Float(delta))
	}
	for _, red := range []string{"none", "sum", "mean"} {
		want := none
		switch red {
		case "sum":
			want = []float64{sum}
		case "mean":
			want = []float64{sum / float64(len(none))}
		}
		out := mustRun(t, op, attrs.With("reduction", ir.String(red)), tensorOf(as, a), tensorOf(bs, b))
		checkNear(t, red, kernels.View[T](out), want, rel[T](), 0)
	}
}

// TestLossErrors checks the data-dependent errors: probabilities outside
// [0,1] for bce_loss (torch: "all elements of input should be between 0
// and 1", and the same for target) and labels outside [0,C).
func TestLossErrors(t *testing.T) {
	f := func(v ...float64) kernels.Tensor { return tensorOf([]int{len(v)}, v) }
	tests := []struct {
		name string
		op   ir.Op
		args []kernels.Tensor
		want string
	}{
		{"bce input above 1", ir.OpBCELoss, []kernels.Tensor{f(0.5, 1.5), f(0, 1)}, "input 1.5 at element 1 is outside [0,1]"},
		{"bce input negative", ir.OpBCELoss, []kernels.Tensor{f(-0.25, 0.5), f(0, 1)}, "input -0.25 at element 0 is outside [0,1]"},
		{"bce input NaN", ir.OpBCELoss, []kernels.Tensor{f(math.NaN()), f(0)}, "input NaN at element 0 is outside [0,1]"},
		{"bce target", ir.OpBCELoss, []kernels.Tensor{f(0.5, 0.5), f(0, 2)}, "target 2 at element 1 is outside [0,1]"},
		{"nll label high", ir.OpNLLLoss, []kernels.Tensor{tensorOf[float64]([]int{2, 3}, make([]float64, 6)), tensorOf([]int{2}, []int32{0, 3})}, "label 3 at row 1 is outside [0,3)"},
		{"nll label negative", ir.OpNLLLoss, []kernels.Tensor{tensorOf[float32]([]int{2, 3}, make([]float32, 6)), tensorOf([]int{2}, []int64{-100, 0})}, "label -100 at row 0 is outside [0,3)"},
		{"nll no classes", ir.OpNLLLoss, []kernels.Tensor{tensorOf[float32]([]int{1, 0}, nil), tensorOf([]int{1}, []int64{0})}, "label 0 at row 0 is outside [0,0)"},
		{"ce labels none", ir.OpSoftmaxCrossEntropy, []kernels.Tensor{tensorOf[float32]([]int{2, 3}, make([]float32, 6)), tensorOf([]int{2}, []int32{1, 5})}, "label 5 at row 1 is outside [0,3)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, red := range []string{"mean", "none"} {
				_, err := run(t, tc.op, reduction(red), tc.args...)
				if err == nil || err.Error() != tc.want {
					t.Errorf("%s: error %v, want %q", red, err, tc.want)
				}
			}
		})
	}
}

// TestLossShapes runs every loss on empty and scalar shapes: no panic, the
// mean of no losses is NaN (0/0, as torch's), their sum 0, and "none"
// gives an empty result.
func TestLossShapes(t *testing.T) {
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, make([]float32, ir.Shape(dims).NumElements()))
	}
	half := func(dims ...int) kernels.Tensor {
		v := make([]float32, ir.Shape(dims).NumElements())
		for i := range v {
			v[i] = 0.5
		}
		return tensorOf(dims, v)
	}
	tests := []struct {
		op    ir.Op
		args  []kernels.Tensor
		empty bool
	}{
		{ir.OpMSELoss, []kernels.Tensor{f32(0, 3), f32(3)}, true},
		{ir.OpL1Loss, []kernels.Tensor{f32(), f32(0)}, true},
		{ir.OpHuberLoss, []kernels.Tensor{f32(2, 0), f32(2, 1)}, true},
		{ir.OpBCELoss, []kernels.Tensor{f32(0, 2), f32(0, 2)}, true},
		{ir.OpBCEWithLogits, []kernels.Tensor{f32(0), f32(0)}, true},
		{ir.OpNLLLoss, []kernels.Tensor{f32(0, 3), tensorOf[int32]([]int{0}, nil)}, true},
		{ir.OpSoftmaxCrossEntropy, []kernels.Tensor{f32(0, 3), tensorOf[int64]([]int{0}, nil)}, true},
		{ir.OpSoftmaxCrossEntropy, []kernels.Tensor{f32(0, 3), f32(0, 3)}, true},
		{ir.OpMSELoss, []kernels.Tensor{f32(), f32()}, false},
		{ir.OpL1Loss, []kernels.Tensor{f32(), f32(1, 1)}, false},
		{ir.OpHuberLoss, []kernels.Tensor{f32(), f32()}, false},
		{ir.OpBCELoss, []kernels.Tensor{half(), half()}, false},
		{ir.OpBCEWithLogits, []kernels.Tensor{f32(), f32()}, false},
		// Classes of size 0 with probability targets: each row's sum over
		// no classes is 0.
		{ir.OpSoftmaxCrossEntropy, []kernels.Tensor{f32(2, 0), f32(2, 0)}, false},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s%v", tc.op, typesOf(tc.args)), func(t *testing.T) {
			for _, red := range []string{"mean", "sum", "none"} {
				out := kernels.View[float32](mustRun(t, tc.op, reduction(red), tc.args...))
				for _, v := range out {
					switch {
					case tc.empty && red == "mean":
						if v == v {
							t.Errorf("%s of no losses = %v, want NaN", red, v)
						}
					case tc.empty && red == "sum":
						if v != 0 {
							t.Errorf("%s of no losses = %v, want 0", red, v)
						}
					case math.IsNaN(float64(v)) || math.IsInf(float64(v), 0):
						t.Errorf("%s = %v, want a finite loss", red, v)
					}
				}
			}
		})
	}
}

// TestLossFuncsDoNotAllocate checks that no loss Func allocates per call.
func TestLossFuncsDoNotAllocate(t *testing.T) {
	r := newRand(13)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	prob := func(dims ...int) kernels.Tensor {
		v := randVals[float32](r, ir.Shape(dims).NumElements(), false)
		for i := range v {
			v[i] = float32(math.Abs(float64(v[i]))) / 2
		}
		return tensorOf(dims, v)
	}
	labels := tensorOf([]int{4}, []int32{0, 3, 1, 2})
	for _, red := range []string{"mean", "none"} {
		tests := []struct {
			op    ir.Op
			attrs ir.Attrs
			args  []kernels.Tensor
		}{
			{ir.OpMSELoss, nil, []kernels.Tensor{f32(4, 5), f32(5)}},
			{ir.OpL1Loss, nil, []kernels.Tensor{f32(4, 1), f32(1, 5)}},
			{ir.OpHuberLoss, ir.MakeAttrs("delta", ir.Float(0.5)), []kernels.Tensor{f32(4, 5), f32(4, 5)}},
			{ir.OpBCELoss, nil, []kernels.Tensor{prob(4, 5), prob(4, 5)}},
			{ir.OpBCEWithLogits, nil, []kernels.Tensor{f32(4, 5), prob(4, 5)}},
			{ir.OpNLLLoss, nil, []kernels.Tensor{f32(4, 5), labels}},
			{ir.OpSoftmaxCrossEntropy, nil, []kernels.Tensor{f32(4, 5), labels}},
			{ir.OpSoftmaxCrossEntropy, nil, []kernels.Tensor{f32(4, 5), prob(4, 5)}},
		}
		for _, tc := range tests {
			t.Run(tc.op.String()+"/"+red, func(t *testing.T) {
				checkNoAlloc(t, tc.op, tc.attrs.With("reduction", ir.String(red)), tc.args)
			})
		}
	}
}

// TestLossBuildRejects checks that builders refuse nodes that inference
// does not accept.
func TestLossBuildRejects(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"bad reduction", kernels.Node{Op: ir.OpL1Loss, Attrs: reduction("avg"), Args: []ir.Type{f32(2), f32(2)}, Out: f32()}, `reduction must be "mean", "sum" or "none", found "avg"`},
		{"none shape", kernels.Node{Op: ir.OpMSELoss, Attrs: reduction("none"), Args: []ir.Type{f32(2, 3), f32(3)}, Out: f32()}, "does not match"},
		{"bce shapes", kernels.Node{Op: ir.OpBCELoss, Attrs: reduction("mean"), Args: []ir.Type{f32(2, 3), f32(3)}, Out: f32()}, "expected a target of the input's type f32[2,3], found f32[3]"},
		{"huber delta", kernels.Node{Op: ir.OpHuberLoss, Attrs: ir.MakeAttrs("delta", ir.Float(0), "reduction", ir.String("mean")), Args: []ir.Type{f32(2), f32(2)}, Out: f32()}, "delta must be positive, found 0.0"},
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
