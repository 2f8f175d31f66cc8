package cpu

import (
	"runtime"
	"sync/atomic"
)

// pool is the executor's kernels.Parallel: it runs the parts of one kernel
// call on the workers that are idle and on the goroutine that calls Run.
//
// A Run call takes a free job slot, publishes its parts there (open), and
// wakes blocked workers through wake, as many as the parts could use less
// those already polling the slots (spinning: an idle worker polls a while
// before it blocks, since waking a blocked goroutine can take as long as a
// part); then it claims parts itself until none is left, closes the slot
// and waits for the helpers still running a part. A worker polling or
// woken scans the slots and claims parts of the open ones the same way.
// The caller runs parts until none is left, so a Run never waits on
// workers that are busy with other steps: with every other worker busy,
// the caller runs all the parts itself. Wakes are hints: a stale one finds
// no open slot and costs a scan. Nothing is allocated per call: the slots
// are made with the pool, and body is the kernel's.
//
// Parts have owners. The n parts are cut into one contiguous block per
// worker (worker w's: parts [w·n/W, (w+1)·n/W)); a worker claims the parts
// of its own block first, lowest first, and only then takes parts of the
// other blocks, highest first, from their far end. Kernels split their
// results into contiguous ranges in part order, so with the same worker
// count the same worker computes the same range of a tensor in every call
// and every kernel that splits it alike (a weight gradient's rows and the
// optimizer's update of them; a layer's columns and its gradient's): the
// data a part reads was most often written by its own core and is still in
// that core's cache, where handing parts out first come first served moved
// it between cores at random (on the 2-core Zen 5 machine, reading 256 KiB
// to 1 MiB that the other core had just written took 2 to 4 times as long
// as reading what the same core wrote). Goroutines and threads move
// between CPUs, though (part 0 of the MLP step's kernels ran on either CPU
// about as often), so with as many workers as CPUs the block a claimer
// starts from is that of the CPU it runs on (byCPU: its number modulo the
// workers, read at the start of its claims, when parts are left):
// the cache a part finds warm is its core's, whichever worker that core
// runs (on the 2-core machine, 4% less CPU time in the MLP step's split
// kernels, 3% in the CNN's). Otherwise the caller's worker is the one
// running the step (stepParts); a call from elsewhere (a Run nested in a
// part, the tests) claims as worker 0. Which worker runs a part never
// changes what the part computes.
type pool struct {
	workers  int
	wake     chan struct{}
	jobs     []partJob
	spinning atomic.Int32 // workers polling the slots (runner.idle): they need no wake
	byCPU    bool         // a claimer starts from its CPU's block, not its worker's
}

// partJob is one Run call's parts. n, body and blocks are written by the
// caller before open is set and read by helpers only after they see it
// set, while counted in users; the caller waits for users to drop to 0
// after clearing open, so no helper reads them once Run returns.
type partJob struct {
	busy  atomic.Bool  // held by a Run call
	open  atomic.Bool  // parts may be claimed
	users atomic.Int32 // helpers inside the slot
	// blocks[w] holds the parts of worker w's block not yet claimed,
	// [lo, hi), as lo<<32 | hi: its owner claims lo, others hi-1.
	blocks []atomic.Uint64
	n      int32
	body   func(int)
	// panicked holds the value of the first part that panicked; Run
	// panics with it on its caller's goroutine.
	panicked atomic.Pointer[any]
	_        [32]byte // keep slots on separate cache lines
}

func newPool(workers int) *pool {
	p := &pool{workers: max(workers, 1)}
	_, ok := currentCPU()
	p.byCPU = ok && p.workers == runtime.NumCPU()
	if p.workers > 1 {
		// A Run call from each worker at once, and as many again nested in
		// the parts they run, before a caller has to wait for a slot.
		p.jobs = make([]partJob, 2*p.workers)
		for i := range p.jobs {
			p.jobs[i].blocks = make([]atomic.Uint64, p.workers)
		}
		p.wake = make(chan struct{}, 2*p.workers*p.workers)
	}
	return p
}

// Workers implements kernels.Parallel.
func (p *pool) Workers() int { return p.workers }

// Run implements kernels.Parallel, claiming parts as worker 0.
func (p *pool) Run(n int, body func(part int)) { p.run(0, n, body) }

// run runs body(0..n-1) (see Run) from a caller that claims parts as
// worker w.
func (p *pool) run(w, n int, body func(part int)) {
	if p.workers <= 1 || n <= 1 {
		for i := range n {
			body(i)
		}
		return
	}
	j := p.acquire()
	j.n, j.body = int32(n), body
	for b := range j.blocks {
		lo, hi := uint64(b*n/p.workers), uint64((b+1)*n/p.workers)
		j.blocks[b].Store(lo<<32 | hi)
	}
	j.open.Store(true)
	for range min(n-1, p.workers-1) - int(p.spinning.Load()) {
		select {
		case p.wake <- struct{}{}:
		default: // enough wakes are pending
		}
	}
	j.drain(p.block(w))
	j.open.Store(false)
	for j.users.Load() != 0 {
		runtime.Gosched()
	}
	j.body = nil
	v := j.panicked.Swap(nil)
	j.busy.Store(false)
	if v != nil {
		panic(*v)
	}
}

// acquire takes a free slot, waiting for one if every slot is held.
func (p *pool) acquire() *partJob {
	for {
		for i := range p.jobs {
			if j := &p.jobs[i]; !j.busy.Load() && j.busy.CompareAndSwap(false, true) {
				return j
			}
		}
		runtime.Gosched()
	}
}

// drain runs the parts of j not yet claimed, starting from block w: its
// parts, then those of the next blocks in turn; it reports whether it ran
// any. A part that panics ends the claiming: the panic is kept for Run to
// raise on its caller's goroutine, since on a helper's it would end the
// process.
func (j *partJob) drain(w int) (ran bool) {
	defer func() {
		if v := recover(); v != nil {
			j.panicked.CompareAndSwap(nil, &v)
			for b := range j.blocks {
				j.blocks[b].Store(0)
			}
		}
	}()
	nb := len(j.blocks)
	for d := range nb {
		b := &j.blocks[(w+d)%nb]
		for {
			i, ok := claim(b, d == 0)
			if !ok {
				break
			}
			ran = true
			j.body(i)
		}
	}
	return ran
}

// block returns the block worker w claims first: its CPU's when byCPU,
// else its own.
func (p *pool) block(w int) int {
	if p.byCPU {
		if c, ok := currentCPU(); ok {
			return c % p.workers
		}
	}
	return w
}

// left reports whether a part of j is still unclaimed.
func (j *partJob) left() bool {
	for b := range j.blocks {
		v := j.blocks[b].Load()
		if v>>32 < v&(1<<32-1) {
			return true
		}
	}
	return false
}

// claim takes a part of block b, its lowest (own) or its highest, and
// reports whether one was left.
func claim(b *atomic.Uint64, own bool) (int, bool) {
	for {
		v := b.Load()
		lo, hi := v>>32, v&(1<<32-1)
		if lo >= hi {
			return 0, false
		}
		if own {
			if b.CompareAndSwap(v, (lo+1)<<32|hi) {
				return int(lo), true
			}
		} else if b.CompareAndSwap(v, lo<<32|(hi-1)) {
			return int(hi - 1), true
		}
	}
}

// help runs parts of every open slot as worker w and reports whether it
// ran one. An open slot whose parts are all taken (its caller or another
// worker is finishing the last ones) does not count: a worker polling
// (runner.idle) goes on polling rather than returning to wait on its
// channels, whose locks the workers running steps take.
func (p *pool) help(w int) bool {
	ran := false
	for i := range p.jobs {
		j := &p.jobs[i]
		if !j.open.Load() {
			continue
		}
		j.users.Add(1)
		if j.open.Load() && j.left() && j.drain(p.block(w)) {
			ran = true
		}
		j.users.Add(-1)
	}
	return ran
}

// stepParts is the kernels.Parallel of one step's kernel: the pool, with
// the worker running the step (set by the runner before it runs it) as
// the worker whose parts the kernel's Run calls claim first.
type stepParts struct {
	*pool
	worker atomic.Int32
}

// Run implements kernels.Parallel.
func (s *stepParts) Run(n int, body func(part int)) {
	s.pool.run(int(s.worker.Load()), n, body)
}
