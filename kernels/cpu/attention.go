package cpu

import (
	"math"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// Fused attention (ir/ops_attention.go) in the online-softmax form of
// FlashAttention-2.
//
// Forward. The queries of one leading index (batch, head) are cut into
// tiles of attnBr rows and the keys into tiles of attnBc. For a query tile
// the kernel sweeps the key tiles in order: S = Q·Kᵀ (the blocked gemm,
// whose sums depend only on dh, so S is bitwise the unfused matmul's),
// x = S·scale + mask (-inf above the diagonal when causal; key tiles wholly
// above it are skipped), and keeps per row the running maximum m, the sum
// l of exp(x - m) and the unnormalized output acc, rescaled by exp(m_old -
// m_new) when the maximum grows; at the end out = acc / l. Only one
// attnBr×attnBc tile of scores exists at a time, per worker. A row whose
// every score is -inf (fully masked) keeps m = -inf and gets 0.
//
// Backward. The forward has one result, so it cannot hand the row
// log-sum-exp over; the backward recomputes it with the probabilities, a
// tile of attnBrGrad query rows at a time against every key they attend
// to (an attnBrGrad×S block per worker, never [T,S]): x = q·kᵀ·scale +
// mask, the row maximum m and sum l of exp(x - m), P = exp(x - m)/l (one
// exp per score, as the forward), then dS = P∘(dy·vᵀ - D)·scale with D =
// rowsum(dy∘y), dv += Pᵀ·dy, dq = dS·k, dk += dSᵀ·q, the query tiles in
// order. Masked scores give P = 0 and so nothing.
//
// The rows of scores are worked on by vector calls: the maximum (rowMax,
// through attnRowMax, which keeps a NaN score's row NaN), the shift, the
// exponentials, the sum in rowSum's order, the divisions and the products
// of dS; the accumulations into acc, dv and dk too.
//
// Work is split across workers by whole items (leading index and query
// tile forward, leading index backward), each computed alone in a fixed
// order, so the result is bitwise the same for any number of workers.

// attnBr and attnBc are the forward's query and key tile sizes, attnBrGrad
// the backward's query tile. On a GPT block's heads (T = S = 128, 32 wide,
// causal; BenchmarkAttention, one goroutine) 64×128 and 48 took 11% less
// time than 64×64 and 64, the forward 4.9 against 5.5 ms and the backward
// 7.3 against 8.1; a backward tile of 16 or 32 rows, or 128-row tiles,
// took longer.
const (
	attnBr     = 64
	attnBc     = 128
	attnBrGrad = 48
)

func init() {
	register(ir.OpAttention, ir.F32, buildAttention[float32])
	register(ir.OpAttention, ir.F64, buildAttention[float64])
	register(ir.OpAttentionGrad, ir.F32, buildAttentionGrad[float32])
	register(ir.OpAttentionGrad, ir.F64, buildAttentionGrad[float64])
}

// attnDims are the sizes of one attention node.
type attnDims[T float] struct {
	nh, t, s, dh, dv int
	scale            T
	causal           bool
	mask             bool
	maskOff          []int // per leading index, the offset of its [T,S] mask view
	mst, mss         int   // the mask's strides along T and S (0 when broadcast)
}

func newAttnDims[T float](q, k, v ir.Type, mask *ir.Type, attrs ir.Attrs) *attnDims[T] {
	r := len(q.Shape)
	lead := q.Shape[:r-2]
	d := &attnDims[T]{nh: lead.NumElements(), t: q.Shape[r-2], s: k.Shape[r-2], dh: q.Shape[r-1], dv: v.Shape[r-1],
		scale: T(attrs.Float("scale", 1)), causal: attrs.Bool("causal", false)}
	if mask != nil {
		full := append(lead.Clone(), d.t, d.s)
		st := broadcastStrides(mask.Shape, full)
		d.mask = true
		d.maskOff = offsets(lead, st[:r-2])
		if len(lead) == 0 {
			d.maskOff = []int{0}
		}
		d.mst, d.mss = st[r-2], st[r-1]
	}
	return d
}

// keyEnd returns the keys that query rows [.., r1) may attend to: all of
// them, or with causal the first r1.
func (d *attnDims[T]) keyEnd(r1 int) int {
	if d.causal {
		return min(d.s, r1)
	}
	return d.s
}

// scores turns the product tile st (rows r0.., keys c0.., row stride cols)
// into x = st·scale + mask, -inf above the diagonal when causal.
func (d *attnDims[T]) scores(st []T, mask []T, h, r0, rows, c0, cols int) {
	negInf := T(math.Inf(-1))
	for i := range rows {
		t := r0 + i
		sr := st[i*cols : (i+1)*cols]
		vecScalar(ir.OpMul, sr, sr, d.scale)
		if d.mask {
			mo := d.maskOff[h] + t*d.mst + c0*d.mss
			switch d.mss {
			case 0: // broadcast along the keys
				vecScalar(ir.OpAdd, sr, sr, mask[mo])
			case 1:
				vecVec(ir.OpAdd, sr, sr, mask[mo:mo+cols])
			default:
				for j := range sr {
					sr[j] += mask[mo+j*d.mss]
				}
			}
		}
		if d.causal {
			for j := max(t+1-c0, 0); j < cols; j++ {
				sr[j] = negInf
			}
		}
	}
}

// attnWork is one worker's scratch.
type attnWork[T float] struct {
	gemm     gemmFunc[T]
	st, dp   []T // score tile attnBr×attnBc (forward); P and dS blocks attnBrGrad×S (backward)
	acc, tmp []T // attnBr×dv (forward); S×max(dh,dv) (backward: tmp)
	m, l     []T // per query row of the tile (forward)
	lo, hi   int // the items of this part
}

// attnParts returns the [lo, hi) item bounds of parts workers over n items.
func attnParts(n, workers int) [][2]int {
	parts := max(min(workers, n), 1)
	b := make([][2]int, parts)
	for p := range parts {
		b[p] = [2]int{p * n / parts, (p + 1) * n / parts}
	}
	return b
}

// buildAttention builds attention(q, k, v [, mask]) {scale, causal}.
func buildAttention[T float](n *kernels.Node) (kernels.Func, error) {
	var mt *ir.Type
	if len(n.Args) > 3 {
		mt = &n.Args[3]
	}
	d := newAttnDims[T](n.Args[0], n.Args[1], n.Args[2], mt, n.Attrs)
	if d.nh*d.t*d.dv == 0 {
		return func(kernels.Tensor, []kernels.Tensor) error { return nil }, nil
	}
	qt := (d.t + attnBr - 1) / attnBr
	bounds := attnParts(d.nh*qt, kernels.Workers(n.Par))
	wd := max(d.dh, d.dv)
	works := make([]*attnWork[T], len(bounds))
	for p, b := range bounds {
		works[p] = &attnWork[T]{gemm: gemmOf[T](attnBr, max(attnBc, wd), max(attnBc, wd)),
			st: make([]T, attnBr*attnBc), acc: make([]T, attnBr*d.dv), tmp: make([]T, attnBr*d.dv),
			m: make([]T, attnBr), l: make([]T, attnBr), lo: b[0], hi: b[1]}
	}
	var out, q, k, v, mask []T
	body := func(p int) {
		w := works[p]
		for it := w.lo; it < w.hi; it++ {
			h, r0 := it/qt, (it%qt)*attnBr
			attnForwardTile(d, w, out, q, k, v, mask, h, r0, min(r0+attnBr, d.t))
		}
	}
	return func(o kernels.Tensor, args []kernels.Tensor) error {
		out, q, k, v = kernels.View[T](o), kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
		if d.mask {
			mask = kernels.View[T](args[3])
		}
		kernels.Run(n.Par, len(works), body)
		out, q, k, v, mask = nil, nil, nil, nil, nil
		return nil
	}, nil
}

// attnRowMax returns the largest of m and the scores x (rowMax), the
// shift of their exponentials. A NaN score makes the row's result NaN
// whether it is the shift or only one of the exponentials added into the
// row's sum, so rowMax may pass it over; but a row whose other scores are
// all -Inf would then be taken for a row with every key masked (whose
// result is 0), so for such a row the NaN is looked for and returned.
func attnRowMax[T float](x []T, m T) T {
	mx := rowMax(x)
	if mx != mx || m != m {
		return mx + m // NaN
	}
	mx = max(mx, m)
	if math.IsInf(float64(mx), -1) {
		for _, v := range x {
			if v != v {
				return v
			}
		}
	}
	return mx
}

// attnForwardTile computes the output rows [r0, r1) of leading index h.
func attnForwardTile[T float](d *attnDims[T], w *attnWork[T], out, q, k, v, mask []T, h, r0, r1 int) {
	rows := r1 - r0
	negInf := T(math.Inf(-1))
	m, l, acc := w.m[:rows], w.l[:rows], w.acc[:rows*d.dv]
	for i := range m {
		m[i], l[i] = negInf, 0
	}
	clear(acc)
	qb := q[(h*d.t+r0)*d.dh : (h*d.t+r1)*d.dh]
	kh := k[h*d.s*d.dh : (h+1)*d.s*d.dh]
	vh := v[h*d.s*d.dv : (h+1)*d.s*d.dv]
	send := d.keyEnd(r1)
	for c0 := 0; c0 < send; c0 += attnBc {
		c1 := min(c0+attnBc, send)
		cols := c1 - c0
		st := w.st[:rows*cols]
		w.gemm(false, true, rows, cols, d.dh, qb, d.dh, kh[c0*d.dh:c1*d.dh], d.dh, st, cols)
		d.scores(st, mask, h, r0, rows, c0, cols)
		for i := range rows {
			sr := st[i*cols : (i+1)*cols]
			mx := attnRowMax(sr, m[i])
			if mx == negInf { // every score so far is masked
				clear(sr)
				continue
			}
			vecScalar(ir.OpSub, sr, sr, mx)
			expRow(sr) // bitwise exp(x - mx) element by element
			sum := rowSum(sr)
			if m[i] != mx {
				corr := exp(m[i] - mx)
				l[i] *= corr
				ar := acc[i*d.dv : (i+1)*d.dv]
				vecScalar(ir.OpMul, ar, ar, corr)
				m[i] = mx
			}
			l[i] += sum
		}
		pv := w.tmp[:rows*d.dv]
		w.gemm(false, false, rows, d.dv, cols, st, cols, vh[c0*d.dv:c1*d.dv], d.dv, pv, d.dv)
		vecVec(ir.OpAdd, acc, acc, pv)
	}
	ob := out[(h*d.t+r0)*d.dv : (h*d.t+r1)*d.dv]
	for i := range rows {
		or, ar := ob[i*d.dv:(i+1)*d.dv], acc[i*d.dv:(i+1)*d.dv]
		if m[i] == negInf {
			clear(or)
			continue
		}
		vecScalar(ir.OpDiv, or, ar, l[i])
	}
}

// buildAttentionGrad builds attention_grad(q, k, v, y, dy [, mask]).
func buildAttentionGrad[T float](n *kernels.Node) (kernels.Func, error) {
	var mt *ir.Type
	if len(n.Args) > 5 {
		mt = &n.Args[5]
	}
	d := newAttnDims[T](n.Args[0], n.Args[1], n.Args[2], mt, n.Attrs)
	dkOff, dvOff, per := ir.AttentionGradSplit(d.t, d.s, d.dh, d.dv)
	if d.nh*per == 0 {
		return func(kernels.Tensor, []kernels.Tensor) error { return nil }, nil
	}
	bounds := attnParts(d.nh, kernels.Workers(n.Par))
	wd := max(d.dh, d.dv)
	works := make([]*attnWork[T], len(bounds))
	for p, b := range bounds {
		works[p] = &attnWork[T]{gemm: gemmOf[T](max(attnBrGrad, d.s), max(d.s, wd), max(attnBrGrad, d.s, wd)),
			st: make([]T, attnBrGrad*d.s), dp: make([]T, attnBrGrad*d.s), tmp: make([]T, d.s*wd), lo: b[0], hi: b[1]}
	}
	var out, q, k, v, y, dy, mask []T
	body := func(p int) {
		w := works[p]
		for h := w.lo; h < w.hi; h++ {
			o := out[h*per : (h+1)*per]
			attnBackwardHead(d, w, o[:dkOff], o[dkOff:dvOff], o[dvOff:], q, k, v, y, dy, mask, h)
		}
	}
	return func(o kernels.Tensor, args []kernels.Tensor) error {
		out = kernels.View[T](o)
		q, k, v = kernels.View[T](args[0]), kernels.View[T](args[1]), kernels.View[T](args[2])
		y, dy = kernels.View[T](args[3]), kernels.View[T](args[4])
		if d.mask {
			mask = kernels.View[T](args[5])
		}
		kernels.Run(n.Par, len(works), body)
		out, q, k, v, y, dy, mask = nil, nil, nil, nil, nil, nil, nil
		return nil
	}, nil
}

// attnBackwardHead computes dq, dk and dv of leading index h, one query
// tile of rows at a time against every key it attends to.
func attnBackwardHead[T float](d *attnDims[T], w *attnWork[T], dq, dk, dv, q, k, v, y, dy, mask []T, h int) {
	negInf := T(math.Inf(-1))
	qh := q[h*d.t*d.dh : (h+1)*d.t*d.dh]
	kh := k[h*d.s*d.dh : (h+1)*d.s*d.dh]
	vh := v[h*d.s*d.dv : (h+1)*d.s*d.dv]
	yh := y[h*d.t*d.dv : (h+1)*d.t*d.dv]
	dyh := dy[h*d.t*d.dv : (h+1)*d.t*d.dv]
	clear(dk)
	clear(dv)
	for r0 := 0; r0 < d.t; r0 += attnBrGrad {
		r1 := min(r0+attnBrGrad, d.t)
		rows := r1 - r0
		send := d.keyEnd(r1)
		qi, dyi, dqi := qh[r0*d.dh:r1*d.dh], dyh[r0*d.dv:r1*d.dv], dq[r0*d.dh:r1*d.dh]
		if send == 0 {
			clear(dqi)
			continue
		}
		// P: the scores of the tile's rows against every key they see,
		// each row's maximum m and sum l of exp(x - m): P = exp(x - m) / l.
		p := w.st[:rows*send]
		w.gemm(false, true, rows, send, d.dh, qi, d.dh, kh[:send*d.dh], d.dh, p, send)
		d.scores(p, mask, h, r0, rows, 0, send)
		for i := range rows {
			pr := p[i*send : (i+1)*send]
			m := attnRowMax(pr, negInf)
			if m == negInf { // every key masked: no gradient
				clear(pr)
				continue
			}
			vecScalar(ir.OpSub, pr, pr, m)
			expRow(pr) // bitwise exp(x - m) element by element
			l := rowSum(pr)
			vecScalar(ir.OpDiv, pr, pr, l)
		}
		// dS = P∘(dy·vᵀ - D)·scale, D = rowsum(dy∘y).
		ds := w.dp[:rows*send]
		w.gemm(false, true, rows, send, d.dv, dyi, d.dv, vh[:send*d.dv], d.dv, ds, send)
		for i := range rows {
			t := r0 + i
			var di T
			yr, gr := yh[t*d.dv:(t+1)*d.dv], dyh[t*d.dv:(t+1)*d.dv]
			for j := range yr {
				di += T(gr[j] * yr[j])
			}
			dr, pr := ds[i*send:(i+1)*send], p[i*send:(i+1)*send]
			vecScalar(ir.OpSub, dr, dr, di)
			vecVec(ir.OpMul, dr, pr, dr)
			vecScalar(ir.OpMul, dr, dr, d.scale)
		}
		// dv += Pᵀ·dy, dq = dS·k, dk += dSᵀ·q.
		tmp := w.tmp[:send*d.dv]
		w.gemm(true, false, send, d.dv, rows, p, send, dyi, d.dv, tmp, d.dv)
		vecVec(ir.OpAdd, dv[:len(tmp)], dv, tmp)
		w.gemm(false, false, rows, d.dh, send, ds, send, kh[:send*d.dh], d.dh, dqi, d.dh)
		tmp = w.tmp[:send*d.dh]
		w.gemm(true, false, send, d.dh, rows, ds, send, qi, d.dh, tmp, d.dh)
		vecVec(ir.OpAdd, dk[:len(tmp)], dk, tmp)
	}
}
