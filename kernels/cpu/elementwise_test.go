package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestElementwiseGenerated checks that the committed SSE2 and AVX2 loops,
// their declarations and loop tables are what gen_elementwise.go writes
// (run go generate ./kernels/cpu after changing it).
func TestElementwiseGenerated(t *testing.T) {
	out, err := exec.Command("go", "run", "gen_elementwise.go", "-check").CombinedOutput()
	if err != nil {
		t.Fatalf("gen_elementwise.go -check: %v\n%s", err, out)
	}
}

// TestBinaryValues checks hand-computed results of add, sub, mul and div in
// every dtype, with one operand of each shape class.
func TestBinaryValues(t *testing.T) {
	testBinaryValues[float32](t)
	testBinaryValues[float64](t)
	testBinaryValues[int32](t)
	testBinaryValues[int64](t)
}

func testBinaryValues[T number](t *testing.T) {
	dt := kernels.DTypeOf[T]()
	isFloat := dt.IsFloat()
	a := []float64{1, 2, 3, -4, 5, 6} // [2,3]
	tests := []struct {
		op     ir.Op
		bShape []int
		b      []float64
		want   []float64
	}{
		{ir.OpAdd, []int{2, 3}, []float64{10, 20, 30, 40, 50, 60}, []float64{11, 22, 33, 36, 55, 66}},
		{ir.OpAdd, []int{3}, []float64{10, 20, 30}, []float64{11, 22, 33, 6, 25, 36}},
		{ir.OpAdd, []int{}, []float64{100}, []float64{101, 102, 103, 96, 105, 106}},
		{ir.OpSub, []int{2, 1}, []float64{1, 2}, []float64{0, 1, 2, -6, 3, 4}},
		{ir.OpSub, []int{1, 3}, []float64{3, 2, 1}, []float64{-2, 0, 2, -7, 3, 5}},
		{ir.OpMul, []int{2, 3}, []float64{2, 3, 4, 5, 6, 7}, []float64{2, 6, 12, -20, 30, 42}},
		{ir.OpMul, []int{}, []float64{-3}, []float64{-3, -6, -9, 12, -15, -18}},
		{ir.OpDiv, []int{2, 3}, []float64{2, 4, 8, 16, 3, 7}, []float64{0.5, 0.5, 0.375, -0.25, 5.0 / 3, 6.0 / 7}},
		{ir.OpDiv, []int{3}, []float64{0, -2, 0.5}, []float64{math.Inf(1), -1, 6, math.Inf(-1), -2.5, 12}},
	}
	for _, tc := range tests {
		if tc.op == ir.OpDiv && !isFloat {
			continue
		}
		t.Run(fmt.Sprintf("%s/%s/%v", dt, tc.op, tc.bShape), func(t *testing.T) {
			out := mustRun(t, tc.op, nil, tensorOf([]int{2, 3}, conv[T](a)), tensorOf(tc.bShape, conv[T](tc.b)))
			checkNear(t, "a op b", kernels.View[T](out), tc.want, rel[T](), 0)
			// The same with the operands swapped, for sub and div through
			// the identities b - a = -(a - b) and b / a = 1 / (a / b).
			out = mustRun(t, tc.op, nil, tensorOf(tc.bShape, conv[T](tc.b)), tensorOf([]int{2, 3}, conv[T](a)))
			want := make([]float64, len(tc.want))
			for i, w := range tc.want {
				switch tc.op {
				case ir.OpSub:
					want[i] = -w
				case ir.OpDiv:
					want[i] = 1 / w
				default:
					want[i] = w
				}
			}
			checkNear(t, "b op a", kernels.View[T](out), want, 2*rel[T](), 0)
		})
	}
}

// TestBinaryBroadcast checks every broadcasting pattern against an
// index-by-index reference computed in T, so results must match exactly.
func TestBinaryBroadcast(t *testing.T) {
	shapes := [][2][]int{
		{{2, 3}, {2, 3}},    // equal shapes
		{{}, {4, 5}},        // scalar a
		{{4, 5}, {}},        // scalar b
		{{7, 3}, {3}},       // trailing row (bias add)
		{{3}, {7, 3}},       // row in a
		{{4, 1}, {4, 5}},    // column in a
		{{4, 5}, {4, 1}},    // column in b
		{{3, 1}, {1, 4}},    // outer product shape
		{{2, 3, 4}, {3, 4}}, // leading batch in a
		{{3, 4}, {2, 3, 4}}, // leading batch in b
		{{2, 1, 4}, {3, 1}}, // both broadcast, mixed
		{{5, 1, 3, 1}, {1, 2, 1, 4}},
		{{1, 1}, {1}},          // all ones
		{{2, 1, 3}, {2, 4, 3}}, // middle axis
		{{6, 1, 1, 2}, {6, 5, 3, 2}},
	}
	testBinaryBroadcast[float32](t, shapes)
	testBinaryBroadcast[float64](t, shapes)
	testBinaryBroadcast[int32](t, shapes)
	testBinaryBroadcast[int64](t, shapes)
}

func testBinaryBroadcast[T number](t *testing.T, shapes [][2][]int) {
	dt := kernels.DTypeOf[T]()
	r := newRand(1)
	ops := []ir.Op{ir.OpAdd, ir.OpSub, ir.OpMul}
	if dt.IsFloat() {
		ops = append(ops, ir.OpDiv)
	}
	for _, sh := range shapes {
		as, bs := ir.Shape(sh[0]), ir.Shape(sh[1])
		a := randVals[T](r, as.NumElements(), false)
		b := randVals[T](r, bs.NumElements(), false)
		for i := range b {
			if b[i] == 0 {
				b[i] = 1
			}
		}
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s/%s/%v/%v", dt, op, as, bs), func(t *testing.T) {
				out := mustRun(t, op, nil, tensorOf(as, a), tensorOf(bs, b))
				os := out.Type.Shape
				want := make([]T, os.NumElements())
				for i := range want {
					idx := unravel(os, i)
					x, y := a[bcastIndex(as, idx)], b[bcastIndex(bs, idx)]
					switch op {
					case ir.OpAdd:
						want[i] = x + y
					case ir.OpSub:
						want[i] = x - y
					case ir.OpMul:
						want[i] = x * y
					case ir.OpDiv:
						want[i] = x / y
					}
				}
				checkEqual(t, "result", kernels.View[T](out), want)
			})
		}
	}
}

// TestWalkStrides checks the general inner-stride path of binaryRow, which
// the broadcasting planner never produces, directly.
func TestWalkStrides(t *testing.T) {
	a := []float64{1, 2, 3, 4, 5, 6}
	b := []float64{10, 20, 30}
	out := make([]float64, 3)
	binaryRow(ir.OpSub, out, a, b, 1, 2, 2, -1)
	checkEqual(t, "strided row", out, []float64{2 - 30, 4 - 20, 6 - 10})
}

// TestUnaryValues checks hand-computed results of the unary ops.
func TestUnaryValues(t *testing.T) {
	testUnaryValues[float32](t)
	testUnaryValues[float64](t)
	for _, dt := range []string{"i32", "i64"} {
		t.Run("neg/"+dt, func(t *testing.T) {
			x := []float64{3, -2, 0, math.MaxInt32, math.MinInt32 + 1}
			want := []float64{-3, 2, 0, -math.MaxInt32, math.MaxInt32}
			var out kernels.Tensor
			if dt == "i32" {
				out = mustRun(t, ir.OpNeg, nil, tensorOf([]int{5}, conv[int32](x)))
				checkEqual(t, "neg", kernels.View[int32](out), conv[int32](want))
			} else {
				out = mustRun(t, ir.OpNeg, nil, tensorOf([]int{5}, conv[int64](x)))
				checkEqual(t, "neg", kernels.View[int64](out), conv[int64](want))
			}
		})
	}
}

func testUnaryValues[T float](t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		op      ir.Op
		x, want []float64
	}{
		{ir.OpNeg, []float64{1, -2.5, 0}, []float64{-1, 2.5, 0}},
		{ir.OpExp, []float64{0, 1, -1, 2000, -2000}, []float64{1, math.E, 0.36787944117144233, inf, 0}},
		{ir.OpLog, []float64{1, math.E, 0.5, 0, -1}, []float64{0, 1, -0.6931471805599453, -inf, math.NaN()}},
		{ir.OpSqrt, []float64{4, 2, 0.25, 0, -1, inf}, []float64{2, math.Sqrt2, 0.5, 0, math.NaN(), inf}},
		{ir.OpTanh, []float64{0, 1, -0.5, 50, -1000}, []float64{0, 0.7615941559557649, -0.46211715726000974, 1, -1}},
		{ir.OpSigmoid, []float64{0, 2, -2, 1000, -1000, 800, -800}, []float64{0.5, 0.8807970779778823, 0.11920292202211755, 1, 0, 1, 0}},
		{ir.OpRelu, []float64{-1, 0, 2, -0.5, 3, math.NaN(), math.Inf(1), math.Inf(-1)}, []float64{0, 0, 2, 0, 3, math.NaN(), math.Inf(1), 0}},
	}
	dt := kernels.DTypeOf[T]()
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.op, dt), func(t *testing.T) {
			x := conv[T](tc.x)
			want := tc.want
			if dt == ir.F32 {
				// The f32 input of exp(1) is e rounded to float32.
				want = append([]float64(nil), want...)
				if tc.op == ir.OpLog {
					want[1] = math.Log(float64(float32(math.E)))
				}
			}
			out := mustRun(t, tc.op, nil, tensorOf([]int{len(x)}, x))
			checkNear(t, tc.op.String(), kernels.View[T](out), want, rel[T](), 0)
		})
	}
}

// TestSigmoidStable checks that sigmoid stays finite and monotone in [0, 1]
// far out, where 1/(1+e^-x) evaluated naively would overflow e^-x.
func TestSigmoidStable(t *testing.T) {
	xs := []float64{-1e30, -3000, -745, -710, -100, -20, 20, 100, 710, 745, 3000, 1e30}
	for _, dt := range []ir.DType{ir.F32, ir.F64} {
		var got []float64
		if dt == ir.F32 {
			got = f64s(kernels.View[float32](mustRun(t, ir.OpSigmoid, nil, tensorOf([]int{len(xs)}, conv[float32](xs)))))
		} else {
			got = f64s(kernels.View[float64](mustRun(t, ir.OpSigmoid, nil, tensorOf([]int{len(xs)}, xs))))
		}
		for i, g := range got {
			if math.IsNaN(g) || g < 0 || g > 1 || (i > 0 && g < got[i-1]) {
				t.Errorf("%s sigmoid(%g) = %g", dt, xs[i], g)
			}
		}
		if got[0] != 0 || got[len(got)-1] != 1 {
			t.Errorf("%s sigmoid at ±1e30 = %g, %g; want 0, 1", dt, got[0], got[len(got)-1])
		}
	}
}

// TestReluGrad checks relu_grad(dy, x) = 0 where x <= 0, else dy (so dy
// where x is NaN, as PyTorch's threshold_backward).
func TestReluGrad(t *testing.T) {
	dy := []float64{1, 2, 3, 4, 5, 6, 7, 8}
	x := []float64{-1, 0, 0.5, 2, math.Copysign(0, -1), 1e-30, math.NaN(), math.Inf(-1)}
	want := []float64{0, 0, 3, 4, 0, 6, 7, 0}
	out := mustRun(t, ir.OpReluGrad, nil, tensorOf([]int{2, 4}, conv[float32](dy)), tensorOf([]int{2, 4}, conv[float32](x)))
	checkEqual(t, "f32", kernels.View[float32](out), conv[float32](want))
	out = mustRun(t, ir.OpReluGrad, nil, tensorOf([]int{2, 4}, dy), tensorOf([]int{2, 4}, x))
	checkEqual(t, "f64", kernels.View[float64](out), want)
}

// TestReluGradRowBits checks reluGradRow's f32 loop (eight lanes at a time
// in assembly on amd64, the rest in Go) bit for bit against x <= 0 ? +0 : dy
// (so a NaN x passes dy, as PyTorch's threshold_backward)
// at every length up to 40 and every offset of a row of special values:
// ±0, subnormals, ±Inf, NaNs of either sign, the largest finite values;
// the dy values include -0 and NaN payloads, which must pass unchanged.
func TestReluGradRowBits(t *testing.T) {
	nan := math.Float32frombits
	special := []float32{0, float32(math.Copysign(0, -1)), nan(1), nan(0x807fffff), float32(math.Inf(1)), float32(math.Inf(-1)),
		nan(0x7fc00000), nan(0xffc00001), nan(0x7f800001), math.MaxFloat32, -math.MaxFloat32, 1, -1, 0.5, -2.5, 1e-30}
	r := rand.New(rand.NewPCG(3, 4))
	for n := range 41 {
		x, dy := make([]float32, n), make([]float32, n)
		for i := range n {
			x[i] = special[(i*7+n)%len(special)]
			dy[i] = special[(i*5+3)%len(special)]
			if r.IntN(3) == 0 {
				x[i], dy[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
		}
		got := make([]float32, n)
		reluGradRow(got, dy, x)
		for i := range n {
			want := float32(0)
			if !(x[i] <= 0) {
				want = dy[i]
			}
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				t.Fatalf("n=%d: relu_grad(dy=%x, x=%x) = %x, want %x", n, math.Float32bits(dy[i]), math.Float32bits(x[i]), math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
	}
}

// BenchmarkReluGradRow measures relu_grad's row loop on 4096 elements of
// random sign (relu's loop too: relu(x) = relu_grad(x, x)).
func BenchmarkReluGradRow(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	b.Run("f32", func(b *testing.B) {
		x, dy, o := make([]float32, 4096), make([]float32, 4096), make([]float32, 4096)
		for i := range x {
			x[i], dy[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		b.SetBytes(4 * 4096)
		for b.Loop() {
			reluGradRow(o, dy, x)
		}
	})
	b.Run("f64", func(b *testing.B) {
		x, dy, o := make([]float64, 4096), make([]float64, 4096), make([]float64, 4096)
		for i := range x {
			x[i], dy[i] = r.NormFloat64(), r.NormFloat64()
		}
		b.SetBytes(8 * 4096)
		for b.Loop() {
			reluGradRow(o, dy, x)
		}
	})
}
