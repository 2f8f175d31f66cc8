package runtime

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// Plan is a trainable plan file: its training step, its evaluation graph,
// the initial params it holds and its metadata.
type Plan struct {
	Path        string        // the file it was read from
	Train, Eval *planner.Plan // the plans planner.TrainPlan and planner.EvalPlan
	Params      []planner.Tensor
	Meta        map[string]string // what kiln compile recorded: optimizer, lr, seed...
	// Seed is the seed kiln compile recorded (metadata "seed"), which
	// selects the params the file does not hold; HasSeed says whether it
	// recorded one.
	Seed    uint64
	HasSeed bool
}

// Load reads the plan file at path (planner.Load checks its format, its
// hash and each plan) and returns it if it holds a training step and its
// evaluation graph.
func Load(path string) (*Plan, error) {
	f, err := planner.Load(path)
	if err != nil {
		return nil, err
	}
	return FromFile(path, f)
}

// FromFile returns the trainable plan of a decoded plan file f; name (its
// path) prefixes errors.
func FromFile(name string, f *planner.File) (*Plan, error) {
	p := &Plan{Path: name, Train: f.Plans[planner.TrainPlan], Eval: f.Plans[planner.EvalPlan], Params: f.Params, Meta: f.Meta}
	if p.Train == nil || p.Eval == nil {
		return nil, fmt.Errorf("%s: a trainable plan file holds the plans %q and %q; this one has %d plans", name, planner.TrainPlan, planner.EvalPlan, len(f.Plans))
	}
	if s, ok := f.Meta["seed"]; ok {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: bad seed %q in the metadata", name, ir.Excerpt(s))
		}
		p.Seed, p.HasSeed = v, true
	}
	return p, nil
}

// NewTrainer builds a trainer from p on the device x names, with the
// params p does not hold drawn from x.Seed, and sets the params p holds.
// Errors start with p's path and wrap the executor's (errors.As finds
// exec/gpu's NotChunkedError).
func NewTrainer(p *Plan, x ExecOptions) (*Trainer, error) {
	t, err := NewTrainerFromPlans(p.Train, p.Eval, x)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	for _, v := range p.Params {
		if err := t.Set(v.Name, kernels.Tensor{Type: v.Type, Data: v.Data}); err != nil {
			t.Close()
			return nil, fmt.Errorf("%s: %w", p.Path, err)
		}
	}
	return t, nil
}

// Set sets the input, param or state name of the training step.
// Evaluate copies the params into the evaluation graph.
func (t *Trainer) Set(name string, v kernels.Tensor) error { return t.train.Set(name, v) }

// Get returns a copy of the input, param, state, output or grad/PARAM name
// of the training step, as of the last step run.
func (t *Trainer) Get(name string) (kernels.Tensor, error) {
	v, err := t.train.Get(name)
	if err != nil {
		return v, err
	}
	return kernels.Tensor{Type: v.Type, Data: slices.Clone(v.Data)}, nil
}

// Params returns copies of the current params, in the plan's order.
func (t *Trainer) Params() ([]safetensors.Tensor, error) { return t.Tensors(t.Plan.Params) }

// Tensors returns copies of the current values of the training step's
// buffers bufs (indices into t.Plan.Buffers: params, state).
func (t *Trainer) Tensors(bufs []int) ([]safetensors.Tensor, error) {
	var out []safetensors.Tensor
	for _, i := range bufs {
		v, err := t.Get(t.Plan.Buffers[i].Name)
		if err != nil {
			return nil, err
		}
		out = append(out, safetensors.Tensor{Name: t.Plan.Buffers[i].Name, Type: v.Type, Data: v.Data})
	}
	return out, nil
}

// SaveParams writes the current params to a safetensors file at path,
// with the graph's name in its metadata.
func (t *Trainer) SaveParams(path string) error {
	ps, err := t.Params()
	if err != nil {
		return err
	}
	return safetensors.WriteFile(path, ps, map[string]string{"graph": t.Plan.Graph.Name})
}

// LoadParams sets params from the safetensors file at path; each of its
// tensors must name a param or state value of the model (an imported
// model's BatchNorm running statistics) with its exact type. Those the file
// does not hold keep their values.
func (t *Trainer) LoadParams(path string) error {
	tensors, _, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	params := map[string]ir.Type{}
	for _, i := range slices.Concat(t.Plan.Params, t.Plan.States) {
		params[t.Plan.Buffers[i].Name] = t.Plan.Buffers[i].Type
	}
	for _, ts := range tensors {
		want, ok := params[ts.Name]
		if !ok {
			return fmt.Errorf("%s: tensor %q is not a param or state of the model", path, ir.Excerpt(ts.Name))
		}
		if !want.Equal(ts.Type) {
			return fmt.Errorf("%s: tensor %q: expected %s, found %s", path, ts.Name, want, ts.Type)
		}
		if err := t.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	return nil
}
