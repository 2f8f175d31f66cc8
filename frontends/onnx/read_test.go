package onnx

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// tinyModel is y = x @ w with x f32[2,3] an input and w f32[3,2] the
// initializer init; edit changes the model before it is serialized.
func tinyModel(init *onnxpb.TensorProto, edit func(*onnxpb.ModelProto)) []byte {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	dim := func(d int64) *onnxpb.TensorShapeProto_Dimension {
		return &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: d}}
	}
	m := &onnxpb.ModelProto{
		IrVersion:   proto.Int64(8),
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Domain: proto.String(""), Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("tiny"),
			Initializer: []*onnxpb.TensorProto{init},
			Input: []*onnxpb.ValueInfoProto{{
				Name: proto.String("x"),
				Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{TensorType: &onnxpb.TypeProto_Tensor{
					ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{dim(2), dim(3)}}}}},
			}},
			Node:   []*onnxpb.NodeProto{{Name: proto.String("mm"), OpType: proto.String("MatMul"), Input: []string{"x", "w"}, Output: []string{"y"}}},
			Output: []*onnxpb.ValueInfoProto{{Name: proto.String("y")}},
		},
	}
	if edit != nil {
		edit(m)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

var wValues = []float32{1, -2, 3.5, 4, 0.25, -6}

func wTensor() *onnxpb.TensorProto {
	return &onnxpb.TensorProto{Name: proto.String("w"), DataType: proto.Int32(int32(onnxpb.TensorProto_FLOAT)), Dims: []int64{3, 2}}
}

func wRaw() []byte {
	b := make([]byte, 4*len(wValues))
	for i, v := range wValues {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// TestInitializerForms reads one initializer stored as float_data, as
// raw_data and in an external data file, and checks its values.
func TestInitializerForms(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w.bin"), append([]byte("pad!"), wRaw()...), 0o644); err != nil {
		t.Fatal(err)
	}
	typed := wTensor()
	typed.FloatData = wValues
	raw := wTensor()
	raw.RawData = wRaw()
	ext := wTensor()
	ext.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
	ext.ExternalData = []*onnxpb.StringStringEntryProto{
		{Key: proto.String("location"), Value: proto.String("w.bin")},
		{Key: proto.String("offset"), Value: proto.String("4")},
		{Key: proto.String("length"), Value: proto.String("24")},
	}
	for _, tc := range []struct {
		name string
		init *onnxpb.TensorProto
	}{{"float_data", typed}, {"raw_data", raw}, {"external", ext}} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".onnx")
			if err := os.WriteFile(path, tinyModel(tc.init, nil), 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := Import(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Params) != 1 || m.Params[0].Name != "w" || !m.Params[0].Type.Equal(ir.TensorOf(ir.F32, 3, 2)) {
				t.Fatalf("params %+v, want w f32[3,2]", m.Params)
			}
			if string(m.Params[0].Data) != string(wRaw()) {
				t.Errorf("w's bytes %v, want %v", m.Params[0].Data, wRaw())
			}
			if len(m.Graph.Inputs()) != 1 || m.Graph.NameOf(m.Graph.Inputs()[0]) != "%x" {
				t.Errorf("inputs %v, want x", m.Graph.Inputs())
			}
		})
	}
}

// TestBadModels checks that each damaged model gets one line naming the
// file and what is wrong.
func TestBadModels(t *testing.T) {
	dir := t.TempDir()
	raw := func() *onnxpb.TensorProto { w := wTensor(); w.RawData = wRaw(); return w }
	good := tinyModel(raw(), nil)
	ext := func(loc string) *onnxpb.TensorProto {
		w := wTensor()
		w.DataLocation = onnxpb.TensorProto_EXTERNAL.Enum()
		w.ExternalData = []*onnxpb.StringStringEntryProto{{Key: proto.String("location"), Value: proto.String(loc)}}
		return w
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"truncated", good[:len(good)-7], "not an ONNX model"},
		{"unknown domain", tinyModel(raw(), func(m *onnxpb.ModelProto) {
			m.OpsetImport = append(m.OpsetImport, &onnxpb.OperatorSetIdProto{Domain: proto.String("com.example"), Version: proto.Int64(1)})
		}), `opset domain "com.example" is not supported`},
		{"newer opset", tinyModel(raw(), func(m *onnxpb.ModelProto) { m.OpsetImport[0].Version = proto.Int64(22) }), "opset 22 is not supported"},
		{"missing initializer", tinyModel(raw(), func(m *onnxpb.ModelProto) { m.Graph.Initializer = nil }), `input "w" is neither a graph input, an initializer nor an earlier node's output`},
		{"absurd size", tinyModel(func() *onnxpb.TensorProto { w := raw(); w.Dims = []int64{1 << 30, 1 << 30, 1 << 30}; return w }(), nil), `initializer "w": shape [1073741824,1073741824,1073741824] has 1.24e+27 elements; the limit is 2^40`},
		{"short raw_data", tinyModel(func() *onnxpb.TensorProto { w := raw(); w.RawData = w.RawData[:5]; return w }(), nil), "expected 24 bytes of data for f32[3,2], found 5"},
		{"unsupported dtype", tinyModel(func() *onnxpb.TensorProto {
			w := raw()
			w.DataType = proto.Int32(int32(onnxpb.TensorProto_FLOAT16))
			return w
		}(), nil), "dtype FLOAT16 is not supported"},
		{"external outside", tinyModel(ext("../secret.bin"), nil), `external data location "../secret.bin" leaves the model's folder`},
		{"external absolute", tinyModel(ext("/etc/passwd"), nil), `leaves the model's folder`},
		{"external missing", tinyModel(ext("none.bin"), nil), "none.bin"},
		{"unsupported ops", tinyModel(raw(), func(m *onnxpb.ModelProto) {
			for i := range 3 {
				m.Graph.Node = append(m.Graph.Node, &onnxpb.NodeProto{Name: proto.String("l" + string(rune('0'+i))), OpType: proto.String("Loop")})
			}
			m.Graph.Node = append(m.Graph.Node, &onnxpb.NodeProto{Name: proto.String("e"), OpType: proto.String("NonMaxSuppression")})
		}), "unsupported op Loop: 3 node(s), the first \"l0\"\nunsupported op NonMaxSuppression: 1 node(s), the first \"e\""},
		{"constant without a tensor", tinyModel(raw(), func(m *onnxpb.ModelProto) {
			m.Graph.Node = append([]*onnxpb.NodeProto{{Name: proto.String("c"), OpType: proto.String("Constant"), Output: []string{"c"},
				Attribute: []*onnxpb.AttributeProto{{Name: proto.String("value"), Type: onnxpb.AttributeProto_TENSOR.Enum()}}}}, m.Graph.Node...)
		}), `node "c" (Constant): a tensor attribute holds no tensor`},
		{"huge ConstantOfShape", tinyModel(raw(), func(m *onnxpb.ModelProto) {
			shape := &onnxpb.TensorProto{DataType: proto.Int32(int32(onnxpb.TensorProto_INT64)), Dims: []int64{2}, Int64Data: []int64{1 << 20, 1 << 10}}
			m.Graph.Node = append([]*onnxpb.NodeProto{
				{Name: proto.String("s"), OpType: proto.String("Constant"), Output: []string{"s"}, Attribute: []*onnxpb.AttributeProto{{Name: proto.String("value"), T: shape}}},
				{Name: proto.String("z"), OpType: proto.String("ConstantOfShape"), Input: []string{"s"}, Output: []string{"z"}},
			}, m.Graph.Node...)
		}), `node "z" (ConstantOfShape): a constant of shape [1048576,1024] has 1073741824 elements; constants computed at import are limited to 1048576`},
		{"no outputs", tinyModel(raw(), func(m *onnxpb.ModelProto) { m.Graph.Output = nil }), "the graph has no outputs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".onnx")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Import(path)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, path+": ") || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q, want %q after %s", msg, tc.want, path)
			}
			if tc.name != "unsupported ops" && strings.Contains(msg, "\n") {
				t.Errorf("error of more than one line: %q", msg)
			}
		})
	}
}

// FuzzDecode checks that Decode returns an error, never panics, on any
// bytes.
func FuzzDecode(f *testing.F) {
	w := wTensor()
	w.RawData = wRaw()
	f.Add(tinyModel(w, nil))
	for _, name := range []string{"mlp", "cnn", "rnn", "gru", "nanogpt"} {
		if b, err := os.ReadFile(filepath.Join("..", "..", "tests", "testdata", "onnx", name+".onnx")); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		Decode(data, "")
	})
}

// TestParamsReachTheLoss checks that a float initializer without a
// differentiable path to the first output is a constant, not a param.
func TestParamsReachTheLoss(t *testing.T) {
	w := wTensor()
	w.RawData = wRaw()
	data := tinyModel(w, func(m *onnxpb.ModelProto) {
		u := wTensor()
		u.Name = proto.String("u")
		u.FloatData = wValues
		m.Graph.Initializer = append(m.Graph.Initializer, u)
		m.Graph.Node = append(m.Graph.Node,
			&onnxpb.NodeProto{OpType: proto.String("MatMul"), Input: []string{"x", "u"}, Output: []string{"z"}},
			&onnxpb.NodeProto{OpType: proto.String("ReduceSum"), Input: []string{"y"}, Output: []string{"l"}})
		m.Graph.Output = []*onnxpb.ValueInfoProto{{Name: proto.String("l")}, {Name: proto.String("z")}}
	})
	m, err := Decode(data, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Params) != 1 || m.Params[0].Name != "w" {
		t.Fatalf("params %v, want only w", m.Params)
	}
	if ps := m.Graph.Params(); len(ps) != 1 {
		t.Errorf("the graph has %d params, want 1", len(ps))
	}
	id, ok := m.Graph.Lookup("u")
	if !ok || m.Graph.Value(id).Op != ir.OpConst {
		t.Errorf("u is not a constant")
	}
}
