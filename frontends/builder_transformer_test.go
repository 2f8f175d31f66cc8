package frontends_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// TestTransformerLayers checks the types the transformer layers give and
// the ops a block is made of.
func TestTransformerLayers(t *testing.T) {
	b := frontends.NewBuilder("layers")
	tok := b.Input("tok", ir.I64, 2, 5)
	x := b.Input("x", ir.F32, 2, 5, 12)
	rows := b.Input("rows", ir.F32, 10, 12)
	tests := []struct {
		name string
		got  frontends.Value
		want ir.Type
	}{
		{"linear rank 2", b.Linear("lin2", rows, 7), ir.TensorOf(ir.F32, 10, 7)},
		{"linear rank 3", b.Linear("lin3", x, 7), ir.TensorOf(ir.F32, 2, 5, 7)},
		{"embedding", b.TokenEmbedding("tokemb", tok, 9, 12), ir.TensorOf(ir.F32, 2, 5, 12)},
		{"attention", b.MultiHeadAttention("attn", x, 3), ir.TensorOf(ir.F32, 2, 5, 12)},
		{"block", b.TransformerBlock("blk", x, frontends.BlockOptions{Heads: 4, Gelu: "tanh"}), ir.TensorOf(ir.F32, 2, 5, 12)},
		{"transformer", b.Transformer(tok, frontends.TransformerOptions{Vocab: 9, DModel: 6, Blocks: 2, BlockOptions: frontends.BlockOptions{Heads: 2}}),
			ir.TensorOf(ir.F32, 10, 9)},
	}
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		if got := g.Type(tc.got.ID()); !got.Equal(tc.want) {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
	// The block: its value named blk is the second residual sum.
	count := map[ir.Op]int{}
	for _, v := range g.Values {
		if strings.HasPrefix(v.Name, "blk.") || v.Name == "blk" {
			count[v.Op]++
		}
	}
	want := map[ir.Op]int{ir.OpParam: 16, ir.OpLayerNorm: 2, ir.OpSoftmax: 1, ir.OpGelu: 1, ir.OpTranspose: 4}
	for op, n := range want {
		if count[op] != n {
			t.Errorf("block: %d %s values named blk.*, want %d", count[op], op, n)
		}
	}
	if id, ok := g.Lookup("blk.fc1.w"); !ok || !g.Type(id).Equal(ir.TensorOf(ir.F32, 12, 48)) {
		t.Errorf("blk.fc1.w: want f32[12,48] (a hidden width of 4·D by default)")
	}
	if id, ok := g.Lookup("blk"); !ok || g.Value(id).Op != ir.OpAdd {
		t.Errorf("blk is not the residual add")
	}
}

// TestTransformerErrors checks that each layer reports bad input at the
// caller's line, naming the layer and what it found.
func TestTransformerErrors(t *testing.T) {
	tests := []struct {
		call func(b *frontends.Builder) int // makes the bad call; returns its line
		want string
	}{
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 2, 5, 12)
			return line(b.MultiHeadAttention("attn", x, 5))
		}, "attention attn: 5 heads do not divide the model width 12"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 2, 5, 12)
			m := b.Input("m", ir.F32, 2, 5)
			return line(b.Attention("attn", x, frontends.AttentionOptions{Heads: 3, KeyMask: m}))
		}, "attention attn: the key mask must be bool[2,5] (true: attend), found f32[2,5]"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 2, 5, 12)
			m := b.Input("m", ir.Bool, 5, 2)
			return line(b.TransformerBlock("blk", x, frontends.BlockOptions{Heads: 3, KeyMask: m}))
		}, "transformer block blk: the key mask must be bool[2,5] (true: attend), found bool[5,2]"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 10, 12)
			return line(b.TransformerBlock("blk", x, frontends.BlockOptions{Heads: 2}))
		}, "transformer block blk: the input must be [B,T,D], found f32[10,12]"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 2, 5, 12)
			return line(b.TransformerBlock("blk", x, frontends.BlockOptions{Heads: 2, Gelu: "erf"}))
		}, `transformer block blk: gelu approximation "erf"; want "none" or "tanh"`},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 2, 5, 12)
			b.Linear("fc", x, 4)
			return line(b.Linear("fc", x, 4))
		}, "linear fc: the prefix is taken: %fc.w exists"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.I64, 2, 5)
			return line(b.Linear("fc", x, 4))
		}, "linear fc: the input must be float, found i64[2,5]"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.F32, 2, 5)
			return line(b.TokenEmbedding("emb", x, 10, 8))
		}, "token embedding emb: the tokens must be integers [B,T], found f32[2,5]"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.I64, 2, 5)
			return line(b.Transformer(x, frontends.TransformerOptions{Vocab: 10, DModel: 8, Blocks: 1, BlockOptions: frontends.BlockOptions{Heads: 3}}))
		}, "transformer block blk0: 3 heads do not divide the model width 8"},
		{func(b *frontends.Builder) int {
			x := b.Input("x", ir.I64, 2, 5)
			return line(b.Transformer(x, frontends.TransformerOptions{Vocab: 0, DModel: 8, Blocks: 1, BlockOptions: frontends.BlockOptions{Heads: 2}}))
		}, "token embedding emb: vocabulary 0 and width 8; want both positive"},
	}
	for _, tc := range tests {
		b := frontends.NewBuilder("bad")
		l := tc.call(b)
		want := fmt.Sprintf("builder_transformer_test.go:%d: %s", l, tc.want)
		if _, err := b.Build(); err == nil || err.Error() != want {
			t.Errorf("Build = %v, want %q", err, want)
		}
	}
}

// line returns the line of its caller's call (the bad call is the
// argument, on the same line).
func line(frontends.Value) int {
	_, _, l, _ := runtime.Caller(1)
	return l
}
