package cpu

import (
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestCast casts every dtype into every dtype and compares each element
// with the rule of ir's cast doc, written out per case.
func TestCast(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	f32 := tensorOf([]int{9}, []float32{1.5, -2.7, 0, float32(nan), float32(inf), float32(-inf), 3e9, -3e9, 16777217})
	f64 := tensorOf([]int{2, 4}, []float64{1.5, -2.7, nan, 1e300, -1e19, 1 + 1e-12, 0, 9.2e18})
	i32 := tensorOf([]int{5}, []int32{0, -1, 7, math.MaxInt32, math.MinInt32})
	i64 := tensorOf([]int{6}, []int64{0, -1, 1 << 40, -(1 << 33) - 5, 1<<24 + 1, 1 << 62})
	b := tensorOf([]int{3}, []bool{true, false, true})
	tests := []struct {
		name string
		x    kernels.Tensor
		to   ir.DType
		want []float64 // the result's elements as float64 (bool 0/1)
	}{
		{"f32 to f64", f32, ir.F64, []float64{1.5, float64(float32(-2.7)), 0, nan, inf, -inf, 3e9, -3e9, 16777216}},
		{"f32 to i32 truncates, NaN 0, saturates", f32, ir.I32, []float64{1, -2, 0, 0, math.MaxInt32, math.MinInt32, math.MaxInt32, math.MinInt32, 16777216}},
		{"f32 to i64", f32, ir.I64, []float64{1, -2, 0, 0, math.MaxInt64, math.MinInt64, 3e9, -3e9, 16777216}},
		{"f32 to bool, NaN true", f32, ir.Bool, []float64{1, 1, 0, 1, 1, 1, 1, 1, 1}},
		{"f32 to f32", f32, ir.F32, []float64{1.5, float64(float32(-2.7)), 0, nan, inf, -inf, 3e9, -3e9, 16777216}},
		{"f64 to f32 rounds, overflows to inf", f64, ir.F32, []float64{1.5, float64(float32(-2.7)), nan, inf, float64(float32(-1e19)), 1, 0, float64(float32(9.2e18))}},
		{"f64 to i64 saturates", f64, ir.I64, []float64{1, -2, 0, math.MaxInt64, math.MinInt64, 1, 0, 9.2e18}},
		{"f64 to i32", f64, ir.I32, []float64{1, -2, 0, math.MaxInt32, math.MinInt32, 1, 0, math.MaxInt32}},
		{"f64 to bool", f64, ir.Bool, []float64{1, 1, 1, 1, 1, 1, 0, 1}},
		{"f64 to f64", f64, ir.F64, []float64{1.5, -2.7, nan, 1e300, -1e19, 1 + 1e-12, 0, 9.2e18}},
		{"i32 to f32", i32, ir.F32, []float64{0, -1, 7, 2147483648, -2147483648}},
		{"i32 to f64", i32, ir.F64, []float64{0, -1, 7, math.MaxInt32, math.MinInt32}},
		{"i32 to i64 sign-extends", i32, ir.I64, []float64{0, -1, 7, math.MaxInt32, math.MinInt32}},
		{"i32 to bool", i32, ir.Bool, []float64{0, 1, 1, 1, 1}},
		{"i32 to i32", i32, ir.I32, []float64{0, -1, 7, math.MaxInt32, math.MinInt32}},
		{"i64 to i32 wraps", i64, ir.I32, []float64{0, -1, 0, -5, 1<<24 + 1, 0}},
		{"i64 to f32 rounds once", i64, ir.F32, []float64{0, -1, 1 << 40, float64(float32(-(1 << 33) - 5)), 1 << 24, 1 << 62}},
		{"i64 to f64", i64, ir.F64, []float64{0, -1, 1 << 40, -(1 << 33) - 5, 1<<24 + 1, 1 << 62}},
		{"i64 to bool", i64, ir.Bool, []float64{0, 1, 1, 1, 1, 1}},
		{"i64 to i64", i64, ir.I64, []float64{0, -1, 1 << 40, -(1 << 33) - 5, 1<<24 + 1, 1 << 62}},
		{"bool to f32", b, ir.F32, []float64{1, 0, 1}},
		{"bool to f64", b, ir.F64, []float64{1, 0, 1}},
		{"bool to i32", b, ir.I32, []float64{1, 0, 1}},
		{"bool to i64", b, ir.I64, []float64{1, 0, 1}},
		{"bool to bool", b, ir.Bool, []float64{1, 0, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := mustRun(t, ir.OpCast, ir.MakeAttrs("dtype", ir.String(tc.to.String())), tc.x)
			if !out.Type.Shape.Equal(tc.x.Type.Shape) || out.Type.DType != tc.to {
				t.Fatalf("result %s, want %s%s", out.Type, tc.to, tc.x.Type.Shape)
			}
			var got []float64
			if tc.to == ir.I64 {
				// Float64s would round an i64 above 2^53; compare exactly.
				for i, v := range kernels.View[int64](out) {
					if w := tc.want[i]; (w == math.MaxInt64 && v != math.MaxInt64) || (w != math.MaxInt64 && v != int64(w)) {
						t.Errorf("element %d = %d, want %v", i, v, w)
					}
				}
				return
			}
			got = kernels.Float64s(out)
			for i, w := range tc.want {
				if got[i] != w && !(math.IsNaN(w) && math.IsNaN(got[i])) {
					t.Errorf("element %d = %v, want %v", i, got[i], w)
				}
			}
		})
	}
}
