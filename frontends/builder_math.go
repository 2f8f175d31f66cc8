package frontends

import "github.com/kilnml/kiln/ir"

// Elementwise math (ir/ops_math.go).

// Abs returns |x|; its gradient is sign(x), 0 at 0.
func (b *Builder) Abs(x Value) Value { return b.op(ir.OpAbs, nil, x) }

// Sign returns -1, 0 or 1 as x is negative, zero or positive; its gradient
// is zero.
func (b *Builder) Sign(x Value) Value { return b.op(ir.OpSign, nil, x) }

// Rsqrt returns 1 / sqrt(x).
func (b *Builder) Rsqrt(x Value) Value { return b.op(ir.OpRsqrt, nil, x) }

// Square returns x * x.
func (b *Builder) Square(x Value) Value { return b.op(ir.OpSquare, nil, x) }

// Reciprocal returns 1 / x.
func (b *Builder) Reciprocal(x Value) Value { return b.op(ir.OpReciprocal, nil, x) }

// Log2 returns the base-2 logarithm of x.
func (b *Builder) Log2(x Value) Value { return b.op(ir.OpLog2, nil, x) }

// Log10 returns the base-10 logarithm of x.
func (b *Builder) Log10(x Value) Value { return b.op(ir.OpLog10, nil, x) }

// Log1p returns log(1 + x), accurate near 0.
func (b *Builder) Log1p(x Value) Value { return b.op(ir.OpLog1p, nil, x) }

// Expm1 returns e^x - 1, accurate near 0.
func (b *Builder) Expm1(x Value) Value { return b.op(ir.OpExpm1, nil, x) }

// Sin returns sin(x).
func (b *Builder) Sin(x Value) Value { return b.op(ir.OpSin, nil, x) }

// Cos returns cos(x).
func (b *Builder) Cos(x Value) Value { return b.op(ir.OpCos, nil, x) }

// Erf returns the error function of x.
func (b *Builder) Erf(x Value) Value { return b.op(ir.OpErf, nil, x) }

// Floor rounds x down to an integer; its gradient is zero.
func (b *Builder) Floor(x Value) Value { return b.op(ir.OpFloor, nil, x) }

// Ceil rounds x up to an integer; its gradient is zero.
func (b *Builder) Ceil(x Value) Value { return b.op(ir.OpCeil, nil, x) }

// Round rounds x to the nearest integer, halves to even (torch.round); its
// gradient is zero.
func (b *Builder) Round(x Value) Value { return b.op(ir.OpRound, nil, x) }

// Clip limits x to [lo, hi] (torch.clamp); the gradient passes where
// lo <= x <= hi.
func (b *Builder) Clip(x Value, lo, hi float64) Value {
	return b.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(lo), "max", ir.Float(hi)), x)
}

// ClipMin limits x from below: max(x, lo).
func (b *Builder) ClipMin(x Value, lo float64) Value {
	return b.op(ir.OpClip, ir.MakeAttrs("min", ir.Float(lo)), x)
}

// ClipMax limits x from above: min(x, hi).
func (b *Builder) ClipMax(x Value, hi float64) Value {
	return b.op(ir.OpClip, ir.MakeAttrs("max", ir.Float(hi)), x)
}

// Pow returns x^y with NumPy broadcasting; both arguments get gradients.
func (b *Builder) Pow(x, y Value) Value { return b.op(ir.OpPow, nil, x, y) }

// PowScalar returns x^exponent.
func (b *Builder) PowScalar(x Value, exponent float64) Value {
	return b.op(ir.OpPow, ir.MakeAttrs("exponent", ir.Float(exponent)), x)
}

// Maximum returns the elementwise larger of x and y with NumPy broadcasting;
// a tie sends half the gradient to each.
func (b *Builder) Maximum(x, y Value) Value { return b.op(ir.OpMaximum, nil, x, y) }

// Minimum returns the elementwise smaller of x and y with NumPy
// broadcasting; a tie sends half the gradient to each.
func (b *Builder) Minimum(x, y Value) Value { return b.op(ir.OpMinimum, nil, x, y) }

// FloorDiv returns x / y rounded toward -Inf (Python //) with NumPy
// broadcasting; its gradient is zero.
func (b *Builder) FloorDiv(x, y Value) Value { return b.op(ir.OpFloorDiv, nil, x, y) }

// Mod returns the remainder of x / y with the sign of y (Python %) with
// NumPy broadcasting.
func (b *Builder) Mod(x, y Value) Value { return b.op(ir.OpMod, nil, x, y) }
