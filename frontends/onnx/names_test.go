package onnx

import (
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// TestNamesRoundTrip imports a model whose graph, input, initializer and
// output names lie outside .kir's syntax, collide once mapped, or are names
// kiln gives its own values (t3, t5): every ONNX name gets a distinct kiln name,
// and the graph's .kir text parses back to the same graph.
func TestNamesRoundTrip(t *testing.T) {
	f32 := int32(onnxpb.TensorProto_FLOAT)
	in := func(name string) *onnxpb.ValueInfoProto {
		return &onnxpb.ValueInfoProto{Name: proto.String(name), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &f32, Shape: &onnxpb.TensorShapeProto{Dim: []*onnxpb.TensorShapeProto_Dimension{
				{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: 2}}}}}}}}
	}
	out := func(name string) *onnxpb.ValueInfoProto { return &onnxpb.ValueInfoProto{Name: proto.String(name)} }
	mp := &onnxpb.ModelProto{
		OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}},
		Graph: &onnxpb.GraphProto{
			Name:        proto.String("1st.graph-v2"),
			Initializer: []*onnxpb.TensorProto{f32s("w:0", []int64{2}, 1, 2), f32s("w_0", []int64{2}, 3, 4), f32s("t5", []int64{2}, 5, 6)},
			Input:       []*onnxpb.ValueInfoProto{in("input/0"), in("1")},
			Node: []*onnxpb.NodeProto{
				node("Mul", []string{"input/0", "w:0"}, []string{"a"}),
				node("Mul", []string{"1", "w_0"}, []string{"b"}),
				node("Add", []string{"a", "b"}, []string{"t3"}),
				node("Add", []string{"t3", "t5"}, []string{"t4"}),
				node("Relu", []string{"t4"}, []string{"out put"}),
			},
			Output: []*onnxpb.ValueInfoProto{out("t4"), out("t3"), out("out put")},
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
	g := m.Graph
	if g.Name != "_1st_graph_v2" {
		t.Errorf("graph name %q, want _1st_graph_v2", g.Name)
	}
	seen := map[string]bool{}
	for _, id := range append(append(g.Inputs(), g.Params()...), g.Outputs...) {
		name := g.Value(id).Name
		if seen[name] {
			t.Errorf("kiln name %q is given twice", name)
		}
		seen[name] = true
	}
	var names []string
	for _, id := range append(append(g.Inputs(), g.Params()...), g.Outputs...) {
		names = append(names, g.Value(id).Name)
	}
	want := []string{"input_0", "1", "w_0", "w_0_1", "t5_1", "t4", "t3_1", "out_put"}
	if len(names) != len(want) {
		t.Fatalf("names %q, want %q", names, want)
	}
	for k := range want {
		if names[k] != want[k] {
			t.Fatalf("names %q, want %q", names, want)
		}
	}
	text := g.Format()
	back, err := ir.Parse("back.kir", []byte(text))
	if err != nil {
		t.Fatalf("the .kir text does not parse: %v\n%s", err, text)
	}
	if back.Format() != text {
		t.Errorf("the .kir text does not read back unchanged:\n%s\nread back:\n%s", text, back.Format())
	}
}
