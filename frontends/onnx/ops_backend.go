package onnx

import (
	"errors"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/onnx/onnxpb"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// constTensor returns the import-time constant holding t's elements.
func constTensor(t safetensors.Tensor) *tensor {
	c := &tensor{dt: t.Type.DType, shape: append([]int{}, t.Type.Shape...)}
	return c.fromLE(t.Data, t.Type.Shape.NumElements())
}

// legacyBroadcast applies the broadcasting of the binary ops before opset
// 7 to their second operand b: with broadcast=1, b's shape is a contiguous
// run of a's dims starting at axis (default: the trailing ones), so b is
// reshaped to a's rank with 1s around it and NumPy broadcasting does the
// rest; with broadcast=0 the shapes must be equal.
func (im *importer) legacyBroadcast(n *onnxpb.NodeProto, a, b ir.ID) (ir.ID, error) {
	if im.opset >= 7 {
		return b, nil
	}
	as, bs := im.shapeOf(a), im.shapeOf(b)
	if attrInt(n, "broadcast", 0) == 0 {
		if !ir.Shape(as).Equal(ir.Shape(bs)) {
			return ir.NoID, fmt.Errorf("operands of shapes %v and %v without broadcast=1", as, bs)
		}
		return b, nil
	}
	axis := len(as) - len(bs)
	if a := attr(n, "axis"); a != nil {
		axis = int(a.GetI())
		if axis < 0 {
			axis += len(as)
		}
	}
	if axis < 0 || axis+len(bs) > len(as) {
		return ir.NoID, fmt.Errorf("broadcast of %v onto %v at axis %d does not fit", bs, as, axis)
	}
	shape := make([]int, 0, len(as))
	for k := range as {
		d := 1
		if k >= axis && k < axis+len(bs) {
			d = bs[k-axis]
		}
		shape = append(shape, d)
	}
	if ir.Shape(shape).Equal(ir.Shape(bs)) {
		return b, nil
	}
	return im.g.Add("", ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(shape...)), b)
}

// backendOps are rows of Ops made of kiln ops that exist: reductions,
// activations and movements that ONNX's backend tests exercise.
func backendOps() map[string]Rule {
	return map[string]Rule{
		"HannWindow":      {windowOp(0.5, 0.5), "folded: 0.5 - 0.5 cos(2 pi n / N), N = size (periodic) or size - 1; size a constant input"},
		"HammingWindow":   {windowOp(25.0/46, 21.0/46), "folded: 25/46 - 21/46 cos(2 pi n / N); N as HannWindow"},
		"BlackmanWindow":  {windowOp(0.42, 0.5, 0.08), "folded: 0.42 - 0.5 cos(2 pi n / N) + 0.08 cos(4 pi n / N); N as HannWindow"},
		"ReverseSequence": {emitReverseSequence, "index_select over the flattened time and batch axes (0 and 1 in either order) at positions from the constant sequence_lens"},
		"Scatter":         {emitScatterElements, "as ScatterElements"},
		"DFT":             {emitDFT, "matmuls with constant cos and sin matrices along axis (real input [..., 1] or complex [..., 2]; inverse, onesided); dft_length only the axis's size"},
	}
}

// builder adds kiln ops and keeps the first error, so that composites read
// as formulas.
type builder struct {
	im  *importer
	err error
}

func (b *builder) op(op ir.Op, attrs ir.Attrs, args ...ir.ID) ir.ID {
	if b.err != nil {
		return ir.NoID
	}
	id, err := b.im.g.Add("", op, attrs, args...)
	b.err = err
	return id
}

// scalar is a constant of dtype dt holding v.
func (b *builder) scalar(dt ir.DType, v float64) ir.ID {
	if b.err != nil {
		return ir.NoID
	}
	c := &tensor{dt: dt, shape: []int{}}
	if dt.IsFloat() {
		c.f = []float64{v}
	} else {
		c.i = []int64{int64(v)}
	}
	id, err := b.im.constOp(c)
	b.err = err
	return id
}

func (b *builder) dtype(id ir.ID) ir.DType {
	if b.err != nil {
		return ir.F32
	}
	return b.im.g.Type(id).DType
}

func (b *builder) result(id ir.ID) ([]*val, error) {
	if b.err != nil {
		return nil, b.err
	}
	return []*val{{id: id}}, nil
}

// keepAll is Dropout's mask where nothing is dropped: a bool constant of
// shape, all true.
func keepAll(shape []int) (*val, error) {
	if k := prod(shape); k > MaxFolded {
		return nil, fmt.Errorf("a mask of shape %v has %d elements; constants computed at import are limited to %d (onnx.MaxFolded)", shape, k, MaxFolded)
	}
	c := &tensor{dt: ir.Bool, shape: append([]int{}, shape...), i: make([]int64, prod(shape))}
	for k := range c.i {
		c.i[k] = 1
	}
	return &val{id: ir.NoID, c: c}, nil
}

// windowOp folds HannWindow, HammingWindow and BlackmanWindow: the cosine
// sum a[0] - a[1] cos(2 pi n / N) + a[2] cos(4 pi n / N) over n in
// [0, size), N = size when periodic (the default), else size - 1.
func windowOp(a ...float64) func(*importer, *onnxpb.NodeProto) ([]*val, error) {
	return func(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
		c, err := im.constIn(n, 0)
		if err != nil {
			return nil, err
		}
		if c.n() != 1 {
			return nil, fmt.Errorf("size has %d elements, expected 1", c.n())
		}
		size := c.ints()[0]
		if size < 0 || size > MaxFolded {
			return nil, fmt.Errorf("size %d is not in [0, %d] (onnx.MaxFolded)", size, MaxFolded)
		}
		dt, err := onnxDType(int32(attrInt(n, "output_datatype", int64(onnxpb.TensorProto_FLOAT))))
		if err != nil {
			return nil, err
		}
		den := float64(size)
		if attrInt(n, "periodic", 1) == 0 {
			den = float64(size - 1)
		}
		out := &tensor{dt: dt, shape: []int{int(size)}}
		for k := range int(size) {
			v := a[0]
			for j := 1; j < len(a); j++ {
				sign := -1.0
				if j%2 == 0 {
					sign = 1
				}
				v += sign * a[j] * math.Cos(2*math.Pi*float64(j*k)/den)
			}
			if dt.IsFloat() {
				out.f = append(out.f, v)
			} else {
				out.i = append(out.i, int64(v))
			}
		}
		return []*val{{id: ir.NoID, c: out}}, nil
	}
}

// emitReverseSequence reverses the first sequence_lens[b] steps of each
// batch entry b: an index_select over the time and batch axes flattened,
// at positions computed from the constant lengths.
func emitReverseSequence(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	c, err := im.constIn(n, 1)
	if err != nil {
		return nil, err
	}
	s := im.shapeOf(x)
	ta, ba := int(attrInt(n, "time_axis", 0)), int(attrInt(n, "batch_axis", 1))
	if len(s) < 2 || !((ta == 0 && ba == 1) || (ta == 1 && ba == 0)) {
		return nil, fmt.Errorf("time_axis %d and batch_axis %d of a rank-%d input: expected 0 and 1 in either order", ta, ba, len(s))
	}
	lens := c.ints()
	T, B := s[ta], s[ba]
	if len(lens) != B {
		return nil, fmt.Errorf("sequence_lens has %d entries for a batch of %d", len(lens), B)
	}
	idx := make([]int64, T*B)
	for t := range T {
		for bi := range B {
			l := int(lens[bi])
			if l < 0 || l > T {
				return nil, fmt.Errorf("sequence length %d is outside [0, %d]", l, T)
			}
			src := t
			if t < l {
				src = l - 1 - t
			}
			pos := func(t int) int64 {
				if ta == 0 {
					return int64(t*B + bi)
				}
				return int64(bi*T + t)
			}
			idx[pos(t)] = pos(src)
		}
	}
	b := &builder{im: im}
	flat := b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(append([]int{T * B}, s[2:]...)...)), x)
	y := b.op(ir.OpIndexSelect, ir.MakeAttrs("axis", ir.Int(0)), flat, b.constant(&tensor{dt: ir.I64, shape: []int{len(idx)}, i: idx}))
	return b.result(b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s...)), y))
}

// wrapNegative returns the integer indices idx with dims added where they
// are negative (ONNX's indices count from the end), dims broadcasting
// against idx.
func wrapNegative(b *builder, idx, dims ir.ID) ir.ID {
	dt := b.dtype(idx)
	return b.op(ir.OpWhere, nil, b.op(ir.OpLess, nil, idx, b.scalar(dt, 0)), b.op(ir.OpAdd, nil, idx, dims), idx)
}

// scatterInto returns data with add(zeros) placed where hit(zeros) is
// nonzero (reduction none) or data with add applied (reduction add).
func scatterInto(b *builder, n *onnxpb.NodeProto, data ir.ID, shape []int, upd ir.ID, add func(base, src ir.ID) ir.ID) (ir.ID, error) {
	dt := b.dtype(data)
	switch red := attrString(n, "reduction", "none"); red {
	case "add":
		return add(data, upd), b.err
	case "none":
		zeros := b.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(shape...)), b.scalar(dt, 0))
		hits := add(zeros, b.op(ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(b.im.shapeOf(upd)...)), b.scalar(dt, 1)))
		placed := add(zeros, upd)
		return b.op(ir.OpWhere, nil, b.op(ir.OpNotEqual, nil, hits, b.scalar(dt, 0)), placed, data), b.err
	default:
		return ir.NoID, fmt.Errorf("reduction %q is not supported (none or add)", ir.Excerpt(red))
	}
}

// emitDFT: the discrete Fourier transform along axis as two matmuls with
// constant cos and sin matrices; real input [..., 1] or complex [..., 2],
// complex output [..., 2]; inverse divides by N; onesided keeps the first
// N/2+1 frequencies. dft_length, when given, must be the axis's size.
func emitDFT(im *importer, n *onnxpb.NodeProto) ([]*val, error) {
	x, err := im.id(n, 0)
	if err != nil {
		return nil, err
	}
	s := im.shapeOf(x)
	r := len(s)
	if r < 2 || (s[r-1] != 1 && s[r-1] != 2) {
		return nil, fmt.Errorf("expected an input [..., N, ..., 1 or 2], found %v", s)
	}
	axis, err := normAxis(int(attrInt(n, "axis", 1)), r)
	if err != nil {
		return nil, err
	}
	if axis == r-1 {
		return nil, errors.New("the axis is the real and imaginary axis")
	}
	N := s[axis]
	if has(n, 1) {
		c, err := im.constIn(n, 1)
		if err != nil {
			return nil, err
		}
		if c.n() != 1 || c.ints()[0] != int64(N) {
			return nil, fmt.Errorf("dft_length %v differs from the axis's size %d (padding and truncating are not supported)", c.ints(), N)
		}
	}
	M := N
	if attrInt(n, "onesided", 0) != 0 {
		M = N/2 + 1
	}
	if N*M > MaxFolded {
		return nil, fmt.Errorf("a DFT of %d points needs a %dx%d matrix; constants computed at import are limited to %d elements (onnx.MaxFolded)", N, N, M, MaxFolded)
	}
	inverse := attrInt(n, "inverse", 0) != 0
	b := &builder{im: im}
	dt := b.dtype(x)
	cm, sm := &tensor{dt: dt, shape: []int{N, M}}, &tensor{dt: dt, shape: []int{N, M}}
	scale, sign := 1.0, 1.0
	if inverse {
		scale, sign = 1/float64(N), -1
	}
	for i := range N {
		for k := range M {
			th := 2 * math.Pi * float64((i*k)%N) / float64(N)
			cm.f = append(cm.f, scale*math.Cos(th))
			sm.f = append(sm.f, sign*scale*math.Sin(th))
		}
	}
	// The parts, each [..., N] with the axis moved last.
	perm := make([]int, 0, r-1)
	for k := range r - 1 {
		if k != axis {
			perm = append(perm, k)
		}
	}
	perm = append(perm, axis)
	part := func(k int) ir.ID {
		p := b.op(ir.OpSlice, ir.MakeAttrs("axis", ir.Int(r-1), "start", ir.Int(k), "end", ir.Int(k+1)), x)
		p = b.op(ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s[:r-1]...)), p)
		return b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(perm...)), p)
	}
	C, S := b.constant(cm), b.constant(sm)
	re := part(0)
	outRe := b.op(ir.OpMatmul, nil, re, C)
	outIm := b.op(ir.OpNeg, nil, b.op(ir.OpMatmul, nil, re, S))
	if s[r-1] == 2 {
		im2 := part(1)
		outRe = b.op(ir.OpAdd, nil, outRe, b.op(ir.OpMatmul, nil, im2, S))
		outIm = b.op(ir.OpAdd, nil, outIm, b.op(ir.OpMatmul, nil, im2, C))
	}
	back := make([]int, r-1)
	for k, p := range perm {
		back[p] = k
	}
	y := b.op(ir.OpStack, ir.MakeAttrs("axis", ir.Int(r-1)),
		b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(back...)), outRe),
		b.op(ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(back...)), outIm))
	return b.result(y)
}

func ones(k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = 1
	}
	return out
}

// constant is a const op holding c.
func (b *builder) constant(c *tensor) ir.ID {
	if b.err != nil {
		return ir.NoID
	}
	id, err := b.im.constOp(c)
	b.err = err
	return id
}
