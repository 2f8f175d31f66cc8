package planner

import (
	"fmt"
	"slices"
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

// overlap returns an error naming two buffers of non-zero size that are
// live at a common step and share memory, other than a buffer and the one
// it takes in place (Alias); nil if there are none. It expects the aliases
// checked: each names another buffer and lies at its offset with its size.
//
// It runs in O(n log n), where comparing every pair of buffers live at a
// common step would take O(n²) on a training step, whose params and state
// live throughout. Buffers joined by Alias (a buffer, the one it takes in
// place, and so on) form a group, which lies at one offset and size; within
// a group the buffers live at a common step are compared in a sweep by
// start (each has at most two partners it may overlap). A group then takes
// its memory during the union of its buffers' live ranges: a few
// rectangles of steps by memory, disjoint in time. Two buffers of
// different groups overlap exactly when two rectangles do; the rectangles
// are swept by step, keeping the memory of those live in a segment tree of
// counts over the distinct offsets, and one whose memory is already taken
// when it becomes live overlaps one live before it.
func (p *Plan) overlap() error {
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
	groups := map[int][]int{} // by root: the buffers of non-zero size, by start
	var roots []int
	for i := range p.Buffers {
		if p.Buffers[i].Size <= 0 {
			continue
		}
		r := find(i)
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	byStart := func(x, y int) int { return p.Buffers[x].Start - p.Buffers[y].Start }
	type rect struct {
		start, end int
		lo, hi     int64
		group      int
	}
	var rects []rect
	for _, r := range roots {
		ms := groups[r]
		slices.SortStableFunc(ms, byStart)
		for x, i := range ms[:len(ms)-1] {
			b := &p.Buffers[i]
			for _, j := range ms[x+1:] {
				c := &p.Buffers[j]
				if c.Start > b.End {
					break
				}
				if b.Alias != j && c.Alias != i && b.Offset < c.Offset+c.Size && c.Offset < b.Offset+b.Size {
					return p.overlapError(i, j)
				}
			}
		}
		b := &p.Buffers[ms[0]]
		q := rect{b.Start, b.End, b.Offset, b.Offset + b.Size, r}
		for _, i := range ms[1:] {
			c := &p.Buffers[i]
			if c.Start > q.end {
				rects = append(rects, q)
				q.start = c.Start
			}
			q.end = max(q.end, c.End)
		}
		rects = append(rects, q)
	}
	xs := make([]int64, 0, 2*len(rects))
	for _, q := range rects {
		xs = append(xs, q.lo, q.hi)
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	cell := func(x int64) int { i, _ := slices.BinarySearch(xs, x); return i }
	t := newCountTree(max(len(xs)-1, 1))
	starts := make([]int, len(rects))
	ends := make([]int, len(rects))
	for i := range rects {
		starts[i], ends[i] = i, i
	}
	slices.SortStableFunc(starts, func(x, y int) int { return rects[x].start - rects[y].start })
	slices.SortStableFunc(ends, func(x, y int) int { return rects[x].end - rects[y].end })
	live := make([]bool, len(rects))
	e := 0
	for _, k := range starts {
		q := rects[k]
		for ; e < len(ends) && rects[ends[e]].end < q.start; e++ {
			d := rects[ends[e]]
			t.add(cell(d.lo), cell(d.hi), -1)
			live[ends[e]] = false
		}
		lo, hi := cell(q.lo), cell(q.hi)
		if t.max(lo, hi) > 0 {
			for j, r := range rects {
				if live[j] && r.lo < q.hi && q.lo < r.hi {
					return p.groupOverlap(groups[r.group], groups[q.group])
				}
			}
			return fmt.Errorf("buffer %%%s overlaps another while both are live", p.Buffers[groups[q.group][0]].Name) // not reached
		}
		t.add(lo, hi, 1)
		live[k] = true
	}
	return nil
}

// groupOverlap names two buffers, one of each group (sorted by start, at
// memory that overlaps), that are live at a common step.
func (p *Plan) groupOverlap(g1, g2 []int) error {
	// Merge by start, remembering each group's buffer that ends last so
	// far: a buffer overlaps the other group's when that one ends at or
	// after its start.
	last := [2]int{-1, -1}
	i, j := 0, 0
	for i < len(g1) || j < len(g2) {
		side, k := 0, 0
		if j >= len(g2) || i < len(g1) && p.Buffers[g1[i]].Start <= p.Buffers[g2[j]].Start {
			k = g1[i]
			i++
		} else {
			side, k = 1, g2[j]
			j++
		}
		if o := last[1-side]; o >= 0 && p.Buffers[o].End >= p.Buffers[k].Start {
			return p.overlapError(o, k)
		}
		if last[side] < 0 || p.Buffers[k].End > p.Buffers[last[side]].End {
			last[side] = k
		}
	}
	return fmt.Errorf("buffers %%%s and %%%s overlap while both are live", p.Buffers[g1[0]].Name, p.Buffers[g2[0]].Name) // not reached
}

// overlapError is the error for buffers i and j, i starting no later.
func (p *Plan) overlapError(i, j int) error {
	b, c := &p.Buffers[i], &p.Buffers[j]
	return fmt.Errorf("buffers %%%s [%d,%d) and %%%s [%d,%d) overlap while both are live (steps %d..%d and %d..%d)",
		b.Name, b.Offset, b.Offset+b.Size, c.Name, c.Offset, c.Offset+c.Size, b.Start, b.End, c.Start, c.End)
}

// countTree is a segment tree over cells 0..n-1 holding a count per cell,
// with range add and range max, each in O(log n).
type countTree struct {
	n       int
	top, lz []int32 // per node: the most of its cells, and what was added to all of them
}

func newCountTree(n int) *countTree {
	return &countTree{n: n, top: make([]int32, 4*n), lz: make([]int32, 4*n)}
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
		t.top[x] += d
		t.lz[x] += d
		return
	}
	m := (l + r) / 2
	t.update(2*x, l, m, lo, hi, d)
	t.update(2*x+1, m, r, lo, hi, d)
	t.top[x] = t.lz[x] + max(t.top[2*x], t.top[2*x+1])
}

// query returns the most of the cells [lo, hi) within node x's cells
// [l, r); counts are never negative, so a node outside gives 0.
func (t *countTree) query(x, l, r, lo, hi int) int32 {
	if hi <= l || r <= lo {
		return 0
	}
	if lo <= l && r <= hi {
		return t.top[x]
	}
	m := (l + r) / 2
	return t.lz[x] + max(t.query(2*x, l, m, lo, hi), t.query(2*x+1, m, r, lo, hi))
}
