package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/kilnml/kiln/dist"
	"io"
	"strconv"
	"strings"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/planner"
	kilnrt "github.com/kilnml/kiln/runtime"
)

// runCompile implements kiln compile: the training step and the evaluation
// graph of a model, compiled and written as a plan file that kiln run
// trains from without the compiler.
func runCompile(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("compile", flag.ContinueOnError)
	cflags := addCompileFlags(fs, withTraining|withRecompute|withRanks)
	out := fs.String("o", "", "the plan file to write (conventionally NAME.kplan)")
	initPath := fs.String("init", "", "safetensors file with initial values of params, stored in the plan file")
	seed := fs.Uint64("seed", 1, "seed of the param initialization, recorded in the plan file as kiln run's default")
	device := fs.String("device", "cpu", "the device the plan is for: cpu or gpu (gpu places the arena in chunks of the GPU's storage binding size, so that kiln run -device gpu can bind it)")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := checkDevice(*device); err != nil {
		return err
	}
	path, err := oneFile(pos, "MODEL.kir")
	if err != nil {
		return err
	}
	if *out == "" {
		return usagef("missing -o FILE.kplan")
	}
	if err := checkFiles([]fileArg{{"MODEL.kir", path}, {"-init", *initPath}}, []fileArg{{"-o", *out}}); err != nil {
		return err
	}
	opt, err := cflags.optimizer()
	if err != nil {
		return err
	}
	g, params, opts, err := cflags.load(path, nil)
	if err != nil {
		return err
	}
	var report *checkpoint.Report
	opts.OnCheckpoint = func(r *checkpoint.Report) {
		if report == nil {
			report = r // the training step's; the evaluation graph has no backward
		}
	}
	opts.Workers = 1 // compile runs no step
	opts.Device = *device
	if opts.Ranks > 1 {
		// The executors of a plan with collectives are built on a
		// communicator of its size; compile runs no step, so none is used.
		opts.Comm = dist.NewComm(dist.Local(opts.Ranks)[0])
	}
	t, err := kiln.NewTrainer(g, *opt, *seed, opts)
	if err != nil {
		return err
	}
	defer t.Close()
	if err := setModelParams(t, params); err != nil {
		return err
	}
	f := &planner.File{
		Plans: map[string]*planner.Plan{planner.TrainPlan: t.Plan, planner.EvalPlan: t.EvalPlan},
		Meta: map[string]string{
			"source": path, "optimizer": opt.Kind, "lr": strconv.FormatFloat(opt.LR, 'g', -1, 64),
			"seed": strconv.FormatUint(*seed, 10), "O0": strconv.FormatBool(*cflags.o0), "device": *device,
		},
	}
	cflags.ckpt.meta(f.Meta, opts)
	if opts.Ranks > 1 {
		f.Meta["ranks"] = strconv.Itoa(opts.Ranks)
		f.Meta["dist-shard"] = strconv.FormatBool(opts.Shard)
	}
	// The settings that change the result, for kiln run -resume to check
	// (see planSettings).
	for k, v := range trainSettings(g, cflags.model, *opt, *cflags.o0, *device) {
		if k == modelHashKey {
			f.Meta[modelHashMeta] = v
		} else if k != "-device" && v != "" {
			f.Meta[strings.TrimPrefix(k, "-")] = v
		}
	}
	if *initPath != "" || len(params) > 0 {
		if *initPath != "" {
			if err := t.LoadParams(*initPath); err != nil {
				return err
			}
		}
		for _, i := range t.Plan.Params {
			b := t.Plan.Buffers[i]
			v, _ := t.Executor().Get(b.Name)
			f.Params = append(f.Params, planner.Tensor{Name: b.Name, Type: b.Type, Data: append([]byte(nil), v.Data...)})
		}
	}
	if err := planner.Save(*out, f); err != nil {
		return err
	}
	if report != nil && cflags.ckpt.active() {
		fmt.Fprint(stdout, report)
	}
	chunks := ""
	if c := t.Plan.ChunkBytes; c > 0 {
		chunks = fmt.Sprintf(", placed for the GPU in chunks of %d bytes", c)
	}
	fmt.Fprintf(stdout, "wrote %s: training step of %s (%d steps, arena %d bytes) and its evaluation graph (%d steps, arena %d bytes)%s\n",
		*out, g.Name, len(t.Plan.Steps), t.Plan.ArenaBytes, len(t.EvalPlan.Steps), t.EvalPlan.ArenaBytes, chunks)
	return nil
}

// runRun implements kiln run: training from a plan file alone.
func runRun(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	lf := addLoopFlags(fs)
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	df := addDistFlags(fs, false)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := df.check(); err != nil {
		return err
	}
	path, err := oneFile(pos, "FILE.kplan")
	if err != nil {
		return err
	}
	if err := lf.check(fs); err != nil {
		return err
	}
	if err := checkRun(*workers, *device); err != nil {
		return err
	}
	if err := lf.checkFiles(fileArg{"FILE.kplan", path}); err != nil {
		return err
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	dbg, err := debugSwitches()
	if err != nil {
		return err
	}
	p, err := kilnrt.Load(path)
	if err != nil {
		return err
	}
	if p.HasSeed && !seedSet {
		lf.seed = p.Seed
	}
	return df.run(stdout, func(stdout io.Writer, comm *dist.Comm) error {
		t, err := kilnrt.NewTrainer(p, kiln.ExecOptions{Device: *device, Seed: lf.seed, CheckNaN: dbg.NaN, Workers: *workers, Comm: comm})
		if nc := (*gpu.NotChunkedError)(nil); errors.As(err, &nc) {
			return fmt.Errorf("%s: %s; compile it with kiln compile -device gpu", path, nc.Problem)
		}
		if err != nil {
			return err
		}
		defer t.Close()
		l := *lf // each rank's own
		data, dataName, err := l.data(t, true)
		if err != nil {
			return err
		}
		return l.train(stdout, t, p.Train.Graph.Name, fmt.Sprintf("%s lr %s (from %s)", p.Meta["optimizer"], p.Meta["lr"], path), planSettings(p, *device), data, dataName)
	})
}

// modelHashMeta is the plan file metadata key of the model's identity.
const modelHashMeta = "model_sha256"

// planSettings returns the settings of kiln run that change the result,
// with the keys of trainSettings: those kiln compile recorded in the plan
// file's metadata, and device. A plan file of an older kiln compile
// records only the optimizer and lr; the hash of its training step stands
// in for the model's identity and the other hyperparameters.
func planSettings(f *kilnrt.Plan, device string) map[string]string {
	s := map[string]string{"-device": device}
	for _, k := range []string{"O0", "optimizer", "lr", "momentum", "dampening", "nesterov", "weight-decay", "clip-grad", "clip-norm", "beta1", "beta2", "eps", "amsgrad", "alpha", "centered", "lr-schedule", "warmup", "lr-step-size", "lr-gamma", "accum"} {
		if v, ok := f.Meta[k]; ok {
			s["-"+k] = v
		}
	}
	for _, k := range []string{"shape", "freeze", "train", "loss"} {
		s["-"+k] = f.Meta[k] // the ONNX import flags, recorded when given
	}
	s[modelHashKey] = f.Meta[modelHashMeta]
	if s[modelHashKey] == "" {
		s[modelHashKey] = "of training step " + f.Train.GraphHash()[:16]
	}
	return s
}
