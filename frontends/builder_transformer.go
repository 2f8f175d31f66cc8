package frontends

import (
	"fmt"
	"math"
	"strings"

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
	if err := b.layerInput("linear", prefix, x, -1); err != nil {
		return b.fail(1, err)
	}
	t := x.Type()
	if out < 1 {
		return b.fail(1, fmt.Errorf("linear %s: %d outputs; want at least 1", prefix, out))
	}
	in := t.Shape[len(t.Shape)-1]
	w := b.Param(prefix+".w", t.DType, in, out)
	bias := b.Param(prefix+".b", t.DType, out)
	h := x
	if len(t.Shape) > 2 {
		h = b.Reshape(x, t.Shape.NumElements()/in, in)
	}
	y := b.Add(b.Matmul(h, w), bias)
	if len(t.Shape) > 2 {
		shape := append(append([]int(nil), t.Shape[:len(t.Shape)-1]...), out)
		y = b.Reshape(y, shape...)
	}
	return b.name(y, prefix)
}

// layerInput reports an input x that the layer what cannot take: a value
// of another builder or after an error, a rank other than rank (-1: any
// rank >= 1) or a non-float dtype; and a prefix that already names a value
// or starts the name of one (PREFIX.something), which would make the
// layer's names collide.
func (b *Builder) layerInput(what, prefix string, x Value, rank int) error {
	if x.b != b || x.id == ir.NoID {
		return fmt.Errorf("%s %s: the input belongs to another builder", what, prefix)
	}
	t := x.Type()
	switch {
	case rank < 0 && len(t.Shape) < 1, rank >= 0 && len(t.Shape) != rank:
		want := "rank >= 1"
		if rank == 3 {
			want = "[B,T,D]"
		}
		return fmt.Errorf("%s %s: the input must be %s, found %s", what, prefix, want, t)
	case !t.DType.IsFloat():
		return fmt.Errorf("%s %s: the input must be float, found %s", what, prefix, t)
	}
	return b.prefixFree(what, prefix)
}

// prefixFree reports a prefix that is empty, names a value or starts the
// name of one.
func (b *Builder) prefixFree(what, prefix string) error {
	if prefix == "" {
		return fmt.Errorf("%s: the name prefix is empty", what)
	}
	for _, v := range b.g.Values {
		if v.Name == prefix || strings.HasPrefix(v.Name, prefix+".") {
			return fmt.Errorf("%s %s: the prefix is taken: %%%s exists", what, prefix, v.Name)
		}
	}
	return nil
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
// position embedding PREFIX.pos [T, D], one row per position (both f32,
// glorot).
func (b *Builder) TokenEmbedding(prefix string, tokens Value, vocab, dModel int) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	if err := b.embeddingInput(prefix, tokens, vocab, dModel); err != nil {
		return b.fail(1, err)
	}
	t := tokens.Type()
	tok := b.Param(prefix+".tok", ir.F32, vocab, dModel)
	pos := b.Param(prefix+".pos", ir.F32, t.Shape[1], dModel)
	return b.name(b.Add(b.Embedding(tok, tokens), pos), prefix)
}

// embeddingInput reports what TokenEmbedding cannot take.
func (b *Builder) embeddingInput(prefix string, tokens Value, vocab, dModel int) error {
	if tokens.b != b || tokens.id == ir.NoID {
		return fmt.Errorf("token embedding %s: the tokens belong to another builder", prefix)
	}
	if t := tokens.Type(); len(t.Shape) != 2 || !t.DType.IsInt() {
		return fmt.Errorf("token embedding %s: the tokens must be integers [B,T], found %s", prefix, t)
	}
	if vocab < 1 || dModel < 1 {
		return fmt.Errorf("token embedding %s: vocabulary %d and width %d; want both positive", prefix, vocab, dModel)
	}
	return b.prefixFree("token embedding", prefix)
}

// MultiHeadAttention returns the self-attention of x [B, T, D] with heads
// heads and no mask: Attention with AttentionOptions{Heads: heads}.
func (b *Builder) MultiHeadAttention(prefix string, x Value, heads int) Value {
	return b.attention(1, prefix, x, AttentionOptions{Heads: heads})
}

// AttentionOptions configure Attention.
type AttentionOptions struct {
	Heads int // attention heads; they divide the model width
	// Causal masks the future: position t attends to positions s <= t
	// only.
	Causal bool
	// KeyMask, when set, is a bool [B, T] that is true at the positions
	// that may be attended to (false: padding); a query whose every key
	// is masked gets 0 from the fused attention op (the unfused softmax,
	// at -O0, gives NaN there).
	KeyMask Value
}

// Attention returns the self-attention of x [B, T, D]: queries, keys and
// values are Linear maps of x (PREFIX.q, PREFIX.k, PREFIX.v), split into
// heads [B, H, T, D/H] by reshape and transpose; each head's scores
// q·kᵀ/√(D/H) [B, H, T, T] (PREFIX.scores) get the masks added, a const
// [T, T] that is -inf above the diagonal with Causal and where(KeyMask, 0,
// -inf) [B, 1, 1, T] (PREFIX.keymask) with a KeyMask, are normalized by
// softmax over the keys (PREFIX.att) and weight the values; the heads are
// joined back to [B, T, D] and mapped by PREFIX.o. The canonicalize pass
// turns the scores, masks, softmax and product into one attention op.
func (b *Builder) Attention(prefix string, x Value, o AttentionOptions) Value {
	return b.attention(1, prefix, x, o)
}

// attention is Attention; an error names the caller depth frames up.
func (b *Builder) attention(depth int, prefix string, x Value, o AttentionOptions) Value {
	if b.err != nil {
		return Value{b, ir.NoID}
	}
	if err := b.attentionInput("attention", prefix, x, o.Heads); err != nil {
		return b.fail(depth+1, err)
	}
	t := x.Type()
	bs, n, d := t.Shape[0], t.Shape[1], t.Shape[2]
	if err := b.keyMaskInput("attention", prefix, o.KeyMask, bs, n); err != nil {
		return b.fail(depth+1, err)
	}
	heads := o.Heads
	dh := d / heads
	rows := b.Reshape(x, bs*n, d)
	split := func(name string, perm ...int) Value {
		h := b.Reshape(b.Linear(prefix+"."+name, rows, d), bs, n, heads, dh)
		return b.Transpose(h, perm...)
	}
	q := b.name(split("q", 0, 2, 1, 3), prefix+".qh")  // [B, H, T, dh]
	kt := b.name(split("k", 0, 2, 3, 1), prefix+".kt") // [B, H, dh, T]
	v := b.name(split("v", 0, 2, 1, 3), prefix+".vh")  // [B, H, T, dh]
	scores := b.name(b.Mul(b.Matmul(q, kt), b.Scalar(1/math.Sqrt(float64(dh)), t.DType)), prefix+".scores")
	if o.Causal {
		tri := make([]float64, n*n)
		for i := range n {
			for j := i + 1; j < n; j++ {
				tri[i*n+j] = math.Inf(-1)
			}
		}
		scores = b.Add(scores, b.Const(t.DType, []int{n, n}, tri...))
	}
	if o.KeyMask.b != nil {
		km := b.Reshape(o.KeyMask, bs, 1, 1, n)
		add := b.name(b.Where(km, b.Scalar(0, t.DType), b.Scalar(math.Inf(-1), t.DType)), prefix+".keymask")
		scores = b.Add(scores, add)
	}
	att := b.name(b.Softmax(scores, -1), prefix+".att")
	ctx := b.name(b.Transpose(b.Matmul(att, v), 0, 2, 1, 3), prefix+".ctx") // [B, T, H, dh]
	return b.Reshape(b.Linear(prefix+".o", b.Reshape(ctx, bs*n, d), d), bs, n, d)
}

// keyMaskInput reports a key mask that is set but not a bool [B, T] of
// this builder.
func (b *Builder) keyMaskInput(what, prefix string, m Value, bs, n int) error {
	if m.b == nil {
		return nil // the zero Value: no mask
	}
	if m.b != b || m.id == ir.NoID {
		return fmt.Errorf("%s %s: the key mask belongs to another builder", what, prefix)
	}
	if t := m.Type(); t.DType != ir.Bool || !t.Shape.Equal(ir.Shape{bs, n}) {
		return fmt.Errorf("%s %s: the key mask must be bool[%d,%d] (true: attend), found %s", what, prefix, bs, n, t)
	}
	return nil
}

// attentionInput reports an input [B,T,D] the layer what cannot take, or
// a number of heads that does not divide D.
func (b *Builder) attentionInput(what, prefix string, x Value, heads int) error {
	if err := b.layerInput(what, prefix, x, 3); err != nil {
		return err
	}
	if d := x.Type().Shape[2]; heads < 1 || d%heads != 0 {
		return fmt.Errorf("%s %s: %d heads do not divide the model width %d", what, prefix, heads, d)
	}
	return nil
}

// BlockOptions configure TransformerBlock.
type BlockOptions struct {
	Heads  int     // attention heads; they divide the model width
	Hidden int     // width of the MLP's hidden layer; 0 means 4·D
	Eps    float64 // layer_norm's eps; 0 means 1e-5
	// Gelu is gelu's approximation: "" or "none" (exact, with erf) or
	// "tanh".
	Gelu string
	// Causal and KeyMask are the attention's masks (AttentionOptions).
	Causal  bool
	KeyMask Value
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
	if err := b.blockInput("transformer block", prefix, x, o); err != nil {
		return b.fail(1, err)
	}
	t := x.Type()
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
	att := b.Attention(prefix+".attn", norm("ln1", x), AttentionOptions{Heads: o.Heads, Causal: o.Causal, KeyMask: o.KeyMask})
	h := b.name(b.Add(x, att), prefix+".res1")
	rows := b.Reshape(norm("ln2", h), t.Shape[0]*t.Shape[1], d)
	m := b.name(b.Gelu(b.Linear(prefix+".fc1", rows, hidden), o.Gelu), prefix+".gelu")
	mlp := b.Reshape(b.Linear(prefix+".fc2", m, d), t.Shape...)
	return b.name(b.Add(h, mlp), prefix)
}

// blockInput reports what TransformerBlock cannot take.
func (b *Builder) blockInput(what, prefix string, x Value, o BlockOptions) error {
	if err := b.attentionInput(what, prefix, x, o.Heads); err != nil {
		return err
	}
	switch {
	case o.Hidden < 0:
		return fmt.Errorf("%s %s: MLP width %d is negative", what, prefix, o.Hidden)
	case o.Eps < 0:
		return fmt.Errorf("%s %s: layer_norm eps %g is negative", what, prefix, o.Eps)
	case o.Gelu != "" && o.Gelu != "none" && o.Gelu != "tanh":
		return fmt.Errorf("%s %s: gelu approximation %q; want \"none\" or \"tanh\"", what, prefix, o.Gelu)
	}
	t := x.Type()
	return b.keyMaskInput(what, prefix, o.KeyMask, t.Shape[0], t.Shape[1])
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
	if o.Blocks < 0 {
		return b.fail(1, fmt.Errorf("transformer: %d blocks; want at least 0", o.Blocks))
	}
	if err := b.embeddingInput("emb", tokens, o.Vocab, o.DModel); err != nil {
		return b.fail(1, err)
	}
	for _, p := range []string{"lnf", "head", "logits"} {
		if err := b.prefixFree("transformer", p); err != nil {
			return b.fail(1, err)
		}
	}
	h := b.TokenEmbedding("emb", tokens, o.Vocab, o.DModel)
	for i := range o.Blocks {
		prefix := fmt.Sprintf("blk%d", i)
		if err := b.blockInput("transformer block", prefix, h, o.BlockOptions); err != nil {
			return b.fail(1, err)
		}
		h = b.TransformerBlock(prefix, h, o.BlockOptions)
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
