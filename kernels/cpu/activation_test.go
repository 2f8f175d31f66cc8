package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// actX are the inputs of the value tables below.
var actX = []float64{-3, -1, -0.5, 0, 0.5, 1, 3}

// TestActivationValues checks leaky_relu, elu, gelu, silu, softplus and
// gelu_grad against values computed with mpmath at 50 digits from PyTorch's
// formulas (torch.nn.functional.*, default attributes unless given).
// Tolerance: rel 1e-6 (f32) or 1e-12 (f64) of the reference (every input
// is exact in f32, so only the result is rounded; zeros must be exact).
func TestActivationValues(t *testing.T) {
	tests := []struct {
		name  string
		op    ir.Op
		attrs ir.Attrs
		x     []float64
		want  []float64
	}{
		{"leaky_relu default", ir.OpLeakyRelu, nil, actX, []float64{-0.03, -0.01, -0.005, 0, 0.5, 1, 3}},
		{"leaky_relu alpha", ir.OpLeakyRelu, ir.MakeAttrs("alpha", ir.Float(0.2)), actX, []float64{-0.6, -0.2, -0.1, 0, 0.5, 1, 3}},
		{"leaky_relu negative alpha", ir.OpLeakyRelu, ir.MakeAttrs("alpha", ir.Float(-1)), actX, []float64{3, 1, 0.5, 0, 0.5, 1, 3}},
		{"elu default", ir.OpElu, nil, actX, []float64{-0.95021293163213606, -0.63212055882855768, -0.39346934028736658, 0, 0.5, 1, 3}},
		{"elu alpha", ir.OpElu, ir.MakeAttrs("alpha", ir.Int(2)), actX, []float64{-1.9004258632642721, -1.2642411176571154, -0.78693868057473315, 0, 0.5, 1, 3}},
		{"gelu exact", ir.OpGelu, nil, actX, []float64{-0.0040496940948902836, -0.15865525393145705, -0.15426876936299345, 0, 0.34573123063700655, 0.84134474606854295, 2.9959503059051097}},
		{"gelu tanh", ir.OpGelu, ir.MakeAttrs("approximate", ir.String("tanh")), actX, []float64{-0.0036373920817730188, -0.1588080093917233, -0.15428599017485608, 0, 0.34571400982514392, 0.8411919906082767, 2.996362607918227}},
		{"silu", ir.OpSilu, nil, actX, []float64{-0.14227761953270034, -0.26894142136999512, -0.18877033439907272, 0, 0.31122966560092728, 0.73105857863000488, 2.8577223804672997}},
		{"softplus default", ir.OpSoftplus, nil, actX, []float64{0.048587351573742059, 0.31326168751822283, 0.47407698418010668, 0.69314718055994531, 0.97407698418010668, 1.3132616875182228, 3.0485873515737421}},
		// beta 2, threshold 1: x = 0.5 gives beta*x = 1, not above the
		// threshold, so log1p(e)/2; x = 1 and 3 are linear.
		{"softplus beta threshold", ir.OpSoftplus, ir.MakeAttrs("beta", ir.Float(2), "threshold", ir.Float(1)), actX, []float64{0.0012378425688652248, 0.063464005521486248, 0.15663084375911142, 0.34657359027997265, 0.65663084375911142, 1, 3}},
		// Above the threshold the result is x itself; far below it is
		// log1p(exp(x)) without underflow to 0 before it must.
		{"softplus extremes", ir.OpSoftplus, nil, []float64{1000, 20, 21, -50, -1000}, []float64{1000, 20.000000002061153, 21, 1.9287498479639178e-22, 0}},
		// A threshold beyond exp's range: PyTorch's log1p(exp(x)) would
		// overflow to inf; kiln's max(z,0) + log1p(exp(-|z|)) does not.
		{"softplus no overflow", ir.OpSoftplus, ir.MakeAttrs("threshold", ir.Float(1e30)), []float64{1000, -1000}, []float64{1000, 0}},
		// Tails: kiln keeps the tiny values that 1 + erf(x/sqrt 2) and
		// 1 + tanh(u) cancel to 0 in PyTorch.
		{"gelu exact tail", ir.OpGelu, nil, []float64{-10, 1000, -1000}, []float64{-7.6198530241605261e-23, 1000, 0}},
		{"gelu tanh tail", ir.OpGelu, ir.MakeAttrs("approximate", ir.String("tanh")), []float64{-10, 1000, -1000}, []float64{-1.2040923482098107e-37, 1000, 0}},
		{"elu extremes", ir.OpElu, nil, []float64{-1000, 1000}, []float64{-1, 1000}},
		{"silu extremes", ir.OpSilu, nil, []float64{-1000, 1000}, []float64{0, 1000}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got32 := kernels.View[float32](mustRun(t, tc.op, tc.attrs, tensorOf([]int{len(tc.x)}, conv[float32](tc.x))))
			checkNear(t, "f32", got32, tc.want, relF32, 0)
			got64 := kernels.View[float64](mustRun(t, tc.op, tc.attrs, tensorOf([]int{len(tc.x)}, tc.x)))
			checkNear(t, "f64", got64, tc.want, relF64, 0)
		})
	}
}

// TestActivationExactZero checks the exact-zero point and the sign of
// zero results: leaky_relu(-0) is -0*alpha = -0, as PyTorch's x > 0 ? x :
// x*slope gives.
func TestActivationExactZero(t *testing.T) {
	for _, op := range []ir.Op{ir.OpLeakyRelu, ir.OpElu, ir.OpGelu, ir.OpSilu} {
		for _, z := range []float64{0, math.Copysign(0, -1)} {
			got := kernels.View[float64](mustRun(t, op, nil, tensorOf([]int{}, []float64{z})))[0]
			if got != 0 {
				t.Errorf("%s(%v) = %v, want 0", op, z, got)
			}
		}
	}
	got := kernels.View[float32](mustRun(t, ir.OpLeakyRelu, nil, tensorOf([]int{}, []float32{float32(math.Copysign(0, -1))})))[0]
	if !math.Signbit(float64(got)) {
		t.Errorf("leaky_relu(-0) = %v, want -0", got)
	}
}

// TestGeluGradValues checks gelu_grad(dy, x) = dy*gelu'(x) against the
// derivatives computed with mpmath (Phi(x) + x*phi(x) for the exact form,
// the derivative of the tanh form), with dy = 2.
func TestGeluGradValues(t *testing.T) {
	exact := []float64{-0.011945647204183927, -0.083315470587686298, 0.13250487534383716, 0.5, 0.86749512465616284, 1.0833154705876863, 1.0119456472041839}
	tanh := []float64{-0.011584166630969726, -0.082964083845782555, 0.13263009646535769, 0.5, 0.86736990353464231, 1.0829640838457826, 1.0115841666309697}
	for _, tc := range []struct {
		approx string
		d      []float64
	}{{"none", exact}, {"tanh", tanh}} {
		want := make([]float64, len(tc.d))
		for i, d := range tc.d {
			want[i] = 2 * d
		}
		dy := make([]float64, len(actX))
		for i := range dy {
			dy[i] = 2
		}
		attrs := ir.MakeAttrs("approximate", ir.String(tc.approx))
		got32 := kernels.View[float32](mustRun(t, ir.OpGeluGrad, attrs, tensorOf([]int{7}, conv[float32](dy)), tensorOf([]int{7}, conv[float32](actX))))
		checkNear(t, tc.approx+" f32", got32, want, relF32, 0)
		got64 := kernels.View[float64](mustRun(t, ir.OpGeluGrad, attrs, tensorOf([]int{7}, dy), tensorOf([]int{7}, actX)))
		checkNear(t, tc.approx+" f64", got64, want, relF64, 0)
		// Far out the derivative is 0 or 1, never NaN (x^3 overflows f64
		// beyond 1e103, and x^2 beyond 1e154).
		big := []float64{1e5, -1e5, 1e200, -1e200}
		got := kernels.View[float64](mustRun(t, ir.OpGeluGrad, attrs, tensorOf([]int{4}, []float64{1, 1, 1, 1}), tensorOf([]int{4}, big)))
		checkEqual(t, tc.approx+" far", got, []float64{1, 0, 1, 0})
	}
}

// TestPreluValues checks prelu against x > 0 ? x : w[c]*x (torch prelu,
// the channel on axis 1 for rank >= 2), with a weight per channel, one
// shared weight [1] or [], and ranks 0 to 3. Products of these values are
// exact, so the comparison is exact.
func TestPreluValues(t *testing.T) {
	testPrelu[float32](t)
	testPrelu[float64](t)
}

func testPrelu[T float](t *testing.T) {
	dt := kernels.DTypeOf[T]()
	tests := []struct {
		name   string
		xs, ws []int
		x, w   []float64
		want   []float64
	}{
		{"per channel rank 3", []int{2, 3, 2}, []int{3},
			[]float64{-1, 2, -2, 0, -4, 1, 3, -1, -2, -2, 1, -8}, []float64{0.5, 0.25, -1},
			[]float64{-0.5, 2, -0.5, 0, 4, 1, 3, -0.5, -0.5, -0.5, 1, 8}},
		{"per channel rank 2", []int{2, 2}, []int{2}, []float64{-1, -1, 2, -4}, []float64{0.5, 2}, []float64{-0.5, -2, 2, -8}},
		{"shared rank 3", []int{1, 2, 2}, []int{1}, []float64{-1, 2, -2, 0}, []float64{0.25}, []float64{-0.25, 2, -0.5, 0}},
		{"scalar weight", []int{2, 2}, []int{}, []float64{-1, 2, -2, 0}, []float64{0.25}, []float64{-0.25, 2, -0.5, 0}},
		{"rank 1 shared", []int{3}, []int{1}, []float64{-4, 0, 4}, []float64{0.5}, []float64{-2, 0, 4}},
		{"rank 0", []int{}, []int{1}, []float64{-4}, []float64{0.5}, []float64{-2}},
		{"one channel", []int{2, 1, 2}, []int{1}, []float64{-1, 1, -2, 2}, []float64{3}, []float64{-3, 1, -6, 2}},
		{"no channels", []int{2, 0, 3}, []int{0}, nil, nil, nil},
		{"no rows", []int{0, 3}, []int{3}, nil, []float64{1, 2, 3}, nil},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", dt, tc.name), func(t *testing.T) {
			out := mustRun(t, ir.OpPrelu, nil, tensorOf(tc.xs, conv[T](tc.x)), tensorOf(tc.ws, conv[T](tc.w)))
			checkEqual(t, "prelu", kernels.View[T](out), conv[T](tc.want))
		})
	}
}

// TestActivationShapes runs every activation on empty, scalar and
// multi-axis shapes; none may panic, and each result element must match
// the kernel's value on that element alone.
func TestActivationShapes(t *testing.T) {
	r := newRand(3)
	ops := []struct {
		op    ir.Op
		attrs ir.Attrs
	}{
		{ir.OpLeakyRelu, nil}, {ir.OpElu, nil}, {ir.OpGelu, nil}, {ir.OpGelu, ir.MakeAttrs("approximate", ir.String("tanh"))},
		{ir.OpSilu, nil}, {ir.OpSoftplus, nil},
	}
	for _, o := range ops {
		for _, shape := range [][]int{{0}, {}, {3, 0}, {2, 3, 4}} {
			x := randVals[float64](r, ir.Shape(shape).NumElements(), false)
			out := kernels.View[float64](mustRun(t, o.op, o.attrs, tensorOf(shape, x)))
			for i, v := range x {
				one := kernels.View[float64](mustRun(t, o.op, o.attrs, tensorOf([]int{}, []float64{v})))[0]
				if out[i] != one {
					t.Errorf("%s%s %v: element %d = %v, alone %v", o.op, o.attrs, shape, i, out[i], one)
				}
			}
		}
	}
	mustRun(t, ir.OpGeluGrad, nil, tensorOf[float32]([]int{0, 2}, nil), tensorOf[float32]([]int{0, 2}, nil))
	mustRun(t, ir.OpGeluGrad, nil, tensorOf([]int{}, []float32{1}), tensorOf([]int{}, []float32{1}))
}

// TestActivationFuncsDoNotAllocate checks that no activation Func
// allocates per call.
func TestActivationFuncsDoNotAllocate(t *testing.T) {
	r := newRand(9)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	tests := []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}{
		{ir.OpLeakyRelu, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpPrelu, nil, []kernels.Tensor{f32(2, 3, 4), f32(3)}},
		{ir.OpPrelu, nil, []kernels.Tensor{f32(2, 3, 4), f32(1)}},
		{ir.OpElu, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpGelu, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpGelu, ir.MakeAttrs("approximate", ir.String("tanh")), []kernels.Tensor{f32(4, 5)}},
		{ir.OpGeluGrad, nil, []kernels.Tensor{f32(4, 5), f32(4, 5)}},
		{ir.OpSilu, nil, []kernels.Tensor{f32(4, 5)}},
		{ir.OpSoftplus, nil, []kernels.Tensor{f32(4, 5)}},
	}
	for _, tc := range tests {
		t.Run(tc.op.String(), func(t *testing.T) {
			checkNoAlloc(t, tc.op, tc.attrs, tc.args)
		})
	}
}

// checkNoAlloc builds op for args and fails if its Func allocates.
func checkNoAlloc(t *testing.T, op ir.Op, attrs ir.Attrs, args []kernels.Tensor) {
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
		t.Errorf("%s%s allocates %v times per call", op, attrs, allocs)
	}
}
