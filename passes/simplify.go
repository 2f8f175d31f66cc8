package passes

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// Simplify applies the algebraic simplification rules, constant folding,
// common-subexpression elimination and dead-code elimination until none of
// them changes the graph. See SimplifyWithStats.
func Simplify(g *ir.Graph) error {
	_, err := SimplifyWithStats(g)
	return err
}

// simplifyMaxRounds caps the fixed point. One sweep already applies the
// rules, folding and CSE to every value after its arguments are final, so
// the graphs seen so far settle in one round and a second finds nothing; the
// cap only guards against rules that would undo each other.
const simplifyMaxRounds = 16

// simplifyMaxPerValue caps the rewrites of one value within a sweep (each
// in-place rewrite may enable a rule of the new op).
const simplifyMaxPerValue = 8

// SimplifyStats says what one Simplify did.
type SimplifyStats struct {
	// Rounds is the number of sweeps; the last one changed nothing unless
	// Capped.
	Rounds int
	// Capped is set when the graph still changed after simplifyMaxRounds
	// sweeps. Simplify then stops and keeps the graph as the last sweep
	// left it: every sweep keeps the graph valid and its results bitwise
	// the same, so stopping early only leaves work undone.
	Capped bool
	// Before and After count the values.
	Before, After int
	// Rules counts the rewrites by rule name; "fold" is constant folding
	// and "cse" a merge of a value into an earlier equal one.
	Rules map[string]int
}

// String summarizes s on one line: rounds, then rewrites by rule name.
func (s SimplifyStats) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d round", s.Rounds)
	if s.Rounds != 1 {
		b.WriteByte('s')
	}
	if s.Capped {
		fmt.Fprintf(&b, ", stopped at the cap, still changing")
	}
	names := make([]string, 0, len(s.Rules))
	for n := range s.Rules {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		sep := ", "
		if i == 0 {
			sep = "; "
		}
		fmt.Fprintf(&b, "%s%s %d", sep, n, s.Rules[n])
	}
	return b.String()
}

// SimplifyWithStats simplifies g to a fixed point and says what it did.
//
// A round is one sweep over the values in order, then dead-code
// elimination. The sweep first points each value's arguments at their
// replacements, then folds the value if its arguments are consts
// (fold.go), applies the rules of its op (simplify_rules.go) until none
// fires, and finally merges it into an earlier equal value (cse.go). Each
// value is thus seen after its arguments are final, and a chain of
// rewrites settles in one sweep. Rounds repeat until a sweep changes
// nothing, at most simplifyMaxRounds times. Each sweep is linear in the
// graph (hashing for CSE), so the whole pass is too.
//
// The rewrites keep every result bit for bit (NaN stays NaN, though its
// sign and payload may change, as IEEE 754 leaves them unspecified):
// outputs, gradients and updates are exactly what the unsimplified graph
// computes. Outputs are never redirected or removed (users read them by
// name): a rule that would replace an output instead rewrites it in
// place, as a copy (a reshape to its own shape) where nothing cheaper
// computes it. Gradients and updates may be redirected to an equal value,
// but never to an input, param or state: the update copies at the end of
// a step would otherwise change what they read.
func SimplifyWithStats(g *ir.Graph) (SimplifyStats, error) {
	st := SimplifyStats{Before: len(g.Values), Rules: map[string]int{}}
	s := &simplifier{g: g, stats: &st}
	for {
		st.Rounds++
		changed, err := s.round()
		if err != nil {
			return st, err
		}
		if !changed {
			break
		}
		if st.Rounds == simplifyMaxRounds {
			st.Capped = true
			break
		}
	}
	st.After = len(g.Values)
	passNote(g, "%s", st) // KILN_DEBUG=time
	return st, nil
}

// simplifier holds the state of one Simplify.
type simplifier struct {
	g     *ir.Graph
	stats *SimplifyStats
	err   error

	// Per sweep, over the n values the sweep starts with and those it
	// inserts (ids n, n+1, ...).
	cur     ir.ID   // the value being simplified; inserted values go before it
	repl    []ir.ID // repl[id]: the value that replaces id (id itself when none)
	output  []bool  // graph outputs: rewritten in place, never replaced
	gradUpd []bool  // gradients and update values: never replaced by a leaf
	before  []ir.ID // before[id-n]: the value that inserted value id must precede
	table   cseTable
	changed bool
}

// round runs one sweep and, when it changed the graph, puts inserted values
// before their users, redirects gradients and updates, and removes dead
// values.
func (s *simplifier) round() (bool, error) {
	g := s.g
	n := len(g.Values)
	s.repl = s.repl[:0]
	s.output = s.output[:0]
	s.gradUpd = s.gradUpd[:0]
	for i := 0; i < n; i++ {
		s.repl = append(s.repl, ir.ID(i))
		s.output = append(s.output, false)
		s.gradUpd = append(s.gradUpd, false)
	}
	for _, o := range g.Outputs {
		s.output[o] = true
	}
	for _, gp := range g.Grads {
		s.gradUpd[gp.Grad] = true
	}
	for _, u := range g.Updates {
		s.gradUpd[u.Value] = true
	}
	s.before = s.before[:0]
	s.table.reset(n)
	s.changed = false

	for i := 0; i < n; i++ {
		id := ir.ID(i)
		if g.Values[i].Op.IsLeaf() {
			continue
		}
		args := g.Values[i].Args
		for j, a := range args {
			args[j] = s.find(a)
		}
		s.cur = id
		s.simplifyValue(id)
		if s.err != nil {
			return false, s.err
		}
		if s.repl[id] != id {
			continue
		}
		if first := s.cse(id); first != id && s.replace(id, first) {
			s.count("cse")
		}
		if s.err != nil {
			return false, s.err
		}
	}
	if !s.changed {
		return false, nil
	}
	g.RedirectUses(s.repl)
	if len(g.Values) > n {
		// Each inserted value goes right before the value that inserted it.
		order := make([]ir.ID, 0, len(g.Values))
		k := 0
		for i := 0; i < n; i++ {
			for k < len(s.before) && s.before[k] == ir.ID(i) {
				order = append(order, ir.ID(n+k))
				k++
			}
			order = append(order, ir.ID(i))
		}
		if err := g.Permute(order); err != nil {
			return false, err
		}
	}
	return true, DCE(g)
}

// find returns the value that replaces id, following chains.
func (s *simplifier) find(id ir.ID) ir.ID {
	for s.repl[id] != id {
		if next := s.repl[s.repl[id]]; next != s.repl[id] {
			s.repl[id] = next
		}
		id = s.repl[id]
	}
	return id
}

// count records one rewrite by rule.
func (s *simplifier) count(rule string) {
	s.stats.Rules[rule]++
	s.changed = true
}

// simplifyValue applies folding and the rules of value id's op until none
// fires or id is replaced.
func (s *simplifier) simplifyValue(id ir.ID) {
	for range simplifyMaxPerValue {
		op := s.g.Values[id].Op
		fired := ""
		for _, r := range simplifyRules[op] {
			if r.fn(s, id) {
				fired = r.name
				break
			}
			if s.err != nil {
				return
			}
		}
		if fired == "" {
			return
		}
		s.count(fired)
		if s.err != nil || s.repl[id] != id {
			return
		}
	}
}

// fail records the first internal error: a rule that built a value of the
// wrong type is a bug in the rule, reported rather than hidden.
func (s *simplifier) fail(format string, args ...any) {
	if s.err == nil {
		s.err = fmt.Errorf(format, args...)
	}
}

// replace makes x take id's place, and reports whether the graph changed.
// x must have id's type. An output, or a gradient or update value that x
// is a leaf for, is rewritten in place as a copy of x instead (see
// SimplifyWithStats), unless it is already a const or a reshape.
func (s *simplifier) replace(id, x ir.ID) bool {
	g := s.g
	x = s.find(x)
	if x == id {
		return false
	}
	if t, u := g.Type(id), g.Type(x); !t.Equal(u) {
		s.fail("simplify: %s (%s) cannot be replaced by %s (%s)", g.NameOf(id), t, g.NameOf(x), u)
		return false
	}
	if s.output[id] || (s.gradUpd[id] && g.Values[x].Op.IsLeaf()) {
		// A const or a reshape (a contiguous copy) is as cheap as a copy
		// of x: leave it, or two equal outputs would take turns being the
		// copy of the other.
		if op := g.Values[id].Op; op == ir.OpConst || op == ir.OpReshape {
			return false
		}
		return s.rewrite(id, ir.OpReshape, ir.MakeAttrs("shape", ir.Ints(g.Type(id).Shape...)), x)
	}
	s.repl[id] = x
	return true
}

// replaceOrBroadcast replaces id by x when they have the same shape, else
// rewrites id in place as x broadcast to id's shape (id computes x's
// elements, repeated by a broadcasting operand).
func (s *simplifier) replaceOrBroadcast(id, x ir.ID) bool {
	t := s.g.Type(id)
	if s.g.Type(x).Shape.Equal(t.Shape) {
		return s.replace(id, x)
	}
	return s.rewrite(id, ir.OpBroadcastTo, ir.MakeAttrs("shape", ir.Ints(t.Shape...)), x)
}

// rewrite turns value id, in place, into op(args) with attrs, keeping its
// id, name and type, and reports whether that changed anything. The new
// op must infer id's type.
func (s *simplifier) rewrite(id ir.ID, op ir.Op, attrs ir.Attrs, args ...ir.ID) bool {
	g := s.g
	t, canon, err := g.Infer(op, attrs, args)
	if err != nil {
		s.fail("simplify: rewriting %s as %s: %v", g.NameOf(id), op, err)
		return false
	}
	v := &g.Values[id]
	if !t.Equal(v.Type) {
		s.fail("simplify: rewriting %s (%s) as %s gives %s", g.NameOf(id), v.Type, op, t)
		return false
	}
	if v.Op == op && idsEqual(v.Args, args) && cseSameAttrs(v.Attrs, canon) {
		return false
	}
	v.Op, v.Args, v.Attrs = op, append([]ir.ID(nil), args...), canon
	return true
}

// insert adds op(args) with attrs as a new value placed before the value
// being simplified, or returns an earlier equal value.
func (s *simplifier) insert(op ir.Op, attrs ir.Attrs, args ...ir.ID) ir.ID {
	g := s.g
	t, canon, err := g.Infer(op, attrs, args)
	if err != nil {
		s.fail("simplify: inserting %s before %s: %v", op, g.NameOf(s.cur), err)
		return ir.NoID
	}
	id := g.Append(ir.Value{Name: g.UniqueName("s" + strconv.Itoa(len(g.Values))), Type: t, Op: op, Args: append([]ir.ID(nil), args...), Attrs: canon})
	s.repl = append(s.repl, id)
	s.output = append(s.output, false)
	s.gradUpd = append(s.gradUpd, false)
	s.before = append(s.before, s.cur)
	s.changed = true
	if first := s.cse(id); first != id {
		s.repl[id] = first // the inserted value stays unused; DCE removes it
		return first
	}
	return id
}

func idsEqual(a, b []ir.ID) bool {
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
