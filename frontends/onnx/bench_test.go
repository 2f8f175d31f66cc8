package onnx

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

// bigMLP returns an MLP of layers Gemm+Relu layers of width d on input
// [8,d], its weights in raw_data: 4*d*d bytes a layer.
func bigMLP(layers, d int) []byte {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dim := func(v int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: v}}
	}
	g := &onnxpb.GraphProto{
		Name: proto.String("big"),
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("h0"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{dim(8), dim(int64(d))}}}}}}},
	}
	raw := make([]byte, 4*d*d)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	prev := "h0"
	for l := range layers {
		w, b, z, h := "w"+strconv.Itoa(l), "b"+strconv.Itoa(l), "z"+strconv.Itoa(l), "h"+strconv.Itoa(l+1)
		g.Initializer = append(g.Initializer,
			&onnxpb.TensorProto{Name: proto.String(w), DataType: &f32, Dims: []int64{int64(d), int64(d)}, RawData: raw},
			&onnxpb.TensorProto{Name: proto.String(b), DataType: &f32, Dims: []int64{int64(d)}, RawData: raw[:4*d]})
		g.Node = append(g.Node,
			&onnxpb.NodeProto{OpType: proto.String("Gemm"), Input: []string{prev, w, b}, Output: []string{z}, Attribute: []*onnxpb.AttributeProto{{Name: proto.String("transB"), Type: onnxpb.AttributeProto_INT.Enum(), I: proto.Int64(1)}}},
			&onnxpb.NodeProto{OpType: proto.String("Relu"), Input: []string{z}, Output: []string{h}})
		prev = h
	}
	g.Output = []*onnxpb.ValueInfoProto{{Name: proto.String(prev)}}
	data, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		panic(err)
	}
	return data
}

// BenchmarkImport100MB imports a 100 MB model (six 2048x2048 f32 layers)
// from a file.
func BenchmarkImport100MB(b *testing.B) {
	path := filepath.Join(b.TempDir(), "big.onnx")
	if err := os.WriteFile(path, bigMLP(6, 2048), 0o644); err != nil {
		b.Fatal(err)
	}
	fi, _ := os.Stat(path)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for range b.N {
		m, err := Import(path)
		if err != nil {
			b.Fatal(err)
		}
		if len(m.Params) != 12 {
			b.Fatalf("%d params, want 12", len(m.Params))
		}
	}
}
