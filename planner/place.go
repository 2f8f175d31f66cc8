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

// pureBudget bounds the work of the pure best-fit runs of place: they run
// only where the blocks they place overlap in time in at most this many
// pairs, as each block is compared with every placed block that overlaps
// it. Beyond it (training steps of thousands of values, where hundreds of
// gradients and update values overlap everything) only the stacked runs
// do, which are fast there.
const pureBudget = 1 << 20

// place assigns every buffer its offset and sets ArenaBytes and LowerBound.
//
// Placement is XLA's heap simulator (GlobalDecreasingSizeBestFitHeap):
// blocks are placed one at a time, each in the smallest gap that fits it
// between the blocks already placed that are live at the same time as it,
// or above them all when no gap fits; it runs once taking the blocks by
// decreasing size (ties: longer lifetime, then lower buffer index) and once
// by decreasing lifetime (ties: larger, then lower index). Some blocks are
// first stacked from offset 0, in the order they become live (ties: larger
// first, then lower index), and the others placed above the stack's height
// at their last step:
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
//     blocks that die before they are computed.
//
// Of the four runs (the pure ones only within pureBudget) place keeps the
// one with the smallest arena, the first in the order above on a tie.
// Offsets are multiples of Align.
func (p *Plan) place() {
	bs, of := p.blocks()
	steps := max(len(p.Steps), 1)
	p.LowerBound = lowerBound(bs, steps)

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
	arena := int64(-1)
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
		offset := make([]int64, len(bs))
		slices.SortStableFunc(stack, func(x, y int) int {
			if c := bs[x].start - bs[y].start; c != 0 {
				return c
			}
			return cmpInt64(bs[y].size, bs[x].size)
		})
		floor := make([]int64, steps)
		var height int64
		for _, k := range stack {
			offset[k] = height
			height += bs[k].size
			floor[bs[k].start] = height
		}
		for s := 1; s < steps; s++ {
			floor[s] = max(floor[s], floor[s-1])
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
		tree := newIntervalTree(bs, rest)
		for _, order := range [][]int{bySize, byLife} {
			tree.reset()
			offs, top := bestFit(bs, order, tree, floor)
			top = max(top, height)
			if arena >= 0 && top >= arena {
				continue
			}
			for _, k := range rest {
				offset[k] = offs[tree.node[k]]
			}
			best, arena = slices.Clone(offset), top
		}
	}
	p.ArenaBytes = arena
	for i := range p.Buffers {
		p.Buffers[i].Offset = best[of[i]]
	}
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

// bestFit places the blocks in order, each above floor[its last step], and
// returns their offsets, indexed like tree.blocks, and the arena's top.
func bestFit(bs []block, order []int, tree *intervalTree, floor []int64) ([]int64, int64) {
	offsets := make([]int64, len(tree.blocks))
	var top int64
	// A span of memory taken during the block's life, packed into one
	// integer that sorts by offset: both ends in units of Align, the start
	// in the high half. (Placement needs arenas below 2^32 * Align = 1 TiB;
	// a larger one would lose bits, so the packing is checked below.)
	var taken []uint64
	var stack []int
	for _, k := range order {
		b := &bs[k]
		taken = taken[:0]
		stack = tree.overlapping(b.start, b.end, stack[:0], func(node int) {
			lo := offsets[node]
			taken = append(taken, uint64(lo/Align)<<32|uint64((lo+bs[tree.blocks[node]].size)/Align))
		})
		slices.Sort(taken)
		at, fit := int64(-1), int64(-1)
		cur := floor[b.end]
		for _, t := range taken {
			lo, hi := int64(t>>32)*Align, int64(t&(1<<32-1))*Align
			if gap := lo - cur; gap >= b.size && (fit < 0 || gap < fit) {
				at, fit = cur, gap
			}
			cur = max(cur, hi)
		}
		if at < 0 {
			at = cur
		}
		node := tree.node[k]
		offsets[node] = at
		tree.insert(node)
		top = max(top, at+b.size)
	}
	return offsets, top
}

// intervalTree holds blocks by live range: a balanced binary tree laid
// out over the blocks sorted by start (the node of a range is its middle),
// where each node knows the latest end of the inserted blocks below it. It
// finds the inserted blocks live during a range of steps in O(log n + k).
type intervalTree struct {
	blocks     []int // block per node, by increasing start
	start, end []int
	inserted   []bool
	maxEnd     []int // latest end among inserted nodes of the subtree
	node       []int // block -> node
}

func newIntervalTree(bs []block, ks []int) *intervalTree {
	t := &intervalTree{blocks: slices.Clone(ks), node: make([]int, len(bs))}
	slices.SortStableFunc(t.blocks, func(x, y int) int { return bs[x].start - bs[y].start })
	n := len(t.blocks)
	t.start, t.end = make([]int, n), make([]int, n)
	for i, k := range t.blocks {
		t.start[i], t.end[i] = bs[k].start, bs[k].end
		t.node[k] = i
	}
	t.inserted = make([]bool, n)
	t.maxEnd = make([]int, n)
	t.reset()
	return t
}

func (t *intervalTree) reset() {
	clear(t.inserted)
	for i := range t.maxEnd {
		t.maxEnd[i] = -1
	}
}

func (t *intervalTree) insert(node int) {
	t.inserted[node] = true
	lo, hi := 0, len(t.blocks)
	for lo < hi {
		mid := (lo + hi) / 2
		t.maxEnd[mid] = max(t.maxEnd[mid], t.end[node])
		switch {
		case node == mid:
			return
		case node < mid:
			hi = mid
		default:
			lo = mid + 1
		}
	}
}

// overlapping calls f with every inserted node live at some step of
// [start, end]. stack is scratch space, returned for reuse.
func (t *intervalTree) overlapping(start, end int, stack []int, f func(node int)) []int {
	// Each entry is a range [lo, hi) of nodes, packed as lo<<32 | hi.
	stack = append(stack, len(t.blocks))
	for len(stack) > 0 {
		r := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		lo, hi := r>>32, r&(1<<32-1)
		for lo < hi {
			mid := (lo + hi) / 2
			if t.maxEnd[mid] < start {
				break
			}
			if t.start[mid] > end {
				hi = mid
				continue
			}
			if t.inserted[mid] && t.end[mid] >= start {
				f(mid)
			}
			if lo < mid {
				stack = append(stack, lo<<32|mid)
			}
			lo = mid + 1
		}
	}
	return stack
}
