package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// TestConst checks filled and listed constants in every dtype.
func TestConst(t *testing.T) {
	vals := []float64{1, -2, 0, 3}
	for _, dt := range allDTypes {
		tests := []struct {
			name  string
			attrs ir.Attrs
			shape []int
			want  []float64
		}{
			{"fill", ir.MakeAttrs("shape", ir.Ints(2, 3), "value", ir.Float(-4)), []int{2, 3}, []float64{-4, -4, -4, -4, -4, -4}},
			{"list", ir.MakeAttrs("shape", ir.Ints(2, 2), "value", ir.Floats(vals...)), []int{2, 2}, vals},
			{"scalar", ir.MakeAttrs("value", ir.Int(7)), []int{}, []float64{7}},
			{"vector", ir.MakeAttrs("value", ir.Floats(vals...)), []int{4}, vals},
		}
		for _, tc := range tests {
			t.Run(fmt.Sprintf("%s/%s", dt, tc.name), func(t *testing.T) {
				out := mustRun(t, ir.OpConst, tc.attrs.With("dtype", ir.String(dt.String())))
				if !out.Type.Equal(ir.Type{DType: dt, Shape: tc.shape}) {
					t.Fatalf("type %s, want %s%v", out.Type, dt, tc.shape)
				}
				switch dt {
				case ir.F32:
					checkEqual(t, "f32", kernels.View[float32](out), conv[float32](tc.want))
				case ir.F64:
					checkEqual(t, "f64", kernels.View[float64](out), tc.want)
				case ir.I32:
					checkEqual(t, "i32", kernels.View[int32](out), conv[int32](tc.want))
				case ir.I64:
					checkEqual(t, "i64", kernels.View[int64](out), conv[int64](tc.want))
				case ir.Bool:
					want := make([]bool, len(tc.want))
					for i, w := range tc.want {
						want[i] = w != 0
					}
					checkEqual(t, "bool", kernels.View[bool](out), want)
				}
			})
		}
	}
	t.Run("special values", func(t *testing.T) {
		out := mustRun(t, ir.OpConst, ir.MakeAttrs("dtype", ir.String("bool"), "value", ir.Floats(0, 0.5, -2, math.NaN())))
		checkEqual(t, "bool", kernels.View[bool](out), []bool{false, true, true, true})
		out = mustRun(t, ir.OpConst, ir.MakeAttrs("dtype", ir.String("i64"), "value", ir.Floats(1<<52+1, -(1<<62))))
		checkEqual(t, "i64", kernels.View[int64](out), []int64{1<<52 + 1, -(1 << 62)})
		out = mustRun(t, ir.OpConst, ir.MakeAttrs("dtype", ir.String("f32"), "value", ir.Floats(math.Inf(-1), 0.1)))
		checkEqual(t, "f32", kernels.View[float32](out), []float32{float32(math.Inf(-1)), 0.1})
	})
}

// TestOneHot checks one_hot for every result dtype and both label dtypes,
// and its error for a label outside [0,classes).
func TestOneHot(t *testing.T) {
	testOneHot[float32, int32](t)
	testOneHot[float64, int64](t)
	testOneHot[int32, int64](t)
	testOneHot[int64, int32](t)
}

func testOneHot[T number, L integer](t *testing.T) {
	dt := kernels.DTypeOf[T]()
	name := fmt.Sprintf("%s/%s", dt, kernels.DTypeOf[L]())
	attrs := ir.MakeAttrs("classes", ir.Int(3), "dtype", ir.String(dt.String()))
	t.Run(name, func(t *testing.T) {
		out := mustRun(t, ir.OpOneHot, attrs, tensorOf([]int{2, 2}, []L{2, 0, 1, 2}))
		if !out.Type.Equal(ir.TensorOf(dt, 2, 2, 3)) {
			t.Fatalf("type %s", out.Type)
		}
		checkEqual(t, "one_hot", kernels.View[T](out), []T{
			0, 0, 1, 1, 0, 0,
			0, 1, 0, 0, 0, 1,
		})
		out = mustRun(t, ir.OpOneHot, attrs, tensorOf([]int{}, []L{1}))
		checkEqual(t, "scalar label", kernels.View[T](out), []T{0, 1, 0})
	})
	t.Run(name+"/out of range", func(t *testing.T) {
		for _, tc := range []struct {
			labels []L
			want   string
		}{
			{[]L{0, 1, 3}, "label 3 at row 2 is outside [0,3)"},
			{[]L{-2, 1, 0}, "label -2 at row 0 is outside [0,3)"},
		} {
			_, err := run(t, ir.OpOneHot, attrs, tensorOf([]int{3}, tc.labels))
			if err == nil || err.Error() != tc.want {
				t.Errorf("labels %v: error %v, want %q", tc.labels, err, tc.want)
			}
		}
	})
}
