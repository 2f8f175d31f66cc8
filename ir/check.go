package ir

import (
	"fmt"
)

// Check verifies that g is well formed: every op is known and has the right
// arity, attributes and argument types; every argument is defined before it
// is used (so the graph is acyclic); every value's type is what its op infers;
// names are unique; outputs, gradients and updates name existing values of the
// right kinds and types; recompute marks name computed values, sorted and
// unique. It knows nothing about passes and runs after each one
// under KILN_DEBUG=check and always in tests.
func Check(g *Graph) error {
	seen := make(map[string]ID, len(g.Values))
	for i := range g.Values {
		id := ID(i)
		v := &g.Values[i]
		fail := func(format string, args ...any) error {
			return fmt.Errorf("%s: %s: %s", g.Where(id), g.NameOf(id), fmt.Sprintf(format, args...))
		}
		if v.Name == "" {
			return fail("value has no name")
		}
		for _, c := range v.Name {
			if !isNameByte(c) {
				return fail("name has character %q; names use letters, digits, _ and .", c)
			}
		}
		if prev, dup := seen[v.Name]; dup {
			return fail("duplicate name (also value %d)", prev)
		}
		seen[v.Name] = id
		if v.Op <= 0 || v.Op >= numOps {
			return fail("unknown op %d", v.Op)
		}
		canon, err := Canonical(v.Op, v.Attrs)
		if err != nil {
			return fail("%v", err)
		}
		if !canon.Equal(v.Attrs) {
			return fail("attributes %s are not canonical (expected %s)", v.Attrs, canon)
		}
		if v.Op.IsLeaf() {
			if len(v.Args) != 0 {
				return fail("%s takes no arguments, found %d", v.Op, len(v.Args))
			}
			if v.Type.DType.Size() == 0 {
				return fail("invalid dtype")
			}
			if _, err := v.Type.BytesChecked(); err != nil {
				return fail("%v", err)
			}
			continue
		}
		for j, a := range v.Args {
			if a < 0 || a >= id {
				return fail("argument %d (value %d) is not defined before use", j, a)
			}
		}
		t, _, err := g.Infer(v.Op, v.Attrs, v.Args)
		if err != nil {
			return fail("%v", err)
		}
		if !t.Equal(v.Type) {
			return fail("has type %s but %s gives %s", v.Type, v.Op, t)
		}
	}
	valid := func(id ID) bool { return id >= 0 && int(id) < len(g.Values) }
	for i, o := range g.Outputs {
		if !valid(o) {
			return fmt.Errorf("%s: output %d is not a value of the graph", g.Name, i)
		}
	}
	gradOf := map[ID]bool{}
	for _, gp := range g.Grads {
		if !valid(gp.Param) || !valid(gp.Grad) {
			return fmt.Errorf("%s: a grad entry names a value outside the graph", g.Name)
		}
		if g.Values[gp.Param].Op != OpParam {
			return fmt.Errorf("%s: grad of %s, which is a %s, not a param", g.Name, g.NameOf(gp.Param), g.Values[gp.Param].Op)
		}
		if gradOf[gp.Param] {
			return fmt.Errorf("%s: %s has two gradients", g.Name, g.NameOf(gp.Param))
		}
		gradOf[gp.Param] = true
		if pt, gt := g.Type(gp.Param), g.Type(gp.Grad); !pt.Equal(gt) {
			return fmt.Errorf("%s: gradient %s of %s has type %s, expected %s (the param's type)", g.Name, g.NameOf(gp.Grad), g.NameOf(gp.Param), gt, pt)
		}
	}
	updated := map[ID]bool{}
	for _, u := range g.Updates {
		if !valid(u.Target) || !valid(u.Value) {
			return fmt.Errorf("%s: an update names a value outside the graph", g.Name)
		}
		if op := g.Values[u.Target].Op; op != OpParam && op != OpState {
			return fmt.Errorf("%s: update of %s, which is a %s, not a param or state", g.Name, g.NameOf(u.Target), op)
		}
		if updated[u.Target] {
			return fmt.Errorf("%s: %s is updated twice", g.Name, g.NameOf(u.Target))
		}
		updated[u.Target] = true
		if tt, vt := g.Type(u.Target), g.Type(u.Value); !tt.Equal(vt) {
			return fmt.Errorf("%s: update of %s by %s: type %s, expected %s", g.Name, g.NameOf(u.Target), g.NameOf(u.Value), vt, tt)
		}
	}
	for i, id := range g.Recompute {
		if !valid(id) {
			return fmt.Errorf("%s: a recompute mark names a value outside the graph", g.Name)
		}
		if op := g.Values[id].Op; op.IsLeaf() {
			return fmt.Errorf("%s: recompute mark on %s, which is a %s; only computed values can be recomputed", g.Name, g.NameOf(id), op)
		}
		if i > 0 && g.Recompute[i-1] >= id {
			return fmt.Errorf("%s: recompute marks are not strictly increasing at %s", g.Name, g.NameOf(id))
		}
	}
	return nil
}
