package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// TestCanonicalizePoolRelu runs Canonicalize on max_pool2d(relu(x)) and
// near misses, checking whether the relu moves below the pooling: the
// pooling's value then computes relu of a pooling of x, and the relu's
// value is that pooling, named %p.max.
func TestCanonicalizePoolRelu(t *testing.T) {
	for _, c := range []struct {
		name, src string
		moved     bool
	}{
		{"2x2 windows", `input %x: f32[2,3,6,6]
%r = relu %x
%p = max_pool2d %r {kernel=[2,2]}
output %p`, true},
		{"overlapping padded windows, 3-D input", `input %x: f64[3,7,7]
%r = relu %x
%p = max_pool2d %r {kernel=[3,3], stride=[2,2], padding=[1,1]}
output %p`, true},
		{"relu used twice", `input %x: f32[2,3,6,6]
%r = relu %x
%p = max_pool2d %r {kernel=[2,2]}
%s = sum %r
output %p, %s`, false},
		{"relu an output", `input %x: f32[2,3,6,6]
%r = relu %x
%p = max_pool2d %r {kernel=[2,2]}
output %p, %r`, false},
		{"a window of padding alone", `input %x: f32[1,1,1,3]
%r = relu %x
%p = max_pool2d %r {kernel=[2,2], padding=[1,1], dilation=[2,2], stride=[1,1]}
output %p`, false},
		{"avg_pool2d", `input %x: f32[2,3,6,6]
%r = relu %x
%p = avg_pool2d %r {kernel=[2,2]}
output %p`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := ir.Parse("p.kir", []byte("graph p\n"+c.src+"\n"))
			if err != nil {
				t.Fatal(err)
			}
			before := g.Format()
			if err := passes.Canonicalize(g); err != nil {
				t.Fatal(err)
			}
			if err := ir.Check(g); err != nil {
				t.Fatalf("%v\n%s", err, g.Format())
			}
			id := func(name string) ir.ID {
				v, ok := g.Lookup(name)
				if !ok {
					t.Fatalf("no %%%s:\n%s", name, g.Format())
				}
				return v
			}
			p := id("p")
			r, ok := g.Lookup("r")
			if c.moved {
				r = id("p.max")
			} else if !ok {
				t.Fatalf("no %%r:\n%s", g.Format())
			}
			moved := g.Value(p).Op == ir.OpRelu && g.Value(p).Args[0] == r &&
				g.Value(r).Op == ir.OpMaxPool2d && g.Value(r).Args[0] == id("x") &&
				g.Value(r).Type.Equal(g.Value(p).Type)
			if moved != c.moved {
				t.Fatalf("moved %v, want %v:\n%s", moved, c.moved, g.Format())
			}
			if !c.moved && g.Format() != before {
				t.Errorf("graph changed:\n%s\nwas:\n%s", g.Format(), before)
			}
			if c.moved && !strings.Contains(g.Format(), "%p: "+g.Value(p).Type.String()+" = relu %p.max") {
				t.Errorf("the pooling's value is not relu %%p.max:\n%s", g.Format())
			}
		})
	}
}
