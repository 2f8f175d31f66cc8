package checkpoint

import (
	"math"
	"slices"
)

// Multi-level recomputation on the chain (binomial checkpointing, as in
// Griewank and Walther's revolve, with per-layer sizes and costs as in
// Gruslys et al., "Memory-efficient backpropagation through time", 2016).
//
// A multi-level segment (s,t] of a segmentation keeps nothing of its
// forward but boundary s. Its backward runs a tree of subproblems. A
// subproblem (a,b) has a copy of boundary a (the kept original or a clone)
// and has to run the backward steps of stages a+1..b (blocks b..a+1, the
// backward runs down the chain). It is solved one of two ways:
//
//   - leaf: recompute everything strictly between a and b from a in one
//     sweep, each value cloned once, just before its first backward user
//     (what a one-level recompute segment does);
//   - split at k (a < k < b): sweep from a to k, cloning the values on the
//     way (each dies at its next clone) and keeping the clone of boundary
//     k; solve (k,b) with it; then solve (a,k), whose top boundary is that
//     clone.
//
// A value can so be recomputed once per subproblem above it on the tree:
// the clones NAME.remat, NAME.remat2, ... The tree's nodes are the
// multi-level nodes of the chain: the virtual ends 0 and m+1 and the
// boundaries k that are
//
//   - saved (the backward reads them),
//   - separated: every backward read of boundary k comes before the first
//     backward read of any activation below it, and
//   - clean: no backward step attributed to a stage at or below k reads an
//     activation above it,
//
// which holds at every cut vertex of MLPs and residual chains. With these,
// the live bytes of a tree decompose exactly over its subproblems (see
// leaf, bound and pre): a split's peak is the largest of its own bound, the
// right tree's peak plus boundary k, and the left tree's peak; its FLOPs
// are its sweep's plus both trees'. A dynamic program over the
// subproblems, shortest first, so finds for every subproblem the Pareto
// front of (peak, recompute FLOPs) over all its trees (fronts), and solve
// offers a multi-level segment's front next to keeping and recomputing it
// once.

// maxNodes bounds the multi-level nodes; more are thinned evenly.
const maxNodes = 160

// maxFront bounds the Pareto front kept per subproblem; past it the front
// is thinned evenly and the fronts are no longer exact.
const maxFront = 512

// negInf is the peak of a subproblem with no step that holds its clones.
const negInf = math.MinInt64 / 4

// A tree is a multi-level schedule of a subproblem: nil is a leaf, else a
// split at boundary k with the trees of (k,b) (right, run first) and (a,k)
// (left).
type tree struct {
	k           int
	right, left *tree
}

// fentry is one point of a subproblem's front: the peak q (the most bytes
// live at its steps from its first clone on, less what its holders keep;
// see leaf and bound), the FLOPs, and how it is made: a leaf (k < 0) or a split at boundary k
// with front entries r of (k,b) and l of (a,k).
type fentry struct {
	q    int64
	cost float64
	k    int32
	r, l int32
}

// wentry is one choice for a multi-level segment of the segmentation: the
// segment's model peak w (what solve adds to the bytes kept below), its
// FLOPs and the front entry of its tree.
type wentry struct {
	w    int64
	cost float64
	e    int32
}

type multi struct {
	c     *chain
	nodes []int // boundary indices, ascending, from 0 to m+1
	idx   []int // boundary index -> node index, -1 when not a node
	lo    [][]int
	hi    [][]int
	first [][]int // F: the first backward read of a saved value strictly inside; MaxInt if none
	// Per pair of nodes (i, j): the front of subproblem (nodes[i],
	// nodes[j]) up to peak limit (see fronts), and its least peak.
	front [][][]fentry
	limit int64
	minQ  [][]int64
	leafQ [][]int64
	leafC [][]float64
	// Per pair (i, k): the sweep from nodes[i] to nodes[k].
	swLive [][]int64
	swCost [][]float64
	swVals [][][]int
	top    map[[2]int][]wentry
	exact  bool // no front was thinned
}

// multiNodes returns the multi-level nodes of the chain (see above).
func (c *chain) multiNodes() []int {
	a := c.a
	m := c.m
	// startLE[k]: the first position attributed to a stage <= k.
	startLE := make([]int, m+2)
	startLE[0] = math.MaxInt
	for k := 1; k <= m+1; k++ {
		startLE[k] = min(startLE[k-1], c.own[k][0])
	}
	// sufLast[p]: the last backward read of any saved value > p.
	sufLast := make([]int, a.fwdEnd+2)
	sufLast[a.fwdEnd+1] = -1
	for p := a.fwdEnd; p >= 0; p-- {
		sufLast[p] = sufLast[p+1]
		if a.saved[p] {
			sufLast[p] = max(sufLast[p], a.lastBwd[p])
		}
	}
	// preFirst[p]: the first backward read of any saved value < p.
	preFirst := make([]int, a.fwdEnd+2)
	preFirst[0] = math.MaxInt
	for p := 1; p <= a.fwdEnd+1; p++ {
		preFirst[p] = preFirst[p-1]
		if a.saved[p-1] {
			preFirst[p] = min(preFirst[p], a.firstBwd[p-1])
		}
	}
	nodes := []int{0}
	for k := 1; k <= m; k++ {
		b := c.bd[k]
		saved := a.saved[b]
		sep := saved && a.lastBwd[b] < preFirst[b]
		clean := sufLast[b+1] < startLE[k]
		if saved && sep && clean {
			nodes = append(nodes, k)
		}
	}
	if len(nodes)-1 > maxNodes-2 {
		nodes = append([]int{0}, thin(nodes[1:], maxNodes-2)...)
	}
	return append(nodes, m+1)
}

// buildMulti builds the multi-level model: the nodes, every subproblem's
// leaf and least peak, every sweep. The fronts come later (fronts).
func (c *chain) buildMulti() *multi {
	if c.mm != nil {
		return c.mm
	}
	a := c.a
	mm := &multi{c: c, nodes: c.multiNodes(), exact: true}
	c.mm = mm
	N := len(mm.nodes)
	mm.idx = make([]int, c.m+2)
	for i := range mm.idx {
		mm.idx[i] = -1
	}
	for i, k := range mm.nodes {
		mm.idx[k] = i
	}
	// first backward reads of saved values, for range minima
	fb := make([]int64, a.fwdEnd+1)
	for p := range fb {
		fb[p] = math.MaxInt64
		if a.saved[p] {
			fb[p] = int64(a.firstBwd[p])
		}
	}
	minT := sparseTableMin(fb)
	rangeMin := func(lo, hi int) int {
		if lo > hi {
			return math.MaxInt
		}
		k := bitsLen(hi-lo+1) - 1
		v := min(minT[k][lo], minT[k][hi-(1<<k)+1])
		if v == math.MaxInt64 {
			return math.MaxInt
		}
		return int(v)
	}
	grid := func() [][]int {
		g := make([][]int, N)
		for i := range g {
			g[i] = make([]int, N)
		}
		return g
	}
	mm.lo, mm.hi, mm.first = grid(), grid(), grid()
	mm.leafQ = make([][]int64, N)
	mm.leafC = make([][]float64, N)
	mm.swLive = make([][]int64, N)
	mm.swCost = make([][]float64, N)
	mm.swVals = make([][][]int, N)
	for i := range N {
		mm.leafQ[i] = make([]int64, N)
		mm.leafC[i] = make([]float64, N)
		mm.swLive[i] = make([]int64, N)
		mm.swCost[i] = make([]float64, N)
		mm.swVals[i] = make([][]int, N)
		lo, hi := math.MaxInt, -1
		s := mm.nodes[i]
		for j := i + 1; j < N; j++ {
			t := mm.nodes[j]
			for st := mm.nodes[j-1] + 1; st <= t; st++ {
				lo = min(lo, c.own[st][0])
				hi = max(hi, c.own[st][1])
			}
			mm.lo[i][j], mm.hi[i][j] = lo, hi
			mm.first[i][j] = rangeMin(c.bd[s]+1, c.bd[t]-1)
			mm.leafQ[i][j], mm.leafC[i][j] = mm.leaf(i, j)
			if t <= c.m {
				mm.swLive[i][j], mm.swCost[i][j], mm.swVals[i][j] = mm.sweepTo(i, j)
			}
		}
	}
	// The least peak of each subproblem over all its trees.
	mm.minQ = make([][]int64, N)
	for i := range N {
		mm.minQ[i] = make([]int64, N)
	}
	for span := 1; span < N; span++ {
		for i := 0; i+span < N; i++ {
			j := i + span
			q := mm.leafQ[i][j]
			for kk := i + 1; kk < j; kk++ {
				sk := a.size[c.bd[mm.nodes[kk]]]
				q = min(q, max(mm.bound(i, kk, j), mm.minQ[kk][j]+sk, mm.minQ[i][kk]))
			}
			mm.minQ[i][j] = q
		}
	}
	return mm
}

// fronts makes sure the fronts hold every tree whose peak q is at most
// limit: the Pareto front (q, FLOPs) of each subproblem over its trees with
// q <= limit, shortest subproblems first (a tree's q is at least its
// subtrees', so capping loses nothing below the cap).
func (mm *multi) fronts(limit int64) {
	if mm.front != nil && mm.limit >= limit {
		return
	}
	N := len(mm.nodes)
	mm.limit = limit
	mm.top = map[[2]int][]wentry{}
	mm.front = make([][][]fentry, N)
	for i := range N {
		mm.front[i] = make([][]fentry, N)
	}
	var acc, next, split []fentry
	for span := 1; span < N; span++ {
		for i := 0; i+span < N; i++ {
			j := i + span
			acc = acc[:0]
			if mm.leafQ[i][j] <= limit {
				acc = append(acc, fentry{q: mm.leafQ[i][j], cost: mm.leafC[i][j], k: -1})
			}
			for kk := i + 1; kk < j; kk++ {
				split = mm.splitFront(split[:0], i, kk, j)
				if len(split) == 0 {
					continue
				}
				next = minMerge(next[:0], acc, split)
				acc, next = next, acc
			}
			if len(acc) > maxFront {
				mm.exact = false
				thinned := make([]fentry, 0, maxFront)
				for t := range maxFront {
					thinned = append(thinned, acc[t*(len(acc)-1)/(maxFront-1)])
				}
				acc = append(acc[:0], thinned...)
			}
			mm.front[i][j] = slices.Clone(acc)
		}
	}
}

func bitsLen(x int) int {
	n := 0
	for x > 0 {
		n++
		x >>= 1
	}
	return n
}

func sparseTableMin(xs []int64) [][]int64 {
	t := [][]int64{xs}
	for k := 1; 1<<k <= len(xs); k++ {
		prev := t[k-1]
		row := make([]int64, len(xs)-(1<<k)+1)
		for i := range row {
			row[i] = min(prev[i], prev[i+(1<<(k-1))])
		}
		t = append(t, row)
	}
	return t
}

// leaf returns the peak q and the FLOPs of solving subproblem (i, j) as a
// leaf: the most bytes live, over its steps from its first clone on and
// its clone steps, of the buffers that are no activation and of its clones
// (boundary a is held by whoever holds the subproblem; boundary b is dead
// there, since b is separated).
func (mm *multi) leaf(i, j int) (int64, float64) {
	c, a := mm.c, mm.c.a
	f := mm.first[i][j]
	if f == math.MaxInt {
		return negInf, 0
	}
	lo, hi := c.bd[mm.nodes[i]]+1, c.bd[mm.nodes[j]]-1
	if mm.nodes[j] == c.m+1 {
		hi = a.fwdEnd
	}
	items, slots, slotGap, cost := c.cloneItems(lo, hi)
	q := c.sweep([][2]int{{f, mm.hi[i][j]}}, items, slots, slotGap)
	return max(q, negInf), cost
}

// cloneItems returns the live ranges of the clones a one-level sweep of
// the activations in lo..hi makes (cloneSetRange, each clone just before
// its first reader), their clone steps with the bytes live across the gap
// there, and their FLOPs.
func (c *chain) cloneItems(lo, hi int) (items []item, slots, slotGap []int64, cost float64) {
	a := c.a
	w := hi - lo + 1
	need := make([]bool, w)
	ins := make([]int, w)
	for i := range ins {
		ins[i] = math.MaxInt
	}
	for i := hi; i >= lo; i-- {
		if !a.cand[i] {
			continue
		}
		if a.firstBwd[i] >= 0 {
			ins[i-lo] = min(ins[i-lo], a.firstBwd[i])
		}
		if ins[i-lo] == math.MaxInt {
			continue
		}
		need[i-lo] = true
		cost += a.flops[i]
		for _, x := range a.g.Values[i].Args {
			if int(x) >= lo && a.cand[x] {
				ins[int(x)-lo] = min(ins[int(x)-lo], ins[i-lo])
			}
		}
	}
	slot := make([]int64, w)
	count := map[int]int{}
	for i := lo; i <= hi; i++ {
		if need[i-lo] {
			p := ins[i-lo]
			slot[i-lo] = extClone(p, count[p])
			count[p]++
			slots = append(slots, slot[i-lo])
			slotGap = append(slotGap, c.gap[p])
		}
	}
	for i := hi; i >= lo; i-- {
		if !need[i-lo] {
			continue
		}
		end := int64(-1)
		if a.lastBwd[i] >= 0 {
			end = ext(a.lastBwd[i])
		}
		for _, u := range a.users[i] {
			if int(u) <= hi && need[int(u)-lo] {
				end = max(end, slot[int(u)-lo])
			}
		}
		items = append(items, item{slot[i-lo], end, a.size[i]})
	}
	return items, slots, slotGap, cost
}

// sweepTo returns, for the sweep from node i to node k, the most bytes of
// its clones live at one of its clone steps, its FLOPs and the values it
// clones: the activations between the two boundaries that boundary k
// depends on, and boundary k.
func (mm *multi) sweepTo(i, k int) (int64, float64, []int) {
	c, a := mm.c, mm.c.a
	lo, top := c.bd[mm.nodes[i]]+1, c.bd[mm.nodes[k]]
	in := make([]bool, top-lo+1)
	in[top-lo] = true
	for v := top; v >= lo; v-- {
		if !in[v-lo] {
			continue
		}
		for _, x := range a.g.Values[v].Args {
			if int(x) >= lo && a.cand[x] {
				in[int(x)-lo] = true
			}
		}
	}
	var vals []int
	for v := lo; v <= top; v++ {
		if in[v-lo] {
			vals = append(vals, v)
		}
	}
	last := make([]int, top-lo+1) // the last clone of the sweep that reads each value
	for _, v := range vals {
		for _, x := range a.g.Values[v].Args {
			if int(x) >= lo && in[int(x)-lo] {
				last[int(x)-lo] = v
			}
		}
	}
	var live, peak int64
	var cost float64
	for _, v := range vals {
		live += a.size[v]
		peak = max(peak, live)
		cost += a.flops[v]
		for _, x := range a.g.Values[v].Args {
			if int(x) >= lo && in[int(x)-lo] && last[int(x)-lo] == v {
				live -= a.size[x]
				last[int(x)-lo] = -1 // an argument read twice is freed once
			}
		}
	}
	return peak, cost, vals
}

// bound returns the most bytes live at the steps of a split of subproblem
// (i, j) at node kk that the subtrees' fronts do not cover: the sweep's
// clone steps, the steps of (k,b) before its first clone (with k's clone
// held), and the steps of (a,k) before its first clone while k's clone is
// read. All are at or after the split's sweep, at F(a,b).
func (mm *multi) bound(i, kk, j int) int64 {
	c, a := mm.c, mm.c.a
	p0 := mm.first[i][j]
	kb := c.bd[mm.nodes[kk]]
	sk := a.size[kb]
	out := c.gap[p0] + mm.swLive[i][kk]
	if x1 := min(mm.first[kk][j]-1, mm.hi[kk][j]); x1 >= p0 {
		if b := c.maxBase(p0, x1); b >= 0 {
			out = max(out, sk+b)
		}
	}
	x0, x1 := max(mm.lo[i][kk], p0), min(mm.first[i][kk]-1, mm.hi[i][kk])
	if x0 <= x1 {
		lb := a.lastBwd[kb]
		if b := c.maxBase(x0, min(x1, lb)); b >= 0 {
			out = max(out, sk+b)
		}
		if b := c.maxBase(max(x0, lb+1), x1); b >= 0 {
			out = max(out, b)
		}
	}
	return out
}

// pre returns the most bytes live at the steps of subproblem (i, j) before
// its first clone: the buffers that are no activation and boundary b while
// the backward reads it.
func (mm *multi) pre(i, j int) int64 {
	c, a := mm.c, mm.c.a
	lo, hi := mm.lo[i][j], min(mm.hi[i][j], mm.first[i][j]-1)
	out := int64(negInf)
	if lo > hi {
		return out
	}
	lb, sb := -1, int64(0)
	if t := mm.nodes[j]; t <= c.m {
		lb, sb = a.lastBwd[c.bd[t]], a.size[c.bd[t]]
	}
	if b := c.maxBase(lo, min(hi, lb)); b >= 0 {
		out = max(out, sb+b)
	}
	if b := c.maxBase(max(lo, lb+1), hi); b >= 0 {
		out = max(out, b)
	}
	return out
}

// splitFront appends to dst the front of the trees of (i, j) that split at
// node kk: at a peak limit W, the cheapest right tree with q + size(k) <= W
// and the cheapest left tree with q <= W, when the split's own bound fits.
func (mm *multi) splitFront(dst []fentry, i, kk, j int) []fentry {
	c := mm.c
	R, L := mm.front[kk][j], mm.front[i][kk]
	if len(R) == 0 || len(L) == 0 {
		return dst
	}
	sk := c.a.size[c.bd[mm.nodes[kk]]]
	bnd := mm.bound(i, kk, j)
	base := mm.swCost[i][kk]
	// A leaf recomputes each value once, so no tree costs less: nothing
	// at or above the leaf's peak is worth keeping, nor above the limit.
	stop := mm.leafQ[i][j]
	if stop == negInf {
		stop = math.MaxInt64
	}
	r, l := 0, 0
	w := max(bnd, R[0].q+sk, L[0].q)
	if w > mm.limit {
		return dst
	}
	for r+1 < len(R) && R[r+1].q+sk <= w {
		r++
	}
	for l+1 < len(L) && L[l+1].q <= w {
		l++
	}
	for {
		cost := base + R[r].cost + L[l].cost
		q := max(bnd, R[r].q+sk, L[l].q)
		if len(dst) == 0 || cost < dst[len(dst)-1].cost {
			dst = append(dst, fentry{q: q, cost: cost, k: int32(kk), r: int32(r), l: int32(l)})
		}
		nr, nl := int64(math.MaxInt64), int64(math.MaxInt64)
		if r+1 < len(R) {
			nr = R[r+1].q + sk
		}
		if l+1 < len(L) {
			nl = L[l+1].q
		}
		w = min(nr, nl)
		if w >= stop || w > mm.limit {
			return dst
		}
		for r+1 < len(R) && R[r+1].q+sk <= w {
			r++
		}
		for l+1 < len(L) && L[l+1].q <= w {
			l++
		}
	}
}

// minMerge appends to dst the pointwise minimum of fronts x and y (each
// sorted by q, cost strictly decreasing).
func minMerge(dst, x, y []fentry) []fentry {
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		var e fentry
		switch {
		case j >= len(y) || (i < len(x) && (x[i].q < y[j].q || x[i].q == y[j].q && x[i].cost <= y[j].cost)):
			e = x[i]
			i++
		default:
			e = y[j]
			j++
		}
		if len(dst) > 0 && dst[len(dst)-1].q == e.q && e.cost < dst[len(dst)-1].cost {
			dst[len(dst)-1] = e
			continue
		}
		if len(dst) == 0 || e.cost < dst[len(dst)-1].cost {
			dst = append(dst, e)
		}
	}
	return dst
}

// treeOf returns the tree of front entry e of (i, j).
func (mm *multi) treeOf(i, j int, e int32) *tree {
	f := mm.front[i][j][e]
	if f.k < 0 {
		return nil
	}
	kk := int(f.k)
	return &tree{k: mm.nodes[kk], right: mm.treeOf(kk, j, f.r), left: mm.treeOf(i, kk, f.l)}
}

// eval returns the peak q and the FLOPs of tree t on (i, j), and false when
// t splits at a boundary that is no node between them.
func (mm *multi) eval(i, j int, t *tree) (int64, float64, bool) {
	if t == nil {
		return mm.leafQ[i][j], mm.leafC[i][j], true
	}
	if t.k < 0 || t.k >= len(mm.idx) {
		return 0, 0, false
	}
	kk := mm.idx[t.k]
	if kk <= i || kk >= j {
		return 0, 0, false
	}
	qr, cr, ok1 := mm.eval(kk, j, t.right)
	ql, cl, ok2 := mm.eval(i, kk, t.left)
	if !ok1 || !ok2 {
		return 0, 0, false
	}
	sk := mm.c.a.size[mm.c.bd[t.k]]
	return max(mm.bound(i, kk, j), qr+sk, ql), mm.swCost[i][kk] + cr + cl, true
}

// segW returns the model peak of a multi-level segment (s,t] of the
// segmentation whose tree has peak q: the larger of its forward steps
// (from recompute mode's model) and, over its backward, boundary s (kept
// throughout) plus the steps before the first clone or the tree's peak.
func (mm *multi) segW(i, j int, q int64) int64 {
	c, a := mm.c, mm.c.a
	s, t := mm.nodes[i], mm.nodes[j]
	var held int64
	if s >= 1 {
		held = a.size[c.bd[s]]
	}
	return max(c.fwdPeak(s, t), held+mm.pre(i, j), held+q)
}

// choices returns the Pareto choices (model peak, FLOPs) of the
// multi-level segment (s,t] (boundary indices), or nil when s or t is no
// node.
func (mm *multi) choices(s, t int) []wentry {
	i, j := mm.idx[s], mm.idx[t]
	if i < 0 || j < 0 || i >= j {
		return nil
	}
	if w, ok := mm.top[[2]int{i, j}]; ok {
		return w
	}
	var out []wentry
	for e, f := range mm.front[i][j] {
		w := mm.segW(i, j, f.q)
		if n := len(out); n > 0 && out[n-1].w == w {
			out[n-1] = wentry{w, f.cost, int32(e)} // cheaper at the same peak
			continue
		}
		out = append(out, wentry{w, f.cost, int32(e)})
	}
	mm.top[[2]int{i, j}] = out
	return out
}

// sweeps appends the sweeps of tree t on (i, j) to dst, in the order they
// run.
func (mm *multi) sweeps(dst []sweep, i, j int, t *tree) []sweep {
	c, a := mm.c, mm.c.a
	if t == nil {
		if mm.first[i][j] == math.MaxInt {
			return dst
		}
		lo, hi := c.bd[mm.nodes[i]]+1, c.bd[mm.nodes[j]]-1
		if mm.nodes[j] == c.m+1 {
			hi = a.fwdEnd
		}
		var vals []int
		for v := lo; v <= hi; v++ {
			if a.cand[v] {
				vals = append(vals, v)
			}
		}
		return append(dst, sweep{vals: vals, lo: mm.lo[i][j], hi: mm.hi[i][j], at: -1})
	}
	kk := mm.idx[t.k]
	hi := max(mm.hi[kk][j], c.own[t.k][1])
	dst = append(dst, sweep{vals: mm.swVals[i][kk], lo: mm.lo[i][j], hi: hi, at: mm.first[i][j]})
	dst = mm.sweeps(dst, kk, j, t.right)
	return mm.sweeps(dst, i, kk, t.left)
}
