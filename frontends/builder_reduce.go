package frontends

import "github.com/kilnml/kiln/ir"

// Reductions, comparisons, where and logical ops. Reductions take axes (nil:
// all axes; negative counts from the end) and keepdims as Sum does.

// Max returns the largest element of x over axes (torch.amax); ties share
// the gradient equally.
func (b *Builder) Max(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpMax, reduceAttrs(axes, keepdims), x)
}

// Min returns the smallest element of x over axes (torch.amin); ties share
// the gradient equally.
func (b *Builder) Min(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpMin, reduceAttrs(axes, keepdims), x)
}

// Prod returns the product of x over axes.
func (b *Builder) Prod(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpProd, reduceAttrs(axes, keepdims), x)
}

// LogSumExp returns log(sum(exp(x))) over axes, computed without overflow.
func (b *Builder) LogSumExp(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpLogSumExp, reduceAttrs(axes, keepdims), x)
}

// Var returns the variance of x over axes, dividing by N - correction
// (PyTorch's default correction is 1).
func (b *Builder) Var(x Value, axes []int, keepdims bool, correction float64) Value {
	return b.op(ir.OpVar, reduceAttrs(axes, keepdims).With("correction", ir.Float(correction)), x)
}

// Std returns the standard deviation of x over axes, the square root of
// Var with the same correction.
func (b *Builder) Std(x Value, axes []int, keepdims bool, correction float64) Value {
	return b.op(ir.OpStd, reduceAttrs(axes, keepdims).With("correction", ir.Float(correction)), x)
}

// Argmax returns the i64 index of the first largest element of x over axes,
// counted row-major over the reduced axes.
func (b *Builder) Argmax(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpArgmax, reduceAttrs(axes, keepdims), x)
}

// Argmin returns the i64 index of the first smallest element of x over
// axes, counted row-major over the reduced axes.
func (b *Builder) Argmin(x Value, axes []int, keepdims bool) Value {
	return b.op(ir.OpArgmin, reduceAttrs(axes, keepdims), x)
}

// Greater returns x > y (bool) with NumPy broadcasting.
func (b *Builder) Greater(x, y Value) Value { return b.op(ir.OpGreater, nil, x, y) }

// GreaterEqual returns x >= y (bool) with NumPy broadcasting.
func (b *Builder) GreaterEqual(x, y Value) Value { return b.op(ir.OpGreaterEqual, nil, x, y) }

// Less returns x < y (bool) with NumPy broadcasting.
func (b *Builder) Less(x, y Value) Value { return b.op(ir.OpLess, nil, x, y) }

// LessEqual returns x <= y (bool) with NumPy broadcasting.
func (b *Builder) LessEqual(x, y Value) Value { return b.op(ir.OpLessEqual, nil, x, y) }

// Equal returns x == y (bool) elementwise with NumPy broadcasting.
func (b *Builder) Equal(x, y Value) Value { return b.op(ir.OpEqual, nil, x, y) }

// NotEqual returns x != y (bool) elementwise with NumPy broadcasting.
func (b *Builder) NotEqual(x, y Value) Value { return b.op(ir.OpNotEqual, nil, x, y) }

// Where returns x where cond (bool) holds and y elsewhere, all three
// broadcast.
func (b *Builder) Where(cond, x, y Value) Value { return b.op(ir.OpWhere, nil, cond, x, y) }

// LogicalAnd returns x and y for bool x and y, with NumPy broadcasting.
func (b *Builder) LogicalAnd(x, y Value) Value { return b.op(ir.OpLogicalAnd, nil, x, y) }

// LogicalOr returns x or y for bool x and y, with NumPy broadcasting.
func (b *Builder) LogicalOr(x, y Value) Value { return b.op(ir.OpLogicalOr, nil, x, y) }

// LogicalNot returns not x for bool x.
func (b *Builder) LogicalNot(x Value) Value { return b.op(ir.OpLogicalNot, nil, x) }
