package ir

import (
	"fmt"
	"math"
)

// Fused attention: softmax(q·kᵀ·scale + mask)·v as one op, computed in the
// online-softmax (FlashAttention) form so that no [T,S] matrix of scores
// or probabilities is ever stored, and its backward as one op that
// recomputes the probabilities tile by tile.
//
// ir values have one result, so the backward packs the three gradients
// into one: attention_grad's result holds, for each leading index (batch,
// head), dq [T,dh], then dk [S,dh], then dv [S,dv], flattened; the
// gradient rule slices them out. One op rather than one per input, because
// every gradient needs the same recomputed probabilities: three ops would
// recompute q·kᵀ three times.

// attentionAttrs are the attributes attention and attention_grad share.
var attentionAttrs = []AttrSpec{
	{Name: "scale", Kind: AttrFloat, Default: defFloat(1), Doc: "multiplies q·kᵀ before the mask is added (1/√dh in a transformer)"},
	{Name: "causal", Kind: AttrBool, Default: defBool(false), Doc: "query t attends only to keys s <= t (top-left aligned, as torch's is_causal)"},
}

// attentionOps returns the rows of attention and attention_grad.
func attentionOps() []opRow {
	return []opRow{
		{OpAttention, OpInfo{Name: "attention", Args: []string{"q", "k", "v", "mask"}, Optional: 1, Attrs: attentionAttrs,
			Infer: inferAttention, Grad: gradAttention, Cost: costAttention(2, 2, 4),
			Doc: "softmax(q·kᵀ·scale + mask)·v over the keys, q [...,T,dh], k [...,S,dh], v [...,S,dv] with the same leading axes (batch, heads), result [...,T,dv]; mask (optional, q's dtype) is added to the scores, broadcast to [...,T,S] (0 attends, -inf masks); with causal, key s > t is masked for query t; a query whose every key is masked gets 0 (and gradient 0) where the unfused softmax gives NaN; computed tile by tile with an online softmax, never storing the [T,S] scores; the mask gets no gradient (one that depends on a param is refused); the canonicalize pass puts it in place of softmax(matmul(q, kᵀ) * scale [+ mask], -1) @ v"}},
		{OpAttentionGrad, OpInfo{Name: "attention_grad", Args: []string{"q", "k", "v", "y", "dy", "mask"}, Optional: 1, Attrs: attentionAttrs,
			Infer: inferAttentionGrad, NoGrad: "the gradient of attention's backward is not written", Cost: costAttention(6, 4, 8),
			Doc: "the gradients of y = attention(q, k, v, mask) for dy, packed per leading index as dq [T,dh], dk [S,dh], dv [S,dv] flattened into the last axis, result [..., T·dh + S·dh + S·dv]; the probabilities are recomputed a tile of query rows at a time (the forward, having one result, keeps no log-sum-exp)"}},
	}
}

// attentionShapes checks q, k, v and the optional mask of attention and
// returns the leading shape and T, S, dh, dv.
func attentionShapes(args []Type) (lead Shape, t, s, dh, dv int, err error) {
	q, k, v := args[0], args[1], args[2]
	if !q.DType.IsFloat() || len(q.Shape) < 2 {
		return nil, 0, 0, 0, 0, fmt.Errorf("expected a float q [...,T,dh], found %s", q)
	}
	r := len(q.Shape)
	lead = q.Shape[:r-2]
	t, dh = q.Shape[r-2], q.Shape[r-1]
	if k.DType != q.DType || len(k.Shape) != r || !k.Shape[:r-2].Equal(lead) || k.Shape[r-1] != dh {
		return nil, 0, 0, 0, 0, fmt.Errorf("expected k %s[%s,S,%d] for q %s, found %s", q.DType, leadString(lead), dh, q, k)
	}
	s = k.Shape[r-2]
	if v.DType != q.DType || len(v.Shape) != r || !v.Shape[:r-2].Equal(lead) || v.Shape[r-2] != s {
		return nil, 0, 0, 0, 0, fmt.Errorf("expected v %s[%s,%d,dv] for k %s, found %s", q.DType, leadString(lead), s, k, v)
	}
	dv = v.Shape[r-1]
	if len(args) > 3 && args[3].DType != DType(0) {
		m := args[3]
		full := append(lead.Clone(), t, s)
		if b, ok := BroadcastShapes(m.Shape, full); m.DType != q.DType || len(m.Shape) > len(full) || !ok || !b.Equal(full) {
			return nil, 0, 0, 0, 0, fmt.Errorf("expected a %s mask that broadcasts to [%s,%d,%d], found %s", q.DType, leadString(lead), t, s, m)
		}
	}
	return lead, t, s, dh, dv, nil
}

// leadString prints the leading axes of attention's operands, "..." when
// there are none.
func leadString(lead Shape) string {
	if len(lead) == 0 {
		return "..."
	}
	s := fmt.Sprint(lead)
	return s[1 : len(s)-1]
}

func attentionCheckScale(a Attrs) error {
	if sc := a.Float("scale", 1); math.IsNaN(sc) || math.IsInf(sc, 0) {
		return fmt.Errorf("scale must be finite, found %g", sc)
	}
	return nil
}

func inferAttention(args []Type, a Attrs) (Type, error) {
	if err := attentionCheckScale(a); err != nil {
		return Type{}, err
	}
	lead, t, _, _, dv, err := attentionShapes(args)
	if err != nil {
		return Type{}, err
	}
	return Type{args[0].DType, append(lead.Clone(), t, dv)}, nil
}

func inferAttentionGrad(args []Type, a Attrs) (Type, error) {
	if err := attentionCheckScale(a); err != nil {
		return Type{}, err
	}
	sh := []Type{args[0], args[1], args[2]}
	if len(args) > 5 {
		sh = append(sh, args[5])
	}
	lead, t, s, dh, dv, err := attentionShapes(sh)
	if err != nil {
		return Type{}, err
	}
	y := Type{args[0].DType, append(lead.Clone(), t, dv)}
	if !args[3].Equal(y) || !args[4].Equal(y) {
		return Type{}, fmt.Errorf("expected y and dy of attention's result type %s, found %s and %s", y, args[3], args[4])
	}
	return Type{y.DType, append(lead.Clone(), t*dh+s*dh+s*dv)}, nil
}

// AttentionGradSplit returns the offsets within one leading index of
// attention_grad's packed result of dk and dv (dq is at 0) and its length.
func AttentionGradSplit(t, s, dh, dv int) (dk, dvOff, n int) {
	return t * dh, t*dh + s*dh, t*dh + s*dh + s*dv
}

// gradAttention emits attention_grad and slices dq, dk and dv out of its
// packed result. The mask gets no gradient: one that depends on a param
// is refused rather than silently treated as constant.
func gradAttention(e *Emitter, y, dy ID) []ID {
	args := e.args(y)
	q, k, v := args[0], args[1], args[2]
	grads := []ID{NoID, NoID, NoID}
	gargs := []ID{q, k, v, y, dy}
	if len(args) > 3 {
		if p, ok := dependsOnParam(e.G, args[3]); ok {
			if e.err == nil {
				e.err = fmt.Errorf("attention %%%s: the mask depends on param %%%s; attention gives its mask no gradient", Excerpt(e.G.Values[y].Name), Excerpt(e.G.Values[p].Name))
			}
			return append(grads, NoID)
		}
		gargs = append(gargs, args[3])
		grads = append(grads, NoID)
	}
	at := e.G.Values[y].Attrs
	packed := e.Op(OpAttentionGrad, MakeAttrs("scale", Float(at.Float("scale", 1)), "causal", BoolAttr(at.Bool("causal", false))), gargs...)
	qs, ks, vs := e.shape(q), e.shape(k), e.shape(v)
	r := len(qs)
	t, s, dh, dv := qs[r-2], ks[r-2], qs[r-1], vs[r-1]
	dkOff, dvOff, n := AttentionGradSplit(t, s, dh, dv)
	for i, part := range []struct {
		off, n int
		shape  Shape
	}{{0, dkOff, qs}, {dkOff, dvOff - dkOff, ks}, {dvOff, n - dvOff, vs}} {
		grads[i] = e.Reshape(e.movementSlice(packed, r-2, part.off, part.n), part.shape)
	}
	return grads
}

// dependsOnParam reports a param (not frozen) that value id is computed
// from, if any.
func dependsOnParam(g *Graph, id ID) (ID, bool) {
	seen := make([]bool, len(g.Values))
	stack := []ID{id}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[x] {
			continue
		}
		seen[x] = true
		v := &g.Values[x]
		if v.Op == OpParam && !v.Attrs.Bool("frozen", false) {
			return x, true
		}
		stack = append(stack, v.Args...)
	}
	return NoID, false
}

// costAttention prices attention and attention_grad per (query, key) pair
// attended (the lower triangle when causal): a·dh + b·dv + c operations,
// 2·(dh+dv)+4 forward and 6·dh+4·dv+8 backward, which recomputes the
// scores and probabilities.
func costAttention(a, b, c float64) func(args []Type, out Type, attrs Attrs) float64 {
	return func(args []Type, _ Type, attrs Attrs) float64 {
		q, k, v := args[0].Shape, args[1].Shape, args[2].Shape
		r := len(q)
		nt, ns, dh, dv := q[r-2], k[r-2], float64(q[r-1]), float64(v[r-1])
		pairs := float64(nt * ns)
		if attrs.Bool("causal", false) {
			pairs = 0
			for t := range nt {
				pairs += float64(min(t+1, ns))
			}
		}
		pairs *= float64(q[:r-2].NumElements())
		return pairs * (a*dh + b*dv + c)
	}
}
