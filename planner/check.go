package planner

import (
	"fmt"
	"slices"
	"sort"
)

// lastUses returns, for each buffer, the last step that reads or writes
// it (-1 if none).
func (p *Plan) lastUses() []int {
	last := make([]int, len(p.Buffers))
	for i := range last {
		last[i] = -1
	}
	for s, st := range p.Steps {
		for _, a := range st.Args {
			if a >= 0 && a < len(last) {
				last[a] = s
			}
		}
		if st.Out >= 0 && st.Out < len(last) {
			last[st.Out] = s
		}
	}
	return last
}

// overlapping returns the first pair of buffers, in a sweep by start, that
// are live at a common step and share memory, other than a buffer and the
// one it takes in place; nil if there is none. It compares every pair of
// buffers live at a common step: O(n²) for a training step, whose params
// and state live throughout, so Check runs it only to name the pair once
// disjoint has found that there is one.
func (p *Plan) overlapping() error {
	idx := make([]int, 0, len(p.Buffers))
	for i := range p.Buffers {
		if p.Buffers[i].Size > 0 {
			idx = append(idx, i)
		}
	}
	sort.SliceStable(idx, func(x, y int) bool { return p.Buffers[idx[x]].Start < p.Buffers[idx[y]].Start })
	for x, i := range idx {
		b := &p.Buffers[i]
		for _, j := range idx[x+1:] {
			c := &p.Buffers[j]
			if c.Start > b.End {
				break
			}
			if b.Alias == j || c.Alias == i {
				continue
			}
			if b.Offset < c.Offset+c.Size && c.Offset < b.Offset+b.Size {
				return fmt.Errorf("buffers %%%s [%d,%d) and %%%s [%d,%d) overlap while both are live (steps %d..%d and %d..%d)",
					b.Name, b.Offset, b.Offset+b.Size, c.Name, c.Offset, c.Offset+c.Size, b.Start, b.End, c.Start, c.End)
			}
		}
	}
	return nil
}

// disjoint reports whether overlapping finds no pair, in O(n log n): it may
// answer false where overlapping finds none (then Check asks overlapping),
// never true where it finds one.
//
// Buffers joined by Alias (a buffer and the one it takes in place, and so
// on) form a group; within a group the pairs are compared as overlapping
// compares them, in a sweep by start. A group whose buffers all lie at one
// offset and size is a rectangle, its steps from the first start to the
// last end by its memory: two buffers of different groups that overlap lie
// in two rectangles that overlap. The rectangles are swept by step,
// keeping the memory of those live in a segment tree of counts over the
// distinct offsets: a rectangle whose memory is taken when it becomes live
// overlaps one live before it.
func (p *Plan) disjoint() bool {
	n := len(p.Buffers)
	parent := make([]int, n)
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	for i := range p.Buffers {
		if a := p.Buffers[i].Alias; a >= 0 && a < n {
			parent[find(i)] = find(a)
		}
	}
	type rect struct {
		start, end int
		lo, hi     int64
	}
	var rects []rect
	byRoot := map[int]int{}    // a group's rectangle, by its root
	members := map[int][]int{} // the buffers of the groups of more than one
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Size <= 0 {
			continue
		}
		r := find(i)
		if r != i || b.Alias >= 0 {
			members[r] = append(members[r], i)
		}
		k, ok := byRoot[r]
		if !ok {
			byRoot[r] = len(rects)
			rects = append(rects, rect{b.Start, b.End, b.Offset, b.Offset + b.Size})
			continue
		}
		q := &rects[k]
		if q.lo != b.Offset || q.hi != b.Offset+b.Size {
			return false
		}
		q.start, q.end = min(q.start, b.Start), max(q.end, b.End)
	}
	// Pairs within a group.
	for r, ms := range members {
		if !slices.Contains(ms, r) && p.Buffers[r].Size > 0 {
			ms = append(ms, r) // the root, whose Alias is -1
		}
		sort.SliceStable(ms, func(x, y int) bool { return p.Buffers[ms[x]].Start < p.Buffers[ms[y]].Start })
		for x, i := range ms {
			b := &p.Buffers[i]
			for _, j := range ms[x+1:] {
				c := &p.Buffers[j]
				if c.Start > b.End {
					break
				}
				if b.Alias != j && c.Alias != i {
					return false
				}
			}
		}
	}
	// Rectangles, swept by step.
	xs := make([]int64, 0, 2*len(rects))
	for _, q := range rects {
		xs = append(xs, q.lo, q.hi)
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	cell := func(x int64) int { i, _ := slices.BinarySearch(xs, x); return i }
	t := newCountTree(max(len(xs)-1, 1))
	byStart := make([]int, len(rects))
	byEnd := make([]int, len(rects))
	for i := range rects {
		byStart[i], byEnd[i] = i, i
	}
	slices.SortFunc(byStart, func(x, y int) int { return rects[x].start - rects[y].start })
	slices.SortFunc(byEnd, func(x, y int) int { return rects[x].end - rects[y].end })
	e := 0
	for _, k := range byStart {
		q := rects[k]
		for ; e < len(byEnd) && rects[byEnd[e]].end < q.start; e++ {
			d := rects[byEnd[e]]
			t.add(cell(d.lo), cell(d.hi), -1)
		}
		lo, hi := cell(q.lo), cell(q.hi)
		if t.max(lo, hi) > 0 {
			return false
		}
		t.add(lo, hi, 1)
	}
	return true
}

// countTree is a segment tree over cells 0..n-1 holding a count per cell,
// with range add and range max, each in O(log n).
type countTree struct {
	n        int
	max_, lz []int32
}

func newCountTree(n int) *countTree {
	return &countTree{n: n, max_: make([]int32, 4*n), lz: make([]int32, 4*n)}
}

// add adds d to the cells [lo, hi).
func (t *countTree) add(lo, hi int, d int32) { t.update(1, 0, t.n, lo, hi, d) }

// max returns the largest count of the cells [lo, hi) (0 when empty).
func (t *countTree) max(lo, hi int) int32 { return t.query(1, 0, t.n, lo, hi) }

func (t *countTree) update(x, l, r, lo, hi int, d int32) {
	if hi <= l || r <= lo {
		return
	}
	if lo <= l && r <= hi {
		t.max_[x] += d
		t.lz[x] += d
		return
	}
	m := (l + r) / 2
	t.update(2*x, l, m, lo, hi, d)
	t.update(2*x+1, m, r, lo, hi, d)
	t.max_[x] = t.lz[x] + max(t.max_[2*x], t.max_[2*x+1])
}

func (t *countTree) query(x, l, r, lo, hi int) int32 {
	if hi <= l || r <= lo {
		return 0
	}
	if lo <= l && r <= hi {
		return t.max_[x]
	}
	m := (l + r) / 2
	return t.lz[x] + max(t.query(2*x, l, m, lo, hi), t.query(2*x+1, m, r, lo, hi))
}
