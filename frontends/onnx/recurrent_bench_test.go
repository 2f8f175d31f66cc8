package onnx

import (
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

// longLSTM returns a bidirectional LSTM node over T steps (batch 8, input
// 64, hidden 128) whose Y is reduced to a scalar output, the loss.
func longLSTM(T int) []byte {
	const B, I, H = 8, 64, 128
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	w := func(name string, dims ...int64) *onnxpb.TensorProto {
		n := int64(4)
		for _, d := range dims {
			n *= d
		}
		return &onnxpb.TensorProto{Name: proto.String(name), DataType: &f32, Dims: dims, RawData: make([]byte, n)}
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("lstm"),
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{dim(int64(T)), dim(B), dim(I)}}}}}}},
		Initializer: []*onnxpb.TensorProto{w("W", 2, 4*H, I), w("R", 2, 4*H, H), w("B", 2, 8*H)},
		Node: []*onnxpb.NodeProto{
			{OpType: proto.String("LSTM"), Input: []string{"x", "W", "R", "B"}, Output: []string{"Y"}, Attribute: []*onnxpb.AttributeProto{
				{Name: proto.String("hidden_size"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(H)},
				{Name: proto.String("direction"), Type: onnxpb.AttributeProto_STRING.Enum(), S: []byte("bidirectional")}}},
			{OpType: proto.String("ReduceSum"), Input: []string{"Y"}, Output: []string{"loss"}, Attribute: []*onnxpb.AttributeProto{
				{Name: proto.String("keepdims"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(0)}}},
		},
		Output: []*onnxpb.ValueInfoProto{{Name: proto.String("loss")}},
	}
	data, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		panic(err)
	}
	return data
}

// BenchmarkImportLSTM128 unrolls a bidirectional LSTM over 128 steps.
func BenchmarkImportLSTM128(b *testing.B) {
	data := longLSTM(128)
	b.ResetTimer()
	for range b.N {
		m, err := Decode(data, "")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(m.Graph.Values)), "values")
	}
}

// BenchmarkCompileLSTM128 compiles the training plan (gradients, memory
// plan) of the unrolled 128-step bidirectional LSTM.
func BenchmarkCompileLSTM128(b *testing.B) {
	m, err := Decode(longLSTM(128), "")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := kiln.Compile(m.Graph, kiln.Options{Grad: true}); err != nil {
			b.Fatal(err)
		}
	}
}
