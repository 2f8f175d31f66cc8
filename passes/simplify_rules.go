package passes

import (
	"math"

	"github.com/kilnml/kiln/internal/vmath"
	"github.com/kilnml/kiln/ir"
)

// simplifyRule is one algebraic rule: it matches at value id, whose op is
// the one the rule is listed under, and rewrites the graph (replaces id by
// an equal value, or rewrites id in place), reporting whether it did.
//
// Every rule keeps results bit for bit. That rules out, for floats, the
// rules that are only true of real numbers: x*0 → 0 and x-x → 0 (NaN and
// ±Inf give NaN), and those that lose the sign of a zero: x + (+0) → x
// (-0 + +0 is +0), x - (-0) → x, (+0) - x → neg x (0 - 0 is +0, neg 0 is
// -0), and a float sum over size-1 axes → reshape (the kernel adds to +0).
// Those apply where the zero is the identity of the operation (x + (-0),
// x - (+0), (-0) - x), for integers, or where the other operand is known
// never to be -0 (neverNegZero). NaN stays NaN, but its sign and payload
// may change (x + neg y gives the NaN of -y where x - y gives that of y),
// as IEEE 754 leaves them unspecified.
type simplifyRule struct {
	name string
	fn   func(s *simplifier, id ir.ID) bool
}

// simplifyRuleTable lists the rules of each op, tried in order; folding
// comes first where the op folds.
var simplifyRuleTable = map[ir.Op][]simplifyRule{
	ir.OpConst: {ruleFoldEntry},
	ir.OpAdd: {ruleFoldEntry,
		{"add-zero", ruleAddZero}, {"add-neg", ruleAddNeg},
		{"broadcast-operand", ruleBroadcastOperand}, {"scalar-operand", ruleScalarOperand}},
	ir.OpSub: {ruleFoldEntry,
		{"sub-zero", ruleSubZero}, {"sub-neg", ruleSubNeg}, {"zero-sub", ruleZeroSub},
		{"broadcast-operand", ruleBroadcastOperand}, {"scalar-operand", ruleScalarOperand}},
	ir.OpMul: {ruleFoldEntry,
		{"mul-one", ruleMulOne}, {"mul-minus-one", ruleMulMinusOne}, {"neg-operands", ruleNegOperands},
		{"broadcast-operand", ruleBroadcastOperand}, {"scalar-operand", ruleScalarOperand}},
	ir.OpDiv: {ruleFoldEntry,
		{"div-one", ruleDivOne}, {"div-minus-one", ruleDivMinusOne}, {"neg-operands", ruleNegOperands},
		{"broadcast-operand", ruleBroadcastOperand}, {"scalar-operand", ruleScalarOperand}},
	ir.OpNeg:  {ruleFoldEntry, {"neg-neg", ruleNegNeg}},
	ir.OpSqrt: {ruleFoldEntry},
	ir.OpTranspose: {ruleFoldEntry,
		{"transpose-identity", ruleTransposeIdentity}, {"transpose-transpose", ruleTransposeTranspose},
		{"transpose-as-reshape", ruleTransposeAsReshape}, {"canonical-axes", ruleCanonicalAxes}},
	ir.OpReshape: {ruleFoldEntry, {"reshape-identity", ruleReshapeIdentity}, {"reshape-reshape", ruleReshapeReshape}},
	ir.OpSqueeze: {ruleFoldEntry, {"reshape-identity", ruleReshapeIdentity}, {"reshape-reshape", ruleReshapeReshape},
		{"squeeze-as-reshape", ruleAsReshape}},
	ir.OpUnsqueeze: {ruleFoldEntry, {"reshape-identity", ruleReshapeIdentity}, {"reshape-reshape", ruleReshapeReshape},
		{"unsqueeze-as-reshape", ruleAsReshape}},
	ir.OpBroadcastTo: {ruleFoldEntry,
		{"broadcast-identity", ruleBroadcastIdentity}, {"broadcast-broadcast", ruleBroadcastBroadcast},
		{"broadcast-reshape", ruleBroadcastReshape}, {"broadcast-as-reshape", ruleBroadcastAsReshape}},
	ir.OpMatmul: {{"matmul-transpose", ruleMatmulTranspose}},
	ir.OpSum:    {{"reduce-unit-axes", ruleReduceUnitAxes}, {"canonical-axes", ruleCanonicalAxes}},
	ir.OpMean:   {{"reduce-unit-axes", ruleReduceUnitAxes}, {"canonical-axes", ruleCanonicalAxes}},
}

var ruleFoldEntry = simplifyRule{"fold", ruleFold}

// simplifyRules is simplifyRuleTable indexed by op, built once.
var simplifyRules = func() [][]simplifyRule {
	t := make([][]simplifyRule, len(ir.Ops())+1)
	for op, rules := range simplifyRuleTable {
		t[op] = rules
	}
	for _, op := range ir.Ops() {
		if _, ok, _ := vmath.Lookup(op, nil); ok && t[op] == nil {
			t[op] = []simplifyRule{ruleFoldEntry} // the unary ops of vmath's table
		}
	}
	return t
}()

// Const predicates, on elements as the kernel stores them.

func isOne(_ ir.DType, x float64) bool      { return x == 1 }
func isMinusOne(_ ir.DType, x float64) bool { return x == -1 }

// isNegZeroOrIntZero: -0 for floats (x + (-0) is x, also for x = -0), 0
// for integers.
func isNegZeroOrIntZero(dt ir.DType, x float64) bool {
	return x == 0 && (math.Signbit(x) || !dt.IsFloat())
}

// isPosZeroOrIntZero: +0 for floats (x - (+0) is x, also for x = -0), 0
// for integers.
func isPosZeroOrIntZero(dt ir.DType, x float64) bool {
	return x == 0 && (!math.Signbit(x) || !dt.IsFloat())
}

func isZero(_ ir.DType, x float64) bool { return x == 0 }

// neverNegZero reports whether no element of value id can be -0: integers,
// and floats made by ops whose results are never -0 (relu gives +0 for
// x <= 0; exp, sigmoid, softmax and abs are +0 at the least; one_hot
// writes +0 and 1; sum adds to +0, and a sum is -0 only when both terms
// are), followed through data movement and add up to a small depth.
func (s *simplifier) neverNegZero(id ir.ID, depth int) bool {
	v := &s.g.Values[id]
	if !v.Type.DType.IsFloat() {
		return true
	}
	switch v.Op {
	case ir.OpConst:
		return s.constAll(id, func(_ ir.DType, x float64) bool { return !(x == 0 && math.Signbit(x)) })
	case ir.OpRelu, ir.OpExp, ir.OpSigmoid, ir.OpSoftmax, ir.OpOneHot, ir.OpAbs, ir.OpSum:
		return true
	case ir.OpAdd:
		return depth > 0 && (s.neverNegZero(v.Args[0], depth-1) || s.neverNegZero(v.Args[1], depth-1))
	case ir.OpReshape, ir.OpSqueeze, ir.OpUnsqueeze, ir.OpBroadcastTo, ir.OpTranspose:
		return depth > 0 && s.neverNegZero(v.Args[0], depth-1)
	}
	return false
}

const neverNegZeroDepth = 4

func (s *simplifier) op(id ir.ID) ir.Op         { return s.g.Values[id].Op }
func (s *simplifier) arg(id ir.ID, i int) ir.ID { return s.g.Values[id].Args[i] }
func (s *simplifier) shape(id ir.ID) ir.Shape   { return s.g.Values[id].Type.Shape }

// add(x, c), add(c, x) → x where c is an additive identity for x: -0, or
// +0 when x is never -0 (floats), 0 (integers). When c broadcasts x to a
// larger shape, the result is broadcast_to(x).
func ruleAddZero(s *simplifier, id ir.ID) bool {
	a, b := s.arg(id, 0), s.arg(id, 1)
	identity := func(c, x ir.ID) bool {
		return s.constAll(c, isNegZeroOrIntZero) || (s.constAll(c, isZero) && s.neverNegZero(x, neverNegZeroDepth))
	}
	if identity(b, a) {
		return s.replaceOrBroadcast(id, a)
	}
	if identity(a, b) {
		return s.replaceOrBroadcast(id, b)
	}
	return false
}

// add(x, neg y) → sub(x, y), add(neg y, x) → sub(x, y): IEEE 754 defines
// x - y as x + (-y).
func ruleAddNeg(s *simplifier, id ir.ID) bool {
	a, b := s.arg(id, 0), s.arg(id, 1)
	if s.op(b) == ir.OpNeg {
		return s.rewrite(id, ir.OpSub, nil, a, s.arg(b, 0))
	}
	if s.op(a) == ir.OpNeg {
		return s.rewrite(id, ir.OpSub, nil, b, s.arg(a, 0))
	}
	return false
}

// sub(x, c) → x where c is +0, or -0 when x is never -0 (floats), 0
// (integers); broadcast_to(x) when c broadcasts x.
func ruleSubZero(s *simplifier, id ir.ID) bool {
	x, c := s.arg(id, 0), s.arg(id, 1)
	if s.constAll(c, isPosZeroOrIntZero) || (s.constAll(c, isZero) && s.neverNegZero(x, neverNegZeroDepth)) {
		return s.replaceOrBroadcast(id, x)
	}
	return false
}

// sub(x, neg y) → add(x, y).
func ruleSubNeg(s *simplifier, id ir.ID) bool {
	a, b := s.arg(id, 0), s.arg(id, 1)
	if s.op(b) == ir.OpNeg {
		return s.rewrite(id, ir.OpAdd, nil, a, s.arg(b, 0))
	}
	return false
}

// sub(c, x) → neg(x) where c is -0 (floats: -0 - x is -x for every x,
// zeros included; +0 - (+0) is +0, not -0, so +0 does not qualify) or 0
// (integers), and x has the result's shape.
func ruleZeroSub(s *simplifier, id ir.ID) bool {
	c, x := s.arg(id, 0), s.arg(id, 1)
	if s.shape(x).Equal(s.shape(id)) && s.constAll(c, isNegZeroOrIntZero) {
		return s.rewrite(id, ir.OpNeg, nil, x)
	}
	return false
}

// mul(x, 1), mul(1, x) → x (broadcast_to(x) when the ones broadcast x).
func ruleMulOne(s *simplifier, id ir.ID) bool {
	a, b := s.arg(id, 0), s.arg(id, 1)
	if s.constAll(b, isOne) {
		return s.replaceOrBroadcast(id, a)
	}
	if s.constAll(a, isOne) {
		return s.replaceOrBroadcast(id, b)
	}
	return false
}

// mul(x, -1), mul(-1, x) → neg(x) where x has the result's shape: x·(-1)
// is -x exactly, and integer negation wraps as the product does.
func ruleMulMinusOne(s *simplifier, id ir.ID) bool {
	a, b := s.arg(id, 0), s.arg(id, 1)
	if s.constAll(b, isMinusOne) && s.shape(a).Equal(s.shape(id)) {
		return s.rewrite(id, ir.OpNeg, nil, a)
	}
	if s.constAll(a, isMinusOne) && s.shape(b).Equal(s.shape(id)) {
		return s.rewrite(id, ir.OpNeg, nil, b)
	}
	return false
}

// mul(neg a, neg b) → mul(a, b), div(neg a, neg b) → div(a, b): the sign
// of a product or quotient is the exclusive or of the signs, and rounding
// to nearest is symmetric.
func ruleNegOperands(s *simplifier, id ir.ID) bool {
	a, b := s.arg(id, 0), s.arg(id, 1)
	if s.op(a) == ir.OpNeg && s.op(b) == ir.OpNeg {
		return s.rewrite(id, s.op(id), nil, s.arg(a, 0), s.arg(b, 0))
	}
	return false
}

// div(x, 1) → x (broadcast_to(x) when the ones broadcast x).
func ruleDivOne(s *simplifier, id ir.ID) bool {
	x, c := s.arg(id, 0), s.arg(id, 1)
	if s.constAll(c, isOne) {
		return s.replaceOrBroadcast(id, x)
	}
	return false
}

// div(x, -1) → neg(x) where x has the result's shape.
func ruleDivMinusOne(s *simplifier, id ir.ID) bool {
	x, c := s.arg(id, 0), s.arg(id, 1)
	if s.constAll(c, isMinusOne) && s.shape(x).Equal(s.shape(id)) {
		return s.rewrite(id, ir.OpNeg, nil, x)
	}
	return false
}

// op(a, broadcast_to(y)) → op(a, y) (either side) where the binary op's own
// broadcasting of a and y gives the same shape: the broadcast repeated
// nothing the op would not repeat itself, and its copy is saved.
func ruleBroadcastOperand(s *simplifier, id ir.ID) bool {
	args := s.g.Values[id].Args
	for j := range 2 {
		b := args[j]
		if s.op(b) != ir.OpBroadcastTo {
			continue
		}
		y := s.arg(b, 0)
		out, ok := ir.BroadcastShapes(s.shape(args[1-j]), s.shape(y))
		if !ok || !out.Equal(s.shape(id)) {
			continue
		}
		next := []ir.ID{args[0], args[1]}
		next[j] = y
		return s.rewrite(id, s.op(id), nil, next...)
	}
	return false
}

// op(x, c) → op(x, c0) (either side) where c is a filled const of rank > 0
// and x has the result's shape: c0 is the scalar const of c's value, so
// the operand needs no buffer of the result's size. (Folding turns
// broadcast_to of a scalar const into such filled consts.)
func ruleScalarOperand(s *simplifier, id ir.ID) bool {
	g := s.g
	for j := range 2 {
		c, x := g.Values[id].Args[j], g.Values[id].Args[1-j]
		cv := &g.Values[c]
		if cv.Op != ir.OpConst || len(cv.Type.Shape) == 0 || !s.shape(x).Equal(s.shape(id)) {
			continue
		}
		value, _ := cv.Attrs.Get("value")
		if value.Kind == ir.AttrList {
			continue // not filled; a list of equal values is made filled by folding first
		}
		scalar := s.insert(ir.OpConst, ir.MakeAttrs("dtype", ir.String(cv.Type.DType.String()), "value", value))
		if scalar == ir.NoID {
			return false
		}
		next := append([]ir.ID(nil), g.Values[id].Args...)
		next[j] = scalar
		return s.rewrite(id, g.Values[id].Op, nil, next...)
	}
	return false
}

// neg(neg x) → x.
func ruleNegNeg(s *simplifier, id ir.ID) bool {
	a := s.arg(id, 0)
	if s.op(a) == ir.OpNeg {
		return s.replace(id, s.arg(a, 0))
	}
	return false
}

// perm returns the permutation of transpose id.
func (s *simplifier) perm(id ir.ID) ([]int, bool) {
	p, err := ir.Perm(s.g.Values[id].Attrs, len(s.shape(s.arg(id, 0))))
	return p, err == nil
}

// transpose(x) with the identity permutation → x.
func ruleTransposeIdentity(s *simplifier, id ir.ID) bool {
	p, ok := s.perm(id)
	if !ok {
		return false
	}
	for i, j := range p {
		if i != j {
			return false
		}
	}
	return s.replace(id, s.arg(id, 0))
}

// transpose(transpose(x, p1), p2) → transpose(x, q) with q[i] = p1[p2[i]]
// (axis i of the result is axis p2[i] of the inner result, which is axis
// p1[p2[i]] of x). An identity q then goes by transpose-identity.
func ruleTransposeTranspose(s *simplifier, id ir.ID) bool {
	inner := s.arg(id, 0)
	if s.op(inner) != ir.OpTranspose {
		return false
	}
	p2, ok2 := s.perm(id)
	p1, ok1 := s.perm(inner)
	if !ok1 || !ok2 {
		return false
	}
	q := make([]int, len(p2))
	for i := range q {
		q[i] = p1[p2[i]]
	}
	return s.rewrite(id, ir.OpTranspose, ir.MakeAttrs("perm", ir.Ints(q...)), s.arg(inner, 0))
}

// transpose(x) → reshape(x) when the permutation keeps the axes longer than
// 1 in their order: only size-1 axes move, so the elements stay in the
// same row-major order.
func ruleTransposeAsReshape(s *simplifier, id ir.ID) bool {
	p, ok := s.perm(id)
	if !ok {
		return false
	}
	xs := s.shape(s.arg(id, 0))
	last := -1
	for _, j := range p {
		if xs[j] == 1 {
			continue
		}
		if j < last {
			return false
		}
		last = j
	}
	return s.rewrite(id, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), s.arg(id, 0))
}

// swapsLast2 reports whether transpose id swaps the last two axes of its
// argument and keeps the others in place.
func (s *simplifier) swapsLast2(id ir.ID) bool {
	p, ok := s.perm(id)
	r := len(p)
	if !ok || r < 2 || p[r-2] != r-1 || p[r-1] != r-2 {
		return false
	}
	for i := range r - 2 {
		if p[i] != i {
			return false
		}
	}
	return true
}

// matmul(transpose(x), y) → matmul(x, y) {transpose_a}, where the
// transpose swaps the last two axes (and likewise for y, transpose_b; a
// flag already set is cleared, as xᵀᵀ = x). The gemm reads an operand
// transposed as it packs it, and adds the products of each result element
// in the same order whichever way its operands are stored, so the bits are
// those of the product of the transpose's result; the transpose is no
// longer computed unless something else reads it.
func ruleMatmulTranspose(s *simplifier, id ir.ID) bool {
	v := &s.g.Values[id]
	ta, tb := ir.MatmulTransposes(v.Attrs)
	flags := [2]bool{ta, tb}
	args := [2]ir.ID{v.Args[0], v.Args[1]}
	changed := false
	for i, x := range args {
		if s.op(x) == ir.OpTranspose && s.swapsLast2(x) {
			args[i], flags[i], changed = s.arg(x, 0), !flags[i], true
		}
	}
	if !changed {
		return false
	}
	var attrs ir.Attrs
	for i, name := range []string{"transpose_a", "transpose_b"} {
		if flags[i] {
			attrs = attrs.With(name, ir.BoolAttr(true))
		}
	}
	return s.rewrite(id, ir.OpMatmul, attrs, args[0], args[1])
}

// isReshapeLike reports whether op only gives its argument's elements a new
// shape, in the same row-major order.
func isReshapeLike(op ir.Op) bool {
	return op == ir.OpReshape || op == ir.OpSqueeze || op == ir.OpUnsqueeze
}

// reshape, squeeze or unsqueeze of x to x's own shape → x.
func ruleReshapeIdentity(s *simplifier, id ir.ID) bool {
	x := s.arg(id, 0)
	if s.shape(x).Equal(s.shape(id)) {
		return s.replace(id, x)
	}
	return false
}

// A reshape (squeeze, unsqueeze) of a reshape (squeeze, unsqueeze) of x →
// one reshape of x: squeeze/unsqueeze pairs that cancel become a reshape to
// x's own shape, which reshape-identity removes.
func ruleReshapeReshape(s *simplifier, id ir.ID) bool {
	inner := s.arg(id, 0)
	if !isReshapeLike(s.op(inner)) {
		return false
	}
	return s.rewrite(id, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), s.arg(inner, 0))
}

// squeeze(x), unsqueeze(x) → reshape(x) to the same shape: one spelling for
// the later rules, CSE and fusion.
func ruleAsReshape(s *simplifier, id ir.ID) bool {
	return s.rewrite(id, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), s.arg(id, 0))
}

// broadcast_to(x) to x's own shape → x.
func ruleBroadcastIdentity(s *simplifier, id ir.ID) bool {
	x := s.arg(id, 0)
	if s.shape(x).Equal(s.shape(id)) {
		return s.replace(id, x)
	}
	return false
}

// broadcast_to(broadcast_to(x, s1), s2) → broadcast_to(x, s2): NumPy
// broadcasting composes.
func ruleBroadcastBroadcast(s *simplifier, id ir.ID) bool {
	inner := s.arg(id, 0)
	if s.op(inner) != ir.OpBroadcastTo {
		return false
	}
	return s.rewrite(id, ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), s.arg(inner, 0))
}

// trimLeadingOnes drops the leading size-1 axes of sh.
func trimLeadingOnes(sh ir.Shape) ir.Shape {
	for len(sh) > 0 && sh[0] == 1 {
		sh = sh[1:]
	}
	return sh
}

// broadcast_to(reshape(y), s) → broadcast_to(y, s) when the reshape only
// adds or removes leading size-1 axes, which broadcasting adds anyway (the
// gradient of a reduction reshapes dy to the kept dims and broadcasts it).
func ruleBroadcastReshape(s *simplifier, id ir.ID) bool {
	inner := s.arg(id, 0)
	if !isReshapeLike(s.op(inner)) {
		return false
	}
	y := s.arg(inner, 0)
	if len(s.shape(y)) > len(s.shape(id)) || !trimLeadingOnes(s.shape(y)).Equal(trimLeadingOnes(s.shape(inner))) {
		return false
	}
	return s.rewrite(id, ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), y)
}

// broadcast_to(x, s) → reshape(x, s) when it repeats nothing (only adds
// size-1 axes): the same elements in the same order.
func ruleBroadcastAsReshape(s *simplifier, id ir.ID) bool {
	x := s.arg(id, 0)
	if s.shape(x).NumElements() != s.shape(id).NumElements() {
		return false
	}
	return s.rewrite(id, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), x)
}

// sum or mean over size-1 axes only (or none) → reshape to the result's
// shape (x itself when that is x's shape). The kernel adds each element to
// +0 (and mean divides by 1), which gives the element back except that -0
// becomes +0; so for floats x must never be -0 (neverNegZero). Integers
// always qualify.
func ruleReduceUnitAxes(s *simplifier, id ir.ID) bool {
	x := s.arg(id, 0)
	xs := s.shape(x)
	axes, err := ir.ReduceAxes(s.g.Values[id].Attrs, len(xs))
	if err != nil {
		return false
	}
	for _, ax := range axes {
		if xs[ax] != 1 {
			return false
		}
	}
	if !s.neverNegZero(x, neverNegZeroDepth) {
		return false
	}
	if xs.Equal(s.shape(id)) {
		return s.replace(id, x)
	}
	return s.rewrite(id, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(s.shape(id)...)), x)
}

// canonical-axes writes the axes of sum and mean, and the perm of
// transpose, out in full (absent axes: every axis; negative axes counted
// from the end; axes in increasing order), so that CSE sees one spelling.
func ruleCanonicalAxes(s *simplifier, id ir.ID) bool {
	v := &s.g.Values[id]
	x := v.Args[0]
	r := len(s.shape(x))
	if v.Op == ir.OpTranspose {
		if _, ok := v.Attrs.Get("perm"); ok {
			return false // written out (Perm checks it is a permutation)
		}
		p, ok := s.perm(id)
		if !ok {
			return false
		}
		return s.rewrite(id, ir.OpTranspose, v.Attrs.With("perm", ir.Ints(p...)), x)
	}
	axes, err := ir.ReduceAxes(v.Attrs, r)
	if err != nil {
		return false
	}
	if have, ok := v.Attrs.Ints("axes"); ok && idsEqualInts(have, axes) {
		return false // already canonical; most are
	}
	return s.rewrite(id, v.Op, v.Attrs.With("axes", ir.Ints(axes...)), x)
}

func idsEqualInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
