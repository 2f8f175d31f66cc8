package cpu

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolRunsEveryPartOnce runs parts through the pool from several
// goroutines at once, nested Runs included (the way kernels on the
// workers call it), and checks that each part runs exactly once and that
// Run returns only after all of its parts have; once with idle workers
// polling for parts (spinning) and once with them blocking at once.
func TestPoolRunsEveryPartOnce(t *testing.T) {
	defer func(d time.Duration) { spinFor = d }(spinFor)
	for _, spin := range []time.Duration{spinFor, 0} {
		spinFor = spin // 0: idle workers block at once and need the wakes
		testPoolRunsEveryPartOnce(t)
	}
}

func testPoolRunsEveryPartOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		p, stop := startHelpers(workers)
		var wg sync.WaitGroup
		for g := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for it := range 50 {
					n := 1 + (g+it)%7
					counts := make([]atomic.Int32, n)
					inner := make([]atomic.Int32, n*3)
					p.Run(n, func(i int) {
						counts[i].Add(1)
						p.Run(3, func(j int) { inner[i*3+j].Add(1) })
					})
					for i := range counts {
						if c := counts[i].Load(); c != 1 {
							t.Errorf("%d workers: part %d of %d ran %d times", workers, i, n, c)
						}
					}
					for i := range inner {
						if c := inner[i].Load(); c != 1 {
							t.Errorf("%d workers: nested part %d ran %d times", workers, i, c)
						}
					}
				}
			}()
		}
		wg.Wait()
		stop()
	}
}

// startHelpers returns a pool of workers whose helpers are workers-1
// runner goroutines, as in an executor: a kernel called with it on the
// calling goroutine runs its parts there and on them. stop ends them.
func startHelpers(workers int) (p *pool, stop func()) {
	p = newPool(workers)
	r := &runner{workers: workers, pool: p, ready: make(chan int32)}
	r.wg.Add(workers - 1)
	for w := range workers - 1 {
		go r.work(w + 1)
	}
	return p, func() {
		close(r.ready)
		r.wg.Wait()
	}
}

// TestPoolClaimsOwnBlockFirst checks the order in which a Run's caller
// claims parts when no worker helps (none is started): the parts of its
// own block (worker w's of W: parts [w·n/W, (w+1)·n/W)) lowest first, then
// those of the next blocks in turn, each from its far end, so that a
// worker that joins late still finds its block's first parts.
func TestPoolClaimsOwnBlockFirst(t *testing.T) {
	for _, c := range []struct {
		workers, caller, n int
		want               []int
	}{
		{2, 0, 2, []int{0, 1}},
		{2, 1, 2, []int{1, 0}},
		{2, 0, 4, []int{0, 1, 3, 2}},
		{2, 1, 4, []int{2, 3, 1, 0}},
		{2, 1, 5, []int{2, 3, 4, 1, 0}},
		{3, 1, 6, []int{2, 3, 5, 4, 1, 0}},
		{3, 2, 2, []int{1, 0}}, // blocks [0,0), [0,1), [1,2)
		{4, 0, 2, []int{0, 1}}, // blocks [0,0), [0,1), [1,1), [1,2): worker 0 owns none
		{4, 3, 2, []int{1, 0}},
	} {
		p := newPool(c.workers)
		p.byCPU = false // the blocks of the caller's worker, not of its CPU
		var got []int
		p.run(c.caller, c.n, func(i int) { got = append(got, i) })
		if !slices.Equal(got, c.want) {
			t.Errorf("%d workers, caller %d, %d parts: ran %v, want %v", c.workers, c.caller, c.n, got, c.want)
		}
	}
}

// TestPoolBlockByCPU checks when a claimer starts from its CPU's block:
// with as many workers as CPUs, where getcpu is there; then block is the
// CPU's number modulo the workers, whatever the worker.
func TestPoolBlockByCPU(t *testing.T) {
	_, ok := currentCPU()
	n := runtime.NumCPU()
	if p := newPool(n); p.byCPU != (ok && n > 1) {
		t.Errorf("%d workers on %d CPUs (getcpu: %v): byCPU = %v", n, n, ok, p.byCPU)
	}
	if p := newPool(n + 1); p.byCPU {
		t.Errorf("%d workers on %d CPUs: byCPU", n+1, n)
	}
	p := newPool(n)
	if !p.byCPU {
		t.Skip("no getcpu, or one CPU")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for w := range n + 2 {
		before, _ := currentCPU()
		b := p.block(w)
		after, _ := currentCPU()
		if before == after && b != before%n {
			t.Errorf("worker %d on CPU %d of %d: block %d, want %d", w, before, n, b, before%n)
		}
	}
}
