package onnx

import (
	"math"
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
	"google.golang.org/protobuf/proto"
)

// TestFoldExpandShape folds the shape arithmetic PyTorch exports for
// h0.expand(2, x.size(0), 6): Equal and Where on constants replace the -1
// entries of the target shape, a Reshape of a constant stays a constant, and
// Expand takes the result as its shape.
func TestFoldExpandShape(t *testing.T) {
	_, typ, y := forward(t, 17, []int64{2, 1},
		[]*onnxpb.TensorProto{i64s("s", -1, 3), i64s("neg", -1, -1), i64s("ones", 1, 1), i64s("two", 2)},
		node("Equal", []string{"s", "neg"}, []string{"eq"}),
		node("Where", []string{"eq", "ones", "s"}, []string{"shp"}),
		node("Reshape", []string{"shp", "two"}, []string{"shp2"}),
		node("Greater", []string{"shp2", "s"}, []string{"gt"}),
		node("Where", []string{"gt", "shp2", "s"}, []string{"shp3"}),
		node("Expand", []string{"x", "shp3"}, []string{"y"}))
	if !typ.Equal(ir.TensorOf(ir.F32, 2, 3)) {
		t.Fatalf("type %s, want f32[2,3]", typ)
	}
	near(t, y, []float64{0, 0, 0, 1, 1, 1})
}

// graphModel imports a model of one input x (dtype code, shape dims), the
// initializers and nodes, with the named outputs.
func graphModel(t *testing.T, dtype onnxpb.TensorProto_DataType, dims []int, inits []*onnxpb.TensorProto, nodes []*onnxpb.NodeProto, outputs ...string) (*Model, error) {
	t.Helper()
	code := int32(dtype)
	shape := &onnxpb.TensorShapeProto{}
	for _, d := range dims {
		shape.Dim = append(shape.Dim, &onnxpb.TensorShapeProto_Dimension{Value: &onnxpb.TensorShapeProto_Dimension_DimValue{DimValue: int64(d)}})
	}
	g := &onnxpb.GraphProto{
		Name:        proto.String("t"),
		Initializer: inits,
		Input: []*onnxpb.ValueInfoProto{{Name: proto.String("x"), Type: &onnxpb.TypeProto{Value: &onnxpb.TypeProto_TensorType{
			TensorType: &onnxpb.TypeProto_Tensor{ElemType: &code, Shape: shape}}}}},
		Node: nodes,
	}
	for _, o := range outputs {
		g.Output = append(g.Output, &onnxpb.ValueInfoProto{Name: proto.String(o)})
	}
	data, err := proto.Marshal(&onnxpb.ModelProto{OpsetImport: []*onnxpb.OperatorSetIdProto{{Version: proto.Int64(17)}}, Graph: g})
	if err != nil {
		t.Fatal(err)
	}
	return Decode(data, "")
}

// TestLayerNormalization checks LayerNormalization against the formula:
// with Scale and B of the normalized shape (layer_norm's weight and bias),
// and with a Scale that broadcasts (multiplied after layer_norm).
func TestLayerNormalization(t *testing.T) {
	ln := func(x []float64, eps float64) []float64 {
		mean, v := 0.0, 0.0
		for _, a := range x {
			mean += a / float64(len(x))
		}
		for _, a := range x {
			v += (a - mean) * (a - mean) / float64(len(x))
		}
		out := make([]float64, len(x))
		for k, a := range x {
			out[k] = (a - mean) / math.Sqrt(v+eps)
		}
		return out
	}
	row := ln([]float64{0, 1, 2}, 1e-3)
	var want []float64
	for range 2 {
		for k, s := range []float64{1, 2, 3} {
			want = append(want, row[k]*s+[]float64{0.5, 0, -0.5}[k])
		}
	}
	_, typ, y := forward(t, 17, []int64{2, 3},
		[]*onnxpb.TensorProto{f32s("scale", []int64{3}, 1, 2, 3), f32s("b", []int64{3}, 0.5, 0, -0.5)},
		node("LayerNormalization", []string{"x", "scale", "b"}, []string{"y"}, aFloat("epsilon", 1e-3)))
	if !typ.Equal(ir.TensorOf(ir.F32, 2, 3)) {
		t.Fatalf("type %s, want f32[2,3]", typ)
	}
	near(t, y, want)

	all := ln([]float64{0, 1, 2, 3, 4, 5}, 1e-5)
	for k := range all {
		all[k] *= []float64{1, 2, 3}[k%3]
	}
	m, _, y := forward(t, 17, []int64{2, 3},
		[]*onnxpb.TensorProto{f32s("scale", []int64{3}, 1, 2, 3)},
		node("LayerNormalization", []string{"x", "scale"}, []string{"y"}, aInt("axis", 0)))
	near(t, y, all)
	if n := len(m.Params); n != 1 {
		t.Errorf("%d params, want 1 (scale)", n)
	}
}

// TestGatherComputedIndices checks Gather with indices that are a graph
// input, along axis 0 (nn.Embedding) and another, of rank 1 and 2.
func TestGatherComputedIndices(t *testing.T) {
	table := f32s("table", []int64{4, 2}, 0, 1, 10, 11, 20, 21, 30, 31)
	cube := f32s("cube", []int64{2, 4}, 0, 1, 2, 3, 4, 5, 6, 7)
	for _, tc := range []struct {
		name   string
		init   *onnxpb.TensorProto
		dims   []int
		axis   int64
		idx    []float64
		shape  ir.Shape
		want   []float64
		errMsg string
	}{
		{"embedding", table, []int{2, 2}, 0, []float64{3, 0, 1, 1}, ir.Shape{2, 2, 2}, []float64{30, 31, 0, 1, 10, 11, 10, 11}, ""},
		{"index_select", cube, []int{3}, 1, []float64{3, 0, 3}, ir.Shape{2, 3}, []float64{3, 0, 3, 7, 4, 7}, ""},
		{"rank-2 indices on axis 1", cube, []int{1, 2}, 1, []float64{3, 1}, ir.Shape{2, 1, 2}, []float64{3, 1, 7, 5}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := graphModel(t, onnxpb.TensorProto_INT64, tc.dims, []*onnxpb.TensorProto{tc.init},
				[]*onnxpb.NodeProto{node("Gather", []string{tc.init.GetName(), "x"}, []string{"y"}, aInt("axis", tc.axis))}, "y")
			if tc.errMsg != "" {
				if err == nil || err.Error() != tc.errMsg {
					t.Fatalf("error %v, want %s", err, tc.errMsg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := runOutputs(t, m, tc.idx, []string{"y"})[0]
			if typ := m.Graph.Type(m.Graph.Outputs[0]); !typ.Shape.Equal(tc.shape) {
				t.Fatalf("shape %v, want %v", typ.Shape, tc.shape)
			}
			near(t, got, tc.want)
		})
	}
}
