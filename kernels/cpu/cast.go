package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// cast converts every element, in order, by ir's rules: floats to integers
// through ir.CastFloatToInt (truncated, NaN 0, saturated); otherwise Go's
// conversions, which round to nearest into floats and wrap into narrower
// integers; nonzero (NaN too) is true; true is 1. The kernel is keyed by
// its result dtype and dispatches on the argument's here.

func init() {
	registerAll(ir.OpCast, buildCast, buildCast, buildCast, buildCast, buildCast)
}

func buildCast(n *kernels.Node) (kernels.Func, error) {
	from, to := n.Args[0].DType, n.Out.DType
	var f kernels.Func
	switch to {
	case ir.F32:
		f = castToNumber[float32](from, to)
	case ir.F64:
		f = castToNumber[float64](from, to)
	case ir.I32:
		f = castToNumber[int32](from, to)
	case ir.I64:
		f = castToNumber[int64](from, to)
	case ir.Bool:
		switch from {
		case ir.F32:
			f = castLoop(func(v float32) bool { return v != 0 })
		case ir.F64:
			f = castLoop(func(v float64) bool { return v != 0 })
		case ir.I32:
			f = castLoop(func(v int32) bool { return v != 0 })
		case ir.I64:
			f = castLoop(func(v int64) bool { return v != 0 })
		case ir.Bool:
			f = castLoop(func(v bool) bool { return v })
		}
	}
	if f == nil {
		return nil, fmt.Errorf("no cast from %s to %s", from, to)
	}
	return f, nil
}

// castToNumber returns the cast from dtype from into T (of dtype to).
func castToNumber[T number](from, to ir.DType) kernels.Func {
	if to.IsFloat() {
		switch from {
		case ir.F32:
			return castLoop(func(v float32) T { return T(v) })
		case ir.F64:
			return castLoop(func(v float64) T { return T(v) })
		}
	} else {
		switch from {
		case ir.F32:
			return castLoop(func(v float32) T { return T(ir.CastFloatToInt(float64(v), to)) })
		case ir.F64:
			return castLoop(func(v float64) T { return T(ir.CastFloatToInt(v, to)) })
		}
	}
	switch from {
	case ir.I32:
		return castLoop(func(v int32) T { return T(v) })
	case ir.I64:
		return castLoop(func(v int64) T { return T(v) }) // into f32: rounded once
	case ir.Bool:
		return castLoop(func(v bool) T {
			if v {
				return 1
			}
			return 0
		})
	}
	return nil
}

func castLoop[F, T kernels.Elem](conv func(F) T) kernels.Func {
	return func(out kernels.Tensor, args []kernels.Tensor) error {
		o, x := kernels.View[T](out), kernels.View[F](args[0])
		for i, v := range x {
			o[i] = conv(v)
		}
		return nil
	}
}
