package checkpoint_test

import (
	"testing"

	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/ir"
)

// TestFLOPsFused checks the price of the fuse pass's ops: a fused matmul
// costs its product and its epilogue, not one per output element.
func TestFLOPsFused(t *testing.T) {
	g, err := ir.Parse("fused.kir", []byte(`graph fused
input %x: f32[4,6]
input %w: f32[6,5]
input %b: f32[5]
%m = matmul %x, %w
%a = fused_matmul %x, %w, %b {program=["t0 = add i0, i1", "t1 = relu t0"]}
%e = fused_elementwise %a, %b {program=["t0 = add i0, i1", "t1 = exp t0", "t2 = mul t1, i0"]}
output %m
output %e
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"m": 2 * 4 * 5 * 6,   // 2·M·N·K
		"a": 2*4*5*6 + 4*5*2, // the product and two instructions per element
		"e": 4 * 5 * 3,       // three instructions per element
		"x": 0,               // a leaf
	}
	n := 0
	for id := range g.Values {
		v := g.Value(ir.ID(id))
		w, ok := want[v.Name]
		if !ok {
			continue
		}
		n++
		if got := checkpoint.FLOPs(g, ir.ID(id)); got != w {
			t.Errorf("FLOPs(%%%s) = %g, want %g", v.Name, got, w)
		}
	}
	if n != len(want) {
		t.Errorf("checked %d values, want %d", n, len(want))
	}
}

// TestFLOPsAttention checks attention's price: per attended (query, key)
// pair, the two products and the softmax; the causal lower triangle only.
func TestFLOPsAttention(t *testing.T) {
	g, err := ir.Parse("attn.kir", []byte(`graph attn
input %q: f32[2,3,4,8]
input %k: f32[2,3,5,8]
input %v: f32[2,3,5,6]
input %dy: f32[2,3,4,6]
%a = attention %q, %k, %v {scale=0.5}
%c = attention %q, %k, %v {causal=true}
%g = attention_grad %q, %k, %v, %a, %dy
output %a
output %c
output %g
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"a": 6 * 4 * 5 * (2*(8+6) + 4),
		"c": 6 * (1 + 2 + 3 + 4) * (2*(8+6) + 4),
		"g": 6 * 4 * 5 * (6*8 + 4*6 + 8),
	}
	for name, w := range want {
		id, _ := g.Lookup(name)
		if got := checkpoint.FLOPs(g, id); got != w {
			t.Errorf("FLOPs(%%%s) = %g, want %g", name, got, w)
		}
	}
}
