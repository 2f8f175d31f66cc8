package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildConst builds const {value, dtype, shape}: the elements of
// kernels.Const, computed once and copied at every call.
func buildConst(n *kernels.Node) (kernels.Func, error) {
	c, err := kernels.Const(n.Attrs, n.Out)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, _ []kernels.Tensor) error {
		copy(out.Data, c.Data)
		return nil
	}, nil
}

// buildOneHot builds one_hot(labels) {classes, dtype}: out[..., c] is 1
// where labels[...] == c, else 0. A label outside [0,classes) is an error
// that names its position in the flattened labels.
func buildOneHot[T number](n *kernels.Node) (kernels.Func, error) {
	classes := n.Out.Shape[len(n.Out.Shape)-1] // = the classes attribute, checked by inference
	switch n.Args[0].DType {
	case ir.I32:
		return oneHot[T, int32](classes), nil
	case ir.I64:
		return oneHot[T, int64](classes), nil
	}
	return nil, fmt.Errorf("labels must be i32 or i64, found %s", n.Args[0])
}

// oneHot returns the one_hot Func for results of type T and labels of
// type L.
func oneHot[T number, L integer](classes int) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, labels := kernels.View[T](out), kernels.View[L](args[0])
		clear(o)
		for i, l := range labels {
			if err := checkLabel(l, i, classes); err != nil {
				return err
			}
			o[i*classes+int(l)] = 1
		}
		return nil
	}
}
