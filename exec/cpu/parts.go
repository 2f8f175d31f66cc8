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
// part); then it claims parts itself, one at a time from an atomic
// counter, until none is left, closes the slot and waits for the helpers
// still running a part. A worker polling or woken scans the slots and
// claims parts of the open ones the same way. The caller runs parts until none is left, so a Run never
// waits on workers that are busy with other steps: with every other worker
// busy, the caller runs all the parts itself. Wakes are hints: a stale one
// finds no open slot and costs a scan. Nothing is allocated per call: the
// slots are made with the pool, and body is the kernel's.
type pool struct {
	workers  int
	wake     chan struct{}
	jobs     []partJob
	spinning atomic.Int32 // workers polling the slots (runner.idle): they need no wake
}

// partJob is one Run call's parts. n and body are written by the caller
// before open is set and read by helpers only after they see it set, while
// counted in users; the caller waits for users to drop to 0 after clearing
// open, so no helper reads them once Run returns.
type partJob struct {
	busy  atomic.Bool  // held by a Run call
	open  atomic.Bool  // parts may be claimed
	users atomic.Int32 // helpers inside the slot
	next  atomic.Int32 // the next part to claim
	n     int32
	body  func(int)
	// panicked holds the value of the first part that panicked; Run
	// panics with it on its caller's goroutine.
	panicked atomic.Pointer[any]
	_        [32]byte // keep slots on separate cache lines
}

func newPool(workers int) *pool {
	p := &pool{workers: max(workers, 1)}
	if p.workers > 1 {
		// A Run call from each worker at once, and as many again nested in
		// the parts they run, before a caller has to wait for a slot.
		p.jobs = make([]partJob, 2*p.workers)
		p.wake = make(chan struct{}, 2*p.workers*p.workers)
	}
	return p
}

// Workers implements kernels.Parallel.
func (p *pool) Workers() int { return p.workers }

// Run implements kernels.Parallel.
func (p *pool) Run(n int, body func(part int)) {
	if p.workers <= 1 || n <= 1 {
		for i := range n {
			body(i)
		}
		return
	}
	j := p.acquire()
	j.n, j.body = int32(n), body
	j.next.Store(0)
	j.open.Store(true)
	for range min(n-1, p.workers-1) - int(p.spinning.Load()) {
		select {
		case p.wake <- struct{}{}:
		default: // enough wakes are pending
		}
	}
	j.drain()
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

// drain runs the parts of j not yet claimed. A part that panics ends the
// claiming: the panic is kept for Run to raise on its caller's goroutine,
// since on a helper's it would end the process.
func (j *partJob) drain() {
	defer func() {
		if v := recover(); v != nil {
			j.panicked.CompareAndSwap(nil, &v)
			j.next.Store(j.n)
		}
	}()
	for {
		i := j.next.Add(1) - 1
		if i >= j.n {
			return
		}
		j.body(int(i))
	}
}

// help runs parts of every open slot and reports whether it found one.
func (p *pool) help() bool {
	found := false
	for i := range p.jobs {
		j := &p.jobs[i]
		if !j.open.Load() {
			continue
		}
		found = true
		j.users.Add(1)
		if j.open.Load() {
			j.drain()
		}
		j.users.Add(-1)
	}
	return found
}
