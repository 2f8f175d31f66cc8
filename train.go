package kiln

import (
	"fmt"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
	"github.com/kilnml/kiln/runtime"
)

// Trainer trains a graph on a dataset, or by running its training step for
// a graph with no inputs; it is runtime.Trainer, which documents the
// convention a trained graph follows. NewTrainer compiles one from a graph;
// NewTrainerFromPlans (or the runtime package alone) builds one from plans.
type Trainer = runtime.Trainer

// TargetKind says what a trained graph's targets are (runtime.TargetKind).
type TargetKind = runtime.TargetKind

// The target kinds (see runtime.TargetKind).
const (
	NoData      = runtime.NoData
	Labels      = runtime.Labels
	TokenLabels = runtime.TokenLabels
	Regression  = runtime.Regression
)

// Signature is the convention a trained graph follows (runtime.Signature).
type Signature = runtime.Signature

// Tally sums the loss and metric of a pass (runtime.Tally).
type Tally = runtime.Tally

// NewTrainer compiles g twice, as a training step with opt's update and as a
// forward-only graph for evaluation (with the inference pass, so without
// dropout), and initializes the params from seed.
//
// opts carries what the two compiles share (O0, Debug, Plan); NewTrainer
// sets Optimizer and Inference itself.
func NewTrainer(g *ir.Graph, opt passes.OptimizerConfig, seed uint64, opts Options) (*Trainer, error) {
	if _, err := runtime.InputSignature(g); err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	if opts.Plan.ChunkBytes == 0 {
		c, err := runtime.ChunkBytes(opts.Device)
		if err != nil {
			return nil, fmt.Errorf("%s: planning for the %s: %w", where(g), opts.Device, err)
		}
		opts.Plan.ChunkBytes = c
	}
	if opts.Comm != nil && opts.Ranks == 0 {
		opts.Ranks = opts.Comm.Size()
	}
	train, eval := opts, opts
	train.Optimizer, train.Grad, train.Inference = &opt, true, false
	eval.Optimizer, eval.Grad, eval.Inference, eval.Ranks = nil, false, true, 0
	tp, err := Compile(g, train)
	if err != nil {
		return nil, err
	}
	ep, err := Compile(g, eval)
	if err != nil {
		return nil, err
	}
	return NewTrainerFromPlans(tp, ep, ExecOptions{Device: opts.Device, Seed: seed, CheckNaN: opts.Debug.NaN, Workers: opts.Workers, Comm: opts.Comm})
}

// NewTrainerFromPlans builds a trainer from compiled plans without the
// compiler: runtime.NewTrainerFromPlans.
func NewTrainerFromPlans(train, eval *planner.Plan, x ExecOptions) (*Trainer, error) {
	return runtime.NewTrainerFromPlans(train, eval, x)
}
