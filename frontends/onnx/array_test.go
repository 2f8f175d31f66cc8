package onnx

import (
	"math"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

func scalarI64(name string, v int64) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{v}}
}

func aString(name, v string) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(v)}
}

func aTo(dt onnxpb.TensorProto_DataType) *onnxpb.AttributeProto { return aInt("to", int64(dt)) }

// TestArrayOpRules checks the rules of the array ops (ops_array.go) on
// x = 0, 1, 2, ...
func TestArrayOpRules(t *testing.T) {
	tests := []struct {
		name  string
		opset int64
		xs    []int64
		inits []*onnxpb.TensorProto
		nodes []*onnxpb.NodeProto
		want  []float64
	}{
		{"Cast of a computed value truncates toward zero", 17, []int64{4}, []*onnxpb.TensorProto{f32s("two", nil, 2), f32s("k", nil, 1.7)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "two"}, []string{"d"}), node("Mul", []string{"d", "k"}, []string{"m"}),
				node("Cast", []string{"m"}, []string{"i"}, aTo(onnxpb.TensorProto_INT32)),
				node("Cast", []string{"i"}, []string{"y"}, aTo(onnxpb.TensorProto_FLOAT))},
			// (x-2)*1.7 = -3.4, -1.7, 0, 1.7.
			[]float64{-3, -1, 0, 1}},
		{"Cast to bool and back", 17, []int64{3}, nil,
			[]*onnxpb.NodeProto{node("Cast", []string{"x"}, []string{"b"}, aTo(onnxpb.TensorProto_BOOL)),
				node("Cast", []string{"b"}, []string{"y"}, aTo(onnxpb.TensorProto_DOUBLE))},
			[]float64{0, 1, 1}},
		{"CastLike an i64 initializer", 17, []int64{3}, []*onnxpb.TensorProto{i64s("like", 7), f32s("k", nil, 0.5)},
			[]*onnxpb.NodeProto{node("Add", []string{"x", "k"}, []string{"h"}), node("CastLike", []string{"h", "like"}, []string{"i"}),
				node("CastLike", []string{"i", "k"}, []string{"y"})},
			[]float64{0, 1, 2}},
		{"causal mask from positions", 17, []int64{3, 3}, []*onnxpb.TensorProto{i64s("a", 0), i64s("n", 3), i64s("d", 1), i64s("ax0", 0), i64s("ax1", 1), f32s("ninf", nil, -100)},
			[]*onnxpb.NodeProto{node("Range", []string{"a", "n", "d"}, []string{"pos"}),
				node("Unsqueeze", []string{"pos", "ax0"}, []string{"row"}), node("Unsqueeze", []string{"pos", "ax1"}, []string{"col"}),
				node("LessOrEqual", []string{"row", "col"}, []string{"keep"}),
				node("Where", []string{"keep", "x", "ninf"}, []string{"y"})},
			[]float64{0, -100, -100, 3, 4, -100, 6, 7, 8}},
		{"CumSum axis input", 17, []int64{2, 3}, []*onnxpb.TensorProto{i64s("ax", 1)},
			[]*onnxpb.NodeProto{node("CumSum", []string{"x", "ax"}, []string{"y"})}, []float64{0, 1, 3, 3, 7, 12}},
		{"CumSum exclusive reverse, scalar axis", 17, []int64{2, 3}, []*onnxpb.TensorProto{scalarI64("ax", -1)},
			[]*onnxpb.NodeProto{node("CumSum", []string{"x", "ax"}, []string{"y"}, aInt("exclusive", 1), aInt("reverse", 1))}, []float64{3, 2, 0, 9, 5, 0}},
		{"GatherElements constant indices, negative from the end", 17, []int64{2, 3}, []*onnxpb.TensorProto{{Name: proto.String("i"),
			DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{2, 2}, Int64Data: []int64{2, 0, 1, -1}}},
			[]*onnxpb.NodeProto{node("GatherElements", []string{"x", "i"}, []string{"y"}, aInt("axis", 1))}, []float64{2, 0, 4, 5}},
		{"GatherElements computed indices", 17, []int64{2, 2}, []*onnxpb.TensorProto{f32s("t", []int64{3, 2}, 10, 11, 12, 13, 14, 15), f32s("half", nil, 0.5)},
			[]*onnxpb.NodeProto{node("Mul", []string{"x", "half"}, []string{"h"}), node("Cast", []string{"h"}, []string{"i"}, aTo(onnxpb.TensorProto_INT64)),
				node("GatherElements", []string{"t", "i"}, []string{"y"}, aInt("axis", 0))},
			// i = [[0,0],[1,1]]: t[0][0], t[0][1], t[1][0], t[1][1].
			[]float64{10, 11, 12, 13}},
		{"Gather computed indices (token ids)", 17, []int64{2, 3}, []*onnxpb.TensorProto{f32s("emb", []int64{6, 2}, 0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51)},
			[]*onnxpb.NodeProto{node("Cast", []string{"x"}, []string{"ids"}, aTo(onnxpb.TensorProto_INT64)),
				node("Gather", []string{"emb", "ids"}, []string{"y"})},
			[]float64{0, 1, 10, 11, 20, 21, 30, 31, 40, 41, 50, 51}},
		{"Gather computed 1-D indices along axis 1", 17, []int64{2}, []*onnxpb.TensorProto{f32s("t", []int64{2, 3}, 5, 6, 7, 8, 9, 10)},
			[]*onnxpb.NodeProto{node("Cast", []string{"x"}, []string{"ids"}, aTo(onnxpb.TensorProto_INT32)),
				node("Gather", []string{"t", "ids"}, []string{"y"}, aInt("axis", 1))},
			[]float64{5, 6, 8, 9}},
		{"ArgMax keepdims 0", 17, []int64{2, 3}, []*onnxpb.TensorProto{f32s("k", []int64{3}, 0, 5, -1)},
			[]*onnxpb.NodeProto{node("Mul", []string{"x", "k"}, []string{"m"}), node("ArgMax", []string{"m"}, []string{"y"}, aInt("axis", 1), aInt("keepdims", 0))},
			[]float64{1, 1}},
		{"ArgMin default axis 0", 17, []int64{2, 3}, []*onnxpb.TensorProto{f32s("k", []int64{2, 3}, 9, 0, 9, 0, 9, 0)},
			[]*onnxpb.NodeProto{node("Add", []string{"x", "k"}, []string{"m"}), node("ArgMin", []string{"m"}, []string{"y"})},
			// m = [[9,1,11],[3,13,5]].
			[]float64{1, 0, 1}},
		{"ReduceProd", 17, []int64{2, 2}, nil, []*onnxpb.NodeProto{node("ReduceProd", []string{"x"}, []string{"y"}, aInts("axes", 1), aInt("keepdims", 0))}, []float64{0, 6}},
		// Each group of 4 values 0..3 (+4) normalizes to (x-1.5)/sqrt(1.25).
		{"GroupNormalization per-group scale (opset 18)", 18, []int64{1, 4, 2}, []*onnxpb.TensorProto{f32s("s", []int64{2}, 1, 2), f32s("b", []int64{2}, 0, 1)},
			[]*onnxpb.NodeProto{node("GroupNormalization", []string{"x", "s", "b"}, []string{"y"}, aInt("num_groups", 2), aFloat("epsilon", 0))},
			[]float64{-1.3416408, -0.4472136, 0.4472136, 1.3416408, -1.6832816, 0.1055728, 1.8944272, 3.6832816}},
		{"GroupNormalization per-channel scale (opset 21)", 21, []int64{1, 4, 2}, []*onnxpb.TensorProto{f32s("s", []int64{4}, 1, 1, 2, 2), f32s("b", []int64{4}, 0, 0, 1, 1)},
			[]*onnxpb.NodeProto{node("GroupNormalization", []string{"x", "s", "b"}, []string{"y"}, aInt("num_groups", 2), aFloat("epsilon", 0))},
			[]float64{-1.3416408, -0.4472136, 0.4472136, 1.3416408, -1.6832816, 0.1055728, 1.8944272, 3.6832816}},
		// x = [0, 1] by w = [1, 2] with stride 2: [0, 0, 1, 2] before cropping.
		{"ConvTranspose pads begin only", 17, []int64{1, 1, 2}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 2}, 1, 2)},
			[]*onnxpb.NodeProto{node("ConvTranspose", []string{"x", "w"}, []string{"y"}, aInts("strides", 2), aInts("pads", 1, 0))}, []float64{0, 1, 2}},
		{"ConvTranspose output_shape", 17, []int64{1, 1, 2}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 2}, 1, 2), f32s("b", []int64{1}, 10)},
			[]*onnxpb.NodeProto{node("ConvTranspose", []string{"x", "w", "b"}, []string{"y"}, aInts("strides", 2), aInts("output_shape", 3))}, []float64{10, 11, 12}},
		{"ConvTranspose output_padding", 17, []int64{1, 1, 2}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 2}, 1, 2)},
			[]*onnxpb.NodeProto{node("ConvTranspose", []string{"x", "w"}, []string{"y"}, aInts("strides", 3), aInts("output_padding", 2))}, []float64{0, 0, 0, 1, 2, 0, 0}},
		{"Pad reflect", 17, []int64{1, 4}, []*onnxpb.TensorProto{i64s("p", 0, 2, 0, 3)},
			[]*onnxpb.NodeProto{node("Pad", []string{"x", "p"}, []string{"y"}, aString("mode", "reflect"))}, []float64{2, 1, 0, 1, 2, 3, 2, 1, 0}},
		{"Pad edge with a crop", 17, []int64{1, 4}, []*onnxpb.TensorProto{i64s("p", 0, -1, 0, 2)},
			[]*onnxpb.NodeProto{node("Pad", []string{"x", "p"}, []string{"y"}, aString("mode", "edge"))}, []float64{1, 2, 3, 3, 3}},
		{"Pad wrap both axes", 19, []int64{2, 2}, []*onnxpb.TensorProto{i64s("p", 1, 0, 0, 1)},
			[]*onnxpb.NodeProto{node("Pad", []string{"x", "p"}, []string{"y"}, aString("mode", "wrap"))}, []float64{2, 3, 2, 0, 1, 0, 2, 3, 2}},
		{"Slice negative step", 17, []int64{5}, []*onnxpb.TensorProto{i64s("s", -1), i64s("e", -100), i64s("a", 0), i64s("st", -2)},
			[]*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a", "st"}, []string{"y"})}, []float64{4, 2, 0}},
		{"Slice negative step, end inside", 17, []int64{2, 4}, []*onnxpb.TensorProto{i64s("s", 2), i64s("e", 0), i64s("a", 1), i64s("st", -1)},
			[]*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a", "st"}, []string{"y"})}, []float64{2, 1, 6, 5}},
		{"ThresholdedRelu", 17, []int64{4}, nil, []*onnxpb.NodeProto{node("ThresholdedRelu", []string{"x"}, []string{"y"}, aFloat("alpha", 1.5))}, []float64{0, 0, 2, 3}},
		{"Tan", 17, []int64{2}, nil, []*onnxpb.NodeProto{node("Tan", []string{"x"}, []string{"y"})}, []float64{0, math.Tan(1)}},
		{"Mish", 17, []int64{2}, nil, []*onnxpb.NodeProto{node("Mish", []string{"x"}, []string{"y"})}, []float64{0, math.Tanh(math.Log1p(math.E))}},
		{"IsNaN and IsInf of x/0", 17, []int64{3}, []*onnxpb.TensorProto{f32s("z", nil, 0), f32s("one", nil, 1), f32s("two", nil, 2)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "one"}, []string{"s"}), node("Div", []string{"s", "z"}, []string{"q"}), // -inf, nan, inf
				node("IsNaN", []string{"q"}, []string{"n"}), node("IsInf", []string{"q"}, []string{"i"}, aInt("detect_negative", 0)),
				node("Where", []string{"n", "one", "z"}, []string{"a"}), node("Where", []string{"i", "two", "z"}, []string{"b"}), node("Add", []string{"a", "b"}, []string{"y"})},
			[]float64{0, 1, 2}},
		{"Sum and Mean", 17, []int64{2}, []*onnxpb.TensorProto{f32s("a", nil, 1), f32s("b", []int64{2}, 10, 20)},
			[]*onnxpb.NodeProto{node("Sum", []string{"x", "a", "b"}, []string{"s"}), node("Mean", []string{"s", "x", "a"}, []string{"y"})},
			// s = 11, 22; mean of (11, 0, 1) and (22, 1, 1).
			[]float64{4, 8}},
		{"ReduceSumSquare and ReduceLogSum", 18, []int64{2, 2}, []*onnxpb.TensorProto{i64s("ax", 1)},
			[]*onnxpb.NodeProto{node("ReduceSumSquare", []string{"x", "ax"}, []string{"q"}, aInt("keepdims", 0)), node("ReduceLogSum", []string{"q"}, []string{"y"})},
			[]float64{math.Log(1 + 13)}},
		{"GlobalMaxPool", 17, []int64{1, 2, 2}, nil, []*onnxpb.NodeProto{node("GlobalMaxPool", []string{"x"}, []string{"y"})}, []float64{1, 3}},
		{"SpaceToDepth", 17, []int64{1, 1, 2, 2}, nil, []*onnxpb.NodeProto{node("SpaceToDepth", []string{"x"}, []string{"y"}, aInt("blocksize", 2))}, []float64{0, 1, 2, 3}},
		{"DepthToSpace DCR", 17, []int64{1, 4, 1, 1}, nil, []*onnxpb.NodeProto{node("DepthToSpace", []string{"x"}, []string{"y"}, aInt("blocksize", 2))}, []float64{0, 1, 2, 3}},
		{"Tile", 17, []int64{2}, []*onnxpb.TensorProto{i64s("r", 3)}, []*onnxpb.NodeProto{node("Tile", []string{"x", "r"}, []string{"y"})}, []float64{0, 1, 0, 1, 0, 1}},
		{"Mod fmod 0", 17, []int64{4}, []*onnxpb.TensorProto{f32s("two", nil, 2), f32s("m", nil, -3)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "two"}, []string{"d"}), node("Mod", []string{"d", "m"}, []string{"y"})},
			// -2, -1, 0, 1 mod -3 with the divisor's sign.
			[]float64{-2, -1, 0, -2}},
		{"PRelu broadcast slope", 17, []int64{2, 2}, []*onnxpb.TensorProto{f32s("two", nil, 2), f32s("s", []int64{2}, 0.5, 0.25)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "two"}, []string{"d"}), node("PRelu", []string{"d", "s"}, []string{"y"})},
			[]float64{-1, -0.25, 0, 1}},
		{"Resize nearest defaults (half_pixel, round_prefer_floor)", 17, []int64{1, 4}, []*onnxpb.TensorProto{f32s("sc", []int64{2}, 1, 2)},
			[]*onnxpb.NodeProto{node("Resize", []string{"x", "", "sc"}, []string{"y"})}, []float64{0, 0, 1, 1, 2, 2, 3, 3}},
		{"Resize linear down to a size, align_corners", 17, []int64{1, 5}, []*onnxpb.TensorProto{i64s("sz", 1, 3)},
			[]*onnxpb.NodeProto{node("Resize", []string{"x", "", "", "sz"}, []string{"y"}, aString("mode", "linear"), aString("coordinate_transformation_mode", "align_corners"))},
			[]float64{0, 2, 4}},
		{"Upsample (opset 9) nearest", 9, []int64{2, 1}, []*onnxpb.TensorProto{f32s("sc", []int64{2}, 1, 3)},
			[]*onnxpb.NodeProto{node("Upsample", []string{"x", "sc"}, []string{"y"})}, []float64{0, 0, 0, 1, 1, 1}},
		{"Sinh and Cosh", 17, []int64{2}, nil, []*onnxpb.NodeProto{node("Sinh", []string{"x"}, []string{"s"}), node("Cosh", []string{"x"}, []string{"c"}), node("Add", []string{"s", "c"}, []string{"y"})},
			[]float64{1, math.E}},
		{"LpNormalization p=1", 17, []int64{2, 2}, nil, []*onnxpb.NodeProto{node("LpNormalization", []string{"x"}, []string{"y"}, aInt("p", 1))}, []float64{0, 1, 0.4, 0.6}},
		{"MeanVarianceNormalization", 17, []int64{1, 1, 1, 2}, nil, []*onnxpb.NodeProto{node("MeanVarianceNormalization", []string{"x"}, []string{"y"})}, []float64{-1, 1}},
		{"Hardmax axis 0", 17, []int64{2, 2}, []*onnxpb.TensorProto{f32s("k", []int64{2, 2}, 5, 0, 0, 0)},
			[]*onnxpb.NodeProto{node("Add", []string{"x", "k"}, []string{"h"}), node("Hardmax", []string{"h"}, []string{"y"}, aInt("axis", 0))},
			// h = [[5,1],[2,3]]: column maxima at rows 0 and 1.
			[]float64{1, 0, 0, 1}},
		{"OneHot axis 0 with values", 17, []int64{2}, []*onnxpb.TensorProto{i64s("d", 3), f32s("v", []int64{2}, -1, 5)},
			[]*onnxpb.NodeProto{node("OneHot", []string{"x", "d", "v"}, []string{"y"}, aInt("axis", 0))},
			// indices 0, 1 (cast from x): [3, 2] with the class first.
			[]float64{5, -1, -1, 5, -1, -1}},
		{"ScatterElements none", 17, []int64{2, 3}, []*onnxpb.TensorProto{{Name: proto.String("i"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{1, 2}, Int64Data: []int64{2, -3}},
			f32s("u", []int64{1, 2}, 10, 20)},
			[]*onnxpb.NodeProto{node("ScatterElements", []string{"x", "i", "u"}, []string{"y"}, aInt("axis", 1))}, []float64{20, 1, 10, 3, 4, 5}},
		{"ScatterElements add", 17, []int64{2, 2}, []*onnxpb.TensorProto{{Name: proto.String("i"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{2, 1}, Int64Data: []int64{1, 1}},
			f32s("u", []int64{2, 1}, 10, 20)},
			[]*onnxpb.NodeProto{node("ScatterElements", []string{"x", "i", "u"}, []string{"y"}, aInt("axis", 0), aString("reduction", "add"))}, []float64{0, 1, 32, 3}},
		{"Size and Xor", 17, []int64{2, 3}, []*onnxpb.TensorProto{f32s("t", nil, 2.5)},
			[]*onnxpb.NodeProto{node("Size", []string{"x"}, []string{"n"}), node("Cast", []string{"n"}, []string{"nf"}, aTo(onnxpb.TensorProto_FLOAT)),
				node("Greater", []string{"x", "t"}, []string{"a"}), node("Less", []string{"x", "nf"}, []string{"b"}), node("Xor", []string{"a", "b"}, []string{"y"})},
			// a: x > 2.5; b: x < 6 (all true): xor is x <= 2.5.
			[]float64{1, 1, 1, 0, 0, 0}},
		// ONNX divides by the unrounded resized length 5*0.5 = 2.5 (2
		// outputs): src 0 and 4/1.5.
		{"Resize align_corners by a scale", 17, []int64{1, 5}, []*onnxpb.TensorProto{f32s("sc", []int64{2}, 1, 0.5)},
			[]*onnxpb.NodeProto{node("Resize", []string{"x", "", "sc"}, []string{"y"}, aString("mode", "linear"), aString("coordinate_transformation_mode", "align_corners"))},
			[]float64{0, 4 / 1.5}},
		{"ConvTranspose auto_pad SAME_UPPER", 17, []int64{1, 1, 2}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 3}, 1, 2, 4)},
			// x = [0, 1], stride 2: full [0, 0, 1, 2, 4]; SAME: 4 long, pads 0 and 1.
			[]*onnxpb.NodeProto{node("ConvTranspose", []string{"x", "w"}, []string{"y"}, aInts("strides", 2), aString("auto_pad", "SAME_UPPER"))}, []float64{0, 0, 1, 2}},
		{"ConvTranspose pads far apart", 17, []int64{1, 1, 2}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 3}, 1, 2, 4)},
			[]*onnxpb.NodeProto{node("ConvTranspose", []string{"x", "w"}, []string{"y"}, aInts("strides", 2), aInts("pads", 0, 2))}, []float64{0, 0, 1}},
		{"ConvTranspose output_shape past the result", 17, []int64{1, 1, 2}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 2}, 1, 2)},
			[]*onnxpb.NodeProto{node("ConvTranspose", []string{"x", "w"}, []string{"y"}, aInts("strides", 2), aInts("output_shape", 5))}, []float64{0, 0, 1, 2, 0}},
		{"OneHot i64 values, negative constant indices", 17, []int64{1}, []*onnxpb.TensorProto{i64s("i", -1, 0), i64s("d", 3), i64s("v", 2, 7)},
			[]*onnxpb.NodeProto{node("OneHot", []string{"i", "d", "v"}, []string{"o"}), node("Cast", []string{"o"}, []string{"f"}, aTo(onnxpb.TensorProto_FLOAT)),
				node("Add", []string{"f", "x"}, []string{"y"})},
			[]float64{2, 2, 7, 7, 2, 2}},
		{"Mod fmod 1", 17, []int64{4}, []*onnxpb.TensorProto{f32s("two", nil, 2), f32s("m", nil, -3)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "two"}, []string{"d"}), node("Mul", []string{"d", "two"}, []string{"e"}), node("Mod", []string{"e", "m"}, []string{"y"}, aInt("fmod", 1))},
			// -4, -2, 0, 2 fmod -3 with the dividend's sign.
			[]float64{-1, -2, 0, 2}},
		{"LayerNormalization Mean output", 17, []int64{2, 2}, nil,
			[]*onnxpb.NodeProto{{Name: proto.String("ln"), OpType: proto.String("LayerNormalization"), Input: []string{"x"}, Output: []string{"n", "y"}}},
			[]float64{0.5, 2.5}},
		{"Gather 2-D constant indices", 17, []int64{3, 2}, []*onnxpb.TensorProto{{Name: proto.String("i"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{2, 2}, Int64Data: []int64{2, -3, 1, 1}}},
			[]*onnxpb.NodeProto{node("Gather", []string{"x", "i"}, []string{"y"})}, []float64{4, 5, 0, 1, 2, 3, 2, 3}},
		{"MaxPool 1-D ceil_mode", 17, []int64{1, 1, 5}, nil,
			[]*onnxpb.NodeProto{node("MaxPool", []string{"x"}, []string{"y"}, aInts("kernel_shape", 2), aInts("strides", 2), aInt("ceil_mode", 1))}, []float64{1, 3, 4}},
		{"AveragePool 1-D SAME_UPPER without the pads in the divisor", 17, []int64{1, 1, 4}, nil,
			[]*onnxpb.NodeProto{node("AveragePool", []string{"x"}, []string{"y"}, aInts("kernel_shape", 2), aString("auto_pad", "SAME_UPPER"))}, []float64{0.5, 1.5, 2.5, 3}},
		{"AveragePool pads wider than half the kernel, counted", 17, []int64{1, 1, 1, 2}, nil,
			[]*onnxpb.NodeProto{node("AveragePool", []string{"x"}, []string{"y"}, aInts("kernel_shape", 1, 2), aInts("pads", 0, 2, 0, 0), aInt("count_include_pad", 1))},
			[]float64{0, 0, 0.5}},
		{"Conv SAME_LOWER", 17, []int64{1, 1, 1, 3}, []*onnxpb.TensorProto{f32s("w", []int64{1, 1, 1, 2}, 1, 1)},
			[]*onnxpb.NodeProto{node("Conv", []string{"x", "w"}, []string{"y"}, aString("auto_pad", "SAME_LOWER"))}, []float64{0, 1, 3}},
		{"Asinh, Acosh and Atanh", 17, []int64{1}, []*onnxpb.TensorProto{f32s("a", nil, 0.5), f32s("b", nil, 2)},
			[]*onnxpb.NodeProto{node("Add", []string{"x", "a"}, []string{"h"}), node("Add", []string{"x", "b"}, []string{"c"}),
				node("Asinh", []string{"h"}, []string{"s"}), node("Acosh", []string{"c"}, []string{"o"}), node("Atanh", []string{"h"}, []string{"t"}),
				node("Concat", []string{"s", "o", "t"}, []string{"y"}, aInt("axis", 0))},
			[]float64{math.Asinh(0.5), math.Acosh(2), math.Atanh(0.5)}},
		{"Einsum diagonal", 17, []int64{3, 3}, nil, []*onnxpb.NodeProto{node("Einsum", []string{"x"}, []string{"y"}, aString("equation", "ii->i"))}, []float64{0, 4, 8}},
		{"Einsum trace, implicit output", 17, []int64{3, 3}, nil, []*onnxpb.NodeProto{node("Einsum", []string{"x"}, []string{"y"}, aString("equation", "ii"))}, []float64{12}},
		{"ArgMax select_last_index", 17, []int64{1, 4}, []*onnxpb.TensorProto{f32s("k", []int64{4}, 5, 0, 4, 2), f32s("lo", nil, 0), f32s("hi", nil, 5)},
			// x + k = [5, 1, 6, 5], clipped to [5, 1, 5, 5]: the last 5 is at 3.
			[]*onnxpb.NodeProto{node("Add", []string{"x", "k"}, []string{"h"}), node("Clip", []string{"h", "lo", "hi"}, []string{"c"}),
				node("ArgMax", []string{"c"}, []string{"y"}, aInt("axis", 1), aInt("select_last_index", 1))},
			[]float64{3}},
		{"Pow of an integer base", 17, []int64{3}, []*onnxpb.TensorProto{i64s("b", 2, 3, 4), i64s("e", 3)},
			[]*onnxpb.NodeProto{node("Pow", []string{"b", "e"}, []string{"p"}), node("Cast", []string{"p"}, []string{"f"}, aTo(onnxpb.TensorProto_FLOAT)),
				node("Add", []string{"f", "x"}, []string{"y"})},
			[]float64{8, 28, 66}},
		{"GatherND computed indices", 17, []int64{2, 2}, []*onnxpb.TensorProto{f32s("t", []int64{2, 2, 2}, 1, 2, 3, 4, 5, 6, 7, 8), f32s("h", nil, 0.5)},
			// i = trunc(x/2) = [[0,0],[1,1]]: t[0][0], t[1][1].
			[]*onnxpb.NodeProto{node("Mul", []string{"x", "h"}, []string{"m"}), node("Cast", []string{"m"}, []string{"i"}, aTo(onnxpb.TensorProto_INT64)),
				node("GatherND", []string{"t", "i"}, []string{"y"})},
			[]float64{1, 2, 7, 8}},
		{"GatherND batch_dims 1, constant indices", 17, []int64{2, 3}, []*onnxpb.TensorProto{{Name: proto.String("i"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{2, 1}, Int64Data: []int64{2, -3}}},
			[]*onnxpb.NodeProto{node("GatherND", []string{"x", "i"}, []string{"y"}, aInt("batch_dims", 1))}, []float64{2, 3}},
		{"ScatterND none", 17, []int64{3, 2}, []*onnxpb.TensorProto{{Name: proto.String("i"), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{1, 1}, Int64Data: []int64{1}},
			f32s("u", []int64{1, 2}, 10, 20)},
			[]*onnxpb.NodeProto{node("ScatterND", []string{"x", "i", "u"}, []string{"y"})}, []float64{0, 1, 10, 20, 4, 5}},
		{"EyeLike k=1", 17, []int64{2, 3}, nil, []*onnxpb.NodeProto{node("EyeLike", []string{"x"}, []string{"e"}, aInt("k", 1)), node("Add", []string{"x", "e"}, []string{"y"})},
			[]float64{0, 2, 2, 3, 4, 6}},
		{"Compress along axis 1", 17, []int64{2, 3}, []*onnxpb.TensorProto{{Name: proto.String("c"), DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)), Dims: []int64{3}, Int32Data: []int32{1, 0, 1}}},
			[]*onnxpb.NodeProto{node("Compress", []string{"x", "c"}, []string{"y"}, aInt("axis", 1))}, []float64{0, 2, 3, 5}},
		{"LRN size 3", 17, []int64{1, 2, 1}, nil, []*onnxpb.NodeProto{node("LRN", []string{"x"}, []string{"y"}, aInt("size", 3), aFloat("alpha", 3), aFloat("beta", 1))},
			// channel window sums of squares: 1 for both; y = x / (1 + 1).
			[]float64{0, 0.5}},
		{"Shrink", 17, []int64{4}, []*onnxpb.TensorProto{f32s("two", nil, 2)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "two"}, []string{"d"}), node("Shrink", []string{"d"}, []string{"y"}, aFloat("lambd", 1.5), aFloat("bias", 1))},
			[]float64{-1, 0, 0, 0}},
		{"Neg folds a constant shape", 17, []int64{2}, []*onnxpb.TensorProto{i64s("m", -2)},
			[]*onnxpb.NodeProto{node("Neg", []string{"m"}, []string{"s"}), node("ConstantOfShape", []string{"s"}, []string{"z"}), node("Add", []string{"x", "z"}, []string{"y"})},
			[]float64{0, 1}},
		{"Einsum broadcasts a dim of 1", 17, []int64{1, 3}, []*onnxpb.TensorProto{f32s("b", []int64{2, 3}, 1, 1, 1, 2, 2, 2)},
			[]*onnxpb.NodeProto{node("Einsum", []string{"x", "b"}, []string{"y"}, aString("equation", "ij,ij->ij"))}, []float64{0, 1, 2, 0, 2, 4}},
		{"Trilu upper default", 17, []int64{3, 3}, nil,
			[]*onnxpb.NodeProto{node("Trilu", []string{"x"}, []string{"y"})}, []float64{0, 1, 2, 0, 4, 5, 0, 0, 8}},
		{"Trilu lower with k", 17, []int64{3, 3}, []*onnxpb.TensorProto{scalarI64("k", -1)},
			[]*onnxpb.NodeProto{node("Trilu", []string{"x", "k"}, []string{"y"}, aInt("upper", 0))}, []float64{0, 0, 0, 3, 0, 0, 6, 7, 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, y := forward(t, tc.opset, tc.xs, tc.inits, tc.nodes...)
			near(t, y, tc.want)
		})
	}
}

// TestCastFoldsLikeTheKernel checks that a Cast folded at import gives the
// cast op's results: NaN to 0, saturation, truncation.
func TestCastFoldsLikeTheKernel(t *testing.T) {
	c := &tensor{dt: ir.F32, shape: []int{5}, f: []float64{-2.7, 3e10, -3e10, 2.9, 0}}
	c.f[4] = c.f[4] / c.f[4] // NaN
	got := castConst(c, ir.I32)
	want := []int64{-2, 2147483647, -2147483648, 2, 0}
	for k, w := range want {
		if got.i[k] != w {
			t.Errorf("element %d = %d, want %d", k, got.i[k], w)
		}
	}
}

// TestEinsumRefusals checks that the einsum forms import does not lower
// are refused with one line naming the equation and the reason.
func TestEinsumRefusals(t *testing.T) {
	for _, tc := range []struct{ eq, want string }{
		{"ii,jk->i", `equation "ii,jk->i": letter i has sizes 2 and 3`},
		{"ij,ij->ij", `equation "ij,ij->ij": letter i has sizes 2 and 3`},
		{"ij,jk->iz", `equation "ij,jk->iz": output letter z is repeated or in no input`},
		{"ijk,jk->i", `term "ijk" has 3 letters for input 0 of rank 2`},
		{"ij->ji", `node "e" (Einsum): equation "ij->ji" names 1 operands, the node has 2 inputs`},
	} {
		w := wTensor()
		w.RawData = wRaw()
		data := tinyModel(w, func(m *onnxpb.ModelProto) {
			m.Graph.Node = []*onnxpb.NodeProto{{Name: proto.String("e"), OpType: proto.String("Einsum"), Input: []string{"x", "w"}, Output: []string{"y"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("equation"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte(tc.eq)}}}}
		})
		_, err := Decode(data, "")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.eq, err, tc.want)
		}
	}
}
