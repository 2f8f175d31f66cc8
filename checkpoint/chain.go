package checkpoint

import (
	"cmp"
	"math"
	"math/bits"
	"slices"
	"sort"
)

// The chain of a graph is its sequence of cut vertices: activations c such
// that, right after c is computed, c is the only computed input-dependent
// forward value that a later forward value still reads. Everything between
// two consecutive cut vertices (a layer, a residual block) depends on the
// rest of the forward graph only through the first of them, so keeping a
// subset of the cut vertices as segment boundaries and recomputing the
// values between them from the nearest kept boundary below is always
// possible. For an MLP the cut vertices are the matmul, bias-add and
// activation outputs of every layer.

// maxBoundaries bounds the chain the dynamic program works on; longer
// chains are thinned to this many evenly spaced cut vertices.
const maxBoundaries = 256

// cuts returns the cut vertices of the chain, in order.
func (a *analysis) cuts() []int {
	// open[p]: forward input- or param-dependent computed values defined at or
	// before p that a forward value after p reads.
	diff := make([]int, a.n+1)
	for i := 0; i <= a.fwdEnd; i++ {
		if !a.dep[i] || a.g.Values[i].Op.IsLeaf() {
			continue
		}
		if a.lastFwd[i] > i {
			diff[i]++
			diff[a.lastFwd[i]]--
		}
	}
	var out []int
	open := 0
	for i := 0; i <= a.fwdEnd; i++ {
		open += diff[i]
		// open counts values live across the gap after i; i itself is
		// among them when a later forward value reads it.
		self := 0
		if a.lastFwd[i] > i {
			self = 1
		}
		if a.cand[i] && open-self == 0 {
			out = append(out, i)
		}
	}
	return out
}

// thin returns at most k evenly spaced elements of xs, the last included.
func thin(xs []int, k int) []int {
	if len(xs) <= k {
		return xs
	}
	out := make([]int, 0, k)
	for i := 1; i <= k; i++ {
		out = append(out, xs[(i*len(xs))/k-1])
	}
	return out
}

// chain is the memory model of one-level segmentations of the chain.
//
// Boundaries 1..m are cut vertices (bd), with the virtual boundaries 0
// (before everything) and m+1 (after the forward). A segmentation keeps a
// subset of the boundaries and treats every segment between consecutive
// kept boundaries one of two ways: keep (its activations stay from the
// forward to the backward) or recompute (its saved activations are
// recomputed from the kept boundary below it, as the rewrite does).
//
// Every step position is attributed to one stage i (the values in
// (bd[i-1], bd[i]]): a forward step to the stage of its value, a backward
// step to the lowest stage of the activations read by it or by any
// backward step before it (the backward runs down the chain). The model's
// peak of a segmentation is the maximum over segments (s,t] of
//
//	P(s) + W(s,t,mode)
//
// where P(s) is the bytes kept below s (boundaries below s that a later
// step reads, activations of kept segments below s) and W is the maximum,
// over the steps attributed to stages s+1..t and the segment's clone
// steps, of the bytes live there that do not depend on the rest of the
// choice: the buffers that are no activation and activations only while
// their forward users run (from the planner's liveness of the graph
// without recomputation), boundary s from its last forward use to its
// last use, boundary t in the backward while it is read, and the segment's
// own kept activations or clones over their live ranges in the rewritten
// graph. The model equals the live bytes of the rewritten plan when no
// clone or kept activation of a segment is read by a backward step
// attributed to another segment (true of MLPs and CNNs; tests compare it
// with the planner's lower bound), and the real arena is checked by
// planning in any case.
type chain struct {
	a      *analysis
	bd     []int // bd[1..m]; bd[0] and bd[m+1] unused
	m      int
	stage  []int // per forward position: its stage 1..m+1
	owner  []int // per position after fwdEnd (0..n): its stage
	own    [][2]int
	base   []int64 // per position: live bytes that do not depend on the choice
	gap    []int64 // per position p: those live across the gap before p
	rmq    [][]int64
	segs   map[[3]int]segment
	lowest int    // the lowest stage that owns a backward step
	mm     *multi // the multi-level model, once built
}

// A segment is the model's price of one segment of a segmentation.
type segment struct {
	peak int64   // W(s,t,mode)
	inc  int64   // what the segment adds to P for the segments above
	cost float64 // recompute FLOPs
	ok   bool
}

const (
	keepMode      = 0
	recomputeMode = 1
	multiMode     = 2 // a multi-level segment (multi.go)
)

// newChain builds the model on the given boundaries (cut vertices).
func newChain(a *analysis, bd []int) *chain {
	m := len(bd)
	c := &chain{a: a, m: m, bd: append(append([]int{-1}, bd...), a.fwdEnd+1), segs: map[[3]int]segment{}}
	c.stage = make([]int, a.fwdEnd+1)
	s := 1
	for p := 0; p <= a.fwdEnd; p++ {
		for s <= m && bd[s-1] < p {
			s++
		}
		c.stage[p] = s
	}
	c.owner = make([]int, a.n+1)
	c.own = make([][2]int, m+2)
	for i := range c.own {
		c.own[i] = [2]int{math.MaxInt, -1}
	}
	cur := m + 1
	for p := a.fwdEnd + 1; p <= a.n; p++ {
		if p < a.n {
			for _, x := range a.g.Values[p].Args {
				if int(x) <= a.fwdEnd && a.cand[x] {
					cur = min(cur, c.stage[x])
				}
			}
		}
		c.owner[p] = cur
		c.own[cur][0] = min(c.own[cur][0], p)
		c.own[cur][1] = max(c.own[cur][1], p)
	}
	c.lowest = cur
	// base: the planner's liveness with every activation live only from
	// its step to its last forward user.
	diff := make([]int64, a.n+2)
	gapDiff := make([]int64, a.n+2)
	var fixed int64
	for i := range a.g.Values {
		switch {
		case a.always[i]:
			fixed += a.size[i]
		case a.cand[i]:
			diff[i] += a.size[i]
			diff[a.lastFwd[i]+1] -= a.size[i]
		default:
			diff[i] += a.size[i]
			diff[a.end[i]+1] -= a.size[i]
			gapDiff[i+1] += a.size[i]
			gapDiff[a.end[i]+1] -= a.size[i]
		}
	}
	c.base = make([]int64, a.n+1)
	c.gap = make([]int64, a.n+1)
	var cur1, cur2 int64
	for p := 0; p <= a.n; p++ {
		cur1 += diff[p]
		cur2 += gapDiff[p]
		c.base[p] = fixed + cur1
		c.gap[p] = fixed + cur2
		if !a.isStep[p] {
			c.base[p] = 0 // not a step: never the peak
		}
	}
	c.rmq = sparseTable(c.base)
	return c
}

func sparseTable(xs []int64) [][]int64 {
	t := [][]int64{xs}
	for k := 1; 1<<k <= len(xs); k++ {
		prev := t[k-1]
		row := make([]int64, len(xs)-(1<<k)+1)
		for i := range row {
			row[i] = max(prev[i], prev[i+(1<<(k-1))])
		}
		t = append(t, row)
	}
	return t
}

// maxBase returns the largest base over positions lo..hi (-1 if empty).
func (c *chain) maxBase(lo, hi int) int64 {
	if lo > hi {
		return -1
	}
	k := bits.Len(uint(hi-lo+1)) - 1
	return max(c.rmq[k][lo], c.rmq[k][hi-(1<<k)+1])
}

// Extended positions order clone steps among the original ones: the k-th
// clone inserted before position p is at p·extW+k, the original step p at
// p·extW+extW-1.
const extW = 1 << 24

func ext(p int) int64         { return int64(p)*extW + extW - 1 }
func extClone(p, k int) int64 { return int64(p)*extW + int64(k) }

// inner returns the activations strictly between boundaries s and t.
func (c *chain) inner(s, t int) (lo, hi int) {
	lo = c.bd[s] + 1
	hi = c.bd[t] - 1
	if t == c.m+1 {
		hi = c.a.fwdEnd
	}
	return lo, hi
}

// seg returns the model's price of segment (s,t] in mode.
func (c *chain) seg(s, t, mode int) segment {
	key := [3]int{s, t, mode}
	if r, ok := c.segs[key]; ok {
		return r
	}
	r := c.price(s, t, mode)
	c.segs[key] = r
	return r
}

type item struct {
	from, to int64 // extended positions, inclusive
	size     int64
}

func (c *chain) price(s, t, mode int) segment {
	a := c.a
	lo, hi := c.inner(s, t)
	var items []item
	var r segment
	r.ok = true
	// The clones of a recompute segment.
	var slots []int64 // clone steps
	var slotGap []int64
	bsCloneUse := int64(-1)
	if mode == recomputeMode {
		rec := make([]bool, a.n)
		for i := lo; i <= hi; i++ {
			rec[i] = a.cand[i]
		}
		need, ins, cost := a.cloneSetRange(rec, lo, hi)
		r.cost = cost
		slot := map[int]int64{}
		count := map[int]int{}
		for i := lo; i <= hi; i++ {
			if need[i] {
				slot[i] = extClone(ins[i], count[ins[i]])
				count[ins[i]]++
				slots = append(slots, slot[i])
				slotGap = append(slotGap, c.gap[ins[i]])
			}
		}
		for i := hi; i >= lo; i-- {
			if !need[i] {
				continue
			}
			end := int64(-1)
			if a.lastBwd[i] >= 0 {
				end = ext(a.lastBwd[i])
			}
			for _, u := range a.users[i] {
				if int(u) <= hi && need[u] {
					end = max(end, slot[int(u)])
				}
			}
			items = append(items, item{slot[i], end, a.size[i]})
			if s >= 1 {
				for _, x := range a.g.Values[i].Args {
					if int(x) == c.bd[s] {
						bsCloneUse = max(bsCloneUse, slot[i])
					}
				}
			}
		}
	} else {
		for i := lo; i <= hi; i++ {
			if a.saved[i] {
				items = append(items, item{ext(a.lastFwd[i]) + 1, ext(a.lastBwd[i]), a.size[i]})
				r.inc += a.size[i]
			}
		}
	}
	if s >= 1 {
		b := c.bd[s]
		end := bsCloneUse
		if a.lastBwd[b] >= 0 {
			end = max(end, ext(a.lastBwd[b]))
		}
		if end >= 0 {
			items = append(items, item{ext(a.lastFwd[b]) + 1, end, a.size[b]})
			r.inc += a.size[b]
		}
	}
	if t <= c.m {
		b := c.bd[t]
		if a.lastBwd[b] >= 0 {
			items = append(items, item{ext(a.lastFwd[b]) + 1, ext(a.lastBwd[b]), a.size[b]})
		}
	}
	// The positions attributed to stages s+1..t.
	fLo := 0
	if s >= 1 {
		fLo = c.bd[s] + 1
	}
	fHi := a.fwdEnd
	if t <= c.m {
		fHi = c.bd[t]
	}
	bLo, bHi := math.MaxInt, -1
	for i := s + 1; i <= t; i++ {
		bLo = min(bLo, c.own[i][0])
		bHi = max(bHi, c.own[i][1])
	}
	ranges := [][2]int{{fLo, fHi}, {bLo, bHi}}
	r.peak = c.sweep(ranges, items, slots, slotGap)
	return r
}

// sweep returns the largest base plus live items over the original
// positions in ranges and the clone steps slots (with the bytes live across
// their gap).
func (c *chain) sweep(ranges [][2]int, items []item, slots, slotGap []int64) int64 {
	type event struct {
		at int64
		d  int64
	}
	ev := make([]event, 0, 2*len(items))
	for _, it := range items {
		if it.to < it.from {
			continue
		}
		ev = append(ev, event{it.from, it.size}, event{it.to + 1, -it.size})
	}
	slices.SortFunc(ev, func(x, y event) int { return cmp.Compare(x.at, y.at) })
	order := make([]int, len(slots))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(slots[x], slots[y]) })
	best := int64(-1)
	var live int64
	k := 0 // next clone slot
	// Walk the pieces between events: [from, to) in extended positions.
	from := int64(math.MinInt64)
	for e := 0; e <= len(ev); e++ {
		to := int64(math.MaxInt64)
		if e < len(ev) {
			to = ev[e].at
		}
		if to > from {
			for _, rg := range ranges {
				plo, phi := rg[0], rg[1]
				if plo > phi {
					continue
				}
				// original positions p with from <= ext(p) < to
				if from > math.MinInt64 {
					plo = max(plo, int(from/extW))
				}
				if to < math.MaxInt64 {
					q := int((to - 1) / extW)
					if ext(q) > to-1 {
						q--
					}
					phi = min(phi, q)
				}
				if b := c.maxBase(plo, phi); b >= 0 {
					best = max(best, b+live)
				}
			}
			for k < len(order) && slots[order[k]] < to {
				if slots[order[k]] >= from {
					best = max(best, slotGap[order[k]]+live)
				}
				k++
			}
		}
		if e < len(ev) {
			live += ev[e].d
			from = to
		}
	}
	return best
}

// fwdPeak returns the model's most live bytes at the forward steps of
// stages s+1..t when the segment (s,t] keeps nothing but boundary s.
func (c *chain) fwdPeak(s, t int) int64 {
	a := c.a
	fLo := 0
	var items []item
	if s >= 1 {
		b := c.bd[s]
		fLo = b + 1
		items = append(items, item{ext(a.lastFwd[b]) + 1, ext(a.n), a.size[b]})
	}
	fHi := a.fwdEnd
	if t <= c.m {
		fHi = c.bd[t]
	}
	return c.sweep([][2]int{{fLo, fHi}}, items, nil, nil)
}

// cloneSetRange is cloneSet restricted to the values lo..hi.
func (a *analysis) cloneSetRange(rec []bool, lo, hi int) (need []bool, ins []int, cost float64) {
	need = make([]bool, a.n)
	ins = make([]int, a.n)
	for i := range ins {
		ins[i] = math.MaxInt
	}
	for i := hi; i >= lo; i-- {
		if !rec[i] || !a.recomputable(i) {
			continue
		}
		if a.firstBwd[i] >= 0 {
			ins[i] = min(ins[i], a.firstBwd[i])
		}
		if ins[i] == math.MaxInt {
			continue
		}
		need[i] = true
		cost += a.flops[i]
		for _, x := range a.g.Values[i].Args {
			if rec[x] {
				ins[x] = min(ins[x], ins[i])
			}
		}
	}
	return need, ins, cost
}

// A segmentation is a choice of kept boundaries (indices into 1..m, in
// order) and a mode for each of the len(kept)+1 segments, with the tree of
// each multi-level segment (trees is nil or parallel to modes).
type segmentation struct {
	kept  []int
	modes []int
	trees []*tree
}

// multiLevel reports whether some segment of sg recomputes a value more
// than once.
func (sg segmentation) multiLevel() bool {
	for j, t := range sg.trees {
		if sg.modes[j] == multiMode && t != nil {
			return true
		}
	}
	return false
}

// schedule returns the recomputation schedule of a segmentation: one sweep
// for the one-level recompute segments, then the sweeps of each
// multi-level segment's tree.
func (c *chain) schedule(sg segmentation) schedule {
	sc := c.a.recSchedule(c.recomputed(sg))
	s := 0
	for j, mode := range sg.modes {
		t := c.m + 1
		if j < len(sg.kept) {
			t = sg.kept[j]
		}
		if mode == multiMode {
			mm := c.buildMulti()
			var tr *tree
			if j < len(sg.trees) {
				tr = sg.trees[j]
			}
			sc.sweeps = mm.sweeps(sc.sweeps, mm.idx[s], mm.idx[t], tr)
		}
		s = t
	}
	return sc
}

// recomputed returns the activations the segmentation's one-level
// recompute segments recompute.
func (c *chain) recomputed(sg segmentation) []bool {
	rec := make([]bool, c.a.n)
	s := 0
	for j, mode := range sg.modes {
		t := c.m + 1
		if j < len(sg.kept) {
			t = sg.kept[j]
		}
		if mode == recomputeMode {
			lo, hi := c.inner(s, t)
			for i := lo; i <= hi; i++ {
				rec[i] = c.a.cand[i]
			}
		}
		s = t
	}
	return rec
}

// modelPeak returns the model's peak and cost of a segmentation; the peak
// is MaxInt64 when a multi-level segment or its tree is not on the
// multi-level nodes.
func (c *chain) modelPeak(sg segmentation) (int64, float64) {
	var prefix, peak int64
	var cost float64
	s := 0
	for j, mode := range sg.modes {
		t := c.m + 1
		if j < len(sg.kept) {
			t = sg.kept[j]
		}
		if mode == multiMode {
			mm := c.buildMulti()
			var tr *tree
			if j < len(sg.trees) {
				tr = sg.trees[j]
			}
			i, k := mm.idx[s], mm.idx[t]
			if i < 0 || k < 0 {
				return math.MaxInt64, 0
			}
			q, fl, ok := mm.eval(i, k, tr)
			if !ok {
				return math.MaxInt64, 0
			}
			peak = max(peak, prefix+mm.segW(i, k, q))
			if s >= 1 {
				prefix += c.a.size[c.bd[s]]
			}
			cost += fl
			s = t
			continue
		}
		r := c.seg(s, t, mode)
		peak = max(peak, prefix+r.peak)
		prefix += r.inc
		cost += r.cost
		s = t
	}
	return peak, cost
}

// maxStates bounds the Pareto front solve keeps per boundary. Chains whose
// boundaries and segments have few distinct sizes (every network made of
// repeated layers) stay far below it.
const maxStates = 2048

// segChoice is one way to treat a segment: its model peak, what it adds to
// the bytes kept below the segments above, its FLOPs, its mode and, for a
// multi-level segment, the front entry of its tree.
type segChoice struct {
	peak, inc int64
	cost      float64
	mode      int
	e         int32
}

// choicesAt returns the ways to treat segment (s,t] that can fit under
// limit bytes above what is kept below it (all of them when limit is
// MaxInt64): keep, recompute and, with multi, the cheapest multi-level
// tree that fits (the fronts must hold limit; see multi.fronts) or, when
// limit is MaxInt64, the least peak of any tree.
func (c *chain) choicesAt(dst []segChoice, s, t int, multi bool, limit int64) []segChoice {
	for mode := keepMode; mode <= recomputeMode; mode++ {
		r := c.seg(s, t, mode)
		if r.peak <= limit {
			dst = append(dst, segChoice{r.peak, r.inc, r.cost, mode, -1})
		}
	}
	if !multi {
		return dst
	}
	mm := c.buildMulti()
	i, j := mm.idx[s], mm.idx[t]
	if i < 0 || j < 0 {
		return dst
	}
	var inc int64
	if s >= 1 {
		inc = c.a.size[c.bd[s]]
	}
	if limit == math.MaxInt64 {
		return append(dst, segChoice{mm.segW(i, j, mm.minQ[i][j]), inc, 0, multiMode, -1})
	}
	ws := mm.choices(s, t)
	if x := sort.Search(len(ws), func(q int) bool { return ws[q].w > limit }) - 1; x >= 0 {
		dst = append(dst, segChoice{ws[x].w, inc, ws[x].cost, multiMode, ws[x].e})
	}
	return dst
}

// solve returns the segmentation of least recompute cost whose model peak
// is at most budget, and false when there is none; with multi, segments
// may also be multi-level (multi.go). It is a dynamic program over the
// boundaries in order whose states at boundary t are the Pareto-optimal
// pairs (bytes kept below t, cost so far); it is exact for the model (no
// segmentation with model peak <= budget costs less) while no front
// exceeds maxStates (and, with multi, no tree front maxFront).
func (c *chain) solve(budget int64, multi bool) (segmentation, float64, bool) {
	type state struct {
		prefix int64
		cost   float64
		from   int // boundary
		idx    int // state index there
		mode   int
		e      int32
	}
	if multi {
		c.buildMulti().fronts(budget)
	}
	states := make([][]state, c.m+2)
	states[0] = []state{{from: -1}}
	var chs []segChoice
	for t := 1; t <= c.m+1; t++ {
		var cands []state
		for s := 0; s < t; s++ {
			if len(states[s]) == 0 {
				continue
			}
			if !multi {
				chs = c.choicesAt(chs[:0], s, t, false, math.MaxInt64)
				for _, ch := range chs {
					for i, st := range states[s] {
						if st.prefix+ch.peak > budget {
							continue
						}
						cands = append(cands, state{st.prefix + ch.inc, st.cost + ch.cost, s, i, ch.mode, ch.e})
					}
				}
				continue
			}
			for i, st := range states[s] {
				chs = c.choicesAt(chs[:0], s, t, true, budget-st.prefix)
				for _, ch := range chs {
					cands = append(cands, state{st.prefix + ch.inc, st.cost + ch.cost, s, i, ch.mode, ch.e})
				}
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].prefix != cands[j].prefix {
				return cands[i].prefix < cands[j].prefix
			}
			return cands[i].cost < cands[j].cost
		})
		best := math.Inf(1)
		for _, st := range cands {
			if st.cost < best {
				states[t] = append(states[t], st)
				best = st.cost
			}
		}
		if n := len(states[t]); n > maxStates {
			// Thin the front evenly, keeping both ends: the answer is
			// then no longer guaranteed optimal.
			thinned := make([]state, 0, maxStates)
			for i := range maxStates {
				thinned = append(thinned, states[t][i*(n-1)/(maxStates-1)])
			}
			states[t] = thinned
		}
		if t == c.m+1 && len(states[t]) > 1 {
			states[t] = states[t][len(states[t])-1:] // the cheapest
		}
	}
	if len(states[c.m+1]) == 0 {
		return segmentation{}, 0, false
	}
	var sg segmentation
	t, i := c.m+1, 0
	for t > 0 {
		st := states[t][i]
		sg.modes = append(sg.modes, st.mode)
		var tr *tree
		if st.mode == multiMode {
			mm := c.buildMulti()
			tr = mm.treeOf(mm.idx[st.from], mm.idx[t], st.e)
		}
		sg.trees = append(sg.trees, tr)
		if st.from > 0 {
			sg.kept = append(sg.kept, st.from)
		}
		t, i = st.from, st.idx
	}
	slices.Reverse(sg.kept)
	slices.Reverse(sg.modes)
	slices.Reverse(sg.trees)
	return sg, states[c.m+1][0].cost, true
}

// leastPeak returns the least model peak of any segmentation (with multi,
// multi-level segments included) and the cheapest segmentation that
// reaches it: a dynamic program like solve's whose states are the
// Pareto-optimal pairs (bytes kept below t, peak so far), then solve at
// that peak.
func (c *chain) leastPeak(multi bool) (int64, segmentation) {
	type state struct{ prefix, peak int64 }
	states := make([][]state, c.m+2)
	states[0] = []state{{}}
	var chs []segChoice
	for t := 1; t <= c.m+1; t++ {
		var cands []state
		for s := 0; s < t; s++ {
			chs = c.choicesAt(chs[:0], s, t, multi, math.MaxInt64)
			for _, ch := range chs {
				for _, st := range states[s] {
					cands = append(cands, state{st.prefix + ch.inc, max(st.peak, st.prefix+ch.peak)})
				}
			}
		}
		sort.Slice(cands, func(i, j int) bool {
			if cands[i].prefix != cands[j].prefix {
				return cands[i].prefix < cands[j].prefix
			}
			return cands[i].peak < cands[j].peak
		})
		best := int64(math.MaxInt64)
		for _, st := range cands {
			if st.peak < best {
				states[t] = append(states[t], st)
				best = st.peak
			}
		}
		if n := len(states[t]); n > maxStates {
			thinned := make([]state, 0, maxStates)
			for i := range maxStates {
				thinned = append(thinned, states[t][i*(n-1)/(maxStates-1)])
			}
			states[t] = thinned
		}
	}
	least := int64(math.MaxInt64)
	for _, st := range states[c.m+1] {
		least = min(least, st.peak)
	}
	sg, _, _ := c.solve(least, multi)
	return least, sg
}

// evenly returns a segmentation that keeps k boundaries spread evenly over
// the saved bytes of the chain: the recompute segments between them, and
// the last segment (up to the loss) kept, as PyTorch's
// checkpoint_sequential runs its last segment without checkpointing.
// Only cut vertices the backward reads are boundaries when there are any.
func (c *chain) evenly(k int) segmentation {
	a := c.a
	var cands []int // boundary indices 1..m
	for i := 1; i <= c.m; i++ {
		if a.saved[c.bd[i]] {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		for i := 1; i <= c.m; i++ {
			cands = append(cands, i)
		}
	}
	k = min(k, len(cands))
	// cumulative saved bytes up to each candidate boundary
	var total int64
	cum := make([]int64, len(cands))
	j := 0
	for p := 0; p <= a.fwdEnd && j < len(cands); p++ {
		if a.saved[p] {
			total += a.size[p]
		}
		if p == c.bd[cands[j]] {
			cum[j] = total
			j++
		}
	}
	for p := c.bd[cands[len(cands)-1]] + 1; p <= a.fwdEnd; p++ {
		if a.saved[p] {
			total += a.size[p]
		}
	}
	var sg segmentation
	next := 0
	for i := 1; i <= k; i++ {
		target := total * int64(i) / int64(k+1)
		for next < len(cands)-1 && cum[next] < target {
			next++
		}
		if len(sg.kept) > 0 && sg.kept[len(sg.kept)-1] >= cands[next] {
			if next+1 >= len(cands) {
				break
			}
			next++
		}
		sg.kept = append(sg.kept, cands[next])
	}
	for range sg.kept {
		sg.modes = append(sg.modes, recomputeMode)
	}
	sg.modes = append(sg.modes, keepMode)
	return sg
}

// savedCuts returns the number of cut vertices the backward reads: the n
// of the √n rule.
func (c *chain) savedCuts() int {
	n := 0
	for i := 1; i <= c.m; i++ {
		if c.a.saved[c.bd[i]] {
			n++
		}
	}
	return n
}
