package passes

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// canonicalizeAttention puts one attention op in place of each group
//
//	matmul(softmax(masks(scale(matmul(q, kᵀ))), axis=-1), v)
//
// that the builder's MultiHeadAttention and the ONNX importer write, before
// autodiff, so that the forward never stores the [T,S] scores and
// probabilities and the backward is one attention_grad. kᵀ is a transpose
// of k swapping its last two axes, or k read with transpose_b; scale is
// optional: mul by a one-element const c (scale c) or div by one (scale
// 1/c); masks are at most two, each add of a mask (either operand order)
// or where(cond, -inf, scores) (masked_fill; also where(cond, scores,
// -inf)), which becomes the mask where(cond, -inf, 0) (the same sums: x +
// -inf is -inf and x + 0 is x). An added const that is 0 on and below the
// diagonal and -inf above it (with leading axes of size 1) becomes
// causal=true instead of a mask; two masks fuse only when one is causal.
//
// A group fuses only when each of its interior values (the products,
// scores, masked scores and probabilities) has no user outside it and is
// no output, when q, k and v have one leading shape, and when the mask
// depends on no trainable param (attention gives its mask no gradient).
// The transpose and the consts are absorbed when nothing else uses them.
// The attention takes the place of the last matmul (same id and name).
func canonicalizeAttention(g *ir.Graph) error {
	m := attnMatcher{g: g, users: g.Users(), pinned: g.RootMask()}
	var found []attnFusion
	taken := make([]bool, len(g.Values))
	for id := range g.Values {
		f, ok := m.match(ir.ID(id))
		if !ok || slices.ContainsFunc(f.group, func(v ir.ID) bool { return taken[v] }) {
			continue
		}
		for _, v := range f.group {
			taken[v] = true
		}
		found = append(found, f)
	}
	if len(found) == 0 {
		return nil
	}
	n0 := len(g.Values)
	before := map[ir.ID][]ir.ID{} // values appended, to go just before a root
	keep := make([]bool, n0)
	for i := range keep {
		keep[i] = true
	}
	for _, f := range found {
		var ins []ir.ID
		if f.kperm != nil {
			k, err := g.Add("", ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(f.kperm...)), f.k)
			if err != nil {
				return err
			}
			f.k, ins = k, append(ins, k)
		}
		args := []ir.ID{f.q, f.k, f.v}
		if f.cond != ir.NoID {
			dt := g.Type(f.q).DType
			zero, err := g.Add("", ir.OpConst, ir.MakeAttrs("dtype", ir.String(dt.String()), "value", ir.Float(0)))
			if err != nil {
				return err
			}
			inf, err := g.Add("", ir.OpConst, ir.MakeAttrs("dtype", ir.String(dt.String()), "value", ir.Float(math.Inf(-1))))
			if err != nil {
				return err
			}
			mk, err := g.Add("", ir.OpWhere, nil, f.cond, inf, zero)
			if err != nil {
				return err
			}
			ins = append(ins, zero, inf, mk)
			f.mask = mk
		}
		if f.mask != ir.NoID {
			args = append(args, f.mask)
		}
		attrs := ir.MakeAttrs("scale", ir.Float(f.scale), "causal", ir.BoolAttr(f.causal))
		ty, attrs, err := g.Infer(ir.OpAttention, attrs, args)
		if err != nil {
			return err
		}
		v := &g.Values[f.root]
		if !ty.Equal(v.Type) {
			return fmt.Errorf("attention in place of %%%s: type %s, want %s", v.Name, ty, v.Type)
		}
		before[f.root] = ins
		v.Op, v.Args, v.Attrs = ir.OpAttention, args, attrs
		for _, x := range f.group {
			if x != f.root {
				keep[x] = false
			}
		}
	}
	order := make([]ir.ID, 0, len(g.Values))
	for id := range n0 {
		order = append(order, before[ir.ID(id)]...)
		order = append(order, ir.ID(id))
	}
	if err := g.Permute(order); err != nil {
		return err
	}
	keepNew := make([]bool, len(order))
	for pos, id := range order {
		keepNew[pos] = int(id) >= n0 || keep[id]
	}
	g.Retain(keepNew)
	return nil
}

// attnFusion is one matched attention group.
type attnFusion struct {
	root, q, k, v ir.ID
	scale         float64
	causal        bool
	mask          ir.ID // the additive mask, or NoID
	cond          ir.ID // a masked_fill's condition (the mask is made from it), or NoID
	kperm         []int // when set, k is a transpose of .k by kperm, inserted by the rewrite
	group         []ir.ID
}

// attnMatcher matches attention groups, knowing every value's users.
type attnMatcher struct {
	g      *ir.Graph
	users  [][]ir.ID
	pinned []bool
}

// closed reports whether v is no output and every user of v is in group.
func (m *attnMatcher) closed(v ir.ID, group []ir.ID) bool {
	if m.pinned[v] {
		return false
	}
	for _, u := range m.users[v] {
		if !slices.Contains(group, u) {
			return false
		}
	}
	return true
}

// match tries the pattern with its last matmul at root.
func (m *attnMatcher) match(root ir.ID) (attnFusion, bool) {
	g := m.g
	rv := &g.Values[root]
	if rv.Op != ir.OpMatmul || !rv.Type.DType.IsFloat() || len(rv.Type.Shape) < 2 {
		return attnFusion{}, false
	}
	if ta, tb := ir.MatmulTransposes(rv.Attrs); ta || tb {
		return attnFusion{}, false
	}
	att := rv.Args[0]
	av := &g.Values[att]
	if av.Op != ir.OpSoftmax {
		return attnFusion{}, false
	}
	r := len(av.Type.Shape)
	if ax, err := ir.Axis(av.Attrs, r); err != nil || ax != r-1 {
		return attnFusion{}, false
	}
	f := attnFusion{root: root, v: rv.Args[1], scale: 1, mask: ir.NoID, cond: ir.NoID, group: []ir.ID{root, att}}
	st := av.Type
	x := av.Args[0]
	masks := 0
	// Masks, outermost first.
	for {
		xv := &g.Values[x]
		if !xv.Type.Equal(st) {
			return attnFusion{}, false
		}
		next := ir.NoID
		switch xv.Op {
		case ir.OpAdd:
			for _, p := range [][2]ir.ID{{xv.Args[0], xv.Args[1]}, {xv.Args[1], xv.Args[0]}} {
				if g.Type(p[0]).Equal(st) && m.scoresOp(p[0]) {
					next = p[0]
					if m.isCausal(p[1], st) {
						if f.causal {
							return attnFusion{}, false
						}
						f.causal = true
						f.group = append(f.group, p[1])
					} else {
						if f.mask != ir.NoID || f.cond != ir.NoID {
							return attnFusion{}, false
						}
						f.mask = p[1]
					}
					break
				}
			}
		case ir.OpWhere:
			cond, a, b := xv.Args[0], xv.Args[1], xv.Args[2]
			if f.mask != ir.NoID || f.cond != ir.NoID || g.Type(cond).DType != ir.Bool {
				return attnFusion{}, false
			}
			switch {
			case m.isNegInf(a) && g.Type(b).Equal(st):
				next = b
			case m.isNegInf(b) && g.Type(a).Equal(st):
				// where(cond, scores, -inf) masks where cond is false: the
				// condition is its negation, which the matcher does not
				// write; leave it.
				return attnFusion{}, false
			default:
				return attnFusion{}, false
			}
			f.cond = cond
			f.group = append(f.group, a)
		}
		if next == ir.NoID {
			break
		}
		if masks++; masks > 2 {
			return attnFusion{}, false
		}
		f.group = append(f.group, x)
		x = next
	}
	// The scale.
	xv := &g.Values[x]
	switch xv.Op {
	case ir.OpMul, ir.OpDiv:
		c, s := xv.Args[1], xv.Args[0]
		if xv.Op == ir.OpMul && m.scalarConst(xv.Args[0]) {
			c, s = xv.Args[0], xv.Args[1]
		}
		if !m.scalarConst(c) || !g.Type(s).Equal(st) {
			return attnFusion{}, false
		}
		f.scale = m.constValue(c)
		if xv.Op == ir.OpDiv {
			f.scale = 1 / f.scale
		}
		if math.IsInf(f.scale, 0) || math.IsNaN(f.scale) {
			return attnFusion{}, false
		}
		f.group = append(f.group, x, c)
		x = s
	}
	// q·kᵀ.
	mv := &g.Values[x]
	if mv.Op != ir.OpMatmul {
		return attnFusion{}, false
	}
	ta, tb := ir.MatmulTransposes(mv.Attrs)
	if ta {
		return attnFusion{}, false
	}
	f.group = append(f.group, x)
	f.q = mv.Args[0]
	kt := mv.Args[1]
	switch {
	case tb:
		f.k = kt
	case g.Values[kt].Op == ir.OpTranspose:
		// k is kt's operand transposed by kt's perm with its last two
		// entries swapped: that operand itself when the perm swaps only
		// them, else a transpose the rewrite inserts.
		f.k = g.Values[kt].Args[0]
		f.kperm = m.permOf(kt)
		f.kperm[r-2], f.kperm[r-1] = f.kperm[r-1], f.kperm[r-2]
		f.group = append(f.group, kt)
	default:
		f.k = kt
		f.kperm = identityPerm(r)
		f.kperm[r-2], f.kperm[r-1] = r-1, r-2
	}
	if f.kperm != nil && slices.Equal(f.kperm, identityPerm(r)) {
		f.kperm = nil
	}
	if f.mask != ir.NoID && m.dependsOnParam(f.mask) {
		return attnFusion{}, false
	}
	// Interior values must be closed; the transpose and consts are
	// absorbed only when they are.
	var group []ir.ID
	for _, v := range f.group {
		switch {
		case v == root:
		case g.Values[v].Op == ir.OpConst || g.Values[v].Op == ir.OpTranspose:
			if !m.closed(v, f.group) {
				continue
			}
		case !m.closed(v, f.group):
			return attnFusion{}, false
		}
		group = append(group, v)
	}
	f.group = append(group, root)
	args := []ir.ID{f.q, f.k, f.v}
	if f.mask != ir.NoID {
		args = append(args, f.mask)
	}
	if f.cond != ir.NoID {
		args = append(args, f.cond) // only its shape is checked below
	}
	qt, kt2, vt := g.Type(f.q), g.Type(f.k), g.Type(f.v)
	if f.kperm != nil {
		kt2 = ir.Type{DType: kt2.DType, Shape: make(ir.Shape, r)}
		for i, p := range f.kperm {
			kt2.Shape[i] = g.Type(f.k).Shape[p]
		}
	}
	if len(qt.Shape) != r || len(kt2.Shape) != r || len(vt.Shape) != r || !qt.Shape[:r-2].Equal(kt2.Shape[:r-2]) ||
		!qt.Shape[:r-2].Equal(vt.Shape[:r-2]) || qt.Shape[r-1] != kt2.Shape[r-1] || kt2.Shape[r-2] != vt.Shape[r-2] {
		return attnFusion{}, false
	}
	if len(args) > 3 {
		full := st.Shape
		ms := g.Type(args[3]).Shape
		if b, ok := ir.BroadcastShapes(ms, full); !ok || !b.Equal(full) || (f.mask != ir.NoID && g.Type(f.mask).DType != st.DType) {
			return attnFusion{}, false
		}
	}
	return f, true
}

// scoresOp reports whether x is computed by an op the scores can be
// (a mask, a scale or the product), so that add(scores, mask) is told
// from add(mask, scores).
func (m *attnMatcher) scoresOp(x ir.ID) bool {
	switch m.g.Values[x].Op {
	case ir.OpAdd, ir.OpWhere, ir.OpMul, ir.OpDiv, ir.OpMatmul:
		return true
	}
	return false
}

// permOf returns transpose t's permutation (absent: the axes reversed).
func (m *attnMatcher) permOf(t ir.ID) []int {
	if perm, ok := m.g.Values[t].Attrs.Ints("perm"); ok {
		return slices.Clone(perm)
	}
	r := len(m.g.Type(t).Shape)
	perm := make([]int, r)
	for i := range perm {
		perm[i] = r - 1 - i
	}
	return perm
}

// identityPerm returns 0, 1, ..., r-1.
func identityPerm(r int) []int {
	p := make([]int, r)
	for i := range p {
		p[i] = i
	}
	return p
}

// scalarConst reports whether c is a const of one element.
func (m *attnMatcher) scalarConst(c ir.ID) bool {
	v := &m.g.Values[c]
	return v.Op == ir.OpConst && v.Type.Shape.NumElements() == 1 && v.Type.DType.IsFloat()
}

// constValue returns the one element of const c as its kernel stores it.
func (m *attnMatcher) constValue(c ir.ID) float64 {
	v := &m.g.Values[c]
	val, _ := v.Attrs.Get("value")
	xs, _ := val.AsFloats()
	if len(xs) == 0 {
		return math.NaN()
	}
	if v.Type.DType == ir.F32 {
		return float64(float32(xs[0]))
	}
	return xs[0]
}

// isNegInf reports whether c is a one-element float const -inf.
func (m *attnMatcher) isNegInf(c ir.ID) bool {
	return m.scalarConst(c) && math.IsInf(m.constValue(c), -1)
}

// isCausal reports whether c is a float const of scores' dtype, [T,S] with
// leading axes of size 1, 0 where s <= t and -inf where s > t.
func (m *attnMatcher) isCausal(c ir.ID, scores ir.Type) bool {
	v := &m.g.Values[c]
	if v.Op != ir.OpConst || v.Type.DType != scores.DType || len(v.Type.Shape) < 2 || len(v.Type.Shape) > len(scores.Shape) {
		return false
	}
	r := len(v.Type.Shape)
	if v.Type.Shape[:r-2].NumElements() != 1 {
		return false
	}
	t, s := v.Type.Shape[r-2], v.Type.Shape[r-1]
	sr := len(scores.Shape)
	if t != scores.Shape[sr-2] || s != scores.Shape[sr-1] {
		return false
	}
	val, _ := v.Attrs.Get("value")
	xs, ok := val.AsFloats()
	if !ok || len(xs) != t*s {
		return false
	}
	for i := range t {
		for j := range s {
			x := xs[i*s+j]
			if j <= i && (x != 0) || j > i && !math.IsInf(x, -1) {
				return false
			}
		}
	}
	return true
}

// dependsOnParam reports whether x is computed from a trainable param.
func (m *attnMatcher) dependsOnParam(x ir.ID) bool {
	seen := make([]bool, len(m.g.Values))
	stack := []ir.ID{x}
	for len(stack) > 0 {
		id := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		if m.g.Values[id].Op == ir.OpParam && !m.g.Frozen(id) {
			return true
		}
		stack = append(stack, m.g.Values[id].Args...)
	}
	return false
}
