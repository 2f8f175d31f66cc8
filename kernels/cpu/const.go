package cpu

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// buildConst builds const {value, dtype, shape}: one value fills every
// element, otherwise the values are the elements in row-major order. The
// values are converted to T here: bool is value != 0; an integer dtype
// rejects a value that is not an integer in its range.
func buildConst[T kernels.Elem](n *kernels.Node) (kernels.Func, error) {
	v, _ := n.Attrs.Get("value")
	fs, ok := v.AsFloats()
	if !ok {
		return nil, fmt.Errorf("value must be a number or a list of numbers, found %s", v)
	}
	if c := n.Out.Shape.NumElements(); len(fs) != 1 && len(fs) != c {
		return nil, fmt.Errorf("value has %d elements, %s needs %d (or 1 to fill)", len(fs), n.Out, c)
	}
	vals, err := convertValues[T](fs)
	if err != nil {
		return nil, err
	}
	return func(out kernels.Tensor, _ []kernels.Tensor) error {
		o := kernels.View[T](out)
		if len(vals) == 1 {
			v := vals[0]
			for i := range o {
				o[i] = v
			}
			return nil
		}
		copy(o, vals)
		return nil
	}, nil
}

// convertValues converts attribute numbers to elements of type T.
func convertValues[T kernels.Elem](fs []float64) ([]T, error) {
	vals := make([]T, len(fs))
	switch vs := any(vals).(type) {
	case []float32:
		for i, f := range fs {
			vs[i] = float32(f)
		}
	case []float64:
		copy(vs, fs)
	case []int32:
		for i, f := range fs {
			if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
				return nil, fmt.Errorf("value %v is not an i32", f)
			}
			vs[i] = int32(f)
		}
	case []int64:
		for i, f := range fs {
			// 2^63 is the first float64 above MaxInt64.
			if f != math.Trunc(f) || f < math.MinInt64 || f >= 1<<63 {
				return nil, fmt.Errorf("value %v is not an i64", f)
			}
			vs[i] = int64(f)
		}
	case []bool:
		for i, f := range fs {
			vs[i] = f != 0
		}
	}
	return vals, nil
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
