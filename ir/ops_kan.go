package ir

import (
	"fmt"
	"math"
)

// Kolmogorov-Arnold (B-spline) and differentiable logic-gate layers.
//
// bspline is the basis of a Kolmogorov-Arnold layer exactly as efficient-kan's
// KANLinear.b_splines computes it (PyTorch has no such op); logic_gate is the
// relaxed two-input gate of difflogic (Petersen et al. 2022) in its training
// form.

func kanOps() []opRow {
	return []opRow{
		{OpBspline, OpInfo{
			Name: "bspline", Args: []string{"x"},
			Doc: "B-spline bases of a Kolmogorov-Arnold layer, as efficient-kan's b_splines: x [...] → [..., grid_size + order]; " +
				"knots t_j = grid_min + (j - order)·h, j = 0 .. grid_size + 2·order, h = (grid_max - grid_min)/grid_size; " +
				"Cox–de Boor from the left-closed indicators of [t_j, t_j+1) up to degree order. x outside [t_0, t_last) gives " +
				"all-zero bases, exactly as efficient-kan (no extrapolation); non-finite x gives NaN for order >= 1, as " +
				"efficient-kan's arithmetic does (inf·0). With derivative = d > 0, the d-th derivatives of the bases in x " +
				"(the right derivative at a knot)",
			Infer: inferKanBspline, Grad: gradKanBspline,
			Cost: func(_ []Type, out Type, attrs Attrs) float64 {
				order := float64(attrs.Int("order", 3))
				return float64(out.Shape.NumElements()) * (order + 1) * (order + 1)
			},
			Attrs: []AttrSpec{
				{Name: "grid_min", Kind: AttrFloat, Default: defFloat(-1), Doc: "left end of the base grid (efficient-kan's grid_range[0])"},
				{Name: "grid_max", Kind: AttrFloat, Default: defFloat(1), Doc: "right end of the base grid (efficient-kan's grid_range[1]); above grid_min"},
				{Name: "grid_size", Kind: AttrInt, Default: defInt(5), Doc: "number of intervals of the base grid (at least 1)"},
				{Name: "order", Kind: AttrInt, Default: defInt(3), Doc: "polynomial degree of the bases (efficient-kan's spline_order: 3 is cubic; 0 gives the indicators)"},
				{Name: "derivative", Kind: AttrInt, Default: defInt(0), Doc: "0 for the bases; d in 1..order for their d-th derivatives in x " +
					"(kiln's own: the gradient of derivative d is written with derivative d+1)"},
			}}},
		{OpLogicGate, OpInfo{
			Name: "logic_gate", Args: []string{"a", "b", "logits"},
			Doc: "difflogic's relaxed two-input gate (training mode): out[..., g] = Σ_i softmax(logits[g])_i · op_i(a, b)[..., g] " +
				"over the 16 real-valued gates in difflogic's order (0 false, 1 a·b, 2 a-ab, 3 a, 4 b-ab, 5 b, 6 a+b-2ab, 7 a+b-ab, " +
				"8 1-(a+b-ab), 9 1-(a+b-2ab), 10 1-b, 11 1-b+ab, 12 1-a, 13 1-a+ab, 14 1-ab, 15 true); a and b broadcast to [..., G], " +
				"logits [G,16]; computed as A + B·a + C·b + D·ab with [A,B,C,D] = softmax(logits) @ coefficients",
			Infer: inferKanLogicGate, Grad: gradKanLogicGate,
			Cost: func(_ []Type, out Type, _ Attrs) float64 { return 16 * float64(out.Shape.NumElements()) }}},
	}
}

// BsplineGrid is the grid of a bspline node, read from its attributes: knots
// Min + (j - Order)·H for j = 0 .. Size + 2·Order, bases of degree Order,
// differentiated Deriv times.
type BsplineGrid struct {
	Min, Max, H        float64
	Size, Order, Deriv int
}

// Intervals returns the number of knot intervals: Size + 2·Order.
func (g BsplineGrid) Intervals() int { return g.Size + 2*g.Order }

// Bases returns the number of bases per input: Size + Order.
func (g BsplineGrid) Bases() int { return g.Size + g.Order }

// kanMaxIntervals bounds the knot intervals of a bspline grid, so that sizes
// cannot overflow.
const kanMaxIntervals = 1 << 24

// BsplineGridOf reads and checks the grid of a bspline node's attributes.
func BsplineGridOf(attrs Attrs) (BsplineGrid, error) {
	g := BsplineGrid{
		Min:   attrs.Float("grid_min", -1),
		Max:   attrs.Float("grid_max", 1),
		Size:  attrs.Int("grid_size", 5),
		Order: attrs.Int("order", 3),
		Deriv: attrs.Int("derivative", 0),
	}
	switch {
	case math.IsNaN(g.Min) || math.IsInf(g.Min, 0) || math.IsNaN(g.Max) || math.IsInf(g.Max, 0) || !(g.Min < g.Max):
		return g, fmt.Errorf("expected finite grid_min < grid_max, found grid_min=%s, grid_max=%s", formatFloat(g.Min), formatFloat(g.Max))
	case g.Size < 1 || g.Size > kanMaxIntervals:
		return g, fmt.Errorf("expected grid_size in [1, %d], found %d", kanMaxIntervals, g.Size)
	case g.Order < 0 || g.Order > kanMaxIntervals || g.Size+2*g.Order > kanMaxIntervals:
		return g, fmt.Errorf("expected order >= 0 with grid_size + 2·order <= %d, found order %d, grid_size %d", kanMaxIntervals, g.Order, g.Size)
	case g.Deriv < 0 || g.Deriv > g.Order:
		return g, fmt.Errorf("expected derivative in [0, order=%d], found %d", g.Order, g.Deriv)
	}
	g.H = (g.Max - g.Min) / float64(g.Size)
	if g.H == 0 || math.IsInf(g.H, 0) {
		return g, fmt.Errorf("grid_min=%s, grid_max=%s, grid_size=%d give a knot spacing of %s", formatFloat(g.Min), formatFloat(g.Max), g.Size, formatFloat(g.H))
	}
	return g, nil
}

func inferKanBspline(args []Type, attrs Attrs) (Type, error) {
	x := args[0]
	if !x.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected a float operand x (f32 or f64), found %s", x)
	}
	g, err := BsplineGridOf(attrs)
	if err != nil {
		return Type{}, err
	}
	return Type{x.DType, append(x.Shape.Clone(), g.Bases())}, nil
}

// gradKanBspline is dx = sum(dy * bspline{derivative=d+1}(x), axis -1): the
// derivative of each basis (or of its d-th derivative) against dy. The
// kernel computes derivatives by the Cox–de Boor derivative formula
// d/dx B_{j,k} = k/(t_{j+k}-t_j)·B_{j,k-1} - k/(t_{j+k+1}-t_{j+1})·B_{j+1,k-1}
// on the same knots, so the rule is again an op with a rule: it can be
// differentiated as often as the degree allows. The indicators are
// left-closed, so at a knot this is the right derivative. The order-th
// derivative is piecewise constant: its derivative is 0 wherever it exists.
func gradKanBspline(e *Emitter, y, dy ID) []ID {
	x := e.args(y)[0]
	attrs := e.G.Values[y].Attrs
	g, err := BsplineGridOf(attrs)
	if err != nil {
		e.err = err
		return []ID{NoID}
	}
	if g.Deriv >= g.Order {
		return []ID{e.Fill(0, e.Type(x))}
	}
	db := e.Op(OpBspline, attrs.With("derivative", Int(g.Deriv+1)), x)
	return []ID{e.Op(OpSum, MakeAttrs("axes", Ints(-1), "keepdims", BoolAttr(false)), e.mul(dy, db))}
}

// kanGateCoeff holds, for each of difflogic's 16 gates in its order, the
// coefficients [c0, c1, c2, c3] of op_i(a, b) = c0 + c1·a + c2·b + c3·ab.
var kanGateCoeff = [16][4]float64{
	{0, 0, 0, 0},   // 0 false
	{0, 0, 0, 1},   // 1 a and b
	{0, 1, 0, -1},  // 2 a and not b
	{0, 1, 0, 0},   // 3 a
	{0, 0, 1, -1},  // 4 not a and b
	{0, 0, 1, 0},   // 5 b
	{0, 1, 1, -2},  // 6 xor
	{0, 1, 1, -1},  // 7 or
	{1, -1, -1, 1}, // 8 nor
	{1, -1, -1, 2}, // 9 xnor
	{1, 0, -1, 0},  // 10 not b
	{1, 0, -1, 1},  // 11 b implies a
	{1, -1, 0, 0},  // 12 not a
	{1, -1, 0, 1},  // 13 a implies b
	{1, 0, 0, -1},  // 14 nand
	{1, 0, 0, 0},   // 15 true
}

// LogicGateCoefficients returns, for each of logic_gate's 16 gates in
// difflogic's order, [c0, c1, c2, c3] with op_i(a, b) = c0 + c1·a + c2·b + c3·ab.
func LogicGateCoefficients() [16][4]float64 { return kanGateCoeff }

func inferKanLogicGate(args []Type, _ Attrs) (Type, error) {
	a, b, lg := args[0], args[1], args[2]
	if !a.DType.IsFloat() {
		return Type{}, fmt.Errorf("expected float a, b and logits (f32 or f64), found a %s", a)
	}
	if b.DType != a.DType || lg.DType != a.DType {
		return Type{}, fmt.Errorf("expected a, b and logits of one dtype, found %s, %s and %s", a, b, lg)
	}
	s, ok := BroadcastShapes(a.Shape, b.Shape)
	if !ok {
		return Type{}, fmt.Errorf("expected a and b that broadcast, found %s and %s", a, b)
	}
	if len(s) == 0 {
		return Type{}, fmt.Errorf("expected a and b broadcasting to [..., G] (rank >= 1), found %s and %s", a, b)
	}
	g := s[len(s)-1]
	if len(lg.Shape) != 2 || lg.Shape[0] != g || lg.Shape[1] != 16 {
		return Type{}, fmt.Errorf("expected logits [%d,16] for a %s and b %s, found %s", g, a, b, lg)
	}
	return Type{a.DType, s}, nil
}

// gradKanLogicGate differentiates out = A + B·a + C·b + D·ab, where
// [A,B,C,D] = softmax(logits) @ coeff, with ops of the table only:
//
//	da = dy·(B + D·b), db = dy·(C + D·a), each summed to its operand's shape;
//	dW_k[g] = Σ_batch dy·basis_k with basis = (1, a, b, ab);
//	dp = Σ_k dW_k ⊗ coeff[:, k]; dlogits = softmax's gradient of dp.
func gradKanLogicGate(e *Emitter, y, dy ID) []ID {
	args := e.args(y)
	a, b, lg := args[0], args[1], args[2]
	dt := e.Type(y).DType
	gates := e.shape(lg)[0]
	col := func(k int) ID {
		v := make([]float64, 16)
		for i := range v {
			v[i] = kanGateCoeff[i][k]
		}
		return e.Op(OpConst, MakeAttrs("dtype", String(dt.String()), "shape", Ints(16), "value", Floats(v...)))
	}
	p := e.Op(OpSoftmax, MakeAttrs("axis", Int(-1)), lg)
	cols := [4]ID{col(0), col(1), col(2), col(3)}
	w := func(k int) ID { return e.Op(OpMatmul, nil, p, cols[k]) } // [G]
	wb, wc, wd := w(1), w(2), w(3)
	da := e.SumTo(e.mul(dy, e.add(wb, e.mul(wd, b))), e.shape(a))
	db := e.SumTo(e.mul(dy, e.add(wc, e.mul(wd, a))), e.shape(b))

	gs := Shape{gates}
	dw := [4]ID{
		e.SumTo(dy, gs),
		e.SumTo(e.mul(dy, a), gs),
		e.SumTo(e.mul(dy, b), gs),
		e.SumTo(e.mul(dy, e.mul(a, b)), gs),
	}
	var dp ID
	for k, d := range dw {
		t := e.mul(e.Reshape(d, Shape{gates, 1}), cols[k])
		if k == 0 {
			dp = t
		} else {
			dp = e.add(dp, t)
		}
	}
	if e.err != nil {
		return []ID{NoID, NoID, NoID}
	}
	return []ID{da, db, gradSoftmax(e, p, dp)[0]}
}
