package planner

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// naiveBestFit is the placement bestFit must reproduce, written the plain
// way: for each block, every placed block live at a common step, their
// spans sorted by offset, the smallest gap above floor[end] that fits.
func naiveBestFit(bs []block, order []int, floor []int64) ([]int64, int64) {
	offset := make([]int64, len(bs))
	var placed []int
	var top int64
	for _, k := range order {
		b := bs[k]
		var taken []span
		for _, j := range placed {
			if bs[j].start <= b.end && b.start <= bs[j].end {
				taken = append(taken, span{offset[j], offset[j] + bs[j].size})
			}
		}
		slices.SortFunc(taken, func(x, y span) int {
			if c := cmpInt64(x.lo, y.lo); c != 0 {
				return c
			}
			return cmpInt64(x.hi, y.hi)
		})
		at, fit := int64(-1), int64(-1)
		cur := floor[b.end]
		for _, t := range taken {
			if gap := t.lo - cur; gap >= b.size && (fit < 0 || gap < fit) {
				at, fit = cur, gap
			}
			cur = max(cur, t.hi)
		}
		if at < 0 {
			at = cur
		}
		offset[k] = at
		placed = append(placed, k)
		top = max(top, at+b.size)
	}
	return offset, top
}

// TestBestFitMatchesNaive places random blocks with bestFit (segment tree
// of span unions, merged sweep) and with the plain search, in random and
// in size order, over random floors, and wants the same offsets and top;
// then checks that a bar stops exactly the runs that cannot beat it.
func TestBestFitMatchesNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 150 {
		steps := 1 + rng.IntN(120)
		n := 1 + rng.IntN(250)
		bs := make([]block, n)
		for k := range bs {
			s := rng.IntN(steps)
			e := min(steps-1, s+rng.IntN(1+rng.IntN(steps)))
			sizes := []int64{1, 2, 3, 4, 8, 16}
			bs[k] = block{start: s, end: e, size: sizes[rng.IntN(len(sizes))] * Align}
		}
		floor := make([]int64, steps)
		var f int64
		for s := range floor {
			if rng.IntN(4) == 0 {
				f += int64(rng.IntN(3)) * Align
			}
			floor[s] = f
		}
		order := rng.Perm(n)
		if iter%2 == 1 {
			slices.SortStableFunc(order, func(x, y int) int { return cmpInt64(bs[y].size, bs[x].size) })
		}
		occ := newOccupancy(steps)
		want, wantTop := naiveBestFit(bs, order, floor)
		for run := range 2 { // twice: reset must leave nothing behind
			occ.reset()
			got := make([]int64, n)
			top, ok := bestFit(bs, order, occ, floor, got, 0, 0, 0, noBar, -1)
			if !ok || top != wantTop || !slices.Equal(got, want) {
				t.Fatalf("iteration %d, run %d: bestFit gives top %d (ok %v), offsets %v; want top %d, offsets %v", iter, run, top, ok, got, wantTop, want)
			}
		}
		for _, c := range []struct {
			limit bar
			ok    bool
		}{
			{bar{wantTop + Align, 0}, true},
			{bar{wantTop, 5}, true}, // an equal arena with a smaller lower bound wins
			{bar{wantTop, 4}, false},
			{bar{wantTop - Align, 100}, false},
		} {
			occ.reset()
			got := make([]int64, n)
			top, ok := bestFit(bs, order, occ, floor, got, 0, 4, 0, c.limit, -1)
			if ok != c.ok || ok && (top != wantTop || !slices.Equal(got, want)) {
				t.Fatalf("iteration %d: against %+v bestFit gives top %d, ok %v; want top %d, ok %v", iter, c.limit, top, ok, wantTop, c.ok)
			}
		}
	}
}

// TestOccupancyVisitsEachBlockOnce checks the property that keeps the gap
// search linear in the blocks it meets: the sets overlapping returns for a
// range hold every block live at some step of it exactly once, and no other
// block. (Blocks are apart in memory here, so no spans merge.)
func TestOccupancyVisitsEachBlockOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for iter := range 100 {
		steps := 1 + rng.IntN(200)
		bs := make([]block, 1+rng.IntN(150))
		occ := newOccupancy(steps)
		for k := range bs {
			s := rng.IntN(steps)
			bs[k] = block{start: s, end: min(steps-1, s+rng.IntN(1+rng.IntN(steps)))}
			occ.insert(bs[k].start, bs[k].end, span{int64(2 * k), int64(2*k + 1)})
		}
		for range 20 {
			start := rng.IntN(steps)
			end := min(steps-1, start+rng.IntN(steps))
			seen := make([]int, len(bs))
			occ.overlapping(start, end, func(set int) {
				for _, s := range occ.sets[set] {
					seen[s.lo/2]++
				}
			})
			for k, b := range bs {
				want := 0
				if b.start <= end && b.end >= start {
					want = 1
				}
				if seen[k] != want {
					t.Fatalf("iteration %d: block %d live over [%d, %d] is in %d of the sets for [%d, %d], want %d", iter, k, b.start, b.end, seen[k], start, end, want)
				}
			}
		}
	}
}

// TestBestFitWorkBudget checks that bestFit gives up once its gap searches
// have swept more spans than its work budget, and that a budget it stays
// within changes nothing. The blocks have nested lifetimes, taken longest
// first: each one's search sweeps the memory of all those placed before it,
// the quadratic case sweepBudget is for.
func TestBestFitWorkBudget(t *testing.T) {
	const n = 64
	bs := make([]block, n)
	order := make([]int, n)
	for k := range bs {
		bs[k] = block{start: k, end: 2*n - 1 - k, size: Align}
		order[k] = k
	}
	occ := newOccupancy(2 * n)
	floor := make([]int64, 2*n)
	want := make([]int64, n)
	wantTop, ok := bestFit(bs, order, occ, floor, want, 0, 0, 0, noBar, -1)
	if !ok || wantTop != n*Align {
		t.Fatalf("without a budget: top %d, ok %v; want top %d, ok true", wantTop, ok, n*Align)
	}
	for _, c := range []struct {
		work int
		ok   bool
	}{{0, false}, {n, false}, {n * n, true}} {
		occ.reset()
		got := make([]int64, n)
		top, ok := bestFit(bs, order, occ, floor, got, 0, 0, 0, noBar, c.work)
		if ok != c.ok || ok && (top != wantTop || !slices.Equal(got, want)) {
			t.Errorf("work %d: top %d, ok %v; want ok %v (and top %d)", c.work, top, ok, c.ok, wantTop)
		}
	}
}
