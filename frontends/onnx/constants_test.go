package onnx

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// TestConstants checks Options.Constants: a graph input given a value is
// folded (the Reshape's shape input), and a value of another type or for a
// name that is no graph input is refused on one line.
func TestConstants(t *testing.T) {
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
			Node:   []*onnxpb.NodeProto{node("Reshape", []string{"x", "shape"}, []string{"y"})},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tensor := func(name string, dt ir.DType, v ...float64) safetensors.Tensor {
		ts, err := safetensors.FromFloat64(name, dt, ir.Shape{len(v)}, v)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	if _, err := Decode(data, ""); err == nil || !strings.Contains(err.Error(), `input 1 ("shape") must be a constant known at import`) {
		t.Errorf("without the constant: %v", err)
	}
	m, err := Options{Constants: map[string]safetensors.Tensor{"shape": tensor("shape", ir.I64, 3, 2)}}.Decode(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if ins := m.Graph.Inputs(); len(ins) != 1 || m.Graph.Value(ins[0]).Name != "x" {
		t.Errorf("inputs %v, want x alone", ins)
	}
	if y := m.Graph.Outputs[0]; !m.Graph.Type(y).Equal(ir.TensorOf(ir.F32, 3, 2)) {
		t.Errorf("y is %s, want f32[3,2]", m.Graph.Type(y))
	}
	for _, tc := range []struct {
		name string
		c    map[string]safetensors.Tensor
		want string
	}{
		{"another dtype", map[string]safetensors.Tensor{"shape": tensor("shape", ir.I32, 3, 2)}, `input "shape": the constant given is i32[2], the model's input i64[2]`},
		{"another shape", map[string]safetensors.Tensor{"shape": tensor("shape", ir.I64, 3, 2, 1)}, `input "shape": the shape given has 3 at dim 0, the model states 2`},
		{"not an input", map[string]safetensors.Tensor{"shape": tensor("shape", ir.I64, 3, 2), "nope": tensor("nope", ir.I64, 1)}, `a constant is given for "nope", which is not a graph input`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Options{Constants: tc.c}.Decode(data, "")
			if err == nil || err.Error() != tc.want {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
