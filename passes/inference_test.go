package passes_test

import (
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

const withDropout = `graph drop
input %x: f32[4,3]
param %w: f32[3,2]
%d1 = dropout %x {p=0.2, seed=1}
%d2 = dropout %d1 {p=0.5, seed=2}
%h = matmul %d2, %w
%out = dropout %h {p=0.3, seed=3}
%s = sum %out
%t = add %s, %s
output %t, %out
`

// TestInferenceRemovesDropout checks that the inference pass replaces every
// dropout by its input, and that a dropout which is an output keeps its
// name as the identity dropout {p=0}.
func TestInferenceRemovesDropout(t *testing.T) {
	g := mustParse(t, withDropout)
	ps := passes.Pipeline(passes.Options{Inference: true, Grad: true})
	if err := passes.Run(g, ps, passes.Debug{Check: true}, nil); err != nil {
		t.Fatal(err)
	}
	text := g.Format()
	for _, gone := range []string{"d1", "d2"} {
		if _, ok := g.Lookup(gone); ok {
			t.Errorf("after inference the graph still has %%%s:\n%s", gone, text)
		}
	}
	for _, gone := range []string{"p=0.2", "p=0.5", "p=0.3"} {
		if strings.Contains(text, gone) {
			t.Errorf("after inference the graph still has a dropout with %s:\n%s", gone, text)
		}
	}
	h, ok := g.Lookup("h")
	if !ok {
		t.Fatalf("%%h is gone:\n%s", text)
	}
	if x, _ := g.Lookup("x"); g.Value(h).Args[0] != x {
		t.Errorf("%%h reads %s, want %%x:\n%s", g.NameOf(g.Value(h).Args[0]), text)
	}
	out, ok := g.Lookup("out")
	if !ok || g.Outputs[1] != out || g.Value(out).Op != ir.OpDropout || g.Value(out).Attrs.Float("p", -1) != 0 {
		t.Errorf("the output %%out should stay as dropout {p=0}:\n%s", text)
	}
	// Without the option the dropouts stay.
	g = mustParse(t, withDropout)
	if err := passes.Run(g, passes.Pipeline(passes.Options{}), passes.Debug{Check: true}, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(g.IDsOf(ir.OpDropout)); n != 3 {
		t.Errorf("without Inference %d dropouts remain, want 3", n)
	}
}

func TestPipelineWithInference(t *testing.T) {
	var names []string
	for _, p := range passes.Pipeline(passes.Options{Inference: true}) {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "verify inference shapes simplify fuse dce" {
		t.Errorf("Pipeline(Inference) = %q, want %q", got, "verify inference shapes simplify fuse dce")
	}
}
