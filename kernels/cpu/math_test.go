package cpu

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Tests of the elementwise math kernels (math.go). Float results are
// compared with hand-computed values or float64 references within relF32 /
// relF64; integer results and the rounding ops exactly.

// runT runs op on T tensors of the given shapes and returns the result as T.
func runT[T number](t *testing.T, op ir.Op, attrs ir.Attrs, shapes [][]int, vals ...[]float64) []T {
	t.Helper()
	args := make([]kernels.Tensor, len(vals))
	for i, v := range vals {
		args[i] = tensorOf(shapes[i], conv[T](v))
	}
	return kernels.View[T](mustRun(t, op, attrs, args...))
}

// vec is the shape of a vector holding v.
func vec(v []float64) []int { return []int{len(v)} }

// TestMathUnaryValues checks hand-computed results of the float-only unary
// ops, including their values at 0, ±Inf and NaN.
func TestMathUnaryValues(t *testing.T) {
	testMathUnaryValues[float32](t)
	testMathUnaryValues[float64](t)
}

func testMathUnaryValues[T float](t *testing.T) {
	inf, nan, negZero := math.Inf(1), math.NaN(), math.Copysign(0, -1)
	tests := []struct {
		op      ir.Op
		x, want []float64
	}{
		{ir.OpRsqrt, []float64{4, 0.25, 1, 0, negZero, -1, inf, 16}, []float64{0.5, 2, 1, inf, -inf, nan, 0, 0.25}},
		{ir.OpReciprocal, []float64{2, -4, 0.5, 0, negZero, inf, -inf}, []float64{0.5, -0.25, 2, inf, -inf, 0, 0}},
		{ir.OpLog2, []float64{1, 8, 0.5, 1024, 0, -1, inf, 3}, []float64{0, 3, -1, 10, -inf, nan, inf, 1.584962500721156}},
		{ir.OpLog10, []float64{1, 1000, 0.5, 0, -1, inf}, []float64{0, 3, -0.3010299956639812, -inf, nan, inf}},
		{ir.OpLog1p, []float64{0, 1, -1, -2, inf, -0.5}, []float64{0, math.Ln2, -inf, nan, inf, -math.Ln2}},
		{ir.OpExpm1, []float64{0, 1, -inf, inf, math.Ln2, -1000}, []float64{0, math.E - 1, -1, inf, 1, -1}},
		{ir.OpSin, []float64{0, math.Pi / 2, -math.Pi / 6, 1, inf}, []float64{0, 1, -0.5, 0.8414709848078965, nan}},
		{ir.OpCos, []float64{0, math.Pi / 3, math.Pi, 1, inf}, []float64{1, 0.5, -1, 0.5403023058681398, nan}},
		{ir.OpErf, []float64{0, 0.5, 1, -2, 3, inf, -inf, nan}, []float64{0, 0.5204998778130465, 0.8427007929497149, -0.9953222650189527, 0.9999779095030014, 1, -1, nan}},
		{ir.OpFloor, []float64{1.5, -1.5, 2, -0.25, 0.999, inf, nan}, []float64{1, -2, 2, -1, 0, inf, nan}},
		{ir.OpCeil, []float64{1.5, -1.5, 2, -0.25, 0.001, -inf, nan}, []float64{2, -1, 2, negZero, 1, -inf, nan}},
		{ir.OpRound, []float64{0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999, 2.5001, 3, nan}, []float64{0, 2, 2, negZero, -2, -2, 2, 3, 3, nan}},
	}
	dt := kernels.DTypeOf[T]()
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.op, dt), func(t *testing.T) {
			// Inputs such as pi/6 are rounded to T; the references for
			// them move by at most the rounding, which is within rel[T]
			// of the result for these well-conditioned points.
			got := runT[T](t, tc.op, nil, [][]int{vec(tc.x)}, tc.x)
			tol := rel[T]()
			if dt == ir.F32 {
				tol = 4 * relF32
			}
			checkNear(t, tc.op.String(), got, tc.want, tol, 1e-7*boolF(dt == ir.F32)+1e-15)
			if tc.op == ir.OpFloor || tc.op == ir.OpCeil || tc.op == ir.OpRound {
				checkEqual(t, "exact", got, conv[T](tc.want))
				for i, g := range got {
					if tc.want[i] == 0 && math.Signbit(float64(g)) != math.Signbit(tc.want[i]) {
						t.Errorf("%s(%v) = %v, want %v (sign of zero)", tc.op, tc.x[i], g, tc.want[i])
					}
				}
			}
		})
	}
}

func boolF(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// TestMathUnaryRandom checks the unary ops on random inputs against
// independent float64 formulas (log2 through log, expm1 through exp, ...).
func TestMathUnaryRandom(t *testing.T) {
	testMathUnaryRandom[float32](t)
	testMathUnaryRandom[float64](t)
}

func testMathUnaryRandom[T float](t *testing.T) {
	r := newRand(3)
	dt := kernels.DTypeOf[T]()
	tests := []struct {
		op     ir.Op
		lo, hi float64
		ref    func(float64) float64
	}{
		{ir.OpRsqrt, 0.01, 100, func(x float64) float64 { return 1 / math.Sqrt(x) }},
		{ir.OpReciprocal, -10, 10, func(x float64) float64 { return 1 / x }},
		{ir.OpLog2, 0.01, 100, func(x float64) float64 { return math.Log(x) / math.Ln2 }},
		{ir.OpLog10, 0.01, 100, func(x float64) float64 { return math.Log(x) / math.Ln10 }},
		{ir.OpLog1p, 0.5, 10, func(x float64) float64 { return math.Log(1 + x) }},
		{ir.OpExpm1, 0.5, 10, func(x float64) float64 { return math.Exp(x) - 1 }},
		{ir.OpSin, -3, 3, func(x float64) float64 { return math.Cos(x - math.Pi/2) }},
		{ir.OpCos, -1, 1, func(x float64) float64 { return math.Sin(x + math.Pi/2) }},
		{ir.OpErf, -3, 3, func(x float64) float64 { return 1 - math.Erfc(x) }},
		{ir.OpFloor, -50, 50, func(x float64) float64 { return -math.Ceil(-x) }},
		{ir.OpCeil, -50, 50, func(x float64) float64 { return -math.Floor(-x) }},
		{ir.OpRound, -50, 50, func(x float64) float64 { return math.Round(x) }}, // no exact halves drawn
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.op, dt), func(t *testing.T) {
			x := make([]float64, 3*7)
			want := make([]float64, len(x))
			for i := range x {
				x[i] = float64(T(tc.lo + (tc.hi-tc.lo)*r.Float64()))
				want[i] = tc.ref(x[i])
			}
			got := runT[T](t, tc.op, nil, [][]int{{3, 7}}, x)
			checkNear(t, tc.op.String(), got, want, 1e-10+boolF(dt == ir.F32)*relF32, 1e-14)
		})
	}
}

// TestLog1pExpm1NearZero checks that log1p and expm1 keep full relative
// accuracy where 1 + x rounds away the digits of x, against their series.
func TestLog1pExpm1NearZero(t *testing.T) {
	series := map[ir.Op]func(float64) float64{
		ir.OpLog1p: func(x float64) float64 { return x - x*x/2 + x*x*x/3 },
		ir.OpExpm1: func(x float64) float64 { return x + x*x/2 + x*x*x/6 },
	}
	xs := []float64{1e-10, -1e-10, 3e-9, -2.5e-8, 1e-300, 1e-17}
	for op, ref := range series {
		want := make([]float64, len(xs))
		for i, x := range xs {
			want[i] = ref(x)
		}
		got := runT[float64](t, op, nil, [][]int{vec(xs)}, xs)
		checkNear(t, op.String()+"/f64", got, want, 1e-15, 0)
		// The naive formula would fail: log(1 + 1e-10) is off by 1e-8
		// relative, exp(1e-10) - 1 likewise.
		if naive := math.Log(1+xs[0]) - want[0]; op == ir.OpLog1p && math.Abs(naive) < 1e-15*want[0] {
			t.Fatalf("the test value does not separate log1p from log(1+x)")
		}

		x32 := []float64{1e-7, -3e-6, 1e-20, 2e-5}
		want32 := make([]float64, len(x32))
		for i, x := range x32 {
			want32[i] = ref(float64(float32(x)))
		}
		got32 := runT[float32](t, op, nil, [][]int{vec(x32)}, x32)
		checkNear(t, op.String()+"/f32", got32, want32, relF32, 0)
	}
}

// TestLogSqrtNearZero checks the core log and sqrt where their results are
// finite although the inputs are tiny or subnormal, and the rsqrt and
// reciprocal of 0.
func TestLogSqrtNearZero(t *testing.T) {
	got := runT[float64](t, ir.OpLog, nil, [][]int{{3}}, []float64{1e-300, 5e-324, 1e-308})
	checkNear(t, "log f64", got, []float64{-690.7755278982137, -744.4400719213812, -709.1962086421661}, 1e-14, 0)
	got32 := runT[float32](t, ir.OpLog, nil, [][]int{{2}}, []float64{1e-40, 1e-45})
	checkNear(t, "log f32", got32, []float64{math.Log(float64(float32(1e-40))), math.Log(float64(float32(1e-45)))}, relF32, 0)
	s32 := runT[float32](t, ir.OpSqrt, nil, [][]int{{3}}, []float64{1e-40, 1e-44, 0})
	checkNear(t, "sqrt f32", s32, []float64{math.Sqrt(float64(float32(1e-40))), math.Sqrt(float64(float32(1e-44))), 0}, relF32, 0)
	if s32[0] == 0 || math.Abs(float64(s32[0])-1e-20) > 1e-25 {
		t.Errorf("sqrt(1e-40) in f32 = %v, want 1e-20", s32[0])
	}
	s64 := runT[float64](t, ir.OpSqrt, nil, [][]int{{2}}, []float64{1e-300, 5e-324})
	checkNear(t, "sqrt f64", s64, []float64{1e-150, math.Sqrt(5e-324)}, 1e-15, 0)
	for _, op := range []ir.Op{ir.OpRsqrt, ir.OpReciprocal} {
		if v := runT[float32](t, op, nil, [][]int{{}}, []float64{0}); !math.IsInf(float64(v[0]), 1) {
			t.Errorf("%s(0) in f32 = %v, want +Inf", op, v[0])
		}
		if v := runT[float64](t, op, nil, [][]int{{}}, []float64{0}); !math.IsInf(v[0], 1) {
			t.Errorf("%s(0) in f64 = %v, want +Inf", op, v[0])
		}
	}
	// Go's math.Log is wrong for subnormal float64 on amd64
	// (golang/go#56600); log, log10 and fractional powers must not be.
	sub := []float64{5e-324, 1e-310, 1e-308}
	checkNear(t, "log10 f64 subnormal", runT[float64](t, ir.OpLog10, nil, [][]int{{3}}, sub), []float64{-323.3062153431158, -310, -308}, 1e-14, 0)
	checkNear(t, "log2 f64 subnormal", runT[float64](t, ir.OpLog2, nil, [][]int{{3}}, sub), []float64{-1074, -1029.7977094150824, -1023.1538532253076}, 1e-14, 0)
	checkNear(t, "pow f64 subnormal", runT[float64](t, ir.OpPow, nil, [][]int{{3}, {3}}, sub, []float64{0.25, 0.001, -0.5}),
		[]float64{1.4908919308538355e-81, 0.4897788193684462, 1e154}, 1e-13, 0)
	checkNear(t, "pow exponent f64 subnormal", runT[float64](t, ir.OpPow, ir.MakeAttrs("exponent", ir.Float(0.25)), [][]int{{3}}, sub),
		[]float64{1.4908919308538355e-81, 3.162277660168377e-78, 1e-77}, 1e-13, 0)
	// rsqrt of a subnormal f32 is finite in f32 only because it is computed
	// in float64: 1/sqrt(1e-40) = 1e20.
	checkNear(t, "rsqrt f32 subnormal", runT[float32](t, ir.OpRsqrt, nil, [][]int{{1}}, []float64{1e-40}), []float64{1 / math.Sqrt(float64(float32(1e-40)))}, relF32, 0)
}

// TestAbsSignSquare checks abs, sign and square in every numeric dtype:
// abs and sign at ±0, NaN and the integer extremes, where abs and square
// wrap.
func TestAbsSignSquare(t *testing.T) {
	negZero, nan, inf := math.Copysign(0, -1), math.NaN(), math.Inf(1)
	fx := []float64{-2.5, 0, negZero, 3, nan, -inf}
	floatWant := map[ir.Op][]float64{
		ir.OpAbs:    {2.5, 0, 0, 3, nan, inf},
		ir.OpSign:   {-1, 0, 0, 1, nan, -1},
		ir.OpSquare: {6.25, 0, 0, 9, nan, inf},
	}
	for op, want := range floatWant {
		g32 := runT[float32](t, op, nil, [][]int{{2, 3}}, fx)
		checkEqual(t, op.String()+"/f32", g32, conv[float32](want))
		g64 := runT[float64](t, op, nil, [][]int{{2, 3}}, fx)
		checkEqual(t, op.String()+"/f64", g64, want)
		if op == ir.OpAbs && (math.Signbit(g64[2]) || math.Signbit(float64(g32[2]))) {
			t.Errorf("abs(-0) = -0, want +0")
		}
	}
	ix := []float64{-7, 0, 5, -1, math.MinInt32, math.MaxInt32}
	t.Run("i32", func(t *testing.T) {
		checkEqual(t, "abs", runT[int32](t, ir.OpAbs, nil, [][]int{vec(ix)}, ix), []int32{7, 0, 5, 1, math.MinInt32, math.MaxInt32})
		checkEqual(t, "sign", runT[int32](t, ir.OpSign, nil, [][]int{vec(ix)}, ix), []int32{-1, 0, 1, -1, -1, 1})
		checkEqual(t, "square", runT[int32](t, ir.OpSquare, nil, [][]int{vec(ix)}, ix), []int32{49, 0, 25, 1, 0, 1})
	})
	t.Run("i64", func(t *testing.T) {
		x := append(ix[:4:4], -3037000500, math.MinInt64)
		checkEqual(t, "abs", runT[int64](t, ir.OpAbs, nil, [][]int{vec(x)}, x), []int64{7, 0, 5, 1, 3037000500, math.MinInt64})
		checkEqual(t, "sign", runT[int64](t, ir.OpSign, nil, [][]int{vec(x)}, x), []int64{-1, 0, 1, -1, -1, -1})
		// 3037000500^2 is just above MaxInt64 and wraps.
		checkEqual(t, "square", runT[int64](t, ir.OpSquare, nil, [][]int{vec(x)}, x), []int64{49, 0, 25, 1, -9223372036709301616, 0})
	})
}

// TestClip checks clip with both bounds, one bound, values exactly at the
// bounds and NaN, in every numeric dtype.
func TestClip(t *testing.T) {
	nan := math.NaN()
	x := []float64{-3, -1, -0.5, 0, 0.5, 2, 5, nan}
	both := ir.MakeAttrs("min", ir.Float(-1), "max", ir.Float(2))
	tests := []struct {
		name  string
		attrs ir.Attrs
		want  []float64
	}{
		{"both", both, []float64{-1, -1, -0.5, 0, 0.5, 2, 2, nan}},
		{"min", ir.MakeAttrs("min", ir.Float(0)), []float64{0, 0, 0, 0, 0.5, 2, 5, nan}},
		{"max", ir.MakeAttrs("max", ir.Int(0)), []float64{-3, -1, -0.5, 0, 0, 0, 0, nan}},
		{"equal bounds", ir.MakeAttrs("min", ir.Float(0.5), "max", ir.Float(0.5)), []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, nan}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkEqual(t, "f32", runT[float32](t, ir.OpClip, tc.attrs, [][]int{{2, 4}}, x), conv[float32](tc.want))
			checkEqual(t, "f64", runT[float64](t, ir.OpClip, tc.attrs, [][]int{{2, 4}}, x), tc.want)
		})
	}
	// f32 rounds the bound first: 0.1 becomes float32(0.1), and an input
	// equal to it stays.
	tenth := float64(float32(0.1))
	got := runT[float32](t, ir.OpClip, ir.MakeAttrs("min", ir.Float(0.1)), [][]int{{3}}, []float64{0, tenth, 0.2})
	checkEqual(t, "f32 rounded bound", got, []float32{float32(0.1), float32(0.1), 0.2})

	ix := []float64{-9, -2, -1, 0, 3, 4, 7}
	iattrs := ir.MakeAttrs("min", ir.Int(-2), "max", ir.Int(3))
	iwant := []float64{-2, -2, -1, 0, 3, 3, 3}
	checkEqual(t, "i32", runT[int32](t, ir.OpClip, iattrs, [][]int{vec(ix)}, ix), conv[int32](iwant))
	checkEqual(t, "i64", runT[int64](t, ir.OpClip, iattrs, [][]int{vec(ix)}, ix), conv[int64](iwant))
	big := ir.MakeAttrs("min", ir.Float(-1e15))
	checkEqual(t, "i64 large bound", runT[int64](t, ir.OpClip, big, [][]int{{2}}, []float64{-2e15, 4}), []int64{-1e15, 4})
}

// TestPow checks a^b and a^exponent: negative bases with whole exponents,
// zero and one exponents, 0^negative, and NaN for a negative base with a
// fractional exponent.
func TestPow(t *testing.T) {
	testPow[float32](t)
	testPow[float64](t)
}

func testPow[T float](t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	dt := kernels.DTypeOf[T]()
	a := []float64{-2, -2, -2, -2, -3, 0, 0, 0, 4, 2, -8, -1, nan, 1.5}
	b := []float64{3, 2, -1, 0, 4, 0, -1, 2, 0.5, -2, 1.0 / 3, 1e9 + 1, 0, 2}
	want := []float64{-8, 4, -0.5, 1, 81, 1, inf, 0, 2, 0.25, nan, -1, 1, 2.25}
	t.Run(fmt.Sprintf("tensor/%s", dt), func(t *testing.T) {
		if dt == ir.F32 {
			b[11] = 1e7 + 1 // odd and exact in float32
		}
		got := runT[T](t, ir.OpPow, nil, [][]int{vec(a), vec(b)}, a, b)
		checkNear(t, "pow", got, want, rel[T](), 0)
	})
	scalar := []struct {
		e    float64
		x    []float64
		want []float64
	}{
		{2, []float64{-3, 0.5, 0, -inf}, []float64{9, 0.25, 0, inf}},
		{3, []float64{-2, 0.5, -1, 10}, []float64{-8, 0.125, -1, 1000}},
		{-1, []float64{-2, 4, 0, -0.5}, []float64{-0.5, 0.25, inf, -2}},
		{-2, []float64{-2, 4, 0, -0.5}, []float64{0.25, 0.0625, inf, 4}},
		{0, []float64{-2, 0, nan, inf}, []float64{1, 1, 1, 1}},
		{1, []float64{-2, 0, 3.5, nan}, []float64{-2, 0, 3.5, nan}},
		{0.5, []float64{4, 2.25, 0, -1}, []float64{2, 1.5, 0, nan}},
		{-0.5, []float64{4, 0.25, 0, -1}, []float64{0.5, 2, inf, nan}},
		{1.5, []float64{4, 0.25, 0, -1}, []float64{8, 0.125, 0, nan}},
		{2.5, []float64{4, 1, 0, -4}, []float64{32, 1, 0, nan}},
	}
	for _, tc := range scalar {
		t.Run(fmt.Sprintf("exponent=%g/%s", tc.e, dt), func(t *testing.T) {
			got := runT[T](t, ir.OpPow, ir.MakeAttrs("exponent", ir.Float(tc.e)), [][]int{vec(tc.x)}, tc.x)
			checkNear(t, "pow", got, tc.want, rel[T](), 0)
		})
	}
	// An int exponent attribute is made a float by ir.Canonical.
	got := runT[T](t, ir.OpPow, ir.MakeAttrs("exponent", ir.Int(3)), [][]int{{2}}, []float64{-2, 3})
	checkNear(t, "int exponent", got, []float64{-8, 27}, rel[T](), 0)
}

// broadcastShapes are the pairs of argument shapes the binary tests run:
// each argument broadcast in turn, and both.
var broadcastShapes = [][2][]int{
	{{2, 3}, {2, 3}},
	{{}, {4, 5}},
	{{4, 5}, {}},
	{{7, 3}, {3}},
	{{3}, {7, 3}},
	{{4, 1}, {4, 5}},
	{{4, 5}, {4, 1}},
	{{3, 1}, {1, 4}},
	{{2, 3, 4}, {3, 1}},
	{{3, 1}, {2, 3, 4}},
}

// TestBinaryMathBroadcast checks maximum, minimum, floor_div, mod and pow
// on every broadcast pattern against an index-by-index reference.
func TestBinaryMathBroadcast(t *testing.T) {
	testBinaryMathBroadcast[float32](t)
	testBinaryMathBroadcast[float64](t)
	testBinaryMathBroadcast[int32](t)
	testBinaryMathBroadcast[int64](t)
}

func testBinaryMathBroadcast[T number](t *testing.T) {
	dt := kernels.DTypeOf[T]()
	r := newRand(5)
	ops := []ir.Op{ir.OpMaximum, ir.OpMinimum, ir.OpFloorDiv, ir.OpMod}
	if dt.IsFloat() {
		ops = append(ops, ir.OpPow)
	}
	for _, sh := range broadcastShapes {
		as, bs := ir.Shape(sh[0]), ir.Shape(sh[1])
		// Small integers in every dtype, so that ties occur and the float
		// references below are exact.
		a := f64s(randVals[T](r, as.NumElements(), true))
		b := f64s(randVals[T](r, bs.NumElements(), true))
		for i := range b {
			if b[i] == 0 {
				b[i] = 3
			}
		}
		for _, op := range ops {
			t.Run(fmt.Sprintf("%s/%s/%v/%v", dt, op, as, bs), func(t *testing.T) {
				got := runT[T](t, op, nil, [][]int{as, bs}, a, b)
				os := ir.Shape(broadcastOf(as, bs))
				want := make([]float64, os.NumElements())
				for i := range want {
					idx := unravel(os, i)
					x, y := a[bcastIndex(as, idx)], b[bcastIndex(bs, idx)]
					switch op {
					case ir.OpMaximum:
						want[i] = math.Max(x, y)
					case ir.OpMinimum:
						want[i] = math.Min(x, y)
					case ir.OpFloorDiv:
						want[i] = math.Floor(x / y) // exact for small integers
					case ir.OpMod:
						want[i] = x - y*math.Floor(x/y)
					case ir.OpPow:
						want[i] = math.Pow(x, y)
					}
				}
				checkNear(t, op.String(), got, want, rel[T](), 0)
			})
		}
	}
}

func broadcastOf(a, b ir.Shape) ir.Shape {
	s, ok := ir.BroadcastShapes(a, b)
	if !ok {
		panic("shapes do not broadcast")
	}
	return s
}

// TestMaximumMinimum checks ties, NaN propagation and signed zeros.
func TestMaximumMinimum(t *testing.T) {
	nan := math.NaN()
	a := []float64{1, 2, -3, nan, 1, 5}
	b := []float64{1, -2, -3, 1, nan, 5}
	checkEqual(t, "max f64", runT[float64](t, ir.OpMaximum, nil, [][]int{{6}, {6}}, a, b), []float64{1, 2, -3, nan, nan, 5})
	checkEqual(t, "min f64", runT[float64](t, ir.OpMinimum, nil, [][]int{{6}, {6}}, a, b), []float64{1, -2, -3, nan, nan, 5})
	checkEqual(t, "max f32", runT[float32](t, ir.OpMaximum, nil, [][]int{{6}, {6}}, a, b), conv[float32]([]float64{1, 2, -3, nan, nan, 5}))
	checkEqual(t, "min f32", runT[float32](t, ir.OpMinimum, nil, [][]int{{6}, {6}}, a, b), conv[float32]([]float64{1, -2, -3, nan, nan, 5}))
	ia := []float64{math.MinInt32, 7, -1}
	ib := []float64{math.MaxInt32, 7, 0}
	checkEqual(t, "max i32", runT[int32](t, ir.OpMaximum, nil, [][]int{{3}, {3}}, ia, ib), []int32{math.MaxInt32, 7, 0})
	checkEqual(t, "min i64", runT[int64](t, ir.OpMinimum, nil, [][]int{{3}, {3}}, ia, ib), []int64{math.MinInt32, 7, -1})
}

// TestFloorDivMod checks floor_div and mod against Python's // and % for
// every sign combination, the float cases where a/b rounds (1 // 0.1 is 9
// in Python), division by zero for floats, and the identity
// a == b*(a//b) + a%b on random integers.
func TestFloorDivMod(t *testing.T) {
	inf, nan := math.Inf(1), math.NaN()
	a := []float64{7, -7, 7, -7, 6, -6, 0, 1}
	b := []float64{2, 2, -2, -2, 3, 3, 5, 7}
	divWant := []float64{3, -4, -4, 3, 2, -2, 0, 0}
	modWant := []float64{1, 1, -1, -1, 0, 0, 0, 1}
	checkEqual(t, "floor_div i32", runT[int32](t, ir.OpFloorDiv, nil, [][]int{{8}, {8}}, a, b), conv[int32](divWant))
	checkEqual(t, "mod i32", runT[int32](t, ir.OpMod, nil, [][]int{{8}, {8}}, a, b), conv[int32](modWant))
	checkEqual(t, "floor_div i64", runT[int64](t, ir.OpFloorDiv, nil, [][]int{{8}, {8}}, a, b), conv[int64](divWant))
	checkEqual(t, "mod i64", runT[int64](t, ir.OpMod, nil, [][]int{{8}, {8}}, a, b), conv[int64](modWant))
	checkEqual(t, "floor_div f32", runT[float32](t, ir.OpFloorDiv, nil, [][]int{{8}, {8}}, a, b), conv[float32](divWant))
	checkEqual(t, "mod f32", runT[float32](t, ir.OpMod, nil, [][]int{{8}, {8}}, a, b), conv[float32](modWant))

	// Python 3 values, float64.
	fa := []float64{7.5, -7.5, 7.5, -7.5, 1, 1, -1, 1e-20, -1e-20, 5, 1, -1, 0, 1, inf, 3}
	fb := []float64{2, 2, -2, -2, 0.1, -0.1, 0.1, 1, 1, inf, 0, 0, 0, nan, 2, -inf}
	fdiv := []float64{3, -4, -4, 3, 9, -10, -10, 0, -1, 0, inf, -inf, nan, nan, nan, -1}
	fmod := []float64{1.5, 0.5, -0.5, -1.5, 0.09999999999999995, -0.00000000000000005551115123125783, 0.00000000000000005551115123125783, 1e-20, 1, 5, nan, nan, nan, nan, nan, -inf}
	gotDiv := runT[float64](t, ir.OpFloorDiv, nil, [][]int{vec(fa), vec(fb)}, fa, fb)
	checkEqual(t, "floor_div f64", gotDiv, fdiv)
	gotMod := runT[float64](t, ir.OpMod, nil, [][]int{vec(fa), vec(fb)}, fa, fb)
	checkNear(t, "mod f64", gotMod, fmod, 1e-15, 0)

	// Integer wrap-around: MinInt / -1 is MinInt, as in Go, not a panic.
	checkEqual(t, "MinInt32 // -1", runT[int32](t, ir.OpFloorDiv, nil, [][]int{{1}, {1}}, []float64{math.MinInt32}, []float64{-1}), []int32{math.MinInt32})
	checkEqual(t, "MinInt64 % -1", runT[int64](t, ir.OpMod, nil, [][]int{{1}, {1}}, []float64{math.MinInt64}, []float64{-1}), []int64{0})

	r := newRand(9)
	x := make([]int64, 200)
	y := make([]int64, 200)
	for i := range x {
		x[i] = int64(r.IntN(2001) - 1000)
		y[i] = int64(r.IntN(41) - 20)
		if y[i] == 0 {
			y[i] = 13
		}
	}
	q := kernels.View[int64](mustRun(t, ir.OpFloorDiv, nil, tensorOf([]int{200}, x), tensorOf([]int{200}, y)))
	m := kernels.View[int64](mustRun(t, ir.OpMod, nil, tensorOf([]int{200}, x), tensorOf([]int{200}, y)))
	for i := range x {
		if y[i]*q[i]+m[i] != x[i] || (m[i] != 0 && (m[i] < 0) != (y[i] < 0)) || abs64(m[i]) >= abs64(y[i]) {
			t.Errorf("%d // %d = %d, %d %% %d = %d", x[i], y[i], q[i], x[i], y[i], m[i])
		}
	}
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// TestIntegerDivisionByZero checks that floor_div and mod return an error
// naming the op and the element for an integer zero divisor, under
// broadcasting, and do not panic.
func TestIntegerDivisionByZero(t *testing.T) {
	for _, op := range []ir.Op{ir.OpFloorDiv, ir.OpMod} {
		// a [2,3] by b [3] = {1, 0, 2}: the first zero is output element 1.
		_, err := run(t, op, nil, tensorOf([]int{2, 3}, []int32{1, 2, 3, 4, 5, 6}), tensorOf([]int{3}, []int32{1, 0, 2}))
		want := fmt.Sprintf("division by zero in %s at element 1", op)
		if err == nil || err.Error() != want {
			t.Errorf("%s i32: error %v, want %q", op, err, want)
		}
		_, err = run(t, op, nil, tensorOf([]int{}, []int64{5}), tensorOf([]int{2, 2}, []int64{1, 2, 3, 0}))
		want = fmt.Sprintf("division by zero in %s at element 3", op)
		if err == nil || err.Error() != want {
			t.Errorf("%s i64: error %v, want %q", op, err, want)
		}
	}
}

// TestMathBuildErrors checks that ir's inference, through the kernels'
// checks, refuses bad pow and clip nodes.
func TestMathBuildErrors(t *testing.T) {
	f32 := func(dims ...int) ir.Type { return ir.TensorOf(ir.F32, dims...) }
	i32 := ir.TensorOf(ir.I32, 2)
	tests := []struct {
		name string
		n    kernels.Node
		want string
	}{
		{"pow both exponents", kernels.Node{Op: ir.OpPow, Attrs: ir.MakeAttrs("exponent", ir.Float(2)), Args: []ir.Type{f32(2), f32(2)}, Out: f32(2)}, "not both"},
		{"pow no exponent", kernels.Node{Op: ir.OpPow, Args: []ir.Type{f32(2)}, Out: f32(2)}, "needs an exponent"},
		{"pow ints", kernels.Node{Op: ir.OpPow, Args: []ir.Type{i32, i32}, Out: i32}, "no pow kernel for i32"},
		{"pow three args", kernels.Node{Op: ir.OpPow, Args: []ir.Type{f32(2), f32(2), f32(2)}, Out: f32(2)}, "takes 1 to 2 arguments"},
		{"clip no bounds", kernels.Node{Op: ir.OpClip, Args: []ir.Type{f32(2)}, Out: f32(2)}, "needs min, max or both"},
		{"clip min > max", kernels.Node{Op: ir.OpClip, Attrs: ir.MakeAttrs("min", ir.Float(2), "max", ir.Float(1)), Args: []ir.Type{f32(2)}, Out: f32(2)}, "min 2.0 is greater than max 1.0"},
		{"clip fractional int bound", kernels.Node{Op: ir.OpClip, Attrs: ir.MakeAttrs("min", ir.Float(0.5)), Args: []ir.Type{i32}, Out: i32}, "not an i32"},
		{"maximum shapes", kernels.Node{Op: ir.OpMaximum, Args: []ir.Type{f32(2), f32(3)}, Out: f32(3)}, "do not broadcast"},
		{"log1p int", kernels.Node{Op: ir.OpLog1p, Args: []ir.Type{i32}, Out: i32}, "no log1p kernel for i32"},
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

// TestMathFuncsDoNotAllocate checks that the math kernels allocate nothing
// per call, and runs them on empty and scalar shapes.
func TestMathFuncsDoNotAllocate(t *testing.T) {
	r := newRand(11)
	f32 := func(dims ...int) kernels.Tensor {
		return tensorOf(dims, randVals[float32](r, ir.Shape(dims).NumElements(), false))
	}
	i64 := func(dims ...int) kernels.Tensor {
		v := randVals[int64](r, ir.Shape(dims).NumElements(), false)
		for i := range v {
			if v[i] == 0 {
				v[i] = 1
			}
		}
		return tensorOf(dims, v)
	}
	clip := ir.MakeAttrs("min", ir.Float(-1), "max", ir.Float(1))
	var tests []struct {
		op    ir.Op
		attrs ir.Attrs
		args  []kernels.Tensor
	}
	add := func(op ir.Op, attrs ir.Attrs, args ...kernels.Tensor) {
		tests = append(tests, struct {
			op    ir.Op
			attrs ir.Attrs
			args  []kernels.Tensor
		}{op, attrs, args})
	}
	for _, op := range []ir.Op{ir.OpAbs, ir.OpSign, ir.OpRsqrt, ir.OpSquare, ir.OpReciprocal, ir.OpLog2, ir.OpLog10,
		ir.OpLog1p, ir.OpExpm1, ir.OpSin, ir.OpCos, ir.OpErf, ir.OpFloor, ir.OpCeil, ir.OpRound} {
		add(op, nil, f32(4, 5))
		add(op, nil, f32())
		add(op, nil, f32(0, 3))
	}
	add(ir.OpClip, clip, f32(4, 5))
	add(ir.OpClip, clip, f32(0))
	add(ir.OpPow, ir.MakeAttrs("exponent", ir.Float(3)), f32(4, 5))
	add(ir.OpPow, ir.MakeAttrs("exponent", ir.Float(2)), f32(4, 5))
	for _, op := range []ir.Op{ir.OpPow, ir.OpMaximum, ir.OpMinimum, ir.OpFloorDiv, ir.OpMod} {
		add(op, nil, f32(2, 3, 4), f32(3, 1))
		add(op, nil, f32(), f32(0, 2))
		add(op, nil, f32(), f32())
	}
	for _, op := range []ir.Op{ir.OpFloorDiv, ir.OpMod} {
		add(op, nil, i64(2, 3, 4), i64(3, 1))
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s%v", tc.op, typesOf(tc.args)), func(t *testing.T) {
			out := mustRun(t, tc.op, tc.attrs, tc.args...) // also for empty shapes
			f, err := Kernels.Build(node(t, tc.op, tc.attrs, typesOf(tc.args)...))
			if err != nil {
				t.Fatal(err)
			}
			allocs := testing.AllocsPerRun(20, func() {
				if err := f(out, tc.args); err != nil {
					t.Fatal(err)
				}
			})
			if allocs != 0 {
				t.Errorf("%s allocates %v times per call", tc.op, allocs)
			}
		})
	}
}
