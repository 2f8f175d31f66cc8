package onnx

import (
	"testing"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
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
