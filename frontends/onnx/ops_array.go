package onnx

import (
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// castValue returns x cast to dtype to: x itself when it already is.
func castValue(im *importer, x ir.ID, to ir.DType) ([]*val, error) {
	if im.g.Type(x).DType == to {
		return []*val{{id: x}}, nil
	}
	return one(im.add(ir.OpCast, ir.MakeAttrs("dtype", ir.String(to.String())), x))
}

// emitCastLike casts input 0 to input 1's dtype (opset 15), as Cast does.
func emitCastLike(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	like, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	to := im.dtypeOfVal(like)
	if v.c != nil && !v.param {
		return []*val{{id: ir.NoID, c: castConst(v.c, to)}}, nil
	}
	x, err := im.value(v, true)
	if err != nil {
		return nil, err
	}
	return castValue(im, x, to)
}

// dtypeOfVal returns the element type of a value.
func (im *importer) dtypeOfVal(v *val) ir.DType {
	if v.id != ir.NoID {
		return im.g.Type(v.id).DType
	}
	return v.c.dt
}

// scalarIn returns the one element of constant input k as an int.
func (im *importer) scalarIn(n *onnxpb.NodeProto, k int) (int, error) {
	c, err := im.constIn(n, k)
	if err != nil {
		return 0, err
	}
	if c.n() != 1 || c.dt.IsFloat() || c.dt == ir.Bool {
		return 0, fmt.Errorf("input %d: expected one integer, found %s%v", k, c.dt, c.shape)
	}
	v := c.ints()[0]
	if v < -ir.MaxTensorBytes || v > ir.MaxTensorBytes {
		return 0, fmt.Errorf("input %d: %d is out of range", k, v)
	}
	return int(v), nil
}

func emitCumSum(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	axis, err := im.scalarIn(n, 1)
	if err != nil {
		return nil, err
	}
	if axis, err = normAxis(axis, len(im.shapeOf(x))); err != nil {
		return nil, err
	}
	return one(im.add(ir.OpCumsum, ir.MakeAttrs("axis", ir.Int(axis),
		"exclusive", ir.BoolAttr(attrInt(n, "exclusive", 0) != 0), "reverse", ir.BoolAttr(attrInt(n, "reverse", 0) != 0)), x))
}

func emitTrilu(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	k := 0
	if has(n, 1) {
		if k, err = im.scalarIn(n, 1); err != nil {
			return nil, err
		}
	}
	return one(im.add(ir.OpTrilu, ir.MakeAttrs("upper", ir.BoolAttr(attrInt(n, "upper", 1) != 0), "k", ir.Int(k)), x))
}
