// Package planner turns a compiled graph into a Plan: steps in order, one
// buffer per value placed at a byte offset in one arena, and the training
// step's signature (inputs, params, state, outputs, gradients). A Plan is
// plain data: executors run it and make no decisions of their own.
package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kilnml/kiln/ir"
)

// Align is the byte alignment of every buffer offset: WebGPU binds storage
// buffers at 256-byte offsets, and it is more than any CPU vector needs.
const Align = 256

// Role says where a buffer's contents come from and how long they live.
type Role uint8

// Buffer roles.
const (
	Temp  Role = iota // computed by a step, dead after its last use
	Input             // fed before every step
	Param             // trainable, persistent across steps
	State             // persistent across steps, not trained
)

var roleNames = [...]string{Temp: "temp", Input: "input", Param: "param", State: "state"}

// String returns the role's name.
func (r Role) String() string { return roleNames[r] }

// Buffer is the storage of one value.
type Buffer struct {
	Value  ir.ID
	Name   string // the value's name, without %
	Type   ir.Type
	Role   Role
	Offset int64 // byte offset in the arena, a multiple of Align
	Size   int64 // bytes the value needs
	Start  int   // first step at which the buffer is live
	End    int   // last step at which it is live (inclusive)

	// Alias is the index of the buffer whose memory this one takes in
	// place, or -1. The step that writes this buffer (at Start) is an op
	// whose argument Alias, of the same type, it may write over
	// (ir.Op.InPlaceArg: an elementwise op's) and reads for the last time
	// there (its End is this Start); the kernel writes the
	// result over it. Or the step is a reshape of Alias, of the same dtype
	// and size, and the result already holds its bytes: the kernel has
	// nothing to do. The two share Offset and are both live at that one
	// step; a buffer is taken in place by at most one other. The new value
	// of an update may also take the memory of the param or state it
	// updates, which then holds it to the end: no later step reads or
	// writes the target, and no copy applies that update.
	Alias int
}

// StepKind distinguishes kernel steps from the copies that apply updates.
type StepKind uint8

// Step kinds.
const (
	Kernel StepKind = iota // run the kernel of Op on Args into Out
	Copy                   // copy buffer Args[0] into Out (an update)
)

// Step is one unit of work. Args and Out are buffer indices, which equal
// value ids.
type Step struct {
	Kind  StepKind
	Op    ir.Op
	Attrs ir.Attrs
	Args  []int
	Out   int
}

// Named is a buffer under the name the plan's users see it by.
type Named struct {
	Name   string
	Buffer int
}

// Plan is a compiled training (or inference) step.
type Plan struct {
	Graph      *ir.Graph
	Buffers    []Buffer // indexed by value id
	Steps      []Step
	ArenaBytes int64 // the arena's size: the peak of the placement
	LowerBound int64 // most bytes live at any step (sizes rounded to Align)
	// ChunkBytes, when not 0, splits the arena into chunks of that many
	// bytes (the last one shorter), each small enough for one binding of a
	// GPU: no buffer straddles a multiple of ChunkBytes (Options.ChunkBytes).
	ChunkBytes int64

	Inputs  []int   // buffers fed before each step, in graph order
	Params  []int   // trainable buffers
	States  []int   // optimizer state buffers
	Outputs []Named // the graph's outputs, by value name
	Grads   []Named // each param's gradient, as grad/NAME (not in a training step, which consumes them)
}

func alignUp(n int64) int64 { return (n + Align - 1) / Align * Align }

// Options control planning. The zero value is the default plan.
type Options struct {
	// Schedule selects the order of the kernel steps; the default,
	// ScheduleAuto, keeps the better of the memory-aware and the
	// topological order.
	Schedule ScheduleKind
	// NoInPlace gives every value memory of its own: no result takes an
	// argument's memory in place.
	NoInPlace bool
	// ChunkBytes, when not 0, places the buffers so that none straddles a
	// multiple of ChunkBytes: the arena can then be allocated as chunks of
	// ChunkBytes, each bound whole, as a GPU whose storage bindings hold at
	// most maxStorageBufferBindingSize bytes needs. It must be a multiple
	// of Align, and no buffer may be larger. The CPU ignores it.
	ChunkBytes int64
}

// Chunk returns the index of the arena chunk holding buffer i (0 when the
// plan has no chunks).
func (p *Plan) Chunk(i int) int64 {
	if p.ChunkBytes <= 0 {
		return 0
	}
	return p.Buffers[i].Offset / p.ChunkBytes
}

// Chunks returns the number of arena chunks: ArenaBytes / ChunkBytes
// rounded up, at least 1; 1 when the plan has no chunks.
func (p *Plan) Chunks() int64 {
	if p.ChunkBytes <= 0 {
		return 1
	}
	return max((p.ArenaBytes+p.ChunkBytes-1)/p.ChunkBytes, 1)
}

// inChunk returns the least offset at or above at where size bytes do not
// straddle a multiple of chunk (at itself when chunk is 0): at, or the next
// multiple of chunk. size must be at most chunk.
func inChunk(at, size, chunk int64) int64 {
	if chunk <= 0 || size == 0 || at/chunk == (at+size-1)/chunk {
		return at
	}
	return (at/chunk + 1) * chunk
}

// checkChunk refuses a chunk size that is not a multiple of Align, and a
// buffer of g larger than a chunk.
func checkChunk(g *ir.Graph, chunk int64) error {
	if chunk == 0 {
		return nil
	}
	if chunk < 0 || chunk%Align != 0 {
		return fmt.Errorf("planning %s: chunk size %d bytes is not a positive multiple of %d", g.Name, chunk, Align)
	}
	for _, v := range g.Values {
		if n := int64(v.Type.Bytes()); n > chunk {
			return fmt.Errorf("planning %s: value %%%s (%s, %d bytes) is larger than the %d-byte arena chunk (one storage binding); no placement can hold it", g.Name, v.Name, v.Type, n, chunk)
		}
	}
	return nil
}

// New plans g, which must have passed ir.Check: it orders the kernel steps
// (opts.Schedule), appends one copy step per update, computes each buffer's
// live range, lets elementwise results take the memory of arguments that
// die there (unless opts.NoInPlace) and places the buffers in one arena.
func New(g *ir.Graph, opts Options) (*Plan, error) {
	if err := ir.Check(g); err != nil {
		return nil, err
	}
	if err := checkChunk(g, opts.ChunkBytes); err != nil {
		return nil, err
	}
	updated := map[ir.ID]bool{}
	for _, u := range g.Updates {
		updated[u.Target] = true
	}
	for _, u := range g.Updates {
		if updated[u.Value] && u.Value != u.Target {
			return nil, fmt.Errorf("update of %s reads %s, which is itself updated in the same step; the order of updates would matter", g.NameOf(u.Target), g.NameOf(u.Value))
		}
	}
	var topo, mem *Plan
	if opts.Schedule != ScheduleMemory {
		// ir.Check has verified that every argument is defined before
		// its user, so the definition order is topological.
		order := make([]ir.ID, len(g.Values))
		for i := range order {
			order[i] = ir.ID(i)
		}
		topo = build(g, order, opts)
	}
	if opts.Schedule != ScheduleTopo {
		order := memorySchedule(g, keptValues(g))
		if len(order) != len(g.Values)-leaves(g) {
			return nil, fmt.Errorf("scheduling %s: the graph has a cycle", g.Name)
		}
		mem = build(g, order, opts)
	}
	switch {
	case topo == nil:
		mem.place(noBar, nil)
		return mem, nil
	case mem == nil:
		topo.place(noBar, nil)
		return topo, nil
	}
	// The topological order wins with a smaller arena, or an equal one and
	// a smaller lower bound; its placement stops once it cannot. Both have
	// the same steps, so they share one occupancy tree.
	occ := newOccupancy(max(len(mem.Steps), 1))
	mem.place(noBar, occ)
	if topo.place(bar{mem.ArenaBytes, mem.LowerBound}, occ) {
		return topo, nil
	}
	return mem, nil
}

// keptValues marks the values the scheduler must not count on freeing:
// inputs, params, state, outputs and, outside a training step, gradients.
// (A training step consumes its gradients; its update values die at their
// copies, which run as early as they can.)
func keptValues(g *ir.Graph) []bool {
	keep := make([]bool, len(g.Values))
	for i, v := range g.Values {
		keep[i] = v.Op.IsLeaf()
	}
	for _, o := range g.Outputs {
		keep[o] = true
	}
	if !g.UpdatesParams() {
		for _, gp := range g.Grads {
			keep[gp.Grad] = true
		}
	}
	return keep
}

func leaves(g *ir.Graph) int {
	n := 0
	for _, v := range g.Values {
		if v.Op.IsLeaf() {
			n++
		}
	}
	return n
}

// build makes the plan that runs the computed values of g in order, but
// leaves its buffers to place.
func build(g *ir.Graph, order []ir.ID, opts Options) *Plan {
	p := &Plan{Graph: g, Buffers: make([]Buffer, len(g.Values)), ChunkBytes: opts.ChunkBytes}
	for i, v := range g.Values {
		b := Buffer{Value: ir.ID(i), Name: v.Name, Type: v.Type, Size: int64(v.Type.Bytes()), Start: -1, End: -1, Alias: -1, Role: roleOf(v.Op)}
		switch b.Role {
		case Input:
			p.Inputs = append(p.Inputs, i)
		case Param:
			p.Params = append(p.Params, i)
		case State:
			p.States = append(p.States, i)
		}
		p.Buffers[i] = b
	}
	for _, id := range order {
		v := &g.Values[id]
		if v.Op.IsLeaf() {
			continue
		}
		args := make([]int, len(v.Args))
		for j, a := range v.Args {
			args[j] = int(a)
		}
		p.Steps = append(p.Steps, Step{Kind: Kernel, Op: v.Op, Attrs: v.Attrs, Args: args, Out: int(id)})
	}
	var direct map[int]int
	if !opts.NoInPlace {
		direct = directUpdates(p.Steps, g)
	}
	p.Steps = withCopies(p.Steps, g, direct)
	for _, o := range g.Outputs {
		p.Outputs = append(p.Outputs, Named{g.Values[o].Name, int(o)})
	}
	// A training step consumes its gradients in the update: they are not
	// part of its signature, so they die at their last use instead of
	// living to the end (as much memory as the params).
	if !g.UpdatesParams() {
		for _, gp := range g.Grads {
			p.Grads = append(p.Grads, Named{"grad/" + g.Values[gp.Param].Name, int(gp.Grad)})
		}
	}
	p.liveness()
	if !opts.NoInPlace {
		// The new value stays in its target's memory to the end: nothing
		// else may take that memory in place.
		for v, t := range direct {
			p.Buffers[v].Alias = t
			p.Buffers[v].End = max(len(p.Steps)-1, 0)
		}
		p.inPlace()
	}
	return p
}

// directUpdates returns the updates whose new value can be computed
// straight into the memory of their target, value → target: the value is
// computed by a kernel step that may write over the target (writesOver)
// and reads it (of the same type) for the last time, the value updates only
// that target, and it is not an output. Such an update needs no copy: once
// the step has run, no step needs the old value, and the target holds the
// new one.
func directUpdates(kernels []Step, g *ir.Graph) map[int]int {
	def := make([]int, len(g.Values))
	lastRead := make([]int, len(g.Values))
	for i := range def {
		def[i], lastRead[i] = -1, -1
	}
	for s, st := range kernels {
		def[st.Out] = s
		for _, a := range st.Args {
			lastRead[a] = s
		}
	}
	targets := make([]int, len(g.Values)) // updates each value is the new value of
	for _, u := range g.Updates {
		targets[u.Value]++
	}
	for _, o := range g.Outputs {
		targets[o] += 2 // never direct
	}
	direct := map[int]int{}
	for _, u := range g.Updates {
		v, t := int(u.Value), int(u.Target)
		if v == t || targets[v] != 1 || def[v] < 0 || lastRead[t] != def[v] {
			continue
		}
		st := &kernels[def[v]]
		if writesOver(st, t) && g.Values[v].Type.Equal(g.Values[t].Type) {
			direct[v] = t
		}
	}
	return direct
}

// withCopies inserts one Copy step per update into the kernel steps, each
// as early as it can run: after the step that computes the new value and
// after the last step that reads the old one. The new value then dies at
// its copy instead of living to the end of the step, and so, when nothing
// else reads them, do the gradients and moments it was computed from.
// Updates ready at the same point keep the graph's order. The updates in
// direct (value → target), computed in their target's memory, need none.
func withCopies(kernels []Step, g *ir.Graph, direct map[int]int) []Step {
	def := make([]int, len(g.Values))      // step computing a value, -1 for leaves
	lastRead := make([]int, len(g.Values)) // last kernel step reading a value
	for i := range def {
		def[i], lastRead[i] = -1, -1
	}
	for s, st := range kernels {
		def[st.Out] = s
		for _, a := range st.Args {
			lastRead[a] = s
		}
	}
	after := make([][]Step, len(kernels)+1) // copies to emit after step s-1
	for _, u := range g.Updates {
		if t, ok := direct[int(u.Value)]; u.Value == u.Target || ok && t == int(u.Target) {
			continue
		}
		at := max(def[u.Value], lastRead[u.Target]) + 1
		after[at] = append(after[at], Step{Kind: Copy, Args: []int{int(u.Value)}, Out: int(u.Target)})
	}
	steps := make([]Step, 0, len(kernels)+len(g.Updates))
	steps = append(steps, after[0]...)
	for s, st := range kernels {
		steps = append(steps, st)
		steps = append(steps, after[s+1]...)
	}
	return steps
}

// liveness sets each buffer's live range in step indices. Inputs, params
// and state are live for the whole step, so an input set once stays valid
// for every later step and can be read back; outputs and gradients live
// until the end, so they can be read after the step.
func (p *Plan) liveness() {
	last := len(p.Steps) - 1
	if last < 0 {
		last = 0
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Role != Temp {
			b.Start, b.End = 0, last
		}
	}
	for s, st := range p.Steps {
		out := &p.Buffers[st.Out]
		if out.Start < 0 {
			out.Start = s
		}
		out.End = max(out.End, s)
		for _, a := range st.Args {
			p.Buffers[a].End = max(p.Buffers[a].End, s)
		}
	}
	for _, n := range append(append([]Named(nil), p.Outputs...), p.Grads...) {
		p.Buffers[n.Buffer].End = last
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Start < 0 {
			b.Start = 0
		}
		if b.End < b.Start {
			b.End = b.Start
		}
	}
}

// keptBuffers marks the outputs and gradients, which are read after the
// step and so live until its end.
func (p *Plan) keptBuffers() []bool {
	kept := make([]bool, len(p.Buffers))
	for _, n := range p.Outputs {
		if n.Buffer >= 0 && n.Buffer < len(kept) {
			kept[n.Buffer] = true
		}
	}
	for _, n := range p.Grads {
		if n.Buffer >= 0 && n.Buffer < len(kept) {
			kept[n.Buffer] = true
		}
	}
	return kept
}

// inPlace lets the result of a kernel step take the memory of an argument
// that dies there (mayTake): a temporary, not an output or gradient, whose
// last reader is this step and whose memory no other result has taken. The
// first such argument wins. Results that already take memory (the updates
// computed into their target) keep it.
func (p *Plan) inPlace() {
	kept := p.keptBuffers()
	taken := make([]bool, len(p.Buffers))
	for s, st := range p.Steps {
		if st.Kind != Kernel {
			continue
		}
		out := &p.Buffers[st.Out]
		if out.Size == 0 || out.Alias >= 0 {
			continue
		}
		for _, a := range st.Args {
			b := &p.Buffers[a]
			if b.Role == Temp && !kept[a] && !taken[a] && b.End == s && mayTake(&st, a, out.Type, b.Type) {
				out.Alias = a
				taken[a] = true
				break
			}
		}
	}
}

// mayTake reports whether the result of kernel step st, of type out, may
// take the memory of its argument a, of type arg, that dies there: an
// argument of the result's type that the step reads only where it may
// write over it (writesOver), or reshape's argument, whose bytes the
// result is, so that its kernel has nothing to copy.
func mayTake(st *Step, a int, out, arg ir.Type) bool {
	if st.Op == ir.OpReshape {
		return out.DType == arg.DType && out.Bytes() == arg.Bytes()
	}
	return out.Equal(arg) && writesOver(st, a)
}

// writesOver reports whether kernel step st reads buffer a, and only as
// arguments whose memory its result may take (ir.Op.InPlaceArg): those its
// kernel reads element by element before it writes each element over
// them.
func writesOver(st *Step, a int) bool {
	found := false
	for j, x := range st.Args {
		if x == a {
			if !st.Op.InPlaceArg(j) {
				return false
			}
			found = true
		}
	}
	return found
}

// checkIndices checks that every buffer index the plan holds (of its
// outputs, gradients and steps) names one of its buffers, so that the rest
// of Check may index with them.
func (p *Plan) checkIndices() error {
	n := len(p.Buffers)
	for _, nm := range append(append([]Named(nil), p.Outputs...), p.Grads...) {
		if nm.Buffer < 0 || nm.Buffer >= n {
			return fmt.Errorf("%s names buffer %d of %d", nm.Name, nm.Buffer, n)
		}
	}
	for s, st := range p.Steps {
		if st.Out < 0 || st.Out >= n {
			return fmt.Errorf("step %d writes buffer %d of %d", s, st.Out, n)
		}
		for _, a := range st.Args {
			if a < 0 || a >= n {
				return fmt.Errorf("step %d reads buffer %d of %d", s, a, n)
			}
		}
	}
	return nil
}

// Check proves the plan sound. With a graph, the plan does what the graph
// says: a buffer per value of its name, type, role and
// size; the graph's outputs and, outside a training step, gradients; one
// step per computed value running its op on its arguments; each update
// applied once, and nothing else writing a param or state. Then: offsets
// aligned and inside the arena, which is no larger than the buffers need; live
// ranges inside the steps, with inputs, params and state live at every step
// and outputs and gradients until the last; no step reading a buffer before
// it is written or outside its live range; every in-place buffer
// (Buffer.Alias) sharing the offset and type of the buffer it names (its
// dtype and size, for a reshape), written by an op that may write over
// that argument (ir.Op.InPlaceArg) or a reshape that reads that buffer for
// the last time at that very step (or, for an update's value in
// its param or state, reads the target with no later step reading or
// writing it); no two buffers that are live
// at the same step overlapping in memory, except a buffer and the one it
// takes in place; with ChunkBytes, a multiple of Align that no buffer
// straddles a multiple of; and LowerBound the most bytes live at any step.
func (p *Plan) Check() error {
	if err := p.checkIndices(); err != nil {
		return err
	}
	if p.Graph != nil {
		if err := p.checkGraph(); err != nil {
			return err
		}
	}
	n := len(p.Buffers)
	last := max(len(p.Steps)-1, 0)
	if p.ChunkBytes < 0 || p.ChunkBytes%Align != 0 {
		return fmt.Errorf("chunk size %d bytes is not a multiple of %d", p.ChunkBytes, Align)
	}
	if p.ArenaBytes < 0 {
		return fmt.Errorf("arena of %d bytes", p.ArenaBytes)
	}
	var top int64 // the end of the highest buffer
	kept := p.keptBuffers()
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Offset%Align != 0 {
			return fmt.Errorf("buffer %%%s: offset %d is not a multiple of %d", b.Name, b.Offset, Align)
		}
		if b.Offset < 0 || b.Size < 0 || b.Offset > p.ArenaBytes-b.Size {
			return fmt.Errorf("buffer %%%s: %d bytes at offset %d lie outside the arena of %d bytes", b.Name, b.Size, b.Offset, p.ArenaBytes)
		}
		top = max(top, b.Offset+b.Size)
		if c := p.ChunkBytes; c > 0 && b.Size > 0 && b.Offset/c != (b.Offset+b.Size-1)/c {
			return fmt.Errorf("buffer %%%s: [%d,%d) straddles the %d-byte chunk boundary at %d", b.Name, b.Offset, b.Offset+b.Size, c, (b.Offset/c+1)*c)
		}
		if b.Start < 0 || b.End < b.Start || b.End > last {
			return fmt.Errorf("buffer %%%s: live range %d..%d is not inside the steps 0..%d", b.Name, b.Start, b.End, last)
		}
		if b.Role != Temp && (b.Start != 0 || b.End != last) {
			return fmt.Errorf("%s %%%s: live %d..%d, but inputs, params and state live at every step (0..%d)", b.Role, b.Name, b.Start, b.End, last)
		}
		if kept[i] && b.End != last {
			return fmt.Errorf("buffer %%%s: an output or gradient, but live only until step %d of 0..%d", b.Name, b.End, last)
		}
	}
	written := make([]bool, n)
	for i := range p.Buffers {
		written[i] = p.Buffers[i].Role != Temp
	}
	for s, st := range p.Steps {
		for _, a := range st.Args {
			b := &p.Buffers[a]
			if !written[a] {
				return fmt.Errorf("step %d reads %%%s before any step writes it", s, b.Name)
			}
			if s < b.Start || s > b.End {
				return fmt.Errorf("step %d reads %%%s outside its live range %d..%d", s, b.Name, b.Start, b.End)
			}
		}
		o := &p.Buffers[st.Out]
		if s < o.Start || s > o.End {
			return fmt.Errorf("step %d writes %%%s outside its live range %d..%d", s, o.Name, o.Start, o.End)
		}
		if st.Kind == Copy && (len(st.Args) != 1 || !p.Buffers[st.Args[0]].Type.Equal(o.Type)) {
			return fmt.Errorf("step %d: a copy into %%%s: %s must read one buffer of that type", s, o.Name, o.Type)
		}
		written[st.Out] = true
	}
	lastUse := p.lastUses()
	takenBy := make([]int, n)
	updates := make([]int, n) // updates[v]: the target value v updates, or -1
	for i := range takenBy {
		takenBy[i], updates[i] = -1, -1
	}
	if p.Graph != nil {
		for _, u := range p.Graph.Updates {
			if int(u.Value) < n && int(u.Target) < n {
				updates[u.Value] = int(u.Target)
			}
		}
	}
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Alias == -1 {
			continue
		}
		if b.Alias < 0 || b.Alias >= n || b.Alias == i {
			return fmt.Errorf("buffer %%%s: alias %d is not another buffer's index (or -1)", b.Name, b.Alias)
		}
		c := &p.Buffers[b.Alias]
		if j := takenBy[b.Alias]; j >= 0 {
			return fmt.Errorf("buffer %%%s is taken in place by both %%%s and %%%s", c.Name, p.Buffers[j].Name, b.Name)
		}
		takenBy[b.Alias] = i
		update := updates[i] == b.Alias && (c.Role == Param || c.Role == State)
		if b.Role != Temp || kept[i] && update || !update && (c.Role != Temp || kept[b.Alias]) {
			return fmt.Errorf("buffer %%%s (%s) takes %%%s (%s) in place, but only a computed buffer can take the memory of another that is neither an output nor a gradient, or the new value of the param or state it updates", b.Name, b.Role, c.Name, c.Role)
		}
		if b.Offset != c.Offset {
			return fmt.Errorf("buffer %%%s takes %%%s in place but lies at offset %d, not %d", b.Name, c.Name, b.Offset, c.Offset)
		}
		if b.Start >= len(p.Steps) {
			return fmt.Errorf("buffer %%%s takes %%%s in place, but no step computes it", b.Name, c.Name)
		}
		st := &p.Steps[b.Start]
		if st.Kind != Kernel || st.Out != i {
			return fmt.Errorf("buffer %%%s takes %%%s in place, but step %d, where it becomes live, does not compute it", b.Name, c.Name, b.Start)
		}
		reshape := st.Op == ir.OpReshape && !update
		if !b.Type.Equal(c.Type) && !(reshape && mayTake(st, b.Alias, b.Type, c.Type)) || b.Size != c.Size {
			return fmt.Errorf("buffer %%%s: %s cannot take the memory of %%%s: %s in place; the types differ", b.Name, b.Type, c.Name, c.Type)
		}
		if !st.Op.InPlace() && st.Op.Info().InPlaceFrom == 0 && !reshape {
			return fmt.Errorf("buffer %%%s takes %%%s in place, but %s cannot write its result over an argument", b.Name, c.Name, st.Op)
		}
		if !slices.Contains(st.Args, b.Alias) {
			return fmt.Errorf("buffer %%%s takes %%%s in place, but step %d does not read it", b.Name, c.Name, b.Start)
		}
		if !reshape && !writesOver(st, b.Alias) {
			return fmt.Errorf("buffer %%%s takes %%%s in place, but %s reads %%%s as an argument it cannot write its result over", b.Name, c.Name, st.Op, c.Name)
		}
		if update {
			// The target lives on, now holding the new value: no step
			// after this one may read the old value or copy into it.
			for s := b.Start + 1; s <= lastUse[b.Alias]; s++ {
				if st := &p.Steps[s]; slices.Contains(st.Args, b.Alias) || st.Out == b.Alias {
					return fmt.Errorf("buffer %%%s is computed into %%%s, which it updates, at step %d, but step %d still reads or writes %%%s", b.Name, c.Name, b.Start, s, c.Name)
				}
			}
		} else if c.End != b.Start {
			return fmt.Errorf("buffer %%%s takes %%%s in place at step %d, but %%%s is live until step %d", b.Name, c.Name, b.Start, c.Name, c.End)
		}
	}
	if err := p.overlap(); err != nil {
		return err
	}
	bs, _ := p.blocks()
	if lb := lowerBound(bs, len(p.Steps)); lb != p.LowerBound {
		return fmt.Errorf("lower bound %d bytes, but the live ranges give %d", p.LowerBound, lb)
	}
	if p.ArenaBytes-top >= Align {
		return fmt.Errorf("arena of %d bytes, but its buffers end at %d; the arena is as large as they need", p.ArenaBytes, top)
	}
	return nil
}

// Format prints the plan for people: a summary line, the arena, lower bound
// and ratio, the buffers with their offsets and live ranges (and the buffer
// each takes in place; "frozen" after a frozen param), the steps and the signature.
func (p *Plan) Format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "plan %s: %d steps, %d buffers\n", p.Graph.Name, len(p.Steps), len(p.Buffers))
	fmt.Fprintf(&b, "arena %d bytes, lower bound %d bytes, ratio %.3f\n", p.ArenaBytes, p.LowerBound, p.Ratio())
	if p.ChunkBytes > 0 {
		fmt.Fprintf(&b, "arena in %d chunks of at most %d bytes\n", p.Chunks(), p.ChunkBytes)
	}
	b.WriteString("\nbuffers:\n")
	for i, buf := range p.Buffers {
		fmt.Fprintf(&b, "  %-24s %-18s %-6s offset %10d size %10d live %d..%d",
			"%"+buf.Name, buf.Type, buf.Role, buf.Offset, buf.Size, buf.Start, buf.End)
		if p.ChunkBytes > 0 {
			fmt.Fprintf(&b, " chunk %d", p.Chunk(i))
		}
		if buf.Alias >= 0 {
			fmt.Fprintf(&b, " in place of %%%s", p.Buffers[buf.Alias].Name)
		}
		if buf.Role == Param && p.Graph.Frozen(buf.Value) {
			b.WriteString(" frozen")
		}
		b.WriteString("\n")
	}
	b.WriteString("\nsteps:\n")
	for s, st := range p.Steps {
		g := p.Graph
		switch st.Kind {
		case Copy:
			fmt.Fprintf(&b, "  %4d  copy %s <- %s\n", s, g.NameOf(ir.ID(st.Out)), g.NameOf(ir.ID(st.Args[0])))
		default:
			fmt.Fprintf(&b, "  %4d  %s\n", s, g.FormatValue(ir.ID(st.Out)))
		}
	}
	b.WriteString("\nsignature:\n")
	list := func(kind string, ids []int) {
		for _, i := range ids {
			fmt.Fprintf(&b, "  %-7s %%%s: %s\n", kind, p.Buffers[i].Name, p.Buffers[i].Type)
		}
	}
	list("input", p.Inputs)
	list("param", p.Params)
	list("state", p.States)
	for _, o := range p.Outputs {
		fmt.Fprintf(&b, "  output  %s: %s\n", o.Name, p.Buffers[o.Buffer].Type)
	}
	for _, o := range p.Grads {
		fmt.Fprintf(&b, "  grad    %s: %s\n", o.Name, p.Buffers[o.Buffer].Type)
	}
	return b.String()
}
