package frontends

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
)

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

// KANOptions are the grid of a Kolmogorov-Arnold layer. Zero fields take
// efficient-kan's defaults: grid [-1, 1] in 5 intervals, cubic splines.
type KANOptions struct {
	GridMin, GridMax float64 // the base grid; both zero means [-1, 1]
	GridSize         int     // intervals of the base grid; 0 means 5
	Order            int     // polynomial degree of the splines; 0 means 3
}

// withDefaults returns o with efficient-kan's defaults for its zero fields.
func (o KANOptions) withDefaults() KANOptions {
	if o.GridMin == 0 && o.GridMax == 0 {
		o.GridMin, o.GridMax = -1, 1
	}
	if o.GridSize == 0 {
		o.GridSize = 5
	}
	if o.Order == 0 {
		o.Order = 3
	}
	return o
}

// KANLinear returns a Kolmogorov-Arnold layer of out outputs on x [..., in],
// efficient-kan's KANLinear without the standalone spline scaler: a
// learnable spline per (input, output) edge plus a base weight on silu(x),
//
//	y = silu(x) @ base + reshape(bspline(x), [..., in·(G+k)]) @ spline
//
// with G = o.GridSize and k = o.Order. It declares two params, in x's
// dtype: name.base_weight [in, out], uniform in ±1/√in (PyTorch's
// default for a linear layer, as efficient-kan's base weight), and
// name.spline_weight [in·(G+k), out], row i·(G+k)+j holding the
// coefficient of basis j of input i (efficient-kan's spline_weight
// [out, in, G+k] transposed and flattened), uniform in ±0.1/√in, so that
// the layer starts close to its base part, as efficient-kan's small
// initial spline noise does. x outside the extended grid
// [GridMin - k·h, GridMax + k·h) (h the interval width) reaches y through
// the base part only.
func (b *Builder) KANLinear(name string, x Value, out int, o KANOptions) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	o = o.withDefaults()
	xt := x.Type()
	if x.b != b || len(xt.Shape) == 0 {
		return b.fail(1, fmt.Errorf("kan layer %s: expected x [..., in] of this builder, found %s", name, xt))
	}
	if out < 1 {
		return b.fail(1, fmt.Errorf("kan layer %s: expected at least 1 output, found %d", name, out))
	}
	in := xt.Shape[len(xt.Shape)-1]
	nb := o.GridSize + o.Order
	bound := 1 / math.Sqrt(float64(max(in, 1)))
	base := b.ParamInit(name+".base_weight", xt.DType, []int{in, out}, "uniform", bound)
	spline := b.ParamInit(name+".spline_weight", xt.DType, []int{in * nb, out}, "uniform", 0.1*bound)
	bases := b.BSpline(x, o.GridMin, o.GridMax, o.GridSize, o.Order) // [..., in, G+k]
	flat := append(xt.Shape[:len(xt.Shape)-1].Clone(), in*nb)
	y := b.Add(b.Matmul(b.Silu(x), base), b.Matmul(b.Reshape(bases, flat...), spline))
	if b.err != nil {
		// The error was recorded at a line of this file: report it at
		// the caller's instead.
		err := b.err
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		b.err = nil
		return b.fail(1, fmt.Errorf("kan layer %s: %w", name, err))
	}
	return y
}
