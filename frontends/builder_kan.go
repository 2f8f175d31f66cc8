package frontends

import "github.com/kilnml/kiln/ir"

// BSpline returns the B-spline bases of x, x [...] → [..., gridSize+order],
// as efficient-kan's KANLinear.b_splines computes them: a uniform grid of
// gridSize intervals on [gridMin, gridMax] extended by order knots on each
// side, bases of polynomial degree order (efficient-kan's spline_order;
// its defaults are -1, 1, 5, 3). x outside the extended grid gives zeros.
func (b *Builder) BSpline(x Value, gridMin, gridMax float64, gridSize, order int) Value {
	return b.op(ir.OpBspline, bsplineAttrs(gridMin, gridMax, gridSize, order), x)
}

// BSplineDerivative returns the derivative-th derivatives in x of the bases
// BSpline returns (1 <= derivative <= order), the right derivative at a
// knot: x [...] → [..., gridSize+order]. BSpline's gradient is written with
// it.
func (b *Builder) BSplineDerivative(x Value, gridMin, gridMax float64, gridSize, order, derivative int) Value {
	return b.op(ir.OpBspline, bsplineAttrs(gridMin, gridMax, gridSize, order).With("derivative", ir.Int(derivative)), x)
}

func bsplineAttrs(gridMin, gridMax float64, gridSize, order int) ir.Attrs {
	return ir.MakeAttrs("grid_min", ir.Float(gridMin), "grid_max", ir.Float(gridMax), "grid_size", ir.Int(gridSize), "order", ir.Int(order))
}

// LogicGate returns difflogic's relaxed two-input gates in training mode:
// for x and y broadcasting to [..., G] (values in [0,1]) and logits [G,16],
// out[..., g] = Σ_i softmax(logits[g])_i · op_i(x, y) over the 16 real-valued
// gates in difflogic's order (false, and, x∧¬y, x, ¬x∧y, y, xor, or, nor,
// xnor, ¬y, y→x, ¬x, x→y, nand, true).
func (b *Builder) LogicGate(x, y, logits Value) Value {
	return b.op(ir.OpLogicGate, nil, x, y, logits)
}
