package ir

import "fmt"

// Shape and data movement: squeeze, unsqueeze, flip, concat, stack, slice,
// pad, and the indexed reads (gather, index_select, embedding) with their
// adjoints, the indexed sums (scatter_add, index_add). Semantics follow
// PyTorch (torch.squeeze, torch.cat, torch.gather, ...); the Docs say where
// kiln differs.

func movementOps() []opRow {
	axisReq := func(doc string) []AttrSpec {
		return []AttrSpec{{Name: "axis", Kind: AttrInt, Required: true, Doc: doc}}
	}
	return []opRow{
		{OpSqueeze, OpInfo{Name: "squeeze", Args: []string{"x"}, Infer: inferSqueezeMove, Grad: gradReshapeBackMove,
			Doc: "removes axes of size 1 (torch.squeeze: a listed axis whose size is not 1 is kept, not an error)",
			Attrs: []AttrSpec{{Name: "axes", Kind: attrInts,
				Doc: "axes to remove where their size is 1 (negative counts from the end); absent means every axis of size 1"}}}},
		{OpUnsqueeze, OpInfo{Name: "unsqueeze", Args: []string{"x"}, Infer: inferUnsqueezeMove, Grad: gradReshapeBackMove,
			Doc: "inserts axes of size 1 (torch.unsqueeze, several at once as numpy.expand_dims)",
			Attrs: []AttrSpec{{Name: "axes", Kind: attrInts, Required: true,
				Doc: "positions of the new axes in the result (negative counts from the end of the result)"}}}},
		{OpFlip, OpInfo{Name: "flip", Args: []string{"x"}, Infer: inferFlipMove, Grad: gradFlipMove,
			Doc: "reverses the order of the elements along axes (torch.flip)",
			Attrs: []AttrSpec{{Name: "axes", Kind: attrInts, Required: true,
				Doc: "the axes to reverse (negative counts from the end; no repeats)"}}}},
		{OpConcat, OpInfo{Name: "concat", Args: []string{"x"}, Variadic: true, Infer: inferConcatMove, Grad: gradConcatMove,
			Doc: "joins tensors of one dtype and rank >= 1 along an existing axis; the other dims must agree (torch.cat)",
			Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: defInt(0),
				Doc: "the axis to join along (negative counts from the end)"}}}},
		{OpStack, OpInfo{Name: "stack", Args: []string{"x"}, Variadic: true, Infer: inferStackMove, Grad: gradStackMove,
			Doc: "joins tensors of one type along a new axis (torch.stack)",
			Attrs: []AttrSpec{{Name: "axis", Kind: AttrInt, Default: defInt(0),
				Doc: "the position of the new axis in the result (negative counts from the end of the result)"}}}},
		{OpSlice, OpInfo{Name: "slice", Args: []string{"x"}, Infer: inferSliceMove, Grad: gradSliceMove,
			Doc: "x[start:end:step] along one axis with Python's rules: negative start and end count from the end, out-of-range bounds clamp, step >= 1 (aten::slice)",
			Attrs: []AttrSpec{
				{Name: "axis", Kind: AttrInt, Default: defInt(0), Doc: "the sliced axis (negative counts from the end)"},
				{Name: "start", Kind: AttrInt, Default: defInt(0), Doc: "the first index taken (negative counts from the end; clamped to [0, size])"},
				{Name: "end", Kind: AttrInt, Doc: "the index the slice stops before (negative counts from the end; clamped to [0, size]); absent means the end of the axis"},
				{Name: "step", Kind: AttrInt, Default: defInt(1), Doc: "the distance between taken indices; at least 1"},
			}}},
		{OpPad, OpInfo{Name: "pad", Args: []string{"x"}, Infer: inferPadMove, Grad: gradPadMove,
			Doc: "pads with a constant, or crops where a pad is negative (torch.nn.functional.pad, constant mode)",
			Attrs: []AttrSpec{
				{Name: "pads", Kind: attrInts, Required: true, Doc: "[before, after] pairs starting from the LAST axis: [left_last, right_last, left_second_last, ...]; negative values remove elements"},
				{Name: "value", Kind: AttrFloat, Default: defFloat(0), Doc: "the fill value, converted to the element type (integers truncate toward zero; bool is value != 0)"},
			}}},
		{OpGather, OpInfo{Name: "gather", Args: []string{"x", "index"}, Infer: inferGatherMove, Grad: gradGatherMove, Indices: indexAlongAxis,
			Doc:   "out[i][j] = x[index[i][j]][j] for axis 0 (torch.gather): index has x's rank (>= 1), its dims at most x's off the axis; the result has index's shape; an index outside [0, size) is an error",
			Attrs: axisReq("the axis that index selects along (negative counts from the end)")}},
		{OpIndexSelect, OpInfo{Name: "index_select", Args: []string{"x", "index"}, Infer: inferIndexSelectMove, Grad: gradIndexSelectMove, Indices: indexAlongAxis,
			Doc:   "the slices of x at the positions in the 1-D (or scalar) integer index along axis (torch.index_select); an index outside [0, size) is an error",
			Attrs: axisReq("the axis that index selects along (negative counts from the end)")}},
		{OpEmbedding, OpInfo{Name: "embedding", Args: []string{"table", "indices"}, Infer: inferEmbeddingMove, Grad: gradEmbeddingMove, Indices: embeddingRows,
			Doc: "the rows of table [V,D] at integer indices of any shape, giving indices.shape + [D] (torch.nn.functional.embedding without padding_idx, max_norm or sparse); an index outside [0, V) is an error"}},
		{OpScatterAdd, OpInfo{Name: "scatter_add", Args: []string{"x", "index", "src"}, Infer: inferScatterAddMove, Grad: gradScatterAddMove, Indices: indexAlongAxis,
			Doc:   "x with src[i][j] added at [index[i][j]][j] for axis 0 (torch.Tensor.scatter_add); index, src and x share a rank, index's dims are at most src's and (off the axis) x's; each element sums its contributions in increasing position of index",
			Attrs: axisReq("the axis that index addresses (negative counts from the end)")}},
		{OpIndexAdd, OpInfo{Name: "index_add", Args: []string{"x", "index", "src"}, Infer: inferIndexAddMove, Grad: gradIndexAddMove, Indices: indexAlongAxis,
			Doc:   "x with slice i of src added at slice index[i] along axis (torch.Tensor.index_add with alpha 1); each element sums its contributions in increasing i",
			Attrs: axisReq("the axis that index addresses (negative counts from the end)")}},
	}
}

// movementAxis normalizes axis ax for rank r.
func movementAxis(ax, r int) (int, error) {
	n := ax
	if n < 0 {
		n += r
	}
	if n < 0 || n >= r {
		return 0, fmt.Errorf("axis %d out of range for rank %d", ax, r)
	}
	return n, nil
}

func movementRankAtLeast1(what string, t Type) error {
	if len(t.Shape) == 0 {
		return fmt.Errorf("expected %s of rank >= 1, found %s", what, t)
	}
	return nil
}

func movementIntIndex(what string, t Type) error {
	if !t.DType.IsInt() {
		return fmt.Errorf("expected an integer (i32 or i64) %s, found %s", what, t)
	}
	return nil
}

// SqueezeAxes returns the normalized, increasing axes that squeeze's attrs
// name for rank r (every axis when absent). A scalar accepts axis 0 or -1,
// as in PyTorch.
func SqueezeAxes(attrs Attrs, r int) ([]int, error) {
	if r == 0 {
		if axes, ok := attrs.Ints("axes"); ok {
			for _, ax := range axes {
				if ax != 0 && ax != -1 {
					return nil, fmt.Errorf("axis %d out of range for a scalar (expected 0 or -1)", ax)
				}
			}
		}
		return nil, nil
	}
	return ReduceAxes(attrs, r)
}

func inferSqueezeMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	axes, err := SqueezeAxes(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	out := Shape{}
	j := 0
	for i, d := range x.Shape {
		if j < len(axes) && axes[j] == i {
			j++
			if d == 1 {
				continue
			}
		}
		out = append(out, d)
	}
	return Type{x.DType, out}, nil
}

func inferUnsqueezeMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	axes, _ := a.Ints("axes")
	r := len(x.Shape) + len(axes)
	isNew := make([]bool, r)
	for _, ax := range axes {
		n, err := movementAxis(ax, r)
		if err != nil {
			return Type{}, fmt.Errorf("%v (the result of inserting %d axes into %s)", err, len(axes), x)
		}
		if isNew[n] {
			return Type{}, fmt.Errorf("axis %d repeated in %s", ax, Shape(axes))
		}
		isNew[n] = true
	}
	out := make(Shape, r)
	j := 0
	for i := range out {
		if isNew[i] {
			out[i] = 1
			continue
		}
		out[i] = x.Shape[j]
		j++
	}
	return Type{x.DType, out}, nil
}

func inferFlipMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if _, err := ReduceAxes(a, len(x.Shape)); err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

func inferConcatMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if err := movementRankAtLeast1("operands", x); err != nil {
		return Type{}, err
	}
	axis, err := Axis(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (operand %s)", err, x)
	}
	out := x.Shape.Clone()
	for i, t := range args[1:] {
		if t.DType != x.DType || len(t.Shape) != len(x.Shape) {
			return Type{}, fmt.Errorf("expected operands of dtype %s and rank %d like operand 0 (%s), found operand %d %s", x.DType, len(x.Shape), x, i+1, t)
		}
		for d := range t.Shape {
			if d != axis && t.Shape[d] != x.Shape[d] {
				return Type{}, fmt.Errorf("expected operands of equal dims except on axis %d, found operand 0 %s and operand %d %s", axis, x, i+1, t)
			}
		}
		out[axis] += t.Shape[axis]
	}
	return Type{x.DType, out}, nil
}

func inferStackMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	axis, err := Axis(a, len(x.Shape)+1)
	if err != nil {
		return Type{}, fmt.Errorf("%v (the result of stacking %s)", err, x)
	}
	for i, t := range args[1:] {
		if !t.Equal(x) {
			return Type{}, fmt.Errorf("expected operands of one type, found operand 0 %s and operand %d %s", x, i+1, t)
		}
	}
	out := append(append(x.Shape[:axis:axis].Clone(), len(args)), x.Shape[axis:]...)
	return Type{x.DType, out}, nil
}

// SliceBounds returns what slice's attrs select from an axis of size n: the
// first index, the number of indices taken and the step. start and end
// follow Python: negative values count from the end and both clamp to
// [0, n]; the count is 0 when end <= start.
func SliceBounds(attrs Attrs, n int) (start, count, step int, err error) {
	step = attrs.Int("step", 1)
	if step < 1 {
		return 0, 0, 0, fmt.Errorf("step must be at least 1, found %d", step)
	}
	clamp := func(i int) int {
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n)
	}
	start = clamp(attrs.Int("start", 0))
	end := n
	if _, ok := attrs.Get("end"); ok {
		end = clamp(attrs.Int("end", n))
	}
	if end > start {
		count = (end - start + step - 1) / step
	}
	return start, count, step, nil
}

// SliceView returns how slice's result reads x of shape xs: the element
// offset of its first element and, per axis of the result, the stride in
// x's elements (x's own strides, the sliced axis's times the step). Both
// backends' slice kernels are this strided read.
func SliceView(xs Shape, attrs Attrs) (base int, strides []int, err error) {
	axis, err := Axis(attrs, len(xs))
	if err != nil {
		return 0, nil, err
	}
	start, _, step, err := SliceBounds(attrs, xs[axis])
	if err != nil {
		return 0, nil, err
	}
	strides = xs.Strides()
	base = start * strides[axis]
	strides[axis] *= step
	return base, strides, nil
}

func inferSliceMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	if err := movementRankAtLeast1("an operand", x); err != nil {
		return Type{}, err
	}
	axis, err := Axis(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	_, count, _, err := SliceBounds(a, x.Shape[axis])
	if err != nil {
		return Type{}, err
	}
	out := x.Shape.Clone()
	out[axis] = count
	return Type{x.DType, out}, nil
}

// PadWidths returns pad's widths per axis of a rank-r operand in axis
// order: before[i] and after[i] elements added to axis i (negative ones
// remove elements). The pads attribute lists pairs from the last axis.
func PadWidths(attrs Attrs, r int) (before, after []int, err error) {
	pads, _ := attrs.Ints("pads")
	if len(pads)%2 != 0 || len(pads)/2 > r {
		return nil, nil, fmt.Errorf("expected pads of an even length <= %d (two per axis, from the last, for rank %d), found %d entries %v", 2*r, r, len(pads), Shape(pads))
	}
	before, after = make([]int, r), make([]int, r)
	for k := 0; 2*k < len(pads); k++ {
		before[r-1-k], after[r-1-k] = pads[2*k], pads[2*k+1]
	}
	return before, after, nil
}

func inferPadMove(args []Type, a Attrs) (Type, error) {
	x := args[0]
	before, after, err := PadWidths(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	out := x.Shape.Clone()
	for i := range out {
		out[i] += before[i] + after[i]
		if out[i] < 0 {
			return Type{}, fmt.Errorf("axis %d of %s padded by %d and %d would have size %d; expected a size >= 0", i, x, before[i], after[i], out[i])
		}
	}
	return Type{x.DType, out}, nil
}

func inferGatherMove(args []Type, a Attrs) (Type, error) {
	x, idx := args[0], args[1]
	if err := movementRankAtLeast1("an operand", x); err != nil {
		return Type{}, err
	}
	if err := movementIntIndex("index", idx); err != nil {
		return Type{}, err
	}
	axis, err := Axis(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	if len(idx.Shape) != len(x.Shape) {
		return Type{}, fmt.Errorf("expected an index of x's rank %d, found %s for x %s", len(x.Shape), idx, x)
	}
	for d := range x.Shape {
		if d != axis && idx.Shape[d] > x.Shape[d] {
			return Type{}, fmt.Errorf("expected index dims at most x's except on axis %d, found index %s for x %s", axis, idx, x)
		}
	}
	return Type{x.DType, idx.Shape.Clone()}, nil
}

func inferIndexSelectMove(args []Type, a Attrs) (Type, error) {
	x, idx := args[0], args[1]
	if err := movementRankAtLeast1("an operand", x); err != nil {
		return Type{}, err
	}
	if err := movementIntIndex("index", idx); err != nil {
		return Type{}, err
	}
	if len(idx.Shape) > 1 {
		return Type{}, fmt.Errorf("expected a 1-D (or scalar) index, found %s", idx)
	}
	axis, err := Axis(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	out := x.Shape.Clone()
	out[axis] = idx.Shape.NumElements()
	return Type{x.DType, out}, nil
}

func inferEmbeddingMove(args []Type, _ Attrs) (Type, error) {
	tab, idx := args[0], args[1]
	if len(tab.Shape) != 2 {
		return Type{}, fmt.Errorf("expected a table of rank 2 [V,D], found %s", tab)
	}
	if err := movementIntIndex("indices", idx); err != nil {
		return Type{}, err
	}
	return Type{tab.DType, append(idx.Shape.Clone(), tab.Shape[1])}, nil
}

// movementNumericPair checks that x and src are numeric tensors of one dtype
// and rank >= 1 and index is an integer tensor.
func movementNumericPair(x, idx, src Type) error {
	if err := movementRankAtLeast1("an operand", x); err != nil {
		return err
	}
	if x.DType == Bool || src.DType != x.DType {
		return fmt.Errorf("expected numeric x and src of one dtype, found x %s and src %s", x, src)
	}
	return movementIntIndex("index", idx)
}

func inferScatterAddMove(args []Type, a Attrs) (Type, error) {
	x, idx, src := args[0], args[1], args[2]
	if err := movementNumericPair(x, idx, src); err != nil {
		return Type{}, err
	}
	axis, err := Axis(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	if len(idx.Shape) != len(x.Shape) || len(src.Shape) != len(x.Shape) {
		return Type{}, fmt.Errorf("expected index and src of x's rank %d, found x %s, index %s, src %s", len(x.Shape), x, idx, src)
	}
	for d := range x.Shape {
		if idx.Shape[d] > src.Shape[d] || (d != axis && idx.Shape[d] > x.Shape[d]) {
			return Type{}, fmt.Errorf("expected index dims at most src's, and x's except on axis %d, found x %s, index %s, src %s", axis, x, idx, src)
		}
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

func inferIndexAddMove(args []Type, a Attrs) (Type, error) {
	x, idx, src := args[0], args[1], args[2]
	if err := movementNumericPair(x, idx, src); err != nil {
		return Type{}, err
	}
	if len(idx.Shape) > 1 {
		return Type{}, fmt.Errorf("expected a 1-D (or scalar) index, found %s", idx)
	}
	axis, err := Axis(a, len(x.Shape))
	if err != nil {
		return Type{}, fmt.Errorf("%v (input %s)", err, x)
	}
	want := x.Shape.Clone()
	want[axis] = idx.Shape.NumElements()
	if !src.Shape.Equal(want) {
		return Type{}, fmt.Errorf("expected src of shape %s (x %s with axis %d the index's length), found %s", want, x, axis, src)
	}
	return Type{x.DType, x.Shape.Clone()}, nil
}

// Gradients. Every rule is written with ops of this family, so each is
// differentiable again: the adjoint of a read (gather, index_select,
// embedding) is the matching sum (scatter_add, index_add), whose own
// gradients are the reads; slice and pad are each other's adjoints.

func gradReshapeBackMove(e *Emitter, y, dy ID) []ID {
	return []ID{e.Reshape(dy, e.shape(e.args(y)[0]))}
}

func gradFlipMove(e *Emitter, y, dy ID) []ID {
	axes, _ := e.G.Values[y].Attrs.Ints("axes")
	return []ID{e.Op(OpFlip, MakeAttrs("axes", Ints(axes...)), dy)}
}

// movementSlice appends x[start:start+n] along axis (step 1), or returns x
// when that is all of it.
func (e *Emitter) movementSlice(x ID, axis, start, n int) ID {
	if x == NoID {
		return NoID
	}
	if start == 0 && n == e.shape(x)[axis] {
		return x
	}
	return e.Op(OpSlice, MakeAttrs("axis", Int(axis), "start", Int(start), "end", Int(start+n)), x)
}

// movementPadAxis appends x padded with before and after zeros along axis
// (negative widths crop), or returns x when both are 0.
func (e *Emitter) movementPadAxis(x ID, axis, before, after int) ID {
	if x == NoID || (before == 0 && after == 0) {
		return x
	}
	r := len(e.shape(x))
	pads := make([]int, 2*(r-axis))
	pads[len(pads)-2], pads[len(pads)-1] = before, after
	return e.Op(OpPad, MakeAttrs("pads", Ints(pads...)), x)
}

func gradConcatMove(e *Emitter, y, dy ID) []ID {
	axis := e.movementAxisAttr(y, len(e.shape(y)))
	args := e.args(y)
	out := make([]ID, len(args))
	off := 0
	for i, a := range args {
		n := e.shape(a)[axis]
		out[i] = e.movementSlice(dy, axis, off, n)
		off += n
	}
	return out
}

func gradStackMove(e *Emitter, y, dy ID) []ID {
	axis := e.movementAxisAttr(y, len(e.shape(y)))
	args := e.args(y)
	out := make([]ID, len(args))
	for i, a := range args {
		out[i] = e.Reshape(e.movementSlice(dy, axis, i, 1), e.shape(a))
	}
	return out
}

func gradSliceMove(e *Emitter, y, dy ID) []ID {
	// The adjoint puts dy's elements back at start, start+step, ... of a
	// zero axis of x's size: with step > 1, step-1 zeros go after every
	// element first (reshape to [..,n,1,..], pad the new axis to step,
	// reshape to [..,n*step,..]); then zeros pad the axis to start before
	// and to the rest after, where a negative width crops the surplus zeros
	// of the last step. Every op is exact.
	x := e.args(y)[0]
	xs := e.shape(x)
	attrs := e.G.Values[y].Attrs
	axis, err := Axis(attrs, len(xs))
	if err != nil {
		e.err = err
		return []ID{NoID}
	}
	start, n, step, err := SliceBounds(attrs, xs[axis])
	if err != nil {
		e.err = err
		return []ID{NoID}
	}
	g := dy
	if step > 1 {
		ys := e.shape(dy)
		split := append(append(ys[:axis+1:axis+1].Clone(), 1), ys[axis+1:]...)
		g = e.movementPadAxis(e.Reshape(g, split), axis+1, 0, step-1)
		spread := ys.Clone()
		spread[axis] = n * step
		g = e.Reshape(g, spread)
	}
	return []ID{e.movementPadAxis(g, axis, start, xs[axis]-start-n*step)}
}

func gradPadMove(e *Emitter, y, dy ID) []ID {
	// Element i of x is element i+before of y where that exists (and a
	// cropped element has no effect), so dx is dy padded by the negated
	// widths: a crop of what pad added, zeros for what it cropped.
	pads, _ := e.G.Values[y].Attrs.Ints("pads")
	neg := make([]int, len(pads))
	for i, p := range pads {
		neg[i] = -p
	}
	return []ID{e.Op(OpPad, MakeAttrs("pads", Ints(neg...)), dy)}
}

// movementAxisAttr returns y's axis attribute normalized for rank r.
func (e *Emitter) movementAxisAttr(y ID, r int) int {
	axis, err := Axis(e.G.Values[y].Attrs, r)
	if err != nil && e.err == nil {
		e.err = err
	}
	return axis
}

func gradGatherMove(e *Emitter, y, dy ID) []ID {
	// dx = scatter_add(0, index, dy): each x element gets the sum of dy at
	// the positions that read it.
	x, idx := e.args(y)[0], e.args(y)[1]
	axis := e.movementAxisAttr(y, len(e.shape(x)))
	dx := e.Op(OpScatterAdd, MakeAttrs("axis", Int(axis)), e.Fill(0, e.Type(x)), idx, dy)
	return []ID{dx, NoID}
}

func gradIndexSelectMove(e *Emitter, y, dy ID) []ID {
	x, idx := e.args(y)[0], e.args(y)[1]
	axis := e.movementAxisAttr(y, len(e.shape(x)))
	dx := e.Op(OpIndexAdd, MakeAttrs("axis", Int(axis)), e.Fill(0, e.Type(x)), idx, dy)
	return []ID{dx, NoID}
}

func gradEmbeddingMove(e *Emitter, y, dy ID) []ID {
	// d table = index_add over rows of the flattened indices: a row used
	// several times gets the sum of its gradients.
	tab, idx := e.args(y)[0], e.args(y)[1]
	n, d := e.shape(idx).NumElements(), e.shape(tab)[1]
	flat := e.Reshape(idx, Shape{n})
	dt := e.Op(OpIndexAdd, MakeAttrs("axis", Int(0)), e.Fill(0, e.Type(tab)), flat, e.Reshape(dy, Shape{n, d}))
	return []ID{dt, NoID}
}

func gradScatterAddMove(e *Emitter, y, dy ID) []ID {
	// dx = dy; dsrc = dy read back at index (gather), and zero where src is
	// larger than index and so unused.
	idx, src := e.args(y)[1], e.args(y)[2]
	r := len(e.shape(y))
	axis := e.movementAxisAttr(y, r)
	ds := e.Op(OpGather, MakeAttrs("axis", Int(axis)), dy, idx)
	is, ss := e.shape(idx), e.shape(src)
	if !is.Equal(ss) {
		pads := make([]int, 2*r)
		for d := range r {
			pads[2*(r-1-d)+1] = ss[d] - is[d]
		}
		ds = e.Op(OpPad, MakeAttrs("pads", Ints(pads...)), ds)
	}
	return []ID{dy, NoID, ds}
}

func gradIndexAddMove(e *Emitter, y, dy ID) []ID {
	idx := e.args(y)[1]
	axis := e.movementAxisAttr(y, len(e.shape(y)))
	return []ID{dy, NoID, e.Op(OpIndexSelect, MakeAttrs("axis", Int(axis)), dy, idx)}
}
