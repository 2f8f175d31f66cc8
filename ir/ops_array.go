package ir

import (
	"fmt"
	"math"
)

// Array ops that models exported to ONNX use and the other families do not
// cover: cast between element types. Semantics follow ONNX and PyTorch;
// the Docs say where kiln defines what they leave undefined.

func arrayOps() []opRow {
	return []opRow{
		{OpCast, OpInfo{Name: "cast", Args: []string{"x"}, Infer: inferCast, Grad: gradCast,
			Doc:   "x converted to dtype (ONNX Cast, torch.Tensor.to): floats round to nearest; floats to integers truncate toward zero, NaN gives 0 and values out of range saturate; integers narrow by wrapping (i64 to i32 keeps the low 32 bits); to bool, nonzero (NaN too) is true; bool is 0 or 1. The gradient flows from float to float only (cast back)",
			Attrs: []AttrSpec{{Name: "dtype", Kind: AttrString, Required: true, Doc: `the result's element type: "f32", "f64", "i32", "i64" or "bool"`}}}},
	}
}

func inferCast(args []Type, a Attrs) (Type, error) {
	s := a.Str("dtype", "")
	dt, ok := ParseDType(s)
	if !ok {
		return Type{}, fmt.Errorf("unknown dtype %q (expected f32, f64, i32, i64 or bool)", Excerpt(s))
	}
	return Type{dt, args[0].Shape.Clone()}, nil
}

func gradCast(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	from := e.Type(x).DType
	if !from.IsFloat() || !e.Type(y).DType.IsFloat() {
		return []ID{NoID}
	}
	if from == e.Type(dy).DType {
		return []ID{dy}
	}
	return []ID{e.Op(OpCast, MakeAttrs("dtype", String(from.String())), dy)}
}

// CastFloatToInt converts x to an integer of dtype to (I32 or I64) as cast
// does: truncated toward zero, NaN to 0, saturated at the type's range.
func CastFloatToInt(x float64, to DType) int64 {
	lo, hi := float64(math.MinInt64), float64(math.MaxInt64)
	if to == I32 {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	switch {
	case math.IsNaN(x):
		return 0
	case x <= lo:
		return int64(lo)
	case x >= hi:
		if to == I32 {
			return math.MaxInt32
		}
		return math.MaxInt64
	}
	return int64(math.Trunc(x))
}
