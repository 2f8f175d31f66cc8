package kernels

import (
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// TestConst checks the elements of const for each dtype, a fill and a
// list, and the errors of values a dtype cannot hold.
func TestConst(t *testing.T) {
	for _, tt := range []struct {
		value ir.AttrValue
		typ   ir.Type
		want  string // the elements, formatted
		err   string
	}{
		{ir.Float(1.5), ir.Type{DType: ir.F32, Shape: ir.Shape{3}}, "[1.5 1.5 1.5]", ""},
		{ir.Floats(1, -2), ir.Type{DType: ir.F64, Shape: ir.Shape{2}}, "[1 -2]", ""},
		{ir.Floats(7, -3), ir.Type{DType: ir.I32, Shape: ir.Shape{2}}, "[7 -3]", ""},
		{ir.Float(-9), ir.Type{DType: ir.I64, Shape: ir.Shape{2}}, "[-9 -9]", ""},
		{ir.Floats(0, 2), ir.Type{DType: ir.Bool, Shape: ir.Shape{2}}, "[false true]", ""},
		{ir.Float(0.5), ir.Type{DType: ir.I32, Shape: ir.Shape{1}}, "", "value 0.5 is not an i32"},
		{ir.Float(1 << 63), ir.Type{DType: ir.I64, Shape: ir.Shape{1}}, "", "value 9.223372036854776e+18 is not an i64"},
		{ir.Floats(1, 2, 3), ir.Type{DType: ir.F32, Shape: ir.Shape{2}}, "", "value has 3 elements, f32[2] needs 2 (or 1 to fill)"},
	} {
		c, err := Const(ir.MakeAttrs("value", tt.value), tt.typ)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s %s: error %v, want %q", tt.value, tt.typ, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s %s: %v", tt.value, tt.typ, err)
		}
		if got := format(c); got != tt.want {
			t.Errorf("%s %s: %s, want %s", tt.value, tt.typ, got, tt.want)
		}
	}
}

func format(c Tensor) string {
	switch c.Type.DType {
	case ir.F32:
		return fmtSlice(View[float32](c))
	case ir.F64:
		return fmtSlice(View[float64](c))
	case ir.I32:
		return fmtSlice(View[int32](c))
	case ir.I64:
		return fmtSlice(View[int64](c))
	}
	return fmtSlice(View[bool](c))
}

// TestIndexError checks the wording every backend reports: the element's
// position in the index, its value and the range.
func TestIndexError(t *testing.T) {
	err := IndexError(ir.OpGather, "index", ir.Shape{2, 3}, 4, 9, 1, 5)
	want := "gather: index[1,1] = 9 is out of range for axis 1 of size 5 (expected 0 <= index < 5)"
	if err.Error() != want {
		t.Errorf("%q, want %q", err, want)
	}
}

func fmtSlice[T Elem](v []T) string { return fmt.Sprint(v) }
