// Package cpu runs a plan on the CPU. It makes no decisions: it allocates
// the plan's arena, builds the kernel of each step once, applies the initial
// values the plan's params and state call for, and runs the steps: in plan
// order with one worker, else on a fixed pool of goroutines, each step as
// soon as the steps it depends on (through the memory it reads and writes)
// are complete. Every kernel computes each element of its result the same
// way whatever runs beside it, so the results are the same, bit for bit,
// for any number of workers.
package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/kilnml/kiln/exec"
	"github.com/kilnml/kiln/internal/sysmem"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	kcpu "github.com/kilnml/kiln/kernels/cpu"
	"github.com/kilnml/kiln/planner"
)

// Options configure an executor.
type Options struct {
	// Seed selects the initial values of the params (see exec.InitialValues).
	Seed uint64
	// CheckNaN stops a step at the first kernel that produces NaN or Inf and
	// names it (KILN_DEBUG=nan).
	CheckNaN bool
	// Workers is the number of goroutines that run steps; 0 means
	// runtime.NumCPU(). With 1, Step runs the steps in plan order on the
	// calling goroutine (the reference); with more, New starts a pool that
	// Close stops.
	Workers int
	// Comm is the communicator of a data-parallel job, which the plan's
	// collectives run on; a plan with collectives needs one of the size it
	// was compiled for.
	Comm kernels.Collective
}

// Executor runs one plan. It is not safe for concurrent use. With more
// than one worker it holds a pool of goroutines: call Close when done with
// it. (An Executor dropped without Close stops its pool once the garbage
// collector finds it unreachable, but that may be never.)
type Executor struct {
	plan  *planner.Plan
	opts  Options
	arena []byte
	views []kernels.Tensor   // per buffer
	funcs []kernels.Func     // per step; nil for copies
	args  [][]kernels.Tensor // per step
	run   *runner
	names *exec.Names // every name a user may set or get -> buffer
	step  *int64      // completed steps since the last Reset; kernels read it (dropout); apart from the Executor, so kernels do not keep it alive
	mem   memory      // the arena memory in use, observed while running
}

// memory measures the arena memory in use while the plan runs, from what
// the executor does: which buffers each step reads and writes, and where
// in the arena their views lie.
type memory struct {
	region     []int   // per buffer: its span of the arena, by (offset, size)
	span       []int64 // per region: its size rounded up to planner.Align
	top        []int64 // per region: its end
	persistent []bool  // per buffer: an input, param or state, which holds its value across steps
	readAfter  []bool  // per buffer: an output or gradient, read after the step
	firstWrite []int   // per buffer: the first step that writes it, or -1
	lastRead   []int   // per buffer: the last step that reads it, or -1
	peak, high int64

	// Scratch for measure.
	from, to         []int // per buffer
	starts, ends     []int // buffers by step
	startEnd, endEnd []int // per step
	users            []int // per region: buffers in use there
}

// New prepares p for running: it checks the plan, allocates its arena and
// builds every step's kernel. An arena larger than the memory available
// (sysmem.Check) is refused before anything is allocated.
func New(p *planner.Plan, opts Options) (*Executor, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("invalid plan: %w", err)
	}
	if err := sysmem.Check("arena", p.ArenaBytes+planner.Align); err != nil {
		return nil, fmt.Errorf("plan %s: %w", p.Graph.Name, err)
	}
	x := &Executor{plan: p, opts: opts, names: exec.NewNames(p), step: new(int64)}
	x.arena = alignedBytes(p.ArenaBytes)
	x.views = make([]kernels.Tensor, len(p.Buffers))
	for i, b := range p.Buffers {
		x.views[i] = kernels.Tensor{Type: b.Type, Data: x.arena[b.Offset : b.Offset+b.Size : b.Offset+b.Size]}
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.NumCPU()
	}
	x.opts.Workers = workers
	pool := newPool(workers)
	pars := make([]stepParts, len(p.Steps))
	x.funcs = make([]kernels.Func, len(p.Steps))
	x.args = make([][]kernels.Tensor, len(p.Steps))
	for s, st := range p.Steps {
		args := make([]kernels.Tensor, len(st.Args))
		types := make([]ir.Type, len(st.Args))
		for j, a := range st.Args {
			args[j] = x.views[a]
			types[j] = p.Buffers[a].Type
		}
		x.args[s] = args
		pars[s].pool = pool
		if st.Kind == planner.Copy {
			continue
		}
		f, err := kcpu.Kernels.Build(&kernels.Node{Op: st.Op, Attrs: st.Attrs, Args: types, Out: p.Buffers[st.Out].Type, Step: x.step, Par: &pars[s], Comm: opts.Comm})
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
		}
		x.funcs[s] = f
	}
	x.mem.init(x)
	if err := x.Reset(opts.Seed); err != nil {
		return nil, err
	}
	x.run = &runner{plan: p, checkNaN: opts.CheckNaN, views: x.views, funcs: x.funcs, args: x.args, workers: workers, pool: pool, pars: pars}
	x.run.dependencies()
	x.run.start()
	runtime.AddCleanup(x, func(r *runner) { r.close() }, x.run)
	return x, nil
}

// Workers returns the number of goroutines that run the steps.
func (x *Executor) Workers() int { return x.opts.Workers }

// Close stops the executor's pool of workers and waits for them to exit.
// It must not be called during Step; the executor cannot run steps after
// it. Closing twice does nothing.
func (x *Executor) Close() error {
	x.run.close()
	return nil
}

// alignedBytes returns n zero bytes starting at a multiple of planner.Align.
func alignedBytes(n int64) []byte {
	raw := make([]byte, n+planner.Align)
	shift := (planner.Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))))%planner.Align) % planner.Align
	return raw[shift : int64(shift)+n : int64(shift)+n]
}

func (x *Executor) describe(s int) string {
	return (&runner{plan: x.plan}).describe(s)
}

// Plan returns the plan the executor runs.
func (x *Executor) Plan() *planner.Plan { return x.plan }

// Reset sets every param and state to its initial value for seed and the
// step count, which step-dependent kernels such as dropout read, to 0.
func (x *Executor) Reset(seed uint64) error {
	*x.step = 0
	x.mem.peak, x.mem.high = 0, 0
	for k, i := range x.plan.Params {
		if err := x.initBuffer(i, seed, k); err != nil {
			return err
		}
	}
	for k, i := range x.plan.States {
		if err := x.initBuffer(i, seed, k); err != nil {
			return err
		}
	}
	return nil
}

func (x *Executor) initBuffer(i int, seed uint64, index int) error {
	v := x.plan.Graph.Value(x.plan.Buffers[i].Value)
	vals, err := exec.InitialValues(v, seed, index)
	if err != nil {
		return err
	}
	return kernels.SetFloat64s(x.views[i], vals)
}

// StepCount returns the number of steps completed since New or Reset: the
// step count that step-dependent kernels such as dropout read.
func (x *Executor) StepCount() int64 { return *x.step }

// SetStepCount sets the step count, so that a run restored from saved
// state draws the masks it would have drawn had it never stopped. It
// returns an error for a negative count.
func (x *Executor) SetStepCount(n int64) error {
	if n < 0 {
		return fmt.Errorf("step count %d is negative", n)
	}
	*x.step = n
	return nil
}

// Names returns every name Set or Get accepts: inputs, params, state,
// outputs and grad/PARAM, sorted.
func (x *Executor) Names() []string {
	return x.names.List()
}

// Set copies t into the input, param or state called name. The type must
// match the plan's exactly.
func (x *Executor) Set(name string, t kernels.Tensor) error {
	i, err := x.names.Settable(name, t.Type)
	if err != nil {
		return err
	}
	copy(x.views[i].Data, t.Data)
	return nil
}

// Get returns a view of the tensor called name: an input, param, state,
// output or grad/PARAM. The view is overwritten by the next Step; copy what
// must outlive it.
func (x *Executor) Get(name string) (kernels.Tensor, error) {
	i, err := x.names.Lookup(name)
	if err != nil {
		return kernels.Tensor{}, err
	}
	return x.views[i], nil
}

// Step runs the plan once. It checks ctx between steps and stops there when
// it is cancelled, returning ctx.Err(). A kernel error stops the step (no
// step after it in plan order starts; those running finish) and is
// returned with the step's op and value: the error a run in plan order
// returns, for any number of workers. A step that completes advances the step count (see
// kernels.Node.Step), so dropout draws a new mask for the next one.
func (x *Executor) Step(ctx context.Context) error {
	err := x.run.run(ctx)
	x.run.trace = nil
	if err != nil {
		return err
	}
	*x.step++
	x.mem.measure(len(x.plan.Steps))
	return nil
}

// PeakBytes returns the most arena bytes in use at once during the steps
// run since New or Reset, as observed while running: a buffer is in use
// from the first step that writes it to the last step that reads it;
// inputs, params and state, which hold their values across steps, at every
// step; outputs and gradients, read after the step, from their write to the
// end. Each buffer counts at its size rounded up to planner.Align (the
// memory it keeps from others), and memory that buffers share in place
// counts once. For a sound plan it equals Plan.LowerBound.
func (x *Executor) PeakBytes() int64 { return x.mem.peak }

// HighWater returns the highest arena address in use during the steps run
// since New or Reset (the end of the highest buffer in use, its size
// rounded up to planner.Align), as observed while running. It is at most
// Plan.ArenaBytes, and equal to it unless the top of the arena goes unused.
func (x *Executor) HighWater() int64 { return x.mem.high }

func (m *memory) init(x *Executor) {
	p := x.plan
	n := len(p.Buffers)
	m.region = make([]int, n)
	m.persistent = make([]bool, n)
	m.readAfter = make([]bool, n)
	m.firstWrite = make([]int, n)
	m.lastRead = make([]int, n)
	m.from, m.to = make([]int, n), make([]int, n)
	m.starts, m.ends = make([]int, n), make([]int, n)
	m.startEnd, m.endEnd = make([]int, max(len(p.Steps), 1)+1), make([]int, max(len(p.Steps), 1)+1)
	base := uintptr(unsafe.Pointer(unsafe.SliceData(x.arena)))
	type key struct{ off, size int64 }
	regions := map[key]int{}
	for i, v := range x.views {
		off := int64(0)
		if len(v.Data) > 0 {
			off = int64(uintptr(unsafe.Pointer(unsafe.SliceData(v.Data))) - base)
		}
		k := key{off, (int64(len(v.Data)) + planner.Align - 1) / planner.Align * planner.Align}
		r, ok := regions[k]
		if !ok {
			r = len(m.span)
			regions[k] = r
			m.span = append(m.span, k.size)
			m.top = append(m.top, k.off+k.size)
		}
		m.region[i] = r
		m.persistent[i] = p.Buffers[i].Role != planner.Temp
	}
	for _, nm := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
		m.readAfter[nm.Buffer] = true
	}
	m.users = make([]int, len(m.span))
	// Every step runs in every Step, so which steps first write and last
	// read each buffer is known now.
	for i := range m.firstWrite {
		m.firstWrite[i], m.lastRead[i] = -1, -1
	}
	for s, st := range p.Steps {
		for _, a := range st.Args {
			m.lastRead[a] = s
		}
		if m.firstWrite[st.Out] < 0 {
			m.firstWrite[st.Out] = s
		}
	}
}

// measure sweeps the steps of the run just done, with the buffers' use
// observed in firstWrite and lastRead, and raises peak and high.
func (m *memory) measure(steps int) {
	last := max(steps-1, 0)
	// from[i]..to[i]: the steps buffer i was in use, or from[i] = -1.
	from, to := m.from, m.to
	for i := range m.region {
		switch {
		case m.persistent[i]:
			from[i], to[i] = 0, last
		case m.readAfter[i] && m.firstWrite[i] >= 0:
			from[i], to[i] = m.firstWrite[i], last
		case m.firstWrite[i] < 0:
			from[i] = -1 // never written: not in use
		default:
			from[i], to[i] = m.firstWrite[i], max(m.lastRead[i], m.firstWrite[i])
		}
	}
	// Bucket the buffers by the step their use starts and by the step it
	// ends; then startEnd[s] and endEnd[s] are the ends of step s's buckets.
	starts := bucket(m.starts, m.startEnd, from, from)
	ends := bucket(m.ends, m.endEnd, from, to)
	clear(m.users)
	var live int64
	si, ei := 0, 0
	for s := 0; s <= last; s++ {
		for ; si < m.startEnd[s]; si++ {
			r := m.region[starts[si]]
			if m.users[r]++; m.users[r] == 1 {
				live += m.span[r]
			}
			m.high = max(m.high, m.top[r])
		}
		m.peak = max(m.peak, live)
		for ; ei < m.endEnd[s]; ei++ {
			r := m.region[ends[ei]]
			if m.users[r]--; m.users[r] == 0 {
				live -= m.span[r]
			}
		}
	}
}

// bucket sorts the buffers i in use (from[i] >= 0) into dst by key[i], a
// step, with a counting sort, and leaves in end[s] the end of step s's
// bucket.
func bucket(dst, end, from, key []int) []int {
	clear(end)
	for i, f := range from {
		if f >= 0 {
			end[key[i]+1]++
		}
	}
	for s := 1; s < len(end); s++ {
		end[s] += end[s-1]
	}
	for i, f := range from {
		if f >= 0 {
			dst[end[key[i]]] = i
			end[key[i]]++
		}
	}
	return dst[:end[len(end)-1]]
}

func firstNonFinite(t kernels.Tensor) (int, bool) {
	switch t.Type.DType {
	case ir.F32:
		for i, v := range kernels.View[float32](t) {
			if f := float64(v); math.IsNaN(f) || math.IsInf(f, 0) {
				return i, true
			}
		}
	case ir.F64:
		for i, v := range kernels.View[float64](t) {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return i, true
			}
		}
	}
	return 0, false
}
