package onnx

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"google.golang.org/protobuf/proto"
)

func node(op string, in []string, out []string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
	return &onnxpb.NodeProto{Name: proto.String(op + "_" + out[0]), OpType: proto.String(op), Input: in, Output: out, Attribute: attrs}
}

func aInt(name string, v int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
}

func aFloat(name string, v float32) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_FLOAT.Enum(), F: proto.Float32(v)}
}

func aInts(name string, v ...int64) *onnxpb.AttributeProto {
	return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INTS.Enum(), Ints: v}
}

func i64s(name string, v ...int64) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{int64(len(v))}, Int64Data: v}
}

func f32s(name string, dims []int64, v ...float32) *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Dims: dims, FloatData: v}
}

func boolScalar(name string, b bool) *onnxpb.TensorProto {
	v := int32(0)
	if b {
		v = 1
	}
	return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_BOOL)), Int32Data: []int32{v}}
}

// forward imports a model with the f32 input x of shape xs, nodes and
// initializers, whose output is y, and runs it on x = 0, 1, 2, ...
func forward(t *testing.T, opset int64, xs []int64, inits []*onnxpb.TensorProto, nodes ...*onnxpb.NodeProto) (*Model, ir.Type, []float64) {
	t.Helper()
	f32 := int32(onnxpb.TensorProto_FLOAT)
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range xs {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
	}
	mp := &onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(opset)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("t"),
			Initializer: inits,
			Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
				TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: shape}}}}},
			Node:   nodes,
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
		},
	}
	data, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(data, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := kiln.Compile(m.Graph, kiln.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	for _, pr := range m.Params {
		if err := x.Set(pr.Name, kernels.Tensor{Type: pr.Type, Data: pr.Data}); err != nil {
			t.Fatal(err)
		}
	}
	in, err := x.Get("x")
	if err != nil {
		t.Fatal(err)
	}
	vals := make([]float64, in.Type.Shape.NumElements())
	for i := range vals {
		vals[i] = float64(i)
	}
	if err := kernels.SetFloat64s(in, vals); err != nil {
		t.Fatal(err)
	}
	if err := x.Step(context.Background()); err != nil {
		t.Fatal(err)
	}
	y, err := x.Get("y")
	if err != nil {
		t.Fatal(err)
	}
	return m, y.Type, kernels.Float64s(y)
}

func near(t *testing.T, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values %v, want %d %v", len(got), got, len(want), want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-5+1e-5*math.Abs(want[i]) {
			t.Fatalf("value %d: got %v, want %v", i, got, want)
		}
	}
}

// TestViewFromShape folds PyTorch's x.view(x.size(0), -1) in its dynamic
// form: Shape, Gather, Unsqueeze, Concat and Reshape.
func TestViewFromShape(t *testing.T) {
	_, typ, y := forward(t, 17, []int64{2, 3, 2},
		[]*onnxpb.TensorProto{i64s("zero", 0), i64s("minus1", -1), i64s("ax0", 0)},
		node("Shape", []string{"x"}, []string{"s"}),
		&onnxpb.NodeProto{Name: proto.String("c0"), OpType: proto.String("Constant"), Output: []string{"i0"},
			Attribute: []*onnxpb.AttributeProto{{Name: proto.String("value"), T: &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Int64Data: []int64{0}}}}},
		node("Gather", []string{"s", "i0"}, []string{"n"}, aInt("axis", 0)),
		node("Unsqueeze", []string{"n", "ax0"}, []string{"n1"}),
		node("Concat", []string{"n1", "minus1"}, []string{"shape"}, aInt("axis", 0)),
		node("Reshape", []string{"x", "shape"}, []string{"y"}))
	if !typ.Equal(ir.TensorOf(ir.F32, 2, 6)) {
		t.Fatalf("type %s, want f32[2,6]", typ)
	}
	near(t, y, []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11})
}

// TestSoftmaxAxisSemantics checks Softmax before opset 13 (over the
// flattened axes from axis on) and from 13 (along axis).
func TestSoftmaxAxisSemantics(t *testing.T) {
	// x = [[[0,1],[2,3]]]: opset 11 axis 1 normalizes over all 4 values.
	_, _, y11 := forward(t, 11, []int64{1, 2, 2}, nil, node("Softmax", []string{"x"}, []string{"y"}, aInt("axis", 1)))
	z := 0.0
	for i := range 4 {
		z += math.Exp(float64(i))
	}
	near(t, y11, []float64{1 / z, math.E / z, math.Exp(2) / z, math.Exp(3) / z})
	// opset 13 axis 1 normalizes each column over axis 1 alone.
	_, _, y13 := forward(t, 13, []int64{1, 2, 2}, nil, node("Softmax", []string{"x"}, []string{"y"}, aInt("axis", 1)))
	a := 1 / (1 + math.Exp(2))
	near(t, y13, []float64{a, a, 1 - a, 1 - a})
}

// TestOpRules checks attribute rules of single ops on x = 0, 1, 2, ...
func TestOpRules(t *testing.T) {
	tests := []struct {
		name  string
		opset int64
		xs    []int64
		inits []*onnxpb.TensorProto
		nodes []*onnxpb.NodeProto
		want  []float64
	}{
		{"Gemm alpha beta transA", 17, []int64{2, 2}, []*onnxpb.TensorProto{f32s("b", []int64{2, 1}, 1, 0), f32s("c", []int64{1}, 10)},
			[]*onnxpb.NodeProto{node("Gemm", []string{"x", "b", "c"}, []string{"y"}, aInt("transA", 1), aFloat("alpha", 2), aFloat("beta", 0.5))},
			// x^T = [[0,2],[1,3]], times [[1],[0]]... b is [2,1] = [[1],[0]]: x^T b = [[0],[1]]; 2*that + 5.
			[]float64{5, 7}},
		{"Transpose default perm", 17, []int64{2, 3}, nil, []*onnxpb.NodeProto{node("Transpose", []string{"x"}, []string{"y"})}, []float64{0, 3, 1, 4, 2, 5}},
		{"Squeeze attr axes (opset 11)", 11, []int64{1, 3}, nil, []*onnxpb.NodeProto{node("Squeeze", []string{"x"}, []string{"y"}, aInts("axes", 0))}, []float64{0, 1, 2}},
		{"Pad constant", 17, []int64{1, 2}, []*onnxpb.TensorProto{i64s("p", 0, 1, 0, 2), f32s("v", nil, 9)},
			[]*onnxpb.NodeProto{node("Pad", []string{"x", "p", "v"}, []string{"y"})}, []float64{9, 0, 1, 9, 9}},
		{"Dropout inference", 17, []int64{3}, []*onnxpb.TensorProto{f32s("r", nil, 0.5), boolScalar("tm", false)},
			[]*onnxpb.NodeProto{node("Dropout", []string{"x", "r", "tm"}, []string{"y", "mask"})}, []float64{0, 1, 2}},
		{"Identity", 17, []int64{2}, nil, []*onnxpb.NodeProto{node("Identity", []string{"x"}, []string{"y"})}, []float64{0, 1}},
		// A comparison of two constants is computed, not folded to zeros.
		{"Greater of constants", 17, []int64{2}, []*onnxpb.TensorProto{i64s("a", 1, 5), i64s("b", 3, 2), f32s("k", nil, 9)},
			[]*onnxpb.NodeProto{node("Greater", []string{"a", "b"}, []string{"g"}), node("Where", []string{"g", "x", "k"}, []string{"y"})},
			[]float64{9, 1}},
		{"BatchNormalization inference", 15, []int64{1, 2, 1}, []*onnxpb.TensorProto{
			f32s("s", []int64{2}, 2, 3), f32s("b", []int64{2}, 1, -1), f32s("m", []int64{2}, 1, 0), f32s("v", []int64{2}, 4, 1)},
			[]*onnxpb.NodeProto{node("BatchNormalization", []string{"x", "s", "b", "m", "v"}, []string{"y"}, aFloat("epsilon", 0))},
			// (0-1)/2*2+1 = 0; (1-0)/1*3-1 = 2.
			[]float64{0, 2}},
		{"ConstantOfShape", 17, []int64{2}, []*onnxpb.TensorProto{i64s("shape", 2)},
			[]*onnxpb.NodeProto{
				node("ConstantOfShape", []string{"shape"}, []string{"z"}, &onnxpb.AttributeProto{Name: proto.String("value"), T: f32s("", []int64{1}, 3)}),
				node("Add", []string{"x", "z"}, []string{"y"})},
			[]float64{3, 4}},
		{"ReduceSum axes attribute (opset 11)", 11, []int64{2, 3}, nil,
			[]*onnxpb.NodeProto{node("ReduceSum", []string{"x"}, []string{"y"}, aInts("axes", 1), aInt("keepdims", 0))}, []float64{3, 12}},
		{"ReduceSum axes input (opset 13)", 13, []int64{2, 3}, []*onnxpb.TensorProto{i64s("ax", -1)},
			[]*onnxpb.NodeProto{node("ReduceSum", []string{"x", "ax"}, []string{"y"})}, []float64{3, 12}},
		{"ReduceMean axes attribute (opset 17)", 17, []int64{2, 3}, nil,
			[]*onnxpb.NodeProto{node("ReduceMean", []string{"x"}, []string{"y"}, aInts("axes", 0), aInt("keepdims", 0))}, []float64{1.5, 2.5, 3.5}},
		{"ReduceMax every axis (opset 18)", 18, []int64{2, 3}, nil, []*onnxpb.NodeProto{node("ReduceMax", []string{"x"}, []string{"y"})}, []float64{5}},
		{"Clip inputs (opset 11)", 11, []int64{5}, []*onnxpb.TensorProto{f32s("lo", nil, 1), f32s("hi", nil, 3)},
			[]*onnxpb.NodeProto{node("Clip", []string{"x", "lo", "hi"}, []string{"y"})}, []float64{1, 1, 2, 3, 3}},
		{"Clip attributes (opset 7)", 7, []int64{5}, nil,
			[]*onnxpb.NodeProto{node("Clip", []string{"x"}, []string{"y"}, aFloat("min", 1))}, []float64{1, 1, 2, 3, 4}},
		{"Pow constant exponent", 17, []int64{4}, []*onnxpb.TensorProto{f32s("e", nil, 2)},
			[]*onnxpb.NodeProto{node("Pow", []string{"x", "e"}, []string{"y"})}, []float64{0, 1, 4, 9}},
		{"Max", 17, []int64{4}, []*onnxpb.TensorProto{f32s("c", nil, 2)},
			[]*onnxpb.NodeProto{node("Max", []string{"x", "c"}, []string{"y"})}, []float64{2, 2, 2, 3}},
		{"LeakyRelu", 17, []int64{4}, []*onnxpb.TensorProto{f32s("two", nil, 2)},
			[]*onnxpb.NodeProto{node("Sub", []string{"x", "two"}, []string{"d"}), node("LeakyRelu", []string{"d"}, []string{"y"}, aFloat("alpha", 0.5))},
			[]float64{-1, -0.5, 0, 1}},
		{"Where Greater", 17, []int64{4}, []*onnxpb.TensorProto{f32s("t", nil, 1.5), f32s("z", nil, 0)},
			[]*onnxpb.NodeProto{node("Greater", []string{"x", "t"}, []string{"c"}), node("Where", []string{"c", "x", "z"}, []string{"y"})},
			[]float64{0, 0, 2, 3}},
		{"Slice inputs (opset 17)", 17, []int64{2, 3}, []*onnxpb.TensorProto{i64s("s", 1), i64s("e", 100), i64s("a", 1)},
			[]*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a"}, []string{"y"})}, []float64{1, 2, 4, 5}},
		{"Slice attributes (opset 9)", 9, []int64{3}, nil,
			[]*onnxpb.NodeProto{node("Slice", []string{"x"}, []string{"y"}, aInts("starts", 0), aInts("ends", -1), aInts("axes", 0))}, []float64{0, 1}},
		{"Slice step", 17, []int64{5}, []*onnxpb.TensorProto{i64s("s", 0), i64s("e", 5), i64s("a", 0), i64s("st", 2)},
			[]*onnxpb.NodeProto{node("Slice", []string{"x", "s", "e", "a", "st"}, []string{"y"})}, []float64{0, 2, 4}},
		{"Expand", 17, []int64{1, 2}, []*onnxpb.TensorProto{i64s("shape", 2, 1)},
			[]*onnxpb.NodeProto{node("Expand", []string{"x", "shape"}, []string{"y"})}, []float64{0, 1, 0, 1}},
		{"Cast of a folded shape", 17, []int64{2}, nil,
			[]*onnxpb.NodeProto{node("Shape", []string{"x"}, []string{"s"}), node("Cast", []string{"s"}, []string{"f"}, aInt("to", int64(onnxpb.TensorProto_FLOAT))),
				node("Add", []string{"x", "f"}, []string{"y"})}, []float64{2, 3}},
		{"Range", 17, []int64{3}, []*onnxpb.TensorProto{i64s("a", 0), i64s("b", 3), i64s("d", 1)},
			[]*onnxpb.NodeProto{node("Range", []string{"a", "b", "d"}, []string{"r"}), node("Cast", []string{"r"}, []string{"f"}, aInt("to", int64(onnxpb.TensorProto_FLOAT))),
				node("Add", []string{"x", "f"}, []string{"y"})}, []float64{0, 2, 4}},
		{"Split sizes input (opset 13)", 13, []int64{3}, []*onnxpb.TensorProto{i64s("sp", 1, 2)},
			[]*onnxpb.NodeProto{node("Split", []string{"x", "sp"}, []string{"a", "y"})}, []float64{1, 2}},
		{"Split equal parts (opset 11)", 11, []int64{4}, nil,
			[]*onnxpb.NodeProto{node("Split", []string{"x"}, []string{"a", "y"})}, []float64{2, 3}},
		{"GlobalAveragePool", 17, []int64{1, 1, 2, 2}, nil, []*onnxpb.NodeProto{node("GlobalAveragePool", []string{"x"}, []string{"y"})}, []float64{1.5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, y := forward(t, tc.opset, tc.xs, tc.inits, tc.nodes...)
			near(t, y, tc.want)
		})
	}
}

// TestBatchNormStatisticsAreNotParams checks that the running statistics
// of the inference form are constants, not params.
func TestBatchNormStatisticsAreNotParams(t *testing.T) {
	m, _, _ := forward(t, 15, []int64{1, 2, 1}, []*onnxpb.TensorProto{
		f32s("s", []int64{2}, 2, 3), f32s("b", []int64{2}, 1, -1), f32s("m", []int64{2}, 1, 0), f32s("v", []int64{2}, 4, 1)},
		node("BatchNormalization", []string{"x", "s", "b", "m", "v"}, []string{"y"}))
	var names []string
	for _, p := range m.Params {
		names = append(names, p.Name)
	}
	if len(names) != 2 || names[0] != "s" || names[1] != "b" {
		t.Errorf("params %v, want [s b]", names)
	}
}

// TestDropoutTraining checks that Dropout in training mode becomes kiln's
// dropout with p = ratio.
func TestDropoutTraining(t *testing.T) {
	m, _, _ := forward(t, 17, []int64{3}, []*onnxpb.TensorProto{f32s("r", nil, 0.25), boolScalar("tm", true)},
		node("Dropout", []string{"x", "r", "tm"}, []string{"y"}))
	ids := m.Graph.IDsOf(ir.OpDropout)
	if len(ids) != 1 {
		t.Fatalf("%d dropout ops, want 1", len(ids))
	}
	if p := m.Graph.Value(ids[0]).Attrs.Float("p", 0); p != 0.25 {
		t.Errorf("dropout p = %g, want 0.25", p)
	}
}

// TestNames checks that ONNX names outside .kir's syntax are mapped to it
// and that names mapping to one get distinct suffixes.
func TestNames(t *testing.T) {
	im := &importer{names: map[string]string{}, g: ir.New("t")}
	for _, tc := range []struct{ in, want string }{
		{"fc1.weight", "fc1.weight"},
		{"/fc1/Gemm_output_0", "_fc1_Gemm_output_0"},
		{"onnx::Gemm_5", "onnx__Gemm_5"},
		{"a:b", "a_b"},
		{"a/b", "a_b_1"},
		{"a:b", "a_b"},
		{"", "v"},
	} {
		if got := im.sanitize(tc.in); got != tc.want {
			t.Errorf("sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestOtherDomainNode checks that a node of another domain is reported as
// unsupported with its domain.
func TestOtherDomainNode(t *testing.T) {
	err := unsupported([]*onnxpb.NodeProto{{Name: proto.String("q"), OpType: proto.String("Relu"), Domain: proto.String("com.microsoft")}})
	if err == nil || err.Error() != `unsupported op com.microsoft.Relu: 1 node(s), the first "q"` {
		t.Errorf("error %v", err)
	}
}

// TestFoldBinary checks the folds of two constants: arithmetic rounded as
// the f32 kernel would, integer division truncating, comparisons exact on
// large integers and false on NaN, and NumPy broadcasting.
func TestFoldBinary(t *testing.T) {
	nan := math.NaN()
	f32 := func(shape []int, v ...float64) *tensor { return &tensor{dt: ir.F32, shape: shape, f: v} }
	i64 := func(shape []int, v ...int64) *tensor { return &tensor{dt: ir.I64, shape: shape, i: v} }
	for _, tc := range []struct {
		name  string
		op    ir.Op
		a, b  *tensor
		shape []int
		f     []float64
		i     []int64
	}{
		{"f32 add rounds", ir.OpAdd, f32([]int{1}, 1), f32([]int{1}, 1e-8), []int{1}, []float64{1}, nil},
		{"broadcast [2,1] by [3]", ir.OpMul, f32([]int{2, 1}, 1, 2), f32([]int{3}, 1, 2, 3), []int{2, 3}, []float64{1, 2, 3, 2, 4, 6}, nil},
		{"i64 div truncates", ir.OpDiv, i64([]int{2}, 7, -7), i64([]int{}, 2), []int{2}, nil, []int64{3, -3}},
		{"i64 equal beyond 2^53", ir.OpEqual, i64([]int{1}, 1<<53+1), i64([]int{1}, 1<<53), []int{1}, nil, []int64{0}},
		{"less broadcast", ir.OpLess, i64([]int{3}, 1, 2, 3), i64([]int{}, 2), []int{3}, nil, []int64{1, 0, 0}},
		{"NaN compares false", ir.OpGreaterEqual, f32([]int{2}, nan, 1), f32([]int{2}, 0, nan), []int{2}, nil, []int64{0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := foldBinary(tc.op, tc.a, tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.shape, tc.shape) || !slices.Equal(got.f, tc.f) || !slices.Equal(got.i, tc.i) {
				t.Errorf("got shape %v, floats %v, ints %v; want %v, %v, %v", got.shape, got.f, got.i, tc.shape, tc.f, tc.i)
			}
		})
	}
	if _, err := foldBinary(ir.OpAdd, f32([]int{2}, 1, 2), f32([]int{3}, 1, 2, 3)); err == nil || !strings.Contains(err.Error(), "do not broadcast") {
		t.Errorf("shapes [2] and [3]: error %v, want one saying they do not broadcast", err)
	}
}
