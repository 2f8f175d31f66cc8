package ir

import (
	"fmt"
	"math"
)

// Array ops that models exported to ONNX use and the other families do not
// cover: cast between element types, cumulative sums, and the triangle
// masks of matrices. Semantics follow ONNX and PyTorch;
// the Docs say where kiln defines what they leave undefined.

func arrayOps() []opRow {
	return []opRow{
		{OpCast, OpInfo{Name: "cast", Args: []string{"x"}, Infer: inferCast, Grad: gradCast,
			Doc:   "x converted to dtype (ONNX Cast, torch.Tensor.to): floats round to nearest; floats to integers truncate toward zero, NaN gives 0 and values out of range saturate; integers narrow by wrapping (i64 to i32 keeps the low 32 bits); to bool, nonzero (NaN too) is true; bool is 0 or 1. The gradient flows from float to float only (cast back)",
			Attrs: []AttrSpec{{Name: "dtype", Kind: AttrString, Required: true, Doc: `the result's element type: "f32", "f64", "i32", "i64" or "bool"`}}}},
		{OpCumsum, OpInfo{Name: "cumsum", Args: []string{"x"}, Infer: inferCumsum, Grad: gradCumsum,
			Doc: "running sums of a numeric x of rank >= 1 along axis (ONNX CumSum, torch.cumsum), added one element at a time in order along the axis, in x's dtype",
			Attrs: []AttrSpec{
				{Name: "axis", Kind: AttrInt, Required: true, Doc: "the summed axis (negative counts from the end)"},
				{Name: "exclusive", Kind: AttrBool, Default: defBool(false), Doc: "element i sums the elements before i only (the first is 0)"},
				{Name: "reverse", Kind: AttrBool, Default: defBool(false), Doc: "sum from the end of the axis: element i sums the elements from i (after i when exclusive) to the end"},
			}}},
		{OpTrilu, OpInfo{Name: "trilu", Args: []string{"x"}, Infer: inferTrilu, Grad: gradTrilu,
			Doc: "x of rank >= 2 with the elements off a triangle of each matrix (its last two axes) set to zero (ONNX Trilu, torch.triu and torch.tril): upper keeps [i][j] where j - i >= k, lower where j - i <= k",
			Attrs: []AttrSpec{
				{Name: "upper", Kind: AttrBool, Default: defBool(true), Doc: "keep the upper triangle (torch.triu); false keeps the lower (torch.tril)"},
				{Name: "k", Kind: AttrInt, Default: defInt(0), Doc: "the diagonal that bounds the triangle: 0 the main one, positive above it, negative below"},
			}}},
	}
}

func inferCumsum(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if x.DType == Bool {
		return Type{}, fmt.Errorf("expected a numeric operand, found %s", x)
	}
	if len(x.Shape) == 0 {
		return Type{}, fmt.Errorf("expected an operand of rank >= 1, found %s", x)
	}
	if _, err := Axis(a, len(x.Shape)); err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// gradCumsum: y[i] sums x[j] for j <= i (j < i when exclusive), so x[j]'s
// gradient sums dy[i] for i >= j (i > j): the cumsum of dy the other way.
func gradCumsum(e *Emitter, y, dy ID) []ID {
	a := e.G.Values[y].Attrs
	rev := !a.Bool("reverse", false)
	return []ID{e.Op(OpCumsum, a.With("reverse", BoolAttr(rev)), dy)}
}

func inferTrilu(args []Type, _ Attrs) (Type, error) {
	x := args[0]
	if len(x.Shape) < 2 {
		return Type{}, fmt.Errorf("expected an operand of rank >= 2 (matrices), found %s", x)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// gradTrilu: the kept elements pass their gradient, the others none.
func gradTrilu(e *Emitter, y, dy ID) []ID {
	return []ID{e.Op(OpTrilu, e.G.Values[y].Attrs, dy)}
}

// TriluKeeps reports whether trilu with attrs keeps element [i][j] of a
// matrix.
func TriluKeeps(attrs Attrs, i, j int) bool {
	k := attrs.Int("k", 0)
	if attrs.Bool("upper", true) {
		return j-i >= k
	}
	return j-i <= k
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
