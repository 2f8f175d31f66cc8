// Package kiln is the Go entry point to the kiln training compiler: it runs
// the pass pipeline over a graph (Transform) and plans the result
// (Compile), evaluates a forward graph (Eval), checks gradients against
// central differences (GradCheck), and trains a compiled model (NewTrainer,
// whose Trainer is package runtime's). The stages are packages of their
// own: ir (the graph), passes, checkpoint, planner, exec/cpu and exec/gpu,
// kernels and frontends; docs/ARCHITECTURE.md shows how they connect.
package kiln

import (
	"fmt"
	"regexp"

	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
	"github.com/kilnml/kiln/runtime"
)

// Options choose what Compile builds.
type Options struct {
	// Grad appends the backward graph: the gradient of the first output
	// (the loss) with respect to every param.
	Grad bool
	// Optimizer appends the parameter update, making the plan a whole
	// training step. It implies Grad.
	Optimizer *passes.OptimizerConfig
	// Freeze, when set, freezes the params whose names it matches: they
	// keep their initial values, with no gradient, no optimizer state and
	// no update (ir.Freeze, ir.Graph.Frozen). Train, when set, freezes the
	// params whose names it does not match. At most one is set, and it
	// must match a param.
	Freeze, Train *regexp.Regexp
	// Inference compiles for evaluation: every dropout is replaced by its
	// input (the inference pass).
	Inference bool
	// O0 compiles without the optimizing passes (canonicalize, simplify,
	// fuse), as kiln's -O0 flag does; by default they run.
	O0 bool
	// Debug switches (check, dump, time); see passes.DebugFromEnv.
	Debug passes.Debug
	// After, when set, sees the graph after every pass.
	After func(pass string, g *ir.Graph)
	// Plan options for the planner.
	Plan planner.Options
	// Device is where a Trainer's executors run: "cpu" (also "") or "gpu"
	// (see NewExecutor). For "gpu", NewTrainer places the arena in chunks
	// of the device's largest storage binding (ChunkBytes) unless
	// Plan.ChunkBytes is set. Compile does not read it: a plan for the GPU
	// sets Plan.ChunkBytes (the CPU needs none, and runs either plan).
	Device string
	// Workers is the number of goroutines the executors a Trainer makes
	// run steps on (cpu.Options.Workers); 0 means runtime.NumCPU().
	// Compile ignores it.
	Workers int

	// Checkpoint chooses what the backward pass recomputes instead of
	// keeping from the forward pass (checkpoint.ParsePolicy): "" (the
	// graph's recompute marks, if it has any, else nothing; with a
	// MemoryBudget, the budget solver), "none" (ignore the marks),
	// "manual" (the marks), "sqrt" or "segments=K".
	Checkpoint string
	// MemoryBudget, when positive, is the most bytes the plan's arena may
	// take. Alone it lets the solver choose what to recompute so the
	// arena fits with the least recompute cost; with a Checkpoint policy
	// it is checked. A budget below the least peak recomputation reaches
	// is an error that states that peak.
	MemoryBudget int64
	// OnCheckpoint, when set, receives the report of the remat pass.
	OnCheckpoint func(*checkpoint.Report)

	// Ranks, when above 1, compiles the training step for data-parallel
	// training on that many processes (the dataparallel pass): every
	// gradient becomes its mean over the ranks, reduced in buckets of up
	// to BucketBytes (0: passes.DefaultBucketBytes).
	Ranks       int
	BucketBytes int64
	// Shard, with Ranks, shards the optimizer state over the ranks (ZeRO
	// stage 1): each rank keeps and updates 1/Ranks of it, with bitwise the
	// params of the unsharded step (passes.Options.Shard).
	Shard bool
	// Comm is the communicator of the data-parallel job this process is a
	// rank of (dist.NewComm on an MPI transport, or dist.Local in one
	// process). NewTrainer compiles for its size when Ranks is 0, and its
	// executors run the collectives on it. Compile does not read it.
	Comm *dist.Comm
}

// checkpointPolicy resolves opts' recomputation policy for g (see
// Options.Checkpoint).
func checkpointPolicy(g *ir.Graph, opts Options) (checkpoint.Policy, error) {
	pol, err := checkpoint.ParsePolicy(opts.Checkpoint)
	if err != nil {
		return pol, err
	}
	if opts.MemoryBudget < 0 {
		return pol, fmt.Errorf("memory budget %d is negative", opts.MemoryBudget)
	}
	pol.Budget = opts.MemoryBudget
	if opts.Checkpoint == "" {
		switch {
		case pol.Budget > 0:
			pol.Kind = checkpoint.Budget
		case len(g.Recompute) > 0:
			pol.Kind = checkpoint.Manual
		}
	}
	return pol, nil
}

// planOptions returns the planner options for a compile with policy pol.
// With recomputation the planner keeps the graph's order (the clones sit
// just before their first backward user) and reuses no memory in place,
// which is the plan checkpoint's chain model describes exactly; without it,
// opts as given.
func planOptions(pol checkpoint.Policy, opts planner.Options) planner.Options {
	if pol.Kind != checkpoint.None {
		opts.Schedule, opts.NoInPlace = planner.ScheduleTopo, true
	}
	return opts
}

// Transform runs the pass pipeline that opts select over a copy of g and
// returns the transformed graph; g itself is not changed.
func Transform(g *ir.Graph, opts Options) (*ir.Graph, error) {
	out := g.Clone()
	pol, err := checkpointPolicy(g, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	if err := ir.Freeze(out, opts.Freeze, opts.Train); err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	if pol.Kind == checkpoint.None {
		out.Recompute = nil // asked not to recompute: the marks go
	}
	cfg := checkpoint.Config{Policy: pol}
	if pol.Budget > 0 || opts.OnCheckpoint != nil {
		popts := planOptions(pol, opts.Plan)
		cfg.Measure = func(h *ir.Graph) (int64, error) {
			p, err := planner.New(h, popts)
			if err != nil {
				return 0, err
			}
			return p.ArenaBytes, nil
		}
	}
	ps := passes.Pipeline(passes.Options{Grad: opts.Grad, Optimizer: opts.Optimizer, Inference: opts.Inference, O0: opts.O0,
		Checkpoint: cfg, CheckpointReport: opts.OnCheckpoint, Ranks: opts.Ranks, BucketBytes: opts.BucketBytes, Shard: opts.Shard})
	if err := passes.Run(out, ps, opts.Debug, opts.After); err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	return out, nil
}

// Compile transforms g and plans the result.
//
// With a memory budget, the plan without recomputation comes first: when it
// fits, nothing is recomputed.
func Compile(g *ir.Graph, opts Options) (*planner.Plan, error) {
	if pol, err := checkpointPolicy(g, opts); err == nil && pol.Kind == checkpoint.Budget {
		keep := opts
		keep.Checkpoint, keep.MemoryBudget = "none", 0
		if p, err := Compile(g, keep); err == nil && p.ArenaBytes <= pol.Budget {
			if opts.OnCheckpoint != nil {
				opts.OnCheckpoint(&checkpoint.Report{Policy: pol, Method: "keep all (fits the budget)", Peak: p.ArenaBytes, KeepAllPeak: p.ArenaBytes})
			}
			return p, nil
		}
	}
	tg, err := Transform(g, opts)
	if err != nil {
		return nil, err
	}
	pol, _ := checkpointPolicy(g, opts) // Transform has checked it
	p, err := planner.New(tg, planOptions(pol, opts.Plan))
	if err != nil {
		return nil, fmt.Errorf("%s: planning: %w", where(g), err)
	}
	return p, nil
}

// ChunkBytes returns the arena chunk size a plan needs to run on device:
// the GPU's largest storage binding for "gpu" (runtime.ChunkBytes), 0 for
// the CPU. Set it as Options.Plan.ChunkBytes to compile for the GPU.
func ChunkBytes(device string) (int64, error) { return runtime.ChunkBytes(device) }

func where(g *ir.Graph) string {
	if g.File != "" {
		return g.File
	}
	return "graph " + g.Name
}

// debugCheck returns debug switches with the IR checker on.
func debugCheck() passes.Debug { return passes.Debug{Check: true} }
