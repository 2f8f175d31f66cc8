package wgsl

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Fused attention (ir/ops_attention.go). The forward runs one thread per
// query row: an online softmax over the keys (the running maximum, with
// NaN winning, and the rescaled sum and output row kept in the result),
// so no [T,S] matrix is stored. The backward runs three dispatches: one
// thread per query row recomputes its log-sum-exp and D = dy·y (kept in
// scratch), another sums dq over the keys; then one thread per key row sums dk
// and dv over the queries, recomputing each probability from the
// log-sum-exp. Each thread adds in a fixed order, so results do not
// depend on scheduling. A row whose every score is -inf gets 0 and
// gradient 0, as on the CPU.

func init() {
	register(ir.OpAttention, ir.F32, buildAttention)
	register(ir.OpAttentionGrad, ir.F32, buildAttentionGrad)
}

// attnGeom is the geometry of an attention node as WGSL constants and the
// WGSL of the score x of query row (h, t) and key s.
type attnGeom struct {
	nh, t, s, dh, dv int
	causal           bool
	mask             []byte // per leading index, the offset of its [T,S] mask view (little-endian u32), or nil
	mst, mss         int
	scale            float64
}

func newAttnGeom(q, k, v ir.Type, mask *ir.Type, a ir.Attrs) attnGeom {
	r := len(q.Shape)
	lead := q.Shape[:r-2]
	g := attnGeom{nh: lead.NumElements(), t: q.Shape[r-2], s: k.Shape[r-2], dh: q.Shape[r-1], dv: v.Shape[r-1],
		causal: a.Bool("causal", false), scale: a.Float("scale", 1)}
	if mask != nil {
		full := append(lead.Clone(), g.t, g.s)
		st := broadcastStrides(mask.Shape, full)
		g.mst, g.mss = st[r-2], st[r-1]
		g.mask = make([]byte, 4*max(g.nh, 1))
		for h := range g.nh {
			off, rem := 0, h
			for i := len(lead) - 1; i >= 0; i-- {
				off += (rem % lead[i]) * st[i]
				rem /= lead[i]
			}
			binary.LittleEndian.PutUint32(g.mask[4*h:], uint32(off))
		}
	}
	return g
}

// decls writes the constants and the helpers: score(h, t, s) (q·k·scale
// plus the mask; the causal bound is the loops'), and ninf(), -inf.
func (g attnGeom) decls(b *strings.Builder) {
	fmt.Fprintf(b, "const T: u32 = %du;\nconst S: u32 = %du;\nconst DH: u32 = %du;\nconst DV: u32 = %du;\nfn ninf() -> f32 { return bitcast<f32>(0xff800000u); }\n", g.t, g.s, g.dh, g.dv)
	b.WriteString(helperSource(map[string]bool{"k_maxnan": true, "k_log": true}))
	mask := ""
	if g.mask != nil {
		mask = fmt.Sprintf(" + mask[u32(moff[h]) + t * %du + s * %du]", g.mst, g.mss)
	}
	fmt.Fprintf(b, `fn score(h: u32, t: u32, s: u32) -> f32 {
  var x = 0.0;
  for (var e = 0u; e < DH; e++) { x = x + q[(h * T + t) * DH + e] * k[(h * S + s) * DH + e]; }
  return x * %s%s;
}
`, F32(g.scale), mask)
}

// keyEnd is the WGSL bound of the keys query t attends to.
func (g attnGeom) keyEnd() string {
	if g.causal {
		return "min(S, t + 1u)"
	}
	return "S"
}

// bindings declares q and k (0, 1), then the named f32 buffers, then the
// mask and its offsets, and returns the operands in binding order (at most
// 8, WebGPU's default per stage).
func (g attnGeom) bindings(b *strings.Builder, names []string, ops []Operand, maskArg int) []Operand {
	b.WriteString(Decl(0, "q", ir.F32))
	b.WriteString(Decl(1, "k", ir.F32))
	bind := []Operand{{Arg, 0}, {Arg, 1}}
	for i, name := range names {
		b.WriteString(Decl(2+i, name, ir.F32))
		bind = append(bind, ops[i])
	}
	if g.mask != nil {
		b.WriteString(Decl(len(bind), "mask", ir.F32))
		b.WriteString(Decl(len(bind)+1, "moff", ir.I32))
		bind = append(bind, Operand{Arg, maskArg}, Operand{Data, 0})
	}
	return bind
}

// buildAttention builds attention(q, k, v [, mask]) {scale, causal}.
func buildAttention(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	var mt *ir.Type
	if len(n.Args) > 3 {
		mt = &n.Args[3]
	}
	g := newAttnGeom(n.Args[0], n.Args[1], n.Args[2], mt, n.Attrs)
	rows := g.nh * g.t
	if rows*g.dv == 0 {
		return &Kernel{}, nil
	}
	var b strings.Builder
	bind := g.bindings(&b, []string{"v", "out"}, []Operand{{Arg, 2}, {Out, 0}}, 3)
	g.decls(&b)
	groups, idx := Grid(rows)
	b.WriteString(header(WorkgroupSize))
	fmt.Fprintf(&b, `  let r = %s;
  if (r >= %du) { return; }
  let h = r / T;
  let t = r %% T;
  var m = ninf();
  var l = 0.0;
  for (var j = 0u; j < DV; j++) { out[r * DV + j] = 0.0; }
  for (var s = 0u; s < %s; s++) {
    let x = score(h, t, s);
    let mn = k_maxnan(m, x);
    if (mn == ninf()) { continue; }
    let corr = exp(m - mn);
    let p = exp(x - mn);
    l = l * corr + p;
    for (var j = 0u; j < DV; j++) { out[r * DV + j] = out[r * DV + j] * corr + p * v[(h * S + s) * DV + j]; }
    m = mn;
  }
  if (m == ninf()) { return; }
  for (var j = 0u; j < DV; j++) { out[r * DV + j] = out[r * DV + j] / l; }
}
`, idx, rows, g.keyEnd())
	k := &Kernel{Dispatches: []Dispatch{{Source: b.String(), Groups: groups, Bind: bind}}}
	if g.mask != nil {
		k.Data = [][]byte{g.mask}
	}
	return k, nil
}

// buildAttentionGrad builds attention_grad(q, k, v, y, dy [, mask]).
func buildAttentionGrad(n *kernels.Node) (*Kernel, error) {
	if err := checkDTypes(n); err != nil {
		return nil, err
	}
	var mt *ir.Type
	if len(n.Args) > 5 {
		mt = &n.Args[5]
	}
	g := newAttnGeom(n.Args[0], n.Args[1], n.Args[2], mt, n.Attrs)
	dkOff, dvOff, per := ir.AttentionGradSplit(g.t, g.s, g.dh, g.dv)
	if g.nh*per == 0 {
		return &Kernel{}, nil
	}
	k := &Kernel{Scratch: []int64{int64(8 * max(g.nh*g.t, 1))}}
	if g.mask != nil {
		k.Data = [][]byte{g.mask}
	}
	consts := fmt.Sprintf("const PER: u32 = %du;\nconst DKOFF: u32 = %du;\nconst DVOFF: u32 = %du;\nfn scale() -> f32 { return %s; }\n", per, dkOff, dvOff, F32(g.scale))
	// Dispatch 1: per query row, lse and D into scratch; dispatch 2: dq.
	if rows := g.nh * g.t; rows > 0 {
		var b strings.Builder
		bind := g.bindings(&b, []string{"y", "dy", "st"}, []Operand{{Arg, 3}, {Arg, 4}, {Scratch, 0}}, 5)
		g.decls(&b)
		b.WriteString(consts)
		groups, idx := Grid(rows)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, `  let r = %s;
  if (r >= %du) { return; }
  let h = r / T;
  let t = r %% T;
  var d = 0.0;
  for (var j = 0u; j < DV; j++) { d = d + dy[r * DV + j] * y[r * DV + j]; }
  var m = ninf();
  var l = 0.0;
  let send = %s;
  for (var s = 0u; s < send; s++) {
    let x = score(h, t, s);
    let mn = k_maxnan(m, x);
    if (mn == ninf()) { continue; }
    l = l * exp(m - mn) + exp(x - mn);
    m = mn;
  }
  var lse = ninf();
  if (m != ninf()) { lse = m + k_log(l); }
  st[2u * r] = lse;
  st[2u * r + 1u] = d;
}
`, idx, rows, g.keyEnd())
		k.Dispatches = append(k.Dispatches, Dispatch{Source: b.String(), Groups: groups, Bind: bind})
		b.Reset()
		bind = g.bindings(&b, []string{"v", "dy", "out", "st"}, []Operand{{Arg, 2}, {Arg, 4}, {Out, 0}, {Scratch, 0}}, 5)
		g.decls(&b)
		b.WriteString(consts)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, `  let r = %s;
  if (r >= %du) { return; }
  let h = r / T;
  let t = r %% T;
  let send = %s;
  let lse = st[2u * r];
  let d = st[2u * r + 1u];
  let dq = h * PER + t * DH;
  for (var e = 0u; e < DH; e++) { out[dq + e] = 0.0; }
  if (lse == ninf()) { return; }
  for (var s = 0u; s < send; s++) {
    let p = exp(score(h, t, s) - lse);
    var dp = 0.0;
    for (var j = 0u; j < DV; j++) { dp = dp + dy[r * DV + j] * v[(h * S + s) * DV + j]; }
    let ds = p * (dp - d) * scale();
    for (var e = 0u; e < DH; e++) { out[dq + e] = out[dq + e] + ds * k[(h * S + s) * DH + e]; }
  }
}
`, idx, rows, g.keyEnd())
		k.Dispatches = append(k.Dispatches, Dispatch{Source: b.String(), Groups: groups, Bind: bind})
	}
	// Dispatch 2: per key row, dk and dv.
	if keys := g.nh * g.s; keys > 0 {
		var b strings.Builder
		bind := g.bindings(&b, []string{"v", "dy", "out", "st"}, []Operand{{Arg, 2}, {Arg, 4}, {Out, 0}, {Scratch, 0}}, 5)
		g.decls(&b)
		b.WriteString(consts)
		t0 := "0u"
		if g.causal {
			t0 = "s"
		}
		groups, idx := Grid(keys)
		b.WriteString(header(WorkgroupSize))
		fmt.Fprintf(&b, `  let r = %s;
  if (r >= %du) { return; }
  let h = r / S;
  let s = r %% S;
  let dk = h * PER + DKOFF + s * DH;
  let dv = h * PER + DVOFF + s * DV;
  for (var e = 0u; e < DH; e++) { out[dk + e] = 0.0; }
  for (var j = 0u; j < DV; j++) { out[dv + j] = 0.0; }
  for (var t = %s; t < T; t++) {
    let rq = h * T + t;
    let lse = st[2u * rq];
    if (lse == ninf()) { continue; }
    let p = exp(score(h, t, s) - lse);
    var dp = 0.0;
    for (var j = 0u; j < DV; j++) { dp = dp + dy[rq * DV + j] * v[r * DV + j]; }
    let ds = p * (dp - st[2u * rq + 1u]) * scale();
    for (var e = 0u; e < DH; e++) { out[dk + e] = out[dk + e] + ds * q[rq * DH + e]; }
    for (var j = 0u; j < DV; j++) { out[dv + j] = out[dv + j] + p * dy[rq * DV + j]; }
  }
}
`, idx, keys, t0)
		k.Dispatches = append(k.Dispatches, Dispatch{Source: b.String(), Groups: groups, Bind: bind})
	}
	return k, nil
}
