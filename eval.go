package kiln

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// CheckFeed checks that t can be fed to g: its name is an input, a param or
// a state value of g (an imported model's BatchNorm running statistics) and
// its type is that value's type. The error is one line naming the tensor,
// what was expected and what was found.
func CheckFeed(g *ir.Graph, t safetensors.Tensor) error {
	id, ok := g.Lookup(t.Name)
	if ok {
		op := g.Value(id).Op
		ok = op == ir.OpInput || op == ir.OpParam || op == ir.OpState
	}
	if !ok {
		var names []string
		for _, id := range append(g.Inputs(), g.Params()...) {
			names = append(names, g.Value(id).Name)
		}
		return fmt.Errorf("tensor %q is not an input or param of graph %s (expected: %s)", ir.Excerpt(t.Name), g.Name, ir.Excerpt(strings.Join(names, ", ")))
	}
	if want := g.Type(id); !want.Equal(t.Type) {
		return fmt.Errorf("tensor %q: expected %s, found %s", ir.Excerpt(t.Name), want, t.Type)
	}
	return nil
}

// CheckFeeds checks feeds with CheckFeed and that they give every input
// and param of g (state values start from their init unless fed); the
// error for missing ones names them all.
func CheckFeeds(g *ir.Graph, feeds []safetensors.Tensor) error {
	given := map[string]bool{}
	for _, t := range feeds {
		if err := CheckFeed(g, t); err != nil {
			return err
		}
		given[t.Name] = true
	}
	var missing []string
	for _, id := range append(g.Inputs(), g.Params()...) {
		if !given[g.Value(id).Name] {
			missing = append(missing, fmt.Sprintf("%s (%s)", g.Value(id).Name, g.Type(id)))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("missing tensor(s) for graph %s: %s", g.Name, ir.Excerpt(strings.Join(missing, ", ")))
	}
	return nil
}

// Eval runs the forward graph of g once: compiled without gradient or
// optimizer update and for inference (every dropout is its input), on the
// device opts names, with feeds giving every input and param of g by name
// (a name given twice takes its last value, so a model's initial params
// can come first and values that override them after). It returns every
// output of g, in order, under the output's name. Of opts, Device,
// Workers, O0, Debug and Plan are used; Grad and Optimizer must be unset.
//
// A feed that is not an input or param of g, one of another type and a
// missing one are errors naming the tensor.
func Eval(ctx context.Context, g *ir.Graph, feeds []safetensors.Tensor, opts Options) ([]safetensors.Tensor, error) {
	if opts.Grad || opts.Optimizer != nil {
		return nil, errors.New("Eval runs the forward graph alone: Options.Grad and Options.Optimizer must be unset")
	}
	if err := CheckFeeds(g, feeds); err != nil {
		return nil, err
	}
	given := map[string]int{}
	for k, t := range feeds {
		given[t.Name] = k
	}
	opts.Inference = true
	p, err := Compile(g, opts)
	if err != nil {
		return nil, err
	}
	x, err := NewExecutor(p, ExecOptions{Device: opts.Device, CheckNaN: opts.Debug.NaN, Workers: opts.Workers})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	defer x.Close()
	// A param or input no output depends on may be gone from the plan.
	names := x.Names()
	for k, t := range feeds {
		if given[t.Name] != k {
			continue
		}
		if _, ok := slices.BinarySearch(names, t.Name); !ok {
			continue
		}
		if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", ir.Excerpt(t.Name), err)
		}
	}
	if err := x.Step(ctx); err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	if len(p.Outputs) != len(g.Outputs) {
		return nil, fmt.Errorf("%s: the compiled graph has %d outputs, the graph %d", where(g), len(p.Outputs), len(g.Outputs))
	}
	out := make([]safetensors.Tensor, len(g.Outputs))
	for k, o := range p.Outputs {
		t, err := x.Get(o.Name)
		if err != nil {
			return nil, err
		}
		out[k] = safetensors.Tensor{Name: g.Value(g.Outputs[k]).Name, Type: t.Type, Data: slices.Clone(t.Data)}
	}
	return out, nil
}
