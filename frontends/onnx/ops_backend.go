package onnx

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// constTensor returns the import-time constant holding t's elements.
func constTensor(t safetensors.Tensor) *tensor {
	c := &tensor{dt: t.Type.DType, shape: append([]int{}, t.Type.Shape...)}
	return c.fromLE(t.Data, t.Type.Shape.NumElements())
}

// legacyBroadcast applies the broadcasting of the binary ops before opset
// 7 to their second operand b: with broadcast=1, b's shape is a contiguous
// run of a's dims starting at axis (default: the trailing ones), so b is
// reshaped to a's rank with 1s around it and NumPy broadcasting does the
// rest; with broadcast=0 the shapes must be equal.
func (im *importer) legacyBroadcast(n *onnxpb.NodeProto, a, b ir.ID) (ir.ID, error) {
	if im.opset >= 7 {
		return b, nil
	}
	as, bs := im.shapeOf(a), im.shapeOf(b)
	if attrInt(n, "broadcast", 0) == 0 {
		if !ir.Shape(as).Equal(ir.Shape(bs)) {
			return ir.NoID, fmt.Errorf("operands of shapes %v and %v without broadcast=1", as, bs)
		}
		return b, nil
	}
	axis := len(as) - len(bs)
	if a := attr(n, "axis"); a != nil {
		axis = int(a.GetI())
		if axis < 0 {
			axis += len(as)
		}
	}
	if axis < 0 || axis+len(bs) > len(as) {
		return ir.NoID, fmt.Errorf("broadcast of %v onto %v at axis %d does not fit", bs, as, axis)
	}
	shape := make([]int, 0, len(as))
	for k := range as {
		d := 1
		if k >= axis && k < axis+len(bs) {
			d = bs[k-axis]
		}
		shape = append(shape, d)
	}
	if ir.Shape(shape).Equal(ir.Shape(bs)) {
		return b, nil
	}
	return im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), b)
}
