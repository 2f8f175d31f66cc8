package ir_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
)

const replaceSrc = `graph r
param %p: f32[3]
state %s: f32[3]
%a = tanh %p
%b = neg %p
%c = add %a, %b
%d = mul %c, %c
output %b, %d
grad %p = %b
update %s = %b
`

func replaceParse(t *testing.T) *ir.Graph {
	t.Helper()
	g, err := ir.Parse("r.kir", []byte(replaceSrc))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func replaceID(t *testing.T, g *ir.Graph, name string) ir.ID {
	t.Helper()
	id, ok := g.Lookup(name)
	if !ok {
		t.Fatalf("no %%%s", name)
	}
	return id
}

// TestReplaceUses: arguments, gradients and updates follow the
// replacement; outputs keep naming the old value.
func TestReplaceUses(t *testing.T) {
	g := replaceParse(t)
	a, b := replaceID(t, g, "a"), replaceID(t, g, "b")
	g.ReplaceUses(b, a)
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
	want := `%c: f32[3] = add %a, %a`
	if got := g.FormatValue(replaceID(t, g, "c")); got != want {
		t.Errorf("c is %q, want %q", got, want)
	}
	if g.Outputs[0] != b {
		t.Errorf("output 0 is %s, want %%b (outputs are never redirected)", g.NameOf(g.Outputs[0]))
	}
	if g.Grads[0].Grad != a || g.Updates[0].Value != a {
		t.Errorf("grad %s, update %s; want both %%a", g.NameOf(g.Grads[0].Grad), g.NameOf(g.Updates[0].Value))
	}
}

// TestRedirectUsesFollowsChains: a → b → c sends a's uses to c.
func TestRedirectUsesFollowsChains(t *testing.T) {
	g := replaceParse(t)
	p, a, b, c := replaceID(t, g, "p"), replaceID(t, g, "a"), replaceID(t, g, "b"), replaceID(t, g, "c")
	to := make([]ir.ID, len(g.Values))
	for i := range to {
		to[i] = ir.ID(i)
	}
	to[c], to[b], to[a] = b, a, p // c → b → a → p
	g.RedirectUses(to)
	want := `%d: f32[3] = mul %p, %p`
	if got := g.FormatValue(replaceID(t, g, "d")); got != want {
		t.Errorf("d is %q, want %q", got, want)
	}
	if g.Grads[0].Grad != p {
		t.Errorf("grad is %s, want %%p", g.NameOf(g.Grads[0].Grad))
	}
}

// TestReorder (Permute) moves a value earlier and renumbers everything that refers
// to values; names follow.
func TestReorder(t *testing.T) {
	g := replaceParse(t)
	// Put %b before %a: p s b a c d.
	if err := g.Permute([]ir.ID{0, 1, 3, 2, 4, 5}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
	text := g.Format()
	if i, j := strings.Index(text, "%b: "), strings.Index(text, "%a: "); i < 0 || j < 0 || i > j {
		t.Errorf("%%b does not come before %%a:\n%s", text)
	}
	if b := replaceID(t, g, "b"); b != 2 || g.Outputs[0] != b || g.Grads[0].Grad != b || g.Updates[0].Value != b {
		t.Errorf("%%b is %d; output %d, grad %d, update %d", b, g.Outputs[0], g.Grads[0].Grad, g.Updates[0].Value)
	}
	want := `%c: f32[3] = add %a, %b`
	if got := g.FormatValue(replaceID(t, g, "c")); got != want {
		t.Errorf("c is %q, want %q", got, want)
	}
}
