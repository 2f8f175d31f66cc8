package frontends

import (
	"math"

	"github.com/kilnml/kiln/ir"
)

// Shape and data movement (ir/ops_movement.go).

// SliceToEnd as Slice's end slices to the end of the axis (the attribute
// is left out, like Python's x[start:]).
const SliceToEnd = math.MaxInt

// Squeeze removes the axes of size 1 among axes (negative counts from the
// end), or every axis of size 1 when none are given. A listed axis whose
// size is not 1 stays, as in torch.squeeze.
func (b *Builder) Squeeze(x Value, axes ...int) Value {
	var a ir.Attrs
	if axes != nil {
		a = ir.MakeAttrs("axes", ir.Ints(axes...))
	}
	return b.op(ir.OpSqueeze, a, x)
}

// Unsqueeze inserts axes of size 1 at the given positions of the result
// (negative counts from the end of the result).
func (b *Builder) Unsqueeze(x Value, axes ...int) Value {
	return b.op(ir.OpUnsqueeze, ir.MakeAttrs("axes", ir.Ints(axes...)), x)
}

// Flip reverses the order of the elements of x along axes.
func (b *Builder) Flip(x Value, axes ...int) Value {
	return b.op(ir.OpFlip, ir.MakeAttrs("axes", ir.Ints(axes...)), x)
}

// Concat joins xs along an existing axis, like torch.cat(xs, dim=axis).
func (b *Builder) Concat(axis int, xs ...Value) Value {
	return b.op(ir.OpConcat, ir.MakeAttrs("axis", ir.Int(axis)), xs...)
}

// Stack joins xs, all of one type, along a new axis at position axis of the
// result, like torch.stack(xs, dim=axis).
func (b *Builder) Stack(axis int, xs ...Value) Value {
	return b.op(ir.OpStack, ir.MakeAttrs("axis", ir.Int(axis)), xs...)
}

// Slice returns x[start:end:step] along axis with Python's rules: negative
// start and end count from the end, out-of-range bounds clamp, step >= 1.
// An end of SliceToEnd means the end of the axis.
func (b *Builder) Slice(x Value, axis, start, end, step int) Value {
	a := ir.MakeAttrs("axis", ir.Int(axis), "start", ir.Int(start), "step", ir.Int(step))
	if end != SliceToEnd {
		a = a.With("end", ir.Int(end))
	}
	return b.op(ir.OpSlice, a, x)
}

// Pad pads x with value, like torch.nn.functional.pad(x, pads, value=value)
// in constant mode: pads holds [before, after] pairs starting from the last
// axis, and negative widths crop.
func (b *Builder) Pad(x Value, pads []int, value float64) Value {
	return b.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(pads...), "value", ir.Float(value)), x)
}

// Gather reads x along axis at the positions in index, like
// torch.gather(x, axis, index): out[i][j] = x[index[i][j]][j] for axis 0.
func (b *Builder) Gather(x, index Value, axis int) Value {
	return b.op(ir.OpGather, ir.MakeAttrs("axis", ir.Int(axis)), x, index)
}

// IndexSelect returns the slices of x along axis at the positions in the
// 1-D index, like torch.index_select(x, axis, index).
func (b *Builder) IndexSelect(x, index Value, axis int) Value {
	return b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(axis)), x, index)
}

// Embedding returns the rows of table [V,D] at integer indices of any
// shape, with shape indices.shape + [D], like
// torch.nn.functional.embedding(indices, table).
func (b *Builder) Embedding(table, indices Value) Value {
	return b.op(ir.OpEmbedding, nil, table, indices)
}

// ScatterAdd returns x with src added at the positions index gives along
// axis, like x.scatter_add(axis, index, src).
func (b *Builder) ScatterAdd(x, index, src Value, axis int) Value {
	return b.op(ir.OpScatterAdd, ir.MakeAttrs("axis", ir.Int(axis)), x, index, src)
}

// IndexAdd returns x with slice i of src along axis added at slice
// index[i], like x.index_add(axis, index, src).
func (b *Builder) IndexAdd(x, index, src Value, axis int) Value {
	return b.op(ir.OpIndexAdd, ir.MakeAttrs("axis", ir.Int(axis)), x, index, src)
}
