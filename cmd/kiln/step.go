package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/passes"
	"io"
	"slices"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// stepLossName is the tensor kiln step writes the losses to.
const stepLossName = "loss"

// runStep implements kiln step: N training steps (the forward, the
// backward and the optimizer's update) on the one batch of a safetensors
// file, writing every param after the last step and the losses, an f64
// vector of the N losses, each computed before its step's update. With
// -accum K, the batch holds K of the model's batches (see microBatches),
// each step is an update that runs them in order, and its loss is the
// mean of theirs. With -dist on N ranks the batch holds N of the model's
// batches, rank r trains the r-th, and the result is -accum N's, bitwise.
func runStep(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("step", flag.ContinueOnError)
	cflags := addCompileFlags(fs, withTraining|withRecompute)
	inPath := fs.String("inputs", "", "safetensors file with a tensor for every input, and for some or all params (named without %)")
	outPath := fs.String("out", "", "safetensors file to write: every param after the last step, and \"loss\", the f64 vector of the losses")
	steps := fs.Int("steps", 1, "training steps (updates) to run on the batch")
	seed := fs.Uint64("seed", 1, "seed of the initial values of the params that neither -inputs nor the model file gives")
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	df := addDistFlags(fs, true)
	path, err := parseModelRun(fs, args, stdout, workers, device)
	if err != nil {
		return err
	}
	if err := df.check(); err != nil {
		return err
	}
	if *inPath == "" || *outPath == "" {
		return usagef("both -inputs and -out are required")
	}
	if *steps < 1 {
		return usagef("-steps must be at least 1, found %d", *steps)
	}
	if err := checkFiles([]fileArg{{"FILE.kir", path}, {"-inputs", *inPath}}, []fileArg{{"-out", *outPath}}); err != nil {
		return err
	}
	opt, err := cflags.optimizer()
	if err != nil {
		return err
	}
	// T of a schedule: the run's updates.
	opt.Total = int64(*steps)
	if err := cflags.checkUsage(); err != nil { // usage errors first
		return err
	}
	tensors, _, err := safetensors.ReadFile(*inPath)
	if err != nil {
		return err
	}
	cflags.model.feed(tensors)
	g, params, opts, err := cflags.load(path, opt)
	if err != nil {
		return err
	}
	if len(g.Params()) == 0 {
		return fail(path, "graph %s has no params to train", g.Name)
	}
	if slices.ContainsFunc(g.Params(), func(id ir.ID) bool { return g.Value(id).Name == stepLossName }) {
		return fail(path, "param %%%s has the name kiln step writes the losses to; rename it", stepLossName)
	}
	if df.mode != "" && opt.Accum > 1 {
		return usagef("kiln step -dist takes no -accum: its inputs hold one of the model's batches for each rank")
	}
	bucket, _ := df.bucketBytes() // checked
	return df.run(stdout, func(stdout io.Writer, comm *dist.Comm) error {
		return step(stdout, comm, path, g, params, tensors, opts, opt, stepRun{*inPath, *outPath, *steps, *seed, *workers, *device, bucket, df.shard})
	})
}

// stepRun holds kiln step's flags that step reads.
type stepRun struct {
	inPath, outPath string
	steps           int
	seed            uint64
	workers         int
	device          string
	bucket          int64
	shard           bool
}

// step is kiln step on one rank of a job (comm nil: alone): it compiles g,
// runs the steps and, on rank 0, writes the params and the losses.
func step(stdout io.Writer, comm *dist.Comm, path string, g *ir.Graph, params, tensors []safetensors.Tensor, opts kiln.Options, opt *passes.OptimizerConfig, f stepRun) error {
	tensors = slices.Clone(tensors) // microBatches replaces some: each rank's own
	ranks, rank := 1, 0
	if comm != nil {
		ranks, rank = comm.Size(), comm.Rank()
		opts.Ranks, opts.BucketBytes, opts.Shard = ranks, f.bucket, f.shard
		if ranks == 1 {
			opts.Ranks = 0
		}
	}
	p, err := compileFor(path, g, opts, f.device)
	if err != nil {
		return err
	}
	x, err := kiln.NewExecutor(p, kiln.ExecOptions{Device: f.device, Seed: f.seed, CheckNaN: opts.Debug.NaN, Workers: f.workers, Comm: comm})
	if err != nil {
		return fail(path, "%v", err)
	}
	defer x.Close()
	// The model file's values (ONNX initializers) come first; -inputs
	// overrides them, and params neither gives keep the seeded values.
	for _, t := range params {
		if err := x.Set(t.Name, kernels.Tensor{Type: t.Type, Data: t.Data}); err != nil {
			return fail(path, "%v", err)
		}
	}
	// Each step runs the k micro-batches of -accum k in turn, or on N
	// ranks this rank's one of N, the kernels seeing its place among them
	// (dropout's step count).
	k := max(int(opt.Accum), ranks)
	micro, err := microBatches(p, tensors, k, f.inPath)
	if err != nil {
		return err
	}
	if err := feedAll(x, p, tensors, f.inPath, path, true); err != nil {
		return err
	}
	ctx := context.Background()
	losses := make([]float64, f.steps)
	for i := range losses {
		for j := range k {
			if ranks > 1 && j != rank {
				continue
			}
			for _, m := range micro {
				if err := x.Set(m.name, kernels.Tensor{Type: m.typ, Data: m.parts[j]}); err != nil {
					return err
				}
			}
			if err := x.SetStepCount(int64(i*k + j)); err != nil {
				return err
			}
			if err := x.Step(ctx); err != nil {
				return fail(path, "step %d: %v", i+1, err)
			}
			l, err := x.Get(p.Outputs[0].Name)
			if err != nil {
				return err
			}
			losses[i] += kernels.Float64s(l)[0]
		}
	}
	if ranks > 1 {
		// Each rank's loss, summed in rank order as -accum sums its batches'.
		if err := comm.SumFloat64s(losses); err != nil {
			return err
		}
		if rank != 0 {
			return nil
		}
	}
	for i := range losses {
		losses[i] /= float64(k)
	}
	var out []safetensors.Tensor
	for _, i := range p.Params {
		name := p.Buffers[i].Name
		v, err := x.Get(name)
		if err != nil {
			return err
		}
		out = append(out, safetensors.Tensor{Name: name, Type: v.Type, Data: append([]byte(nil), v.Data...)})
	}
	lt, err := safetensors.FromFloat64(stepLossName, ir.F64, ir.Shape{len(losses)}, losses)
	if err != nil {
		return err
	}
	out = append(out, lt)
	if err := safetensors.WriteFile(f.outPath, out, map[string]string{"graph": g.Name, "source": path, "optimizer": opt.Kind}); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %d params and %d losses (%.6g to %.6g) to %s\n", len(p.Params), len(losses), losses[0], losses[len(losses)-1], f.outPath)
	return nil
}

// microBatch is an input of kiln step -accum K: its K parts, each of the
// model's type typ.
type microBatch struct {
	name  string
	typ   ir.Type
	parts [][]byte
}

// microBatches splits the inputs of tensors that hold k of the model's
// batches along their first axis (k times the model's first dimension)
// into k parts, replacing each such tensor in tensors by its first part.
// An input of the model's own type is fed as it is at every step; file
// names the inputs' file in errors.
func microBatches(p *planner.Plan, tensors []safetensors.Tensor, k int, file string) ([]microBatch, error) {
	if k == 1 {
		return nil, nil
	}
	var out []microBatch
	for _, i := range p.Inputs {
		b := p.Buffers[i]
		j := slices.IndexFunc(tensors, func(t safetensors.Tensor) bool { return t.Name == b.Name })
		if j < 0 || tensors[j].Type.Equal(b.Type) {
			continue // missing (feedAll says so) or one for every step
		}
		t := tensors[j]
		whole := ir.Type{DType: b.Type.DType, Shape: slices.Clone(b.Type.Shape)}
		if len(whole.Shape) > 0 {
			whole.Shape[0] *= k
		}
		if len(whole.Shape) == 0 || !t.Type.Equal(whole) {
			return nil, fmt.Errorf("%s: tensor %q: expected %s, or %s holding the %d batches of -accum %d, found %s", file, t.Name, b.Type, whole, k, k, t.Type)
		}
		n := len(t.Data) / k
		m := microBatch{name: b.Name, typ: b.Type}
		for part := range k {
			m.parts = append(m.parts, t.Data[part*n:(part+1)*n])
		}
		out = append(out, m)
		tensors[j] = safetensors.Tensor{Name: t.Name, Type: b.Type, Data: m.parts[0]}
	}
	return out, nil
}
