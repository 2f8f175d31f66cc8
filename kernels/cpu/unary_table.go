package cpu

import (
	"fmt"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// The unary float element-wise ops of vmath's table (exp, log, tanh,
// sigmoid, gelu, silu, softplus, elu, erf, sin, ...) take their row code
// from it, here and in the fused element-wise interpreter, as constant
// folding does, so the three give the same bits.

func init() {
	for _, op := range vmath.Ops() {
		register(op, ir.F32, buildTableUnary[float32])
		register(op, ir.F64, buildTableUnary[float64])
	}
}

// tableRow returns vmath's row code of op for T; ok is false for an op the
// table does not have.
func tableRow[T float](op ir.Op, a ir.Attrs) (row func(o, x []T), ok bool, err error) {
	u, ok, err := vmath.Lookup(op, a)
	if !ok || err != nil {
		return nil, ok, err
	}
	var f any = u.F64
	if _, f32 := any(T(0)).(float32); f32 {
		f = u.F32
	}
	return f.(func(o, x []T)), true, nil
}

// buildTableUnary builds an op of vmath's table: out[i] = f(x[i]), split
// across the workers when large (parUnary).
func buildTableUnary[T float](n *kernels.Node) (kernels.Func, error) {
	f, ok, err := tableRow[T](n.Op, n.Attrs)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s is not in the table of unary float ops", n.Op)
	}
	return parUnary(n.Par, n.Out.Shape.NumElements(), parCostExp, f), nil
}
