package frontends

import (
	"fmt"
	"math"

	"github.com/kilnml/kiln/ir"
)

// Layers of a transformer, written with the ops of the table: each helper
// declares its params under a name prefix (PREFIX.w, PREFIX.ln1.w, ...) and
// names the values it computes PREFIX.something, so the graph (kiln dump,
// kiln plan) reads as the model does.

// Linear returns x @ PREFIX.w + PREFIX.b for x [..., in], with the params
// w [in, out] (glorot) and b [out] (zeros). An x of rank above 2 is
// multiplied as one [N, in] matrix (N the product of its leading axes) and
// reshaped back, so the weight's gradient is one matrix product rather
// than a batch of them summed.
func (b *Builder) Linear(prefix string, x Value, out int) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	t := x.Type()
	if len(t.Shape) < 1 {
		return b.fail(1, fmt.Errorf("linear %s: the input must have rank >= 1, found %s", prefix, t))
	}
	in := t.Shape[len(t.Shape)-1]
	w := b.Param(prefix+".w", t.DType, in, out)
	bias := b.Param(prefix+".b", t.DType, out)
	h := x
	if len(t.Shape) > 2 {
		h = b.Reshape(x, -1, in)
	}
	y := b.Add(b.Matmul(h, w), bias)
	if len(t.Shape) > 2 {
		shape := append(append([]int(nil), t.Shape[:len(t.Shape)-1]...), out)
		y = b.Reshape(y, shape...)
	}
	return b.name(y, prefix)
}

// name renames v to name unless that name is taken (then it keeps its own).
func (b *Builder) name(v Value, name string) Value {
	if b.err != nil || v.id == ir.NoID {
		return v
	}
	if _, taken := b.g.Lookup(name); taken {
		return v
	}
	return b.Rename(v, name)
}

// TokenEmbedding returns the embeddings [B, T, D] of integer tokens [B, T]
// in [0, vocab): the rows of the table PREFIX.tok [vocab, D] plus a learned
// position embedding PREFIX.pos [T, D], one row per position (both glorot).
func (b *Builder) TokenEmbedding(prefix string, tokens Value, vocab, dModel int) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	t := tokens.Type()
	if len(t.Shape) != 2 || !t.DType.IsInt() {
		return b.fail(1, fmt.Errorf("token embedding %s: tokens must be integers [B,T], found %s", prefix, t))
	}
	tok := b.Param(prefix+".tok", ir.F32, vocab, dModel)
	pos := b.Param(prefix+".pos", ir.F32, t.Shape[1], dModel)
	return b.name(b.Add(b.Embedding(tok, tokens), pos), prefix)
}

// MultiHeadAttention returns the self-attention of x [B, T, D] with heads
// heads (D divisible by heads): queries, keys and values are Linear maps of
// x (PREFIX.q, PREFIX.k, PREFIX.v), split into heads [B, H, T, D/H] by
// reshape and transpose; each head's scores q·kᵀ/√(D/H) [B, H, T, T] are
// normalized by softmax over the keys (every position attends to every
// position: no causal mask) and weight the values; the heads are joined
// back to [B, T, D] and mapped by PREFIX.o.
func (b *Builder) MultiHeadAttention(prefix string, x Value, heads int) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	t := x.Type()
	if len(t.Shape) != 3 {
		return b.fail(1, fmt.Errorf("attention %s: the input must be [B,T,D], found %s", prefix, t))
	}
	bs, n, d := t.Shape[0], t.Shape[1], t.Shape[2]
	if heads < 1 || d%heads != 0 {
		return b.fail(1, fmt.Errorf("attention %s: %d heads do not divide the model width %d", prefix, heads, d))
	}
	dh := d / heads
	rows := b.Reshape(x, bs*n, d)
	split := func(name string, perm ...int) Value {
		h := b.Reshape(b.Linear(prefix+"."+name, rows, d), bs, n, heads, dh)
		return b.Transpose(h, perm...)
	}
	q := b.name(split("q", 0, 2, 1, 3), prefix+".qh")  // [B, H, T, dh]
	kt := b.name(split("k", 0, 2, 3, 1), prefix+".kt") // [B, H, dh, T]
	v := b.name(split("v", 0, 2, 1, 3), prefix+".vh")  // [B, H, T, dh]
	scores := b.Mul(b.Matmul(q, kt), b.Scalar(1/math.Sqrt(float64(dh)), t.DType))
	att := b.name(b.Softmax(b.name(scores, prefix+".scores"), -1), prefix+".att")
	ctx := b.name(b.Transpose(b.Matmul(att, v), 0, 2, 1, 3), prefix+".ctx") // [B, T, H, dh]
	return b.Reshape(b.Linear(prefix+".o", b.Reshape(ctx, bs*n, d), d), bs, n, d)
}

// BlockOptions configure TransformerBlock.
type BlockOptions struct {
	Heads  int     // attention heads; they divide the model width
	Hidden int     // width of the MLP's hidden layer; 0 means 4·D
	Eps    float64 // layer_norm's eps; 0 means 1e-5
	// Gelu is gelu's approximation: "" or "none" (exact, with erf) or
	// "tanh".
	Gelu string
}

// TransformerBlock returns a pre-norm transformer block of x [B, T, D]:
//
//	h = x + MultiHeadAttention(LayerNorm(x))
//	y = h + Linear(Gelu(Linear(LayerNorm(h))))
//
// with the layer norms' weight and bias PREFIX.ln1.{w,b} and
// PREFIX.ln2.{w,b} (ones and zeros), the attention under PREFIX.attn and
// the MLP's layers PREFIX.fc1 [D, Hidden] and PREFIX.fc2 [Hidden, D].
func (b *Builder) TransformerBlock(prefix string, x Value, o BlockOptions) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	t := x.Type()
	if len(t.Shape) != 3 {
		return b.fail(1, fmt.Errorf("transformer block %s: the input must be [B,T,D], found %s", prefix, t))
	}
	d := t.Shape[2]
	hidden, eps := o.Hidden, o.Eps
	if hidden == 0 {
		hidden = 4 * d
	}
	if eps == 0 {
		eps = 1e-5
	}
	norm := func(name string, x Value) Value {
		w := b.ParamInit(prefix+"."+name+".w", t.DType, []int{d}, "ones", 0)
		bias := b.Param(prefix+"."+name+".b", t.DType, d)
		return b.name(b.LayerNorm(x, w, bias, nil, eps), prefix+"."+name)
	}
	h := b.name(b.Add(x, b.MultiHeadAttention(prefix+".attn", norm("ln1", x), o.Heads)), prefix+".res1")
	rows := b.Reshape(norm("ln2", h), t.Shape[0]*t.Shape[1], d)
	m := b.name(b.Gelu(b.Linear(prefix+".fc1", rows, hidden), o.Gelu), prefix+".gelu")
	mlp := b.Reshape(b.Linear(prefix+".fc2", m, d), t.Shape...)
	return b.name(b.Add(h, mlp), prefix)
}

// TransformerOptions configure Transformer.
type TransformerOptions struct {
	Vocab  int // tokens are in [0, Vocab); the logits have Vocab classes
	DModel int // the model width D
	Blocks int // the number of transformer blocks
	BlockOptions
}

// Transformer returns the logits [B·T, Vocab] of a token-to-token
// transformer over tokens [B, T]: TokenEmbedding (params emb.tok,
// emb.pos), Blocks pre-norm TransformerBlocks (blk0, blk1, ...), a final
// LayerNorm (lnf.w, lnf.b) and a Linear map to the vocabulary (head), one
// row of logits per position, ready for SoftmaxCrossEntropy against the
// targets reshaped to [B·T].
func (b *Builder) Transformer(tokens Value, o TransformerOptions) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	if o.Vocab < 1 || o.DModel < 1 || o.Blocks < 0 {
		return b.fail(1, fmt.Errorf("transformer: vocabulary %d, width %d and %d blocks; want them positive", o.Vocab, o.DModel, o.Blocks))
	}
	h := b.TokenEmbedding("emb", tokens, o.Vocab, o.DModel)
	for i := range o.Blocks {
		h = b.TransformerBlock(fmt.Sprintf("blk%d", i), h, o.BlockOptions)
	}
	eps := o.Eps
	if eps == 0 {
		eps = 1e-5
	}
	dt := h.Type().DType
	h = b.name(b.LayerNorm(h, b.ParamInit("lnf.w", dt, []int{o.DModel}, "ones", 0), b.Param("lnf.b", dt, o.DModel), nil, eps), "lnf")
	t := h.Type()
	return b.name(b.Linear("head", b.Reshape(h, t.Shape[0]*t.Shape[1], o.DModel), o.Vocab), "logits")
}
