package exec

import (
	"fmt"
	"sort"
	"strings"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// Names indexes the tensors a user may set or get on an executor of a
// plan by name: inputs, params, state, outputs and grad/PARAM, each to its
// buffer.
type Names struct {
	plan   *planner.Plan
	buffer map[string]int
}

// NewNames returns the names of p's tensors.
func NewNames(p *planner.Plan) *Names {
	n := &Names{plan: p, buffer: map[string]int{}}
	for _, i := range p.Inputs {
		n.buffer[p.Buffers[i].Name] = i
	}
	for _, i := range append(append([]int(nil), p.Params...), p.States...) {
		n.buffer[p.Buffers[i].Name] = i
	}
	for _, o := range append(append([]planner.Named(nil), p.Outputs...), p.Grads...) {
		n.buffer[o.Name] = o.Buffer
	}
	return n
}

// List returns every name, sorted.
func (n *Names) List() []string {
	names := make([]string, 0, len(n.buffer))
	for name := range n.buffer {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Lookup returns the buffer of the tensor called name, or an error naming
// the plan and the names it has.
func (n *Names) Lookup(name string) (int, error) {
	i, ok := n.buffer[name]
	if !ok {
		return 0, fmt.Errorf("plan %s has no tensor %q (it has: %s)", n.plan.Graph.Name, name, strings.Join(n.List(), ", "))
	}
	return i, nil
}

// Settable returns the buffer that Set may copy t into: the input, param
// or state called name, whose type t must have exactly. An output, or a
// type that differs, is an error naming the tensor.
func (n *Names) Settable(name string, t ir.Type) (int, error) {
	i, err := n.Lookup(name)
	if err != nil {
		return 0, err
	}
	b := &n.plan.Buffers[i]
	if b.Role == planner.Temp {
		return 0, fmt.Errorf("tensor %q is an output of plan %s; it cannot be set", name, n.plan.Graph.Name)
	}
	if !t.Equal(b.Type) {
		return 0, fmt.Errorf("tensor %q: expected %s, found %s", name, b.Type, t)
	}
	return i, nil
}
