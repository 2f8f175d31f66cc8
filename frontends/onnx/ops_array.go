package onnx

import (
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
