package gpu_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
)

// TestImportedCausalMaskMatchesCPU imports an ONNX model that builds a
// causal mask from positions, as exported transformers do (Range,
// Unsqueeze, an i64 comparison, Where over i64, Cast), masks scores with it
// and takes their softmax, and runs it with -device gpu: the outputs equal
// the CPU's within the kernel tolerance (rtol 1e-4, atol 1e-6).
func TestImportedCausalMaskMatchesCPU(t *testing.T) {
	needGPU(t)
	i64 := func(name string, v ...int64) *onnxpb.TensorProto {
		return &onnxpb.TensorProto{Name: proto.String(name), DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{int64(len(v))}, Int64Data: v}
	}
	node := func(op string, in []string, out string, attrs ...*onnxpb.AttributeProto) *onnxpb.NodeProto {
		return &onnxpb.NodeProto{Name: proto.String(out), OpType: proto.String(op), Input: in, Output: []string{out}, Attribute: attrs}
	}
	attr := func(name string, v int64) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(v)}
	}
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dim := func(d int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}}
	}
	mp := &onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name: proto.String("mask"),
			Initializer: []*onnxpb.TensorProto{i64("zero", 0), i64("n", 37), i64("one", 1), i64("ax0", 0), i64("ax1", 1), i64("far", -1000),
				{Name: proto.String("ninf"), DataType: &f32, FloatData: []float32{-1e9}}},
			Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
				TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{dim(3), dim(37), dim(37)}}}}}}},
			Node: []*onnxpb.NodeProto{
				node("Range", []string{"zero", "n", "one"}, "pos"),
				node("Unsqueeze", []string{"pos", "ax0"}, "row"),
				node("Unsqueeze", []string{"pos", "ax1"}, "col"),
				node("LessOrEqual", []string{"row", "col"}, "keep"),
				node("Where", []string{"keep", "row", "far"}, "bias"),
				node("Cast", []string{"bias"}, "biasf", attr("to", int64(onnxpb.TensorProto_FLOAT))),
				node("Where", []string{"keep", "x", "ninf"}, "masked"),
				node("Add", []string{"masked", "biasf"}, "s"),
				node("Softmax", []string{"s"}, "y", attr("axis", -1)),
				node("Greater", []string{"x", "ninf"}, "pos_x"),
				node("Cast", []string{"pos_x"}, "z", attr("to", int64(onnxpb.TensorProto_INT32))),
			},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}, {Name: proto.String("z")}, {Name: proto.String("keep")}},
		},
	}
	data, err := proto.Marshal(mp)
	if err != nil {
		t.Fatal(err)
	}
	m, err := onnx.Decode(data, "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := kiln.Compile(m.Graph, kiln.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, got := runBoth(t, p, 5, 0)
	if len(want) != 3 {
		t.Fatalf("%d outputs, want 3", len(want))
	}
	for name := range want {
		compare(t, name, got[name], want[name], rtol, atolEw)
	}
}
