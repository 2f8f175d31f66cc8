package kernels

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
)

// Const returns the elements of const {value, dtype, shape} of type t, the
// one definition of how attribute values become elements, which every
// backend's const kernel uses: one value fills every element, otherwise the
// values are the elements in row-major order. bool is value != 0; an
// integer dtype rejects a value that is not an integer in its range.
func Const(attrs ir.Attrs, t ir.Type) (Tensor, error) {
	v, _ := attrs.Get("value")
	fs, ok := v.AsFloats()
	if !ok {
		return Tensor{}, fmt.Errorf("value must be a number or a list of numbers, found %s", v)
	}
	n := t.Shape.NumElements()
	if len(fs) != 1 && len(fs) != n {
		return Tensor{}, fmt.Errorf("value has %d elements, %s needs %d (or 1 to fill)", len(fs), t, n)
	}
	out := New(t)
	var err error
	switch t.DType {
	case ir.F32:
		fill(View[float32](out), fs, func(f float64) (float32, error) { return float32(f), nil })
	case ir.F64:
		fill(View[float64](out), fs, func(f float64) (float64, error) { return f, nil })
	case ir.I32:
		err = fill(View[int32](out), fs, func(f float64) (int32, error) {
			if f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
				return 0, fmt.Errorf("value %v is not an i32", f)
			}
			return int32(f), nil
		})
	case ir.I64:
		err = fill(View[int64](out), fs, func(f float64) (int64, error) {
			// 2^63 is the first float64 above MaxInt64.
			if f != math.Trunc(f) || f < math.MinInt64 || f >= 1<<63 {
				return 0, fmt.Errorf("value %v is not an i64", f)
			}
			return int64(f), nil
		})
	case ir.Bool:
		fill(View[bool](out), fs, func(f float64) (bool, error) { return f != 0, nil })
	default:
		err = fmt.Errorf("const of dtype %s", t.DType)
	}
	if err != nil {
		return Tensor{}, err
	}
	return out, nil
}

// fill sets o from the attribute numbers fs (one fills every element)
// converted by conv.
func fill[T Elem](o []T, fs []float64, conv func(float64) (T, error)) error {
	if len(fs) == 1 {
		v, err := conv(fs[0])
		if err != nil {
			return err
		}
		for i := range o {
			o[i] = v
		}
		return nil
	}
	for i, f := range fs {
		v, err := conv(f)
		if err != nil {
			return err
		}
		o[i] = v
	}
	return nil
}

// IndexError is the error of an index element outside [0, size): element
// pos (flat) of the index of shape is, with value v, for axis of size size
// of op's argument what. Every backend's movement kernels word it so.
func IndexError(op ir.Op, what string, is ir.Shape, pos int, v int64, axis, size int) error {
	idx := make(ir.Shape, len(is))
	for k := len(is) - 1; k >= 0; k-- {
		if is[k] > 0 {
			idx[k] = pos % is[k]
			pos /= is[k]
		}
	}
	return fmt.Errorf("%s: %s%s = %d is out of range for axis %d of size %d (expected 0 <= index < %d)", op, what, idx, v, axis, size, size)
}
