package frontends_test

import (
	"fmt"
	"log"

	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
)

// A two-layer perceptron for 4 features and 3 classes, trained on batches
// of 8: the loss is the first output, the logits the second.
func ExampleBuilder() {
	b := frontends.NewBuilder("mlp")
	x := b.Input("x", ir.F32, 8, 4)
	y := b.Input("y", ir.I64, 8)
	w1 := b.Param("w1", ir.F32, 4, 16)
	b1 := b.Param("b1", ir.F32, 16)
	w2 := b.Param("w2", ir.F32, 16, 3)
	b2 := b.Param("b2", ir.F32, 3)

	h := b.Relu(b.Add(b.Matmul(x, w1), b1))
	logits := b.Rename(b.Add(b.Matmul(h, w2), b2), "logits")
	loss := b.Rename(b.SoftmaxCrossEntropy(logits, y), "loss")
	b.Output(loss, logits)

	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(g.Format())
	// Output:
	// graph mlp
	// input %x: f32[8,4]
	// input %y: i64[8]
	// param %w1: f32[4,16]
	// param %b1: f32[16]
	// param %w2: f32[16,3]
	// param %b2: f32[3]
	// %t6: f32[8,16] = matmul %x, %w1
	// %t7: f32[8,16] = add %t6, %b1
	// %t8: f32[8,16] = relu %t7
	// %t9: f32[8,3] = matmul %t8, %w2
	// %logits: f32[8,3] = add %t9, %b2
	// %loss: f32[] = softmax_cross_entropy %logits, %y {reduction="mean"}
	// output %loss, %logits
}

// The builder keeps the first error, with the Go line that made the call,
// and Build returns it; the calls after it do nothing.
func ExampleBuilder_shapeError() {
	b := frontends.NewBuilder("bad")
	x := b.Input("x", ir.F32, 8, 4)
	w := b.Param("w", ir.F32, 5, 2)
	z := b.Matmul(x, w) // 4 columns times 5 rows: line 55 of this file
	b.Output(b.Relu(z))

	_, err := b.Build()
	fmt.Println(err)
	// Output:
	// example_test.go:55: matmul: inner dimensions differ: [8,4] and [5,2] (4 vs 5)
}

// A transformer for sequences of 8 tokens in [0,10): one pre-norm block of
// width 16 with 2 heads, one row of logits per position, trained against
// the targets flattened to [B·T]. The params are named after the layers.
func ExampleBuilder_Transformer() {
	b := frontends.NewBuilder("reverse")
	x := b.Input("x", ir.I64, 4, 8)
	y := b.Input("y", ir.I64, 4, 8)
	logits := b.Transformer(x, frontends.TransformerOptions{Vocab: 10, DModel: 16, Blocks: 1,
		BlockOptions: frontends.BlockOptions{Heads: 2, Hidden: 32}})
	loss := b.SoftmaxCrossEntropy(logits, b.Reshape(y, 4*8))
	b.Output(loss, logits)

	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	for _, id := range g.Params() {
		fmt.Printf("%s %s\n", g.NameOf(id), g.Type(id))
	}
	fmt.Println("logits:", logits.Type())
	// Output:
	// %emb.tok f32[10,16]
	// %emb.pos f32[8,16]
	// %blk0.ln1.w f32[16]
	// %blk0.ln1.b f32[16]
	// %blk0.attn.q.w f32[16,16]
	// %blk0.attn.q.b f32[16]
	// %blk0.attn.k.w f32[16,16]
	// %blk0.attn.k.b f32[16]
	// %blk0.attn.v.w f32[16,16]
	// %blk0.attn.v.b f32[16]
	// %blk0.attn.o.w f32[16,16]
	// %blk0.attn.o.b f32[16]
	// %blk0.ln2.w f32[16]
	// %blk0.ln2.b f32[16]
	// %blk0.fc1.w f32[16,32]
	// %blk0.fc1.b f32[32]
	// %blk0.fc2.w f32[32,16]
	// %blk0.fc2.b f32[16]
	// %lnf.w f32[16]
	// %lnf.b f32[16]
	// %head.w f32[16,10]
	// %head.b f32[10]
	// logits: f32[32,10]
}

// Causal self-attention over a padded batch: position t attends to
// positions s <= t whose key mask is true. The canonicalize pass turns the
// scores, masks, softmax and product into one attention op.
func ExampleBuilder_Attention() {
	b := frontends.NewBuilder("attn")
	x := b.Input("x", ir.F32, 2, 5, 8)
	keep := b.Input("keep", ir.Bool, 2, 5) // false: padding
	y := b.Attention("attn", x, frontends.AttentionOptions{Heads: 2, Causal: true, KeyMask: keep})
	b.Output(b.Sum(y, nil, false))
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	scores, _ := g.Lookup("attn.scores")
	mask, _ := g.Lookup("attn.keymask")
	fmt.Println("scores:", g.Type(scores), "key mask:", g.Type(mask), "y:", y.Type())
	// Output:
	// scores: f32[2,2,5,5] key mask: f32[2,1,1,5] y: f32[2,5,8]
}
