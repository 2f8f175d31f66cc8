package planner

import (
	"slices"
)

// A block is what placement places: a buffer together with the buffers that
// take its memory in place (Buffer.Alias), which share one offset. Their
// live ranges follow one another, so the block is live from the first one's
// Start to the last one's End.
type block struct {
	start, end int // live range in steps
	size       int64
}

func (b *block) lifetime() int { return b.end - b.start }

// blocks groups the buffers by the memory they share and returns the
// blocks and each buffer's block.
func (p *Plan) blocks() ([]block, []int) {
	of := make([]int, len(p.Buffers))
	for i := range of {
		of[i] = -1
	}
	var bs []block
	var find func(i int) int
	find = func(i int) int {
		if of[i] >= 0 {
			return of[i]
		}
		b := &p.Buffers[i]
		if b.Alias >= 0 && b.Alias < len(p.Buffers) && of[b.Alias] != -2 {
			of[i] = -2 // on the way: an alias cycle (which Check refuses) ends here
			k := find(b.Alias)
			of[i] = k
			bs[k].start = min(bs[k].start, b.Start)
			bs[k].end = max(bs[k].end, b.End)
			bs[k].size = max(bs[k].size, alignUp(b.Size))
			return k
		}
		bs = append(bs, block{start: b.Start, end: b.End, size: alignUp(b.Size)})
		of[i] = len(bs) - 1
		return of[i]
	}
	for i := range p.Buffers {
		find(i)
	}
	return bs, of
}

// lowerBound returns the most bytes live at any step: the sum of the sizes
// (rounded to Align) of the blocks live there, memory shared in place
// counted once.
func lowerBound(bs []block, steps int) int64 {
	delta := make([]int64, max(steps, 1)+1)
	for _, b := range bs {
		delta[b.start] += b.size
		delta[b.end+1] -= b.size
	}
	var live, peak int64
	for _, d := range delta {
		live += d
		peak = max(peak, live)
	}
	return peak
}

// pureBudget bounds where the pure best-fit runs of place run: only where
// the blocks they place overlap in time in at most this many pairs
// (overlappingPairs). Beyond it, in training steps of thousands of values,
// the pure runs differ from the stacked ones only by the few gradients and
// update values live to the end, and cost as much: on the 10,000-value
// benchmark model they reach the same arena and would add 40% to the
// planner's time. (The count once bounded the gap search's work, which
// compared each block with every placed block overlapping it; the
// occupancy tree no longer does.)
const pureBudget = 1 << 20

// sweepBudget bounds the work of a run of place when there is a placement
// to beat already: a run that has swept more spans in its gap searches than sweepBudget
// times the blocks it places is abandoned. The runs of the example models
// sweep at most 90 spans a block; on deep training steps (tens of
// thousands of nested activation lifetimes) the lifetime order sweeps a
// number that grows with the graph, 2,200 a block at 100,000 ops, and took
// 4 of the planner's 6 seconds there without winning.
const sweepBudget = 512

// A bar is the placement a plan must beat, none when arena < 0: a plan
// beats it with a smaller arena, or an equal one and a smaller lower bound
// (the rule by which New keeps the better schedule).
type bar struct {
	arena, lowerBound int64
}

// noBar is beaten by every placement.
var noBar = bar{arena: -1}

// beaten reports whether a plan with lower bound lb whose placement has
// reached top bytes can still beat the bar: placing more blocks only raises
// the top.
func (b bar) beaten(top, lb int64) bool {
	return b.arena < 0 || top < b.arena || top == b.arena && lb < b.lowerBound
}

// place assigns every buffer its offset and sets ArenaBytes and LowerBound.
// A placement that cannot beat the bar is abandoned: then place leaves the
// offsets and ArenaBytes alone, returns false, and sets only LowerBound.
//
// Placement is XLA's heap simulator (GlobalDecreasingSizeBestFitHeap):
// blocks are placed one at a time, each in the smallest gap that fits it
// between the blocks already placed that are live at the same time as it,
// or above them all when no gap fits; it runs once taking the blocks by
// decreasing size (ties: longer lifetime, then lower buffer index), once
// by decreasing lifetime (ties: larger, then lower index) and once by
// decreasing last step (ties: larger, then lower index), which places a
// training step's blocks from its end back, where the first layers' large
// weight gradients are, and fits the activations around them. Some blocks
// are first stacked from offset 0, in the order they become live (ties:
// larger first, then lower index), and the others placed above the stack's
// height at their last step:
//
//   - pure: the blocks live at every step (inputs, params, state). That
//     memory is taken at every step, so packing it at the bottom costs
//     nothing.
//   - stacked: also the blocks that, once live, stay live until the kernel
//     steps are over (outputs and gradients, read after the step; update
//     values, read by the copies after the last kernel). The stack then
//     takes at each step exactly the bytes of those live there, and the
//     hundreds of gradients and update values of a large training step need
//     not be searched for gaps around; but it reserves their memory below
//     blocks that die before they are computed. (Update values computed in
//     their target's memory are part of the target's block.)
//
// Of the six runs (the pure ones only within pureBudget, and all but the
// first only within sweepBudget once there is a placement to beat: the bar,
// or a run's) place keeps the
// one with the smallest arena, the first in the order above on a tie. The
// arena a run reaches only grows as it places blocks, and it is at least
// the lower bound and the stack's height; so a run stops as soon as its top
// reaches the best arena so far (or can no longer beat the bar), and a run
// whose stack or lower bound already does is not started: the result is
// that of all six runs to the end. Offsets are multiples of Align.
//
// occ, if not nil, is the occupancy tree bestFit uses (place resets it),
// so that placements of the same steps can share its memory.
func (p *Plan) place(limit bar, occ *occupancy) bool {
	bs, of := p.blocks()
	steps := max(len(p.Steps), 1)
	p.LowerBound = lowerBound(bs, steps)
	if !limit.beaten(p.LowerBound, p.LowerBound) {
		return false
	}

	lastKernel := -1
	for s, st := range p.Steps {
		if st.Kind == Kernel {
			lastKernel = s
		}
	}
	always := make([]bool, len(bs))
	for k, b := range bs {
		always[k] = b.start == 0 && b.end >= steps-1
	}
	kept := p.keptBuffers()
	for i := range p.Buffers {
		if p.Buffers[i].Role != Temp || p.Buffers[i].End > lastKernel {
			kept[i] = true
		}
	}
	untilEnd := make([]bool, len(bs))
	for i, k := range of {
		untilEnd[k] = untilEnd[k] || kept[i] || always[k]
	}

	var best []int64
	if occ == nil || occ.n < steps {
		occ = newOccupancy(steps)
	}
	for variant, stacked := range [][]bool{always, untilEnd} {
		var stack, rest []int
		for k, b := range bs {
			switch {
			case b.size == 0:
			case stacked[k]:
				stack = append(stack, k)
			default:
				rest = append(rest, k)
			}
		}
		if variant == 0 && overlappingPairs(bs, rest) > pureBudget {
			continue
		}
		// Sort the stack, then skip the variant if it cannot win.
		slices.SortStableFunc(stack, func(x, y int) int {
			if c := bs[x].start - bs[y].start; c != 0 {
				return c
			}
			return cmpInt64(bs[y].size, bs[x].size)
		})
		offset := make([]int64, len(bs))
		floor := make([]int64, steps)
		var height int64
		for _, k := range stack {
			offset[k] = inChunk(height, bs[k].size, p.ChunkBytes)
			height = offset[k] + bs[k].size
			floor[bs[k].start] = height
		}
		for s := 1; s < steps; s++ {
			floor[s] = max(floor[s], floor[s-1])
		}
		least := max(height, p.LowerBound) // the least arena of any run
		if !limit.beaten(least, p.LowerBound) {
			continue
		}
		bySize := slices.Clone(rest)
		slices.SortStableFunc(bySize, func(x, y int) int {
			if c := cmpInt64(bs[y].size, bs[x].size); c != 0 {
				return c
			}
			return bs[y].lifetime() - bs[x].lifetime()
		})
		byLife := slices.Clone(rest)
		slices.SortStableFunc(byLife, func(x, y int) int {
			if c := bs[y].lifetime() - bs[x].lifetime(); c != 0 {
				return c
			}
			return cmpInt64(bs[y].size, bs[x].size)
		})
		byEnd := slices.Clone(rest)
		slices.SortStableFunc(byEnd, func(x, y int) int {
			if c := bs[y].end - bs[x].end; c != 0 {
				return c
			}
			return cmpInt64(bs[y].size, bs[x].size)
		})
		for _, order := range [][]int{bySize, byLife, byEnd} {
			if !limit.beaten(least, p.LowerBound) {
				break
			}
			occ.reset()
			work := -1
			if limit.arena >= 0 {
				work = sweepBudget * len(order)
			}
			top, ok := bestFit(bs, order, occ, floor, offset, height, p.LowerBound, p.ChunkBytes, limit, work)
			if ok {
				best, limit = slices.Clone(offset), bar{top, p.LowerBound}
			}
		}
	}
	if best == nil {
		return false
	}
	p.ArenaBytes = limit.arena
	for i := range p.Buffers {
		p.Buffers[i].Offset = best[of[i]]
	}
	return true
}

// overlappingPairs counts the pairs of blocks ks that are live at a common
// step, in O(n log n).
func overlappingPairs(bs []block, ks []int) int {
	starts := make([]int, len(ks))
	ends := make([]int, len(ks))
	for i, k := range ks {
		starts[i], ends[i] = bs[k].start, bs[k].end
	}
	slices.Sort(starts)
	slices.Sort(ends)
	// A block overlaps every other except those starting after it ends
	// and those ending before it starts.
	n := 0
	for _, k := range ks {
		after := len(starts) - upperBound(starts, bs[k].end)
		before := lowerBoundIdx(ends, bs[k].start)
		n += len(ks) - 1 - after - before
	}
	return n / 2
}

// upperBound returns the number of elements of sorted a that are <= x.
func upperBound(a []int, x int) int {
	i, _ := slices.BinarySearch(a, x+1)
	return i
}

// lowerBoundIdx returns the number of elements of sorted a that are < x.
func lowerBoundIdx(a []int, x int) int {
	i, _ := slices.BinarySearch(a, x)
	return i
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// bestFit places the blocks in order, each above floor[its last step],
// writing their offsets into offset, and returns the arena's top: the
// highest end of a block, at least top. It gives up, returning false, as
// soon as the top cannot beat limit (for a plan of lower bound lb). With
// chunk > 0 no block straddles a multiple of chunk: in a gap that spans one,
// a block that would straddle it starts at it, if it still fits. It also
// gives up once its gap searches have swept more than work spans, unless
// work < 0.
func bestFit(bs []block, order []int, occ *occupancy, floor, offset []int64, top, lb, chunk int64, limit bar, work int) (int64, bool) {
	var m merger
	for _, k := range order {
		b := &bs[k]
		cur := floor[b.end]
		m.reset(occ, b.start, b.end, cur)
		// Sweep the spans taken during the block's life by offset: cur is
		// the end of the memory taken so far, and a span starting above it
		// leaves a gap. The first gap of exactly the block's size is the
		// best.
		at, fit := int64(-1), int64(-1)
		for fit != b.size {
			t, ok := m.next(cur)
			if !ok {
				break
			}
			if work--; work == -1 {
				return top, false
			}
			if gap, in := t.lo-cur, inChunk(cur, b.size, chunk); in+b.size <= t.lo && (fit < 0 || gap < fit) {
				at, fit = in, gap
			}
			cur = max(cur, t.hi)
		}
		if at < 0 {
			at = inChunk(cur, b.size, chunk)
		}
		offset[k] = at
		occ.insert(b.start, b.end, span{at, at + b.size})
		if top = max(top, at+b.size); !limit.beaten(top, lb) {
			return top, false
		}
	}
	return top, true
}

// A span is the memory [lo, hi), in bytes.
type span struct{ lo, hi int64 }

// A spanSet is a union of spans: disjoint, not touching, by increasing lo.
type spanSet []span

// add adds s to the set, merging it with the spans it overlaps or touches,
// and reports whether the set changed (whether s was not inside it).
func (set *spanSet) add(s span) bool {
	l := *set
	// Spans i..j-1 merge with s: from the first that ends at or after s.lo
	// to the last that starts at or before s.hi.
	i := l.firstEndingAbove(s.lo - 1)
	if i < len(l) && l[i].lo <= s.lo && s.hi <= l[i].hi {
		return false
	}
	j := i
	for j < len(l) && l[j].lo <= s.hi {
		j++
	}
	if i < j {
		s.lo, s.hi = min(s.lo, l[i].lo), max(s.hi, l[j-1].hi)
	}
	*set = slices.Replace(l, i, j, s)
	return true
}

// firstEndingAbove returns the index of the first span whose hi is above
// x, or len(l).
func (l spanSet) firstEndingAbove(x int64) int {
	lo, hi := 0, len(l)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if l[mid].hi <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// occupancy holds the memory taken by the placed blocks over time, for the
// gap search: two segment trees over the steps, whose nodes hold unions of
// spans (spanSet). A block's span goes into own at each canonical node of
// its live range (the O(log n) nodes that partition it), and into begin at
// the leaf of its first step and every node above it. A block is live at
// some step of [start, end] when it is live at start, or begins in
// [start+1, end]; those live at start are in own at exactly one node above
// or at the leaf start, those beginning later in begin at exactly one
// canonical node of [start+1, end]. So the memory taken during [start, end]
// is the union of O(log n) sets in which every block overlapping the range
// appears once, and neighbours in memory merge.
type occupancy struct {
	n    int       // leaves: a power of two, at least the steps
	sets []spanSet // begin of node x at x, own at 2n + x (nodes from 1)
}

func newOccupancy(steps int) *occupancy {
	n := 1
	for n < steps {
		n *= 2
	}
	return &occupancy{n: n, sets: make([]spanSet, 4*n)}
}

func (o *occupancy) begin(x int) int { return x }
func (o *occupancy) own(x int) int   { return 2*o.n + x }

// reset empties the tree, keeping its memory.
func (o *occupancy) reset() {
	for i := range o.sets {
		o.sets[i] = o.sets[i][:0]
	}
}

// insert records s as taken during steps [start, end].
func (o *occupancy) insert(start, end int, s span) {
	// A node's begin holds its children's, so once one holds s already,
	// so do all above it.
	for x := start + o.n; x >= 1 && o.sets[o.begin(x)].add(s); x /= 2 {
	}
	for l, r := start+o.n, end+1+o.n; l < r; l, r = l/2, r/2 {
		if l&1 == 1 {
			o.sets[o.own(l)].add(s)
			l++
		}
		if r&1 == 1 {
			r--
			o.sets[o.own(r)].add(s)
		}
	}
}

// overlapping calls f with the index in sets of every set, not empty, of
// those whose union is the memory taken at some step of [start, end].
func (o *occupancy) overlapping(start, end int, f func(set int)) {
	use := func(i int) {
		if len(o.sets[i]) > 0 {
			f(i)
		}
	}
	for x := start + o.n; x >= 1; x /= 2 {
		use(o.own(x))
	}
	for l, r := start+1+o.n, end+1+o.n; l < r; l, r = l/2, r/2 {
		if l&1 == 1 {
			use(o.begin(l))
			l++
		}
		if r&1 == 1 {
			r--
			use(o.begin(r))
		}
	}
}

// A merger yields the spans of several sets of an occupancy by increasing
// lo: a binary heap of the sets' unread parts, by their first span's lo.
type merger struct {
	occ  *occupancy
	heap []cursor
}

// A cursor is the unread part of a set: its spans from pos on, the first of
// which starts at lo.
type cursor struct {
	lo       int64
	set, pos int32
}

// reset starts the merge of the sets that hold the memory taken during
// steps [start, end], from their first spans that end above from.
func (m *merger) reset(occ *occupancy, start, end int, from int64) {
	m.occ, m.heap = occ, m.heap[:0]
	occ.overlapping(start, end, func(set int) {
		l := occ.sets[set]
		if i := l.firstEndingAbove(from); i < len(l) {
			m.heap = append(m.heap, cursor{l[i].lo, int32(set), int32(i)})
		}
	})
	for i := len(m.heap)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
}

// next returns the span of least lo not yet returned, if any is left,
// passing over the spans that end at or below cur: those lie in memory
// already swept, so they leave no gap and do not move cur.
func (m *merger) next(cur int64) (span, bool) {
	for len(m.heap) > 0 {
		c := &m.heap[0]
		l := m.occ.sets[c.set]
		s := l[c.pos]
		i := int(c.pos) + 1
		if s.hi <= cur {
			// Skip the set's spans below cur, galloping: most sets hold
			// runs of them.
			step := 1
			for i+step < len(l) && l[i+step].hi <= cur {
				step *= 2
			}
			i += l[i:min(i+step, len(l))].firstEndingAbove(cur)
		}
		if i < len(l) {
			c.pos, c.lo = int32(i), l[i].lo
		} else {
			last := len(m.heap) - 1
			m.heap[0] = m.heap[last]
			m.heap = m.heap[:last]
		}
		if len(m.heap) > 0 {
			m.down(0)
		}
		if s.hi > cur {
			return s, true
		}
	}
	return span{}, false
}

func (m *merger) down(i int) {
	h := m.heap
	for {
		c := 2*i + 1
		if c >= len(h) {
			return
		}
		if r := c + 1; r < len(h) && h[r].lo < h[c].lo {
			c = r
		}
		if h[i].lo <= h[c].lo {
			return
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
}
