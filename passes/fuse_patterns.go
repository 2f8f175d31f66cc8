package passes

import (
	"fmt"
	"math"
	"slices"

	"github.com/kilnml/kiln/ir"
)

// fusePatterns puts a fused op with a dedicated kernel in place of each
// group of ops that matches one of the patterns autodiff emits:
//
//	softmax_grad      mul(y, sub(dy, sum(mul(dy, y), axes=[a], keepdims=true)))
//	log_softmax_grad  sub(dy, mul(exp(y), sum(dy, axes=[a], keepdims=true)))
//	max_grad          mul(div(reshape(dy), sum(w, axes, keepdims=true)), w),
//	                  w = where(equal(x, reshape(y)), 1, 0), y = max or min of x
//	softmax_ce_grad   mul(sub(softmax(logits), one_hot(labels)), scale), or for
//	                  probabilities mul(sub(mul(softmax(logits), sum(t, axes=[1],
//	                  keepdims=true)), t), scale); the sub alone (scale 1)
//
// Commutative operands (mul, equal) match in either order, the reshapes
// autodiff puts around dy and y are optional, and the forms simplification
// leaves of a constant dy are matched too (max's dy a scalar, the
// cross-entropy difference without its multiplication by 1), so the
// patterns still match after simplification. The fused op takes the place
// of the group's last value (same id and name), so outputs, gradients and
// updates that name it are unchanged; its "from" attribute records the
// .kir lines of the values it replaces.
//
// The cost rule: a group is fused only when each of its interior values is
// used by nothing outside the group (no other op, output, gradient or
// update). Otherwise the interior value has to be computed and kept anyway,
// and the fused kernel would compute it a second time: softmax_ce_grad
// would recompute a softmax whose exp per element costs more than the
// elementwise passes fusion saves. Reshapes and constants around the group
// are absorbed when they have no other users and left alone otherwise.
//
// Matching runs over the values in order and again until nothing changes
// (a fusion can leave an earlier group's interior free of outside users);
// then the replaced values, now unused, are removed.
func fusePatterns(g *ir.Graph) error {
	changed := false
	// The unscaled cross-entropy difference is tried only once every
	// scaled one has been fused, which would otherwise lose its scale.
	for _, match := range []func(*fusepatMatcher, ir.ID) (fusepatFusion, bool){(*fusepatMatcher).match, (*fusepatMatcher).softmaxCEUnscaled} {
		for {
			m := fusepatNewMatcher(g)
			fused := false
			for id := range g.Values {
				if !m.live[id] {
					continue
				}
				f, ok := match(m, ir.ID(id))
				if !ok {
					continue
				}
				if err := m.rewrite(f); err != nil {
					return err
				}
				fused, changed = true, true
				m = fusepatNewMatcher(g)
			}
			if !fused {
				break
			}
		}
	}
	if !changed {
		return nil
	}
	return DCE(g)
}

// fusepatFusion is one matched group and the op that replaces it.
type fusepatFusion struct {
	root  ir.ID
	op    ir.Op
	args  []ir.ID
	attrs ir.Attrs
	group []ir.ID // every replaced value, the root included
}

// fusepatMatcher matches the patterns against a graph, knowing the live
// users of every value.
type fusepatMatcher struct {
	g *ir.Graph
	// users[v] are the live values that use v; pinned[v] is set when an
	// output, gradient or update names v.
	users  [][]ir.ID
	pinned []bool
	// live[v] is set when an output, gradient or update needs v; dead
	// groups are left for DCE.
	live []bool
}

// fusepatNewMatcher returns a matcher for g as it is now; a rewrite
// changes the users, so each one is followed by a new matcher.
func fusepatNewMatcher(g *ir.Graph) *fusepatMatcher {
	m := &fusepatMatcher{g: g, users: make([][]ir.ID, len(g.Values)), pinned: g.RootMask()}
	live := make([]bool, len(g.Values))
	m.live = live
	for i := len(g.Values) - 1; i >= 0; i-- {
		if m.pinned[i] {
			live[i] = true
		}
		if !live[i] {
			continue
		}
		for _, a := range g.Values[i].Args {
			live[a] = true
		}
	}
	for i, v := range g.Values {
		if !live[i] {
			continue
		}
		for _, a := range v.Args {
			m.users[a] = append(m.users[a], ir.ID(i))
		}
	}
	return m
}

// closed reports whether every use of v is by a member of group.
func (m *fusepatMatcher) closed(v ir.ID, group []ir.ID) bool {
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

// interiorClosed reports whether every value of group but root is closed.
func (m *fusepatMatcher) interiorClosed(root ir.ID, group []ir.ID) bool {
	for _, v := range group {
		if v != root && !m.closed(v, group) {
			return false
		}
	}
	return true
}

// absorb adds each optional value to group when all its uses are in group.
func (m *fusepatMatcher) absorb(group []ir.ID, optional ...ir.ID) []ir.ID {
	for _, v := range optional {
		if v != ir.NoID && !slices.Contains(group, v) && m.closed(v, group) {
			group = append(group, v)
		}
	}
	return group
}

// val returns value id.
func (m *fusepatMatcher) val(id ir.ID) *ir.Value { return &m.g.Values[id] }

// is reports whether id is computed by op.
func (m *fusepatMatcher) is(id ir.ID, op ir.Op) bool { return m.g.Values[id].Op == op }

// pairs returns the two orders of a commutative op's arguments.
func (m *fusepatMatcher) pairs(id ir.ID) [][2]ir.ID {
	a := m.g.Values[id].Args
	return [][2]ir.ID{{a[0], a[1]}, {a[1], a[0]}}
}

// match tries every pattern at root.
func (m *fusepatMatcher) match(root ir.ID) (fusepatFusion, bool) {
	if !m.val(root).Type.DType.IsFloat() {
		return fusepatFusion{}, false
	}
	switch m.val(root).Op {
	case ir.OpMul:
		if f, ok := m.softmaxGrad(root); ok {
			return f, true
		}
		if f, ok := m.maxGrad(root); ok {
			return f, true
		}
		return m.softmaxCEGrad(root)
	case ir.OpSub:
		return m.logSoftmaxGrad(root)
	}
	return fusepatFusion{}, false
}

// sumAxis returns the single axis that the keepdims sum s reduces of its
// operand, normalized.
func (m *fusepatMatcher) sumAxis(s ir.ID) (int, bool) {
	v := m.val(s)
	if v.Op != ir.OpSum || !v.Attrs.Bool("keepdims", false) {
		return 0, false
	}
	axes, err := ir.ReduceAxes(v.Attrs, len(m.g.Type(v.Args[0]).Shape))
	if err != nil || len(axes) != 1 {
		return 0, false
	}
	return axes[0], true
}

// softmaxGrad matches root = mul(y, sub(dy, sum(mul(dy, y), axes=[a],
// keepdims=true))), with dy, y and every elementwise value of one type.
func (m *fusepatMatcher) softmaxGrad(root ir.ID) (fusepatFusion, bool) {
	t := m.val(root).Type
	for _, p := range m.pairs(root) {
		y, t2 := p[0], p[1]
		if !m.is(t2, ir.OpSub) || !m.g.Type(y).Equal(t) {
			continue
		}
		dy, s := m.val(t2).Args[0], m.val(t2).Args[1]
		axis, ok := m.sumAxis(s)
		if !ok || !m.g.Type(dy).Equal(t) || !m.g.Type(t2).Equal(t) {
			continue
		}
		t1 := m.val(s).Args[0]
		if !m.is(t1, ir.OpMul) || !m.g.Type(t1).Equal(t) {
			continue
		}
		a := m.val(t1).Args
		if !(a[0] == dy && a[1] == y || a[0] == y && a[1] == dy) {
			continue
		}
		group := []ir.ID{t1, s, t2, root}
		if !m.interiorClosed(root, group) {
			continue
		}
		return fusepatFusion{root: root, op: ir.OpSoftmaxGrad, args: []ir.ID{dy, y},
			attrs: ir.MakeAttrs("axis", ir.Int(axis)), group: group}, true
	}
	return fusepatFusion{}, false
}

// logSoftmaxGrad matches root = sub(dy, mul(exp(y), sum(dy, axes=[a],
// keepdims=true))), with dy, y and every elementwise value of one type.
func (m *fusepatMatcher) logSoftmaxGrad(root ir.ID) (fusepatFusion, bool) {
	t := m.val(root).Type
	dy, mu := m.val(root).Args[0], m.val(root).Args[1]
	if !m.is(mu, ir.OpMul) || !m.g.Type(dy).Equal(t) || !m.g.Type(mu).Equal(t) {
		return fusepatFusion{}, false
	}
	for _, p := range m.pairs(mu) {
		e, s := p[0], p[1]
		if !m.is(e, ir.OpExp) || !m.g.Type(e).Equal(t) {
			continue
		}
		axis, ok := m.sumAxis(s)
		if !ok || m.val(s).Args[0] != dy {
			continue
		}
		y := m.val(e).Args[0]
		group := []ir.ID{e, s, mu, root}
		if !m.interiorClosed(root, group) {
			continue
		}
		return fusepatFusion{root: root, op: ir.OpLogSoftmaxGrad, args: []ir.ID{dy, y},
			attrs: ir.MakeAttrs("axis", ir.Int(axis)), group: group}, true
	}
	return fusepatFusion{}, false
}

// constIs reports whether id is a const of dtype dt whose every element is
// v (with v's sign, so -0 is not 0).
func (m *fusepatMatcher) constIs(id ir.ID, dt ir.DType, v float64) bool {
	c := m.val(id)
	if c.Op != ir.OpConst || c.Type.DType != dt {
		return false
	}
	val, _ := c.Attrs.Get("value")
	vals, ok := val.AsFloats()
	if !ok || len(vals) == 0 {
		return false
	}
	for _, x := range vals {
		if x != v || math.Signbit(x) != math.Signbit(v) {
			return false
		}
	}
	return true
}

// maxGrad matches the gradient of y = max(x) or min(x) over axes:
// root = mul(div(dyk, count), w) with w = where(equal(x, yk), 1, 0),
// count = sum(w, axes, keepdims=true), yk = y or reshape(y) and dyk = dy
// or reshape(dy), both of the keepdims shape.
func (m *fusepatMatcher) maxGrad(root ir.ID) (fusepatFusion, bool) {
	t := m.val(root).Type
	for _, p := range m.pairs(root) {
		q, w := p[0], p[1]
		if !m.is(q, ir.OpDiv) || !m.is(w, ir.OpWhere) || !m.g.Type(w).Equal(t) {
			continue
		}
		dyk, count := m.val(q).Args[0], m.val(q).Args[1]
		cv := m.val(count)
		if cv.Op != ir.OpSum || cv.Args[0] != w || !cv.Attrs.Bool("keepdims", false) {
			continue
		}
		axes, err := ir.ReduceAxes(cv.Attrs, len(t.Shape))
		if err != nil {
			continue
		}
		keep := ir.Type{DType: t.DType, Shape: ir.ReducedShape(t.Shape, axes, true)}
		// dyk is dy in the keepdims shape, or a scalar (a constant dy,
		// folded) that every slice shares.
		scalarDy := m.g.Type(dyk).Equal(ir.Type{DType: t.DType, Shape: ir.Shape{}})
		if !m.g.Type(q).Equal(keep) || !m.g.Type(dyk).Equal(keep) && !scalarDy {
			continue
		}
		wa := m.val(w).Args
		mask, one, zero := wa[0], wa[1], wa[2]
		if !m.is(mask, ir.OpEqual) || !m.constIs(one, t.DType, 1) || !m.constIs(zero, t.DType, 0) {
			continue
		}
		for _, xy := range m.pairs(mask) {
			x, yk := xy[0], xy[1]
			if !m.g.Type(x).Equal(t) || !m.g.Type(yk).Equal(keep) {
				continue
			}
			// y is yk itself (keepdims) or what yk reshapes.
			y, reshaped := yk, false
			if m.is(yk, ir.OpReshape) {
				y, reshaped = m.val(yk).Args[0], true
			}
			yv := m.val(y)
			if yv.Op != ir.OpMax && yv.Op != ir.OpMin || yv.Args[0] != x {
				continue
			}
			if yaxes, err := ir.ReduceAxes(yv.Attrs, len(t.Shape)); err != nil || !slices.Equal(yaxes, axes) {
				continue
			}
			group := []ir.ID{mask, w, count, q, root}
			if !m.interiorClosed(root, group) {
				continue
			}
			dy, keepdims := dyk, true
			switch {
			case !reshaped:
				// y has the keepdims shape; dyk does too, or is a scalar.
			case scalarDy:
				keepdims = m.g.Type(y).Shape.Equal(keep.Shape)
				group = m.absorb(group, yk)
			case m.is(dyk, ir.OpReshape) && m.g.Type(m.val(dyk).Args[0]).Equal(m.g.Type(y)):
				dy, keepdims = m.val(dyk).Args[0], m.g.Type(y).Shape.Equal(keep.Shape)
				group = m.absorb(group, yk, dyk)
			default:
				// dy is only at hand in the keepdims shape: use yk as y.
				y = yk
			}
			group = m.absorb(group, one, zero)
			attrs := ir.MakeAttrs("axes", ir.Ints(axes...), "keepdims", ir.BoolAttr(keepdims), "min", ir.BoolAttr(yv.Op == ir.OpMin))
			return fusepatFusion{root: root, op: ir.OpMaxGrad, args: []ir.ID{dy, x, y}, attrs: attrs, group: group}, true
		}
	}
	return fusepatFusion{}, false
}

// softmaxCEGrad matches softmax_cross_entropy's logits gradient:
// root = mul(d, scale), d = sub(softmax(logits), one_hot(labels)) for
// labels or sub(mul(softmax(logits), sum(t, axes=[1], keepdims=true)), t)
// for probabilities, and scale a scalar (mul(dy, 1/N) for "mean", any other
// scalar as dy for "sum") or per row ([N,1], reshape(dy [N]) or itself, for
// "none").
func (m *fusepatMatcher) softmaxCEGrad(root ir.ID) (fusepatFusion, bool) {
	t := m.val(root).Type
	if len(t.Shape) != 2 {
		return fusepatFusion{}, false
	}
	n := t.Shape[0]
	for _, p := range m.pairs(root) {
		d, scale := p[0], p[1]
		if !m.is(d, ir.OpSub) || !m.g.Type(d).Equal(t) || m.g.Type(scale).DType != t.DType {
			continue
		}
		logits, target, group, ok := m.ceDifference(d, t)
		if !ok {
			continue
		}
		group = append(group, root)
		if !m.interiorClosed(root, group) {
			continue
		}
		var dy ir.ID
		var reduction string
		switch ss := m.g.Type(scale).Shape; {
		case len(ss) == 0:
			dy, reduction = scale, "sum"
			if mean, ok := m.ceMeanScale(scale, n, t.DType); ok && m.closed(scale, group) {
				dy, reduction = m.val(scale).Args[mean[0]], "mean"
				group = append(group, scale)
				group = m.absorb(group, m.val(scale).Args[mean[1]])
			}
		case ss.Equal(ir.Shape{n, 1}):
			dy, reduction = scale, "none"
			if m.is(scale, ir.OpReshape) && m.g.Type(m.val(scale).Args[0]).Shape.Equal(ir.Shape{n}) {
				dy = m.val(scale).Args[0]
				group = m.absorb(group, scale)
			}
		default:
			continue
		}
		return fusepatFusion{root: root, op: ir.OpSoftmaxCEGrad, args: []ir.ID{logits, target, dy},
			attrs: ir.MakeAttrs("reduction", ir.String(reduction)), group: group}, true
	}
	return fusepatFusion{}, false
}

// softmaxCEUnscaled matches the cross-entropy difference alone at root,
// sub(softmax(logits), one_hot(labels)) or the probabilities' form: what
// simplification leaves of the gradient of a "sum" loss whose dy is 1
// (mul(d, 1) is d). It becomes softmax_ce_grad without dy.
func (m *fusepatMatcher) softmaxCEUnscaled(root ir.ID) (fusepatFusion, bool) {
	t := m.val(root).Type
	if m.val(root).Op != ir.OpSub || !t.DType.IsFloat() || len(t.Shape) != 2 {
		return fusepatFusion{}, false
	}
	logits, target, group, ok := m.ceDifference(root, t)
	if !ok || !m.interiorClosed(root, group) {
		return fusepatFusion{}, false
	}
	return fusepatFusion{root: root, op: ir.OpSoftmaxCEGrad, args: []ir.ID{logits, target},
		attrs: ir.MakeAttrs("reduction", ir.String("sum")), group: group}, true
}

// ceDifference matches d = sub(softmax(logits), one_hot(labels)) or
// sub(mul(softmax(logits), sum(t, axes=[1], keepdims=true)), t), softmax
// along the last axis of [N,C] values of type ty, and returns logits, the
// target and the group's values.
func (m *fusepatMatcher) ceDifference(d ir.ID, ty ir.Type) (logits, target ir.ID, group []ir.ID, ok bool) {
	a, b := m.val(d).Args[0], m.val(d).Args[1]
	softmaxOf := func(p ir.ID) (ir.ID, bool) {
		v := m.val(p)
		if v.Op != ir.OpSoftmax || !v.Type.Equal(ty) {
			return ir.NoID, false
		}
		ax, err := ir.Axis(v.Attrs, 2)
		return v.Args[0], err == nil && ax == 1
	}
	if lg, ok := softmaxOf(a); ok {
		oh := m.val(b)
		if oh.Op != ir.OpOneHot || !oh.Type.Equal(ty) {
			return ir.NoID, ir.NoID, nil, false
		}
		return lg, oh.Args[0], []ir.ID{a, b, d}, true
	}
	if !m.is(a, ir.OpMul) || !m.g.Type(a).Equal(ty) || !m.g.Type(b).Equal(ty) {
		return ir.NoID, ir.NoID, nil, false
	}
	for _, p := range m.pairs(a) {
		sm, st := p[0], p[1]
		lg, ok := softmaxOf(sm)
		if !ok {
			continue
		}
		if ax, ok := m.sumAxis(st); !ok || ax != 1 || m.val(st).Args[0] != b {
			continue
		}
		return lg, b, []ir.ID{sm, st, a, d}, true
	}
	return ir.NoID, ir.NoID, nil, false
}

// ceMeanScale reports whether scalar s is mul(dy, c) with c a const equal,
// in dtype dt, to 1/n: the scale of a "mean" loss over n rows. It returns
// the argument positions of dy and c.
func (m *fusepatMatcher) ceMeanScale(s ir.ID, n int, dt ir.DType) ([2]int, bool) {
	if !m.is(s, ir.OpMul) {
		return [2]int{}, false
	}
	inv := 1 / float64(max(n, 1))
	if dt == ir.F32 {
		inv = float64(float32(inv))
	}
	args := m.val(s).Args
	for i, c := range args {
		other := args[1-i]
		if len(m.g.Type(c).Shape) != 0 || len(m.g.Type(other).Shape) != 0 || m.val(c).Op != ir.OpConst {
			continue
		}
		val, _ := m.val(c).Attrs.Get("value")
		f, ok := val.AsFloat()
		if !ok {
			continue
		}
		if dt == ir.F32 {
			f = float64(float32(f))
		}
		if f == inv {
			return [2]int{1 - i, i}, true
		}
	}
	return [2]int{}, false
}

// rewrite puts f's op in place of its root, recording the lines of the
// group's values that it replaces.
func (m *fusepatMatcher) rewrite(f fusepatFusion) error {
	g := m.g
	// A value the fused op reads (a constant dy also used inside the
	// group) is not replaced.
	group := slices.DeleteFunc(slices.Clone(f.group), func(v ir.ID) bool { return slices.Contains(f.args, v) })
	slices.Sort(group)
	attrs := f.attrs.With(ir.FromAttr, g.Provenance(group...))
	ty, attrs, err := g.Infer(f.op, attrs, f.args)
	if err != nil {
		return fmt.Errorf("fusing %s into %s: %v", g.NameOf(f.root), f.op, err)
	}
	v := &g.Values[f.root]
	if !ty.Equal(v.Type) {
		return fmt.Errorf("fusing %s into %s: type %s, the value has %s", g.NameOf(f.root), f.op, ty, v.Type)
	}
	v.Op, v.Args, v.Attrs = f.op, slices.Clone(f.args), attrs
	return nil
}
