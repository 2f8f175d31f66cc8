// Package planner turns a compiled graph into a Plan: steps in order, one
// buffer per value placed at a byte offset in one arena, and the training
// step's signature (inputs, params, state, outputs, gradients). A Plan is
// plain data: executors run it and make no decisions of their own.
package planner

import (
	"fmt"
	"sort"
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

	Inputs  []int   // buffers fed before each step, in graph order
	Params  []int   // trainable buffers
	States  []int   // optimizer state buffers
	Outputs []Named // the graph's outputs, by value name
	Grads   []Named // each param's gradient, as grad/NAME
}

func alignUp(n int64) int64 { return (n + Align - 1) / Align * Align }

// Options control planning. The zero value is the default plan.
type Options struct{}

// New plans g, which must have passed ir.Check: it schedules the values in a
// topological order (ties by value id), appends one copy step per update,
// computes each buffer's live range and places the buffers in one arena.
func New(g *ir.Graph, _ Options) (*Plan, error) {
	if err := ir.Check(g); err != nil {
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
	order, err := g.TopoOrder()
	if err != nil {
		return nil, fmt.Errorf("scheduling %s: %v", g.Name, err)
	}
	p := &Plan{Graph: g, Buffers: make([]Buffer, len(g.Values))}
	for i, v := range g.Values {
		b := Buffer{Value: ir.ID(i), Name: v.Name, Type: v.Type, Size: int64(v.Type.Bytes()), Start: -1, End: -1}
		switch v.Op {
		case ir.OpInput:
			b.Role = Input
			p.Inputs = append(p.Inputs, i)
		case ir.OpParam:
			b.Role = Param
			p.Params = append(p.Params, i)
		case ir.OpState:
			b.Role = State
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
	for _, u := range g.Updates {
		if u.Value == u.Target {
			continue
		}
		p.Steps = append(p.Steps, Step{Kind: Copy, Args: []int{int(u.Value)}, Out: int(u.Target)})
	}
	for _, o := range g.Outputs {
		p.Outputs = append(p.Outputs, Named{g.Values[o].Name, int(o)})
	}
	for _, gp := range g.Grads {
		p.Grads = append(p.Grads, Named{"grad/" + g.Values[gp.Param].Name, int(gp.Grad)})
	}
	p.liveness()
	p.place()
	return p, nil
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

func (b *Buffer) livesWith(c *Buffer) bool { return b.Start <= c.End && c.Start <= b.End }

// place assigns offsets: buffers by decreasing size (then by id), each at the
// lowest aligned offset that overlaps no placed buffer live at the same time.
func (p *Plan) place() {
	idx := make([]int, len(p.Buffers))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return p.Buffers[idx[i]].Size > p.Buffers[idx[j]].Size })
	var placed []int
	for _, i := range idx {
		b := &p.Buffers[i]
		size := alignUp(b.Size)
		// Collect the intervals already taken by buffers alive with b.
		type span struct{ lo, hi int64 }
		var taken []span
		for _, j := range placed {
			c := &p.Buffers[j]
			if c.Size > 0 && b.livesWith(c) {
				taken = append(taken, span{c.Offset, c.Offset + alignUp(c.Size)})
			}
		}
		sort.Slice(taken, func(x, y int) bool { return taken[x].lo < taken[y].lo })
		off := int64(0)
		for _, t := range taken {
			if off+size <= t.lo {
				break
			}
			off = max(off, t.hi)
		}
		b.Offset = off
		p.ArenaBytes = max(p.ArenaBytes, off+size)
		placed = append(placed, i)
	}
	steps := max(len(p.Steps), 1)
	for s := 0; s < steps; s++ {
		var live int64
		for i := range p.Buffers {
			if b := &p.Buffers[i]; b.Start <= s && s <= b.End {
				live += alignUp(b.Size)
			}
		}
		p.LowerBound = max(p.LowerBound, live)
	}
}

// Check proves the plan sound: offsets aligned and inside the arena, no two
// buffers that are live at the same step overlap in memory, and no step reads
// a buffer before it is written or outside its live range.
func (p *Plan) Check() error {
	for i := range p.Buffers {
		b := &p.Buffers[i]
		if b.Offset%Align != 0 {
			return fmt.Errorf("buffer %%%s: offset %d is not a multiple of %d", b.Name, b.Offset, Align)
		}
		if b.Offset < 0 || b.Offset+b.Size > p.ArenaBytes {
			return fmt.Errorf("buffer %%%s: [%d,%d) lies outside the arena of %d bytes", b.Name, b.Offset, b.Offset+b.Size, p.ArenaBytes)
		}
		for j := i + 1; j < len(p.Buffers); j++ {
			c := &p.Buffers[j]
			if b.Size == 0 || c.Size == 0 || !b.livesWith(c) {
				continue
			}
			if b.Offset < c.Offset+c.Size && c.Offset < b.Offset+b.Size {
				return fmt.Errorf("buffers %%%s [%d,%d) and %%%s [%d,%d) overlap while both are live (steps %d..%d and %d..%d)",
					b.Name, b.Offset, b.Offset+b.Size, c.Name, c.Offset, c.Offset+c.Size, b.Start, b.End, c.Start, c.End)
			}
		}
	}
	written := make([]bool, len(p.Buffers))
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
		written[st.Out] = true
	}
	return nil
}

// Format prints the plan for people: a summary line, the buffers with their
// offsets and live ranges, and the steps.
func (p *Plan) Format() string {
	var b strings.Builder
	ratio := 0.0
	if p.LowerBound > 0 {
		ratio = float64(p.ArenaBytes) / float64(p.LowerBound)
	}
	fmt.Fprintf(&b, "plan %s: %d steps, %d buffers\n", p.Graph.Name, len(p.Steps), len(p.Buffers))
	fmt.Fprintf(&b, "arena %d bytes, lower bound %d bytes, ratio %.3f\n", p.ArenaBytes, p.LowerBound, ratio)
	b.WriteString("\nbuffers:\n")
	for _, buf := range p.Buffers {
		fmt.Fprintf(&b, "  %-24s %-18s %-6s offset %10d size %10d live %d..%d\n",
			"%"+buf.Name, buf.Type, buf.Role, buf.Offset, buf.Size, buf.Start, buf.End)
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
