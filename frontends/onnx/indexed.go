package onnx

import (
	"errors"
	"fmt"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/ir"
)

// GatherND and ScatterND address rows of the data seen as a matrix:
// [prod(the addressed dims), prod(the rest)]; an index tuple becomes one
// row number, computed at import for constant indices (negatives counted
// from the end), else by integer ops (on the CPU). The rows move by
// index_select and index_add, whose gradients are each other.

// ndRows returns the row numbers, a 1-D i64 value, of the index tuples in
// indices [..., k] into dims (the addressed dims after the batch dims of
// batch, whose positions add their own offsets).
func (im *importer) ndRows(iv *val, dims []int, batch []int) (ir.ID, error) {
	k := len(dims)
	per := prod(dims) // rows per batch position
	if iv.c != nil {
		c := iv.c
		c.load()
		if c.dt != ir.I32 && c.dt != ir.I64 {
			return ir.NoID, fmt.Errorf("expected integer indices, found %s", c.dt)
		}
		is := c.shape
		if len(is) == 0 || is[len(is)-1] != k {
			return ir.NoID, fmt.Errorf("expected indices [..., %d], found %v", k, is)
		}
		m := prod(is[:len(is)-1])
		rows := make([]int64, m)
		nb := prod(batch)
		for r := range m {
			var flat int64
			for j, d := range dims {
				v := c.ints()[r*k+j]
				if v < 0 {
					v += int64(d)
				}
				if v < 0 || v >= int64(d) {
					return ir.NoID, fmt.Errorf("index %d is out of range for a dim of size %d", c.ints()[r*k+j], d)
				}
				flat = flat*int64(d) + v
			}
			// Index tuples run over the batch positions in order: tuple r
			// belongs to batch position r / (m / nb).
			b := int64(0)
			if nb > 0 && m > 0 {
				b = int64(r / (m / nb))
			}
			rows[r] = b*int64(per) + flat
		}
		return im.constOp(&tensor{dt: ir.I64, shape: []int{m}, i: rows})
	}
	idx, err := im.value(iv, false)
	if err != nil {
		return ir.NoID, err
	}
	is := im.shapeOf(idx)
	if len(is) == 0 || is[len(is)-1] != k {
		return ir.NoID, fmt.Errorf("expected indices [..., %d], found %v", k, is)
	}
	c := &builder{im: im}
	if im.g.Type(idx).DType != ir.I64 {
		idx = c.op(ir.OpCast, ir.MakeAttrs("dtype", ir.String("i64")), idx)
	}
	strides := make([]int64, k)
	s := int64(1)
	for j := k - 1; j >= 0; j-- {
		strides[j] = s
		s *= int64(dims[j])
	}
	st, err := im.constOp(&tensor{dt: ir.I64, shape: []int{k}, i: strides})
	if err != nil {
		return ir.NoID, err
	}
	flat := c.op(ir.OpSum, ir.MakeAttrs("axes", ir.Ints(len(is)-1), "keepdims", ir.BoolAttr(false)), c.op(ir.OpMul, nil, idx, st))
	m := prod(is[:len(is)-1])
	if nb := prod(batch); nb > 1 {
		offs := make([]int64, m)
		for r := range offs {
			offs[r] = int64(r/(m/nb)) * int64(per)
		}
		o, err := im.constOp(&tensor{dt: ir.I64, shape: is[:len(is)-1], i: offs})
		if err != nil {
			return ir.NoID, err
		}
		flat = c.op(ir.OpAdd, nil, flat, o)
	}
	return c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(m)), flat), c.err
}

func emitGatherND(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	iv, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	xs, is := im.shapeOf(x), im.shapeOfVal(iv)
	b := int(attrInt(n, "batch_dims", 0))
	if len(is) == 0 {
		return nil, errors.New("expected indices of rank >= 1")
	}
	k := is[len(is)-1]
	if b < 0 || b+k > len(xs) || b > len(is)-1 {
		return nil, fmt.Errorf("indices %v with batch_dims %d do not fit data %v", is, b, xs)
	}
	rows, err := im.ndRows(iv, xs[b:b+k], xs[:b])
	if err != nil {
		return nil, err
	}
	c := &builder{im: im}
	rest := xs[b+k:]
	x2 := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(xs[:b+k]), prod(rest))), x)
	y := c.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(0)), x2, rows)
	out := append(append([]int(nil), is[:len(is)-1]...), rest...)
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(out...)), y))
}

// emitScatterND writes (reduction none) or adds (add) the updates at the
// rows the indices name: index_add into the data for add; for none,
// where a row is named, index_add of the updates into zeros, else the data
// (exact for unique indices, which ONNX needs for a defined result).
func emitScatterND(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	iv, err := im.in(n, 1)
	if err != nil {
		return nil, err
	}
	u, err := im.id(n, 2)
	if err != nil {
		return nil, err
	}
	xs, is := im.shapeOf(x), im.shapeOfVal(iv)
	if len(is) == 0 || is[len(is)-1] > len(xs) {
		return nil, fmt.Errorf("indices %v do not fit data %v", is, xs)
	}
	k := is[len(is)-1]
	rows, err := im.ndRows(iv, xs[:k], nil)
	if err != nil {
		return nil, err
	}
	c := &builder{im: im}
	p, rest := prod(xs[:k]), prod(xs[k:])
	m := prod(is[:len(is)-1])
	x2 := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(p, rest)), x)
	u2 := c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(m, rest)), u)
	axis0 := ir.MakeAttrs("axis", ir.Int(0))
	var y ir.ID
	switch red := attrString(n, "reduction", "none"); red {
	case "add":
		y = c.op(ir.OpIndexAdd, axis0, x2, rows, u2)
	case "none":
		dt := ir.String(im.g.Type(x).DType.String())
		zeros := c.op(ir.OpConst, ir.MakeAttrs("dtype", dt, "shape", ir.Ints(p, rest), "value", ir.Float(0)))
		ones := c.op(ir.OpConst, ir.MakeAttrs("dtype", dt, "shape", ir.Ints(m, rest), "value", ir.Float(1)))
		hit := c.op(ir.OpGreater, nil, c.op(ir.OpIndexAdd, axis0, zeros, rows, ones), c.scalarLike(0, x))
		y = c.op(ir.OpWhere, nil, hit, c.op(ir.OpIndexAdd, axis0, zeros, rows, u2), x2)
	default:
		return nil, fmt.Errorf("reduction %q is not supported (none, add)", ir.Excerpt(red))
	}
	return c.result(c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(xs...)), y))
}

// emitEyeLike folds to the constant with ones on diagonal k.
func emitEyeLike(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	v, err := im.in(n, 0)
	if err != nil {
		return nil, err
	}
	s := im.shapeOfVal(v)
	if len(s) != 2 {
		return nil, fmt.Errorf("expected a 2-D input, found %v", s)
	}
	dt := im.dtypeOfVal(v)
	if a := attr(n, "dtype"); a != nil {
		if dt, err = onnxDType(int32(a.GetI())); err != nil {
			return nil, err
		}
	}
	if prod(s) > MaxFolded {
		return nil, fmt.Errorf("a constant of shape %v is above onnx.MaxFolded (%d)", s, MaxFolded)
	}
	k := int(attrInt(n, "k", 0))
	out := &tensor{dt: dt, shape: s}
	vals := make([]float64, prod(s))
	for i := range s[0] {
		if j := i + k; j >= 0 && j < s[1] {
			vals[i*s[1]+j] = 1
		}
	}
	if dt.IsFloat() {
		out.f = vals
	} else {
		out.i = make([]int64, len(vals))
		for i, x := range vals {
			out.i[i] = int64(x)
		}
	}
	return []*val{{id: ir.NoID, c: out}}, nil
}

// emitCompress keeps the slices along axis (of the flattened input without
// one) where the constant condition is true: index_select of their
// positions.
func emitCompress(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	cond, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	c := &builder{im: im}
	axis := 0
	if a := attr(n, "axis"); a != nil {
		if axis, err = normAxis(int(a.GetI()), len(im.shapeOf(x))); err != nil {
			return nil, err
		}
	} else {
		x = c.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(prod(im.shapeOf(x)))), x)
	}
	if c.err != nil {
		return nil, c.err
	}
	d := im.shapeOf(x)[axis]
	var keep []int64
	for i, v := range cond.floats() {
		if i < d && v != 0 {
			keep = append(keep, int64(i))
		}
	}
	idx, err := im.constOp(&tensor{dt: ir.I64, shape: []int{len(keep)}, i: keep})
	if err != nil {
		return nil, err
	}
	return c.result(c.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(axis)), x, idx))
}

// emitLRN is local response normalization across channels: x divided by
// (bias + alpha/size * the sum of squares over the channel window)^beta,
// the window sum as padded channel slices added.
func emitLRN(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	size := int(attrInt(n, "size", 0))
	if len(xs) < 3 || size < 1 {
		return nil, fmt.Errorf("expected an input [N,C,...] and size >= 1, found %v and size %d", xs, size)
	}
	alpha, beta, bias := attrFloat(n, "alpha", 1e-4), attrFloat(n, "beta", 0.75), attrFloat(n, "bias", 1)
	before, after := (size-1)/2, size-1-(size-1)/2
	c := &builder{im: im}
	pads := make([]int, 2*(len(xs)-1))
	pads[len(pads)-2], pads[len(pads)-1] = before, after
	sq := c.op(ir.OpPad, ir.MakeAttrs("pads", ir.Ints(pads...)), c.op(ir.OpSquare, nil, x))
	sum := ir.NoID
	for t := range size {
		s := c.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(1), "start", ir.Int(t), "end", ir.Int(t+xs[1]), "step", ir.Int(1)), sq)
		if sum == ir.NoID {
			sum = s
		} else {
			sum = c.op(ir.OpAdd, nil, sum, s)
		}
	}
	den := c.op(ir.OpAdd, nil, c.op(ir.OpMul, nil, sum, c.scalarLike(alpha/float64(size), x)), c.scalarLike(bias, x))
	return c.result(c.op(ir.OpMul, nil, x, c.op(ir.OpPow, ir.MakeAttrs("exponent", ir.Float(-beta)), den)))
}

func emitShrink(c *builder, n *onnxpb.NodeProto, x ir.ID) ir.ID {
	l, b := attrFloat(n, "lambd", 0.5), attrFloat(n, "bias", 0)
	hi := c.op(ir.OpWhere, nil, c.op(ir.OpGreater, nil, x, c.scalarLike(l, x)), c.op(ir.OpSub, nil, x, c.scalarLike(b, x)), c.scalarLike(0, x))
	return c.op(ir.OpWhere, nil, c.op(ir.OpLess, nil, x, c.scalarLike(-l, x)), c.op(ir.OpAdd, nil, x, c.scalarLike(b, x)), hi)
}

// MaxTopK is the largest k that TopK unrolls: each of the k picks is an
// argmax, a gather and a mask over the axis.
const MaxTopK = 256

// emitTopK unrolls TopK with a constant k into k picks along the axis (moved
// last): the arg max (min when largest=0) of what is left, the value there
// read from the input by gather (so gradients reach the input exactly),
// then that position masked with the dtype's lowest (highest) value. Ties
// go to the lower index, as ONNX asks; the results are sorted.
func emitTopK(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	var k int
	if im.opset < 10 {
		k = int(attrInt(n, "k", 0))
	} else if k, err = im.scalarIn(n, 1); err != nil {
		return nil, err
	}
	xs := im.shapeOf(x)
	axis, err := normAxis(int(attrInt(n, "axis", -1)), len(xs))
	if err != nil {
		return nil, err
	}
	if k < 0 || k > xs[axis] || k > MaxTopK {
		return nil, fmt.Errorf("k %d is out of range (at most the axis's %d and onnx.MaxTopK, %d)", k, xs[axis], MaxTopK)
	}
	if !im.g.Type(x).DType.IsFloat() {
		return nil, fmt.Errorf("expected float input, found %s", im.g.Type(x).DType)
	}
	largest := attrInt(n, "largest", 1) != 0
	c := &builder{im: im}
	r := len(xs)
	perm := make([]int, r)
	for j := range perm {
		perm[j] = j
	}
	perm[axis], perm[r-1] = r-1, axis
	xt, err := im.transposeIfNeeded(x, perm)
	if err != nil {
		return nil, err
	}
	d := xs[axis]
	iota := make([]int64, d)
	for j := range iota {
		iota[j] = int64(j)
	}
	pos, err := im.constOp(&tensor{dt: ir.I64, shape: []int{d}, i: iota})
	if err != nil {
		return nil, err
	}
	pick, fill := ir.OpArgmax, im.lowest(x)
	if !largest {
		pick, fill = ir.OpArgmin, -fill
	}
	last := ir.MakeAttrs("axes", ir.Ints(r-1), "keepdims", ir.BoolAttr(true))
	cur := xt.id
	var vals, idxs []ir.ID
	for j := range k {
		i := c.op(pick, last, cur)
		vals = append(vals, c.op(ir.OpGather, ir.MakeAttrs("axis", ir.Int(r-1)), xt.id, i))
		idxs = append(idxs, i)
		if j < k-1 {
			cur = c.op(ir.OpWhere, nil, c.op(ir.OpEqual, nil, i, pos), c.scalarLike(fill, x), cur)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	cat := func(ids []ir.ID, dt ir.DType) (ir.ID, error) {
		if len(ids) == 0 {
			s := im.shapeOf(xt.id)
			s[r-1] = 0
			return c.op(ir.OpConst, ir.MakeAttrs("dtype", ir.String(dt.String()), "shape", ir.Ints(s...), "value", ir.Float(0))), c.err
		}
		y := ids[0]
		if len(ids) > 1 {
			y = c.op(ir.OpConcat, ir.MakeAttrs("axis", ir.Int(r-1)), ids...)
		}
		v, err := im.transposeIfNeeded(y, perm)
		if err != nil {
			return ir.NoID, err
		}
		return v.id, c.err
	}
	v, err := cat(vals, im.g.Type(x).DType)
	if err != nil {
		return nil, err
	}
	ix, err := cat(idxs, ir.I64)
	if err != nil {
		return nil, err
	}
	return []*val{{id: v}, {id: ix}}, nil
}
