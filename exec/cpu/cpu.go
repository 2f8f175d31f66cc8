// Package cpu runs a plan on the CPU. It makes no decisions: it allocates
// the plan's arena, builds the kernel of each step once, applies the initial
// values the plan's params and state call for, and runs the steps in order.
package cpu

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"unsafe"

	"github.com/kilnml/kiln/exec"
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
}

// Executor runs one plan. It is not safe for concurrent use.
type Executor struct {
	plan   *planner.Plan
	opts   Options
	arena  []byte
	views  []kernels.Tensor   // per buffer
	funcs  []kernels.Func     // per step; nil for copies
	args   [][]kernels.Tensor // per step
	byName map[string]int     // every name a user may set or get -> buffer
	step   int64              // completed steps since the last Reset; kernels read it (dropout)
}

// New prepares p for running: it checks the plan, allocates its arena and
// builds every step's kernel.
func New(p *planner.Plan, opts Options) (*Executor, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("invalid plan: %w", err)
	}
	x := &Executor{plan: p, opts: opts, byName: map[string]int{}}
	x.arena = alignedBytes(p.ArenaBytes)
	x.views = make([]kernels.Tensor, len(p.Buffers))
	for i, b := range p.Buffers {
		x.views[i] = kernels.Tensor{Type: b.Type, Data: x.arena[b.Offset : b.Offset+b.Size : b.Offset+b.Size]}
	}
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
		if st.Kind == planner.Copy {
			continue
		}
		f, err := kcpu.Kernels.Build(&kernels.Node{Op: st.Op, Attrs: st.Attrs, Args: types, Out: p.Buffers[st.Out].Type, Step: &x.step})
		if err != nil {
			return nil, fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
		}
		x.funcs[s] = f
	}
	for _, i := range p.Inputs {
		x.byName[p.Buffers[i].Name] = i
	}
	for _, i := range append(append([]int(nil), p.Params...), p.States...) {
		x.byName[p.Buffers[i].Name] = i
	}
	for _, n := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
		x.byName[n.Name] = n.Buffer
	}
	if err := x.Reset(opts.Seed); err != nil {
		return nil, err
	}
	return x, nil
}

// alignedBytes returns n zero bytes starting at a multiple of planner.Align.
func alignedBytes(n int64) []byte {
	raw := make([]byte, n+planner.Align)
	shift := (planner.Align - int(uintptr(unsafe.Pointer(unsafe.SliceData(raw))))%planner.Align) % planner.Align
	return raw[shift : int64(shift)+n : int64(shift)+n]
}

func (x *Executor) describe(s int) string {
	st := x.plan.Steps[s]
	if st.Kind == planner.Copy {
		return fmt.Sprintf("copy %%%s <- %%%s", x.plan.Buffers[st.Out].Name, x.plan.Buffers[st.Args[0]].Name)
	}
	return x.plan.Graph.FormatValue(ir.ID(st.Out))
}

// Plan returns the plan the executor runs.
func (x *Executor) Plan() *planner.Plan { return x.plan }

// Reset sets every param and state to its initial value for seed and the
// step count, which step-dependent kernels such as dropout read, to 0.
func (x *Executor) Reset(seed uint64) error {
	x.step = 0
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

// Names returns every name Set or Get accepts: inputs, params, state,
// outputs and grad/PARAM, sorted.
func (x *Executor) Names() []string {
	names := make([]string, 0, len(x.byName))
	for n := range x.byName {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (x *Executor) lookup(name string) (int, error) {
	i, ok := x.byName[name]
	if !ok {
		return 0, fmt.Errorf("plan %s has no tensor %q (it has: %s)", x.plan.Graph.Name, name, strings.Join(x.Names(), ", "))
	}
	return i, nil
}

// Set copies t into the input, param or state called name. The type must
// match the plan's exactly.
func (x *Executor) Set(name string, t kernels.Tensor) error {
	i, err := x.lookup(name)
	if err != nil {
		return err
	}
	b := &x.plan.Buffers[i]
	if b.Role == planner.Temp {
		return fmt.Errorf("tensor %q is an output of plan %s; it cannot be set", name, x.plan.Graph.Name)
	}
	if !t.Type.Equal(b.Type) {
		return fmt.Errorf("tensor %q: expected %s, found %s", name, b.Type, t.Type)
	}
	copy(x.views[i].Data, t.Data)
	return nil
}

// Get returns a view of the tensor called name: an input, param, state,
// output or grad/PARAM. The view is overwritten by the next Step; copy what
// must outlive it.
func (x *Executor) Get(name string) (kernels.Tensor, error) {
	i, err := x.lookup(name)
	if err != nil {
		return kernels.Tensor{}, err
	}
	return x.views[i], nil
}

// Step runs the plan once. It checks ctx between steps and stops there when
// it is cancelled. A kernel error stops the step and is returned with the
// step's op and value. A step that completes advances the step count (see
// kernels.Node.Step), so dropout draws a new mask for the next one.
func (x *Executor) Step(ctx context.Context) error {
	for s, st := range x.plan.Steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		out := x.views[st.Out]
		if st.Kind == planner.Copy {
			copy(out.Data, x.args[s][0].Data)
			continue
		}
		if err := x.funcs[s](out, x.args[s]); err != nil {
			return fmt.Errorf("step %d (%s): %v", s, x.describe(s), err)
		}
		if x.opts.CheckNaN {
			if at, ok := firstNonFinite(out); ok {
				return fmt.Errorf("step %d (%s) produced a non-finite value at element %d", s, x.describe(s), at)
			}
		}
	}
	x.step++
	return nil
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
