package cpu

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// runner runs a plan's steps: in plan order on the calling goroutine with
// one worker, else as a dependency graph on a fixed pool of goroutines. It
// holds everything the workers touch, and nothing that points back at the
// Executor, so that an Executor dropped without Close can still be
// collected (its cleanup stops the pool).
type runner struct {
	plan     *planner.Plan
	checkNaN bool
	views    []kernels.Tensor   // per buffer
	funcs    []kernels.Func     // per step; nil for copies
	args     [][]kernels.Tensor // per step
	workers  int
	trace    TraceFunc   // for one Step; nil when untimed
	pool     *pool       // the kernels' kernels.Parallel; its wakes are served by the workers
	pars     []stepParts // per step: its kernel's view of pool, told which worker runs it

	// The dependency graph, fixed in New. Step s waits for npred[s]
	// earlier steps; when it completes, the steps succ[succStart[s]:
	// succStart[s+1]] each have one fewer to wait for. roots are the steps
	// that wait for none.
	npred     []int32
	succStart []int32
	succ      []int32
	roots     []int32

	// Per Step.
	pending   []atomic.Int32 // per step: predecessors not yet complete
	remaining atomic.Int32   // steps not yet complete (run or skipped)
	stopAt    atomic.Int32   // start no step from this one on: the lowest that failed (0 when cancelled)
	ctx       context.Context
	mu        sync.Mutex // guards errStep, err and ctxErr
	errStep   int        // the lowest step that failed, or -1
	err       error      // its error
	ctxErr    error      // ctx's error, when it was cancelled during the run

	ready chan int32    // steps whose predecessors are complete; closed by close
	done  chan struct{} // one value when the last step of a Step completes
	wg    sync.WaitGroup
	once  sync.Once
}

// dependencies computes, for each step, the earlier steps it must wait
// for: those that write memory it reads or writes, and those that read
// memory it writes. Memory is compared by arena bytes, not by buffer, since
// buffers whose live ranges do not meet share memory over the step (and a
// result taken in place shares its argument's); so running the steps in
// any order the graph allows computes what plan order does. Only the
// nearest hazards are kept: the last writer of each byte range and the
// readers since.
func (r *runner) dependencies() {
	p := r.plan
	// Cut the arena at every buffer's ends: each buffer then covers a run
	// of whole segments.
	cuts := make([]int64, 0, 2*len(p.Buffers))
	for _, b := range p.Buffers {
		if b.Size > 0 {
			cuts = append(cuts, b.Offset, b.Offset+b.Size)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	segs := func(b int) (int, int) {
		buf := &p.Buffers[b]
		if buf.Size == 0 {
			return 0, 0
		}
		lo, _ := slices.BinarySearch(cuts, buf.Offset)
		hi, _ := slices.BinarySearch(cuts, buf.Offset+buf.Size)
		return lo, hi
	}
	nseg := max(len(cuts)-1, 0)
	writer := make([]int32, nseg)    // per segment: the last step writing it, or -1
	readers := make([][]int32, nseg) // per segment: steps reading it since
	for i := range writer {
		writer[i] = -1
	}
	n := len(p.Steps)
	preds := make([][]int32, n)
	mark := make([]int32, n) // mark[t] == s+1: t is already a predecessor of s
	for s, st := range p.Steps {
		add := func(t int32) {
			if t >= 0 && int(t) != s && mark[t] != int32(s)+1 {
				mark[t] = int32(s) + 1
				preds[s] = append(preds[s], t)
			}
		}
		for _, a := range st.Args {
			lo, hi := segs(a)
			for g := lo; g < hi; g++ {
				add(writer[g])
			}
		}
		lo, hi := segs(st.Out)
		for g := lo; g < hi; g++ {
			add(writer[g])
			for _, t := range readers[g] {
				add(t)
			}
		}
		// Record this step's reads, then its write (which supersedes the
		// reads of the memory it overwrites, its own included).
		for _, a := range st.Args {
			lo, hi := segs(a)
			for g := lo; g < hi; g++ {
				if k := len(readers[g]); k == 0 || readers[g][k-1] != int32(s) {
					readers[g] = append(readers[g], int32(s))
				}
			}
		}
		for g := lo; g < hi; g++ {
			writer[g] = int32(s)
			readers[g] = readers[g][:0]
		}
	}
	r.npred = make([]int32, n)
	r.succStart = make([]int32, n+1)
	for s := range preds {
		r.npred[s] = int32(len(preds[s]))
		for _, t := range preds[s] {
			r.succStart[t+1]++
		}
		if len(preds[s]) == 0 {
			r.roots = append(r.roots, int32(s))
		}
	}
	for s := 1; s <= n; s++ {
		r.succStart[s] += r.succStart[s-1]
	}
	r.succ = make([]int32, r.succStart[n])
	fill := slices.Clone(r.succStart[:n])
	for s := range preds {
		for _, t := range preds[s] {
			r.succ[fill[t]] = int32(s)
			fill[t]++
		}
	}
	r.pending = make([]atomic.Int32, n)
}

// start launches the pool, when there is one.
func (r *runner) start() {
	if r.workers <= 1 {
		return
	}
	r.ready = make(chan int32, len(r.plan.Steps)+1)
	r.done = make(chan struct{}, 1)
	r.wg.Add(r.workers)
	for w := range r.workers {
		go r.work(w)
	}
}

// close stops the pool and waits for its goroutines to exit.
func (r *runner) close() {
	r.once.Do(func() {
		if r.ready != nil {
			close(r.ready)
			r.wg.Wait()
		}
	})
}

func (r *runner) describe(s int) string {
	st := r.plan.Steps[s]
	if st.Kind == planner.Copy {
		return fmt.Sprintf("copy %%%s <- %%%s", r.plan.Buffers[st.Out].Name, r.plan.Buffers[st.Args[0]].Name)
	}
	return r.plan.Graph.FormatValue(ir.ID(st.Out))
}

// exec runs step s and returns its error, naming the step. A kernel that
// panics is a bug in kiln; it is returned as an internal error of the step,
// since a panic on a worker would end the process.
func (r *runner) exec(s int) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("step %d (%s): internal error in the kernel: %v", s, r.describe(s), v)
		}
	}()
	st := &r.plan.Steps[s]
	out := r.views[st.Out]
	if st.Kind == planner.Copy {
		copy(out.Data, r.args[s][0].Data)
		return nil
	}
	if err := r.funcs[s](out, r.args[s]); err != nil {
		return fmt.Errorf("step %d (%s): %v", s, r.describe(s), err)
	}
	if r.checkNaN {
		if at, ok := firstNonFinite(out); ok {
			return fmt.Errorf("step %d (%s) produced a non-finite value at element %d", s, r.describe(s), at)
		}
	}
	return nil
}

// run runs every step once and returns the first error: ctx's when it is
// cancelled between steps, else the failing step's.
func (r *runner) run(ctx context.Context) error {
	n := len(r.plan.Steps)
	if r.workers <= 1 || n == 0 {
		for s := range n {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := r.step(s, 0); err != nil {
				return err
			}
		}
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for s := range r.pending {
		r.pending[s].Store(r.npred[s])
	}
	r.remaining.Store(int32(n))
	r.stopAt.Store(int32(n))
	r.ctx, r.errStep, r.err, r.ctxErr = ctx, -1, nil, nil
	for _, s := range r.roots {
		r.ready <- s
	}
	<-r.done
	r.ctx = nil
	if r.ctxErr != nil {
		return r.ctxErr
	}
	return r.err
}

// fail records the error of step s and stops the run at s: no step after
// it in plan order starts, but earlier ones still may, and of several
// errors the earliest step's is kept. So the error is the one a run in
// plan order returns, whatever the scheduling.
func (r *runner) fail(s int, err error) {
	r.mu.Lock()
	if r.errStep < 0 || s < r.errStep {
		r.errStep, r.err = s, err
		r.stopAt.Store(int32(s))
	}
	r.mu.Unlock()
}

// cancel records ctx's error and stops the run: no further step starts.
func (r *runner) cancel(err error) {
	r.mu.Lock()
	if r.ctxErr == nil {
		r.ctxErr = err
	}
	r.stopAt.Store(0)
	r.mu.Unlock()
}

// work serves the ready queue until it is closed, and the pool's parts (of
// a kernel split across the workers) between steps: when neither is
// waiting it polls for both a while (idle), then blocks until a step is
// ready or a wake comes. A step is run unless the run has been stopped
// before it, and then completed either way, so that every step of a run
// completes and the run ends when the last one does; the steps after a
// stop complete at once without running.
//
// Parts come before steps: a worker helps a split kernel in progress
// before it takes a ready step, since the kernel's caller waits for its
// parts (those of this worker's block first of all), where a ready step
// can wait (a small one off the critical path, most often: the bias
// gradient and its update while the other worker multiplies).
func (r *runner) work(w int) {
	defer r.wg.Done()
	for {
		if r.pool.help(w) {
			continue
		}
		var s int32
		var ok bool
		select {
		case s, ok = <-r.ready:
		case <-r.pool.wake:
			r.pool.help(w)
			continue
		default:
			if r.idle(w) {
				continue
			}
			select {
			case s, ok = <-r.ready:
			case <-r.pool.wake:
				r.pool.help(w)
				continue
			}
		}
		if !ok {
			return
		}
		r.runStep(s, w)
	}
}

// spinFor is how long an idle worker polls for work (idle) before it
// blocks: a goroutine blocked on a channel takes tens to a hundred
// microseconds to wake on some machines (virtual CPUs, deep idle states),
// as long as a part of a split kernel takes.
var spinFor = 200 * time.Microsecond

// idle polls, for up to spinFor, for parts of a split kernel (running
// them) and for ready steps, yielding the processor between polls so that
// goroutines waiting for it (the Step caller) run; it reports whether it
// ran a part or found a ready step. While it polls the worker counts as spinning, and Run sends
// it no wake. w is the worker.
func (r *runner) idle(w int) bool {
	p := r.pool
	p.spinning.Add(1)
	start := time.Now()
	for i := 0; ; i++ {
		if p.help(w) || len(r.ready) > 0 {
			p.spinning.Add(-1)
			return true
		}
		if i%8 == 7 && time.Since(start) > spinFor {
			break
		}
		runtime.Gosched()
	}
	// A Run that saw this worker spinning sent it no wake: look once more
	// after leaving the count, so that a slot opened before then is helped
	// (a Run that opens its slot after it sees the count and wakes a worker).
	p.spinning.Add(-1)
	return p.help(w)
}

// runStep runs step s on worker w (unless the run was stopped before it)
// and completes it.
func (r *runner) runStep(s int32, w int) {
	if s < r.stopAt.Load() {
		if err := r.ctx.Err(); err != nil {
			r.cancel(err)
		} else {
			r.pars[s].worker.Store(int32(w))
			if err := r.step(int(s), w); err != nil {
				r.fail(int(s), err)
			}
		}
	}
	for _, t := range r.succ[r.succStart[s]:r.succStart[s+1]] {
		if r.pending[t].Add(-1) == 0 {
			r.ready <- t
		}
	}
	if r.remaining.Add(-1) == 0 {
		r.done <- struct{}{}
	}
}
