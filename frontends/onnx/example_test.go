package onnx_test

import (
	"context"
	"fmt"
	"log"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"google.golang.org/protobuf/proto"
)

// Import an MLP exported from PyTorch with its loss inside the forward,
// set its params to the ONNX initializers and take one gradient.
func ExampleImport() {
	m, err := onnx.Import("../../tests/testdata/onnx/mlp.onnx")
	if err != nil {
		log.Fatal(err)
	}
	p, err := kiln.Compile(m.Graph, kiln.Options{Grad: true})
	if err != nil {
		log.Fatal(err)
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer x.Close()
	inputs, _, err := safetensors.ReadFile("../../tests/testdata/onnx/mlp.inputs.safetensors")
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range append(m.Params, inputs...) {
		if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
			log.Fatal(err)
		}
	}
	if err := x.Step(context.Background()); err != nil {
		log.Fatal(err)
	}
	for _, t := range m.Params {
		fmt.Println("param", t.Name, t.Type)
	}
	loss, _ := x.Get("loss")
	fmt.Printf("loss %.4f\n", kernels.Float64s(loss)[0])
	// Output:
	// param fc1.weight f32[32,64]
	// param fc1.bias f32[32]
	// param fc2.weight f32[10,32]
	// param fc2.bias f32[10]
	// loss 2.2896
}

// Import a model that takes a Reshape's target shape as a graph input,
// giving that input a value known at import, and evaluate it.
func ExampleOptions_Decode() {
	f32, i64 := int32(onnxpb.TensorProto_FLOAT), int32(onnxpb.TensorProto_INT64)
	input := func(name string, dt int32, dims ...int64) *onnxpb.ValueInfoProto {
		s := &onnxpb.TensorShapeProto{}
		for _, d := range dims {
			s.Dim = append(s.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}})
		}
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &dt, Shape: s}}}}
	}
	data, err := proto.Marshal(&onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:   proto.String("reshape"),
			Input:  []*onnxpb.ValueInfoProto{input("x", f32, 2, 3), input("shape", i64, 2)},
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Reshape"), Input: []string{"x", "shape"}, Output: []string{"y"}}},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	shape, _ := safetensors.FromFloat64("shape", ir.I64, ir.Shape{2}, []float64{3, 2})
	m, err := onnx.Options{Constants: map[string]safetensors.Tensor{"shape": shape}}.Decode(data, "")
	if err != nil {
		log.Fatal(err)
	}
	x, _ := safetensors.FromFloat64("x", ir.F32, ir.Shape{2, 3}, []float64{1, 2, 3, 4, 5, 6})
	out, err := kiln.Eval(context.Background(), m.Graph, []safetensors.Tensor{x}, kiln.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(out[0].Name, out[0].Type, out[0].Float64s())
	// Output:
	// y f32[3,2] [1 2 3 4 5 6]
}
