package ir_test

import (
	"slices"
	"strconv"
	"testing"

	"github.com/kilnml/kiln/ir"
)

const permuteSrc = `graph p
input %x: f32[2]
%a = relu %x
%b = exp %x
%c = add %a, %b
output %c
recompute %a, %b
`

// TestPermute moves %b before %a and checks that every reference follows.
func TestPermute(t *testing.T) {
	g, err := ir.Parse("t.kir", []byte(permuteSrc))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Permute([]ir.ID{0, 2, 1, 3}); err != nil {
		t.Fatal(err)
	}
	if err := ir.Check(g); err != nil {
		t.Fatal(err)
	}
	want := "graph p\ninput %x: f32[2]\n%b: f32[2] = exp %x\n%a: f32[2] = relu %x\n%c: f32[2] = add %a, %b\noutput %c\nrecompute %b, %a\n"
	if got := g.Format(); got != want {
		t.Errorf("after Permute:\n%s\nwant\n%s", got, want)
	}
	if id, _ := g.Lookup("a"); id != 2 {
		t.Errorf("Lookup(a) = %d after Permute, want 2", id)
	}
	// Permute writes the new arguments into one array; a value's must
	// still grow without overwriting the next one's.
	g.Values[2].Args = append(g.Values[2].Args, 0)
	if c := g.Values[3].Args; len(c) != 2 || c[0] != 2 || c[1] != 1 {
		t.Errorf("appending to %%a's arguments changed %%c's to %v", c)
	}
	g.Values[2].Args = g.Values[2].Args[:1]
	if err := g.Permute([]ir.ID{0, 3, 1, 2}); err == nil {
		t.Error("Permute accepted an order that uses c before its arguments")
	}
	if err := g.Permute([]ir.ID{0, 1, 1, 3}); err == nil {
		t.Error("Permute accepted a repeated id")
	}
}

// TestRetainDropsMarks checks that Retain renumbers recompute marks and drops
// those of removed values, and that Clone copies them.
func TestRetainDropsMarks(t *testing.T) {
	src := "graph r\ninput %x: f32[2]\n%a = relu %x\n%b = exp %x\noutput %b\nrecompute %a, %b\n"
	g, err := ir.Parse("t.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	c := g.Clone()
	g.Retain([]bool{true, false, true})
	if len(g.Recompute) != 1 || g.Recompute[0] != 1 {
		t.Errorf("marks after Retain = %v, want [1]", g.Recompute)
	}
	if len(c.Recompute) != 2 {
		t.Errorf("the clone lost its marks: %v", c.Recompute)
	}
}

// TestGrow checks that Grow makes room for the values a pass is about to
// append, so that appending them copies none: the optimizer appends
// hundreds of thousands of values to a graph cloned at its exact length.
func TestGrow(t *testing.T) {
	for _, n := range []int{1, 100, 5000} {
		g := &ir.Graph{Name: "g"}
		for i := range n {
			g.Append(ir.Value{Name: "v" + strconv.Itoa(i), Op: ir.OpConst})
		}
		g = g.Clone()
		g.Grow(10 * n)
		c := cap(g.Values)
		if c < n+10*n {
			t.Errorf("Grow(%d) on %d values: room for %d", 10*n, n, c)
		}
		for i := range 10 * n {
			g.Append(ir.Value{Name: "w" + strconv.Itoa(i), Op: ir.OpConst})
		}
		if cap(g.Values) != c || g.Values[n].Name != "w0" || g.Values[n-1].Name != "v"+strconv.Itoa(n-1) {
			t.Errorf("appends after Grow reallocated or lost values: room %d, was %d", cap(g.Values), c)
		}
	}
}

// TestRoots checks the values a graph delivers: outputs, gradients, and
// updates' new values and targets, in that order, and their mask.
func TestRoots(t *testing.T) {
	g, err := ir.Parse("roots.kir", []byte("graph r\ninput %x: f32[2]\nparam %w: f32[2]\nstate %s: f32[2]\n%y = mul %x, %w\n%l = sum %y\n%n = add %s, %y\noutput %l\n"))
	if err != nil {
		t.Fatal(err)
	}
	x, _ := g.Lookup("x")
	w, _ := g.Lookup("w")
	s, _ := g.Lookup("s")
	l, _ := g.Lookup("l")
	n, _ := g.Lookup("n")
	g.Grads = []ir.GradPair{{Param: w, Grad: x}}
	g.Updates = []ir.Update{{Target: s, Value: n}}
	if got, want := g.Roots(), []ir.ID{l, x, n, s}; !slices.Equal(got, want) {
		t.Errorf("Roots() = %v, want %v", got, want)
	}
	mask := g.RootMask()
	for id := range g.Values {
		want := ir.ID(id) == l || ir.ID(id) == x || ir.ID(id) == n || ir.ID(id) == s
		if mask[id] != want {
			t.Errorf("RootMask()[%%%s] = %v, want %v", g.NameOf(ir.ID(id)), mask[id], want)
		}
	}
}
