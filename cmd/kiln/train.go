package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// loopFlags are the flags of the training loop, shared by kiln train and
// kiln run.
type loopFlags struct {
	dataPath           string
	epochs             int
	seed               uint64
	holdout            float64
	standardize        bool
	initPath, savePath string
}

func addLoopFlags(fs *flag.FlagSet) *loopFlags {
	l := &loopFlags{}
	fs.StringVar(&l.dataPath, "data", "", "CSV file (optionally gzipped): features then an integer label per row; \"digits\" is the embedded digits data")
	fs.IntVar(&l.epochs, "epochs", 30, "passes over the training data")
	fs.Uint64Var(&l.seed, "seed", 1, "seed of the param initialization, the split and the shuffles")
	fs.Float64Var(&l.holdout, "holdout", 0.2, "fraction of the rows held out for evaluation")
	fs.BoolVar(&l.standardize, "standardize", true, "scale each feature to mean 0, std 1 (statistics of the training rows)")
	fs.StringVar(&l.initPath, "init", "", "safetensors file with initial values for some or all params")
	fs.StringVar(&l.savePath, "save", "", "write the trained params to this safetensors file")
	return l
}

func (l *loopFlags) check() error {
	if l.epochs < 1 {
		return usagef("-epochs must be at least 1, found %d", l.epochs)
	}
	if !(l.holdout > 0 && l.holdout < 1) {
		return usagef("-holdout must be in (0,1), found %g", l.holdout)
	}
	return nil
}

// digitsData is the -data value that names the embedded digits data.
const digitsData = "digits"

// data loads -data, or the embedded digits data when it is "digits" or when
// it is not given and builtin is set; it returns the data and its name for
// messages.
func (l *loopFlags) data(builtin bool) (*dataset.Dataset, string, error) {
	if l.dataPath == "" || l.dataPath == digitsData {
		if l.dataPath == "" && !builtin {
			return nil, "", usagef("missing -data FILE.csv")
		}
		d, err := dataset.Digits()
		return d, "the digits data", err
	}
	d, err := dataset.LoadCSV(l.dataPath)
	return d, l.dataPath, err
}

// train splits data, applies -init, runs the epochs with a progress line
// each, reports the held-out accuracy and applies -save.
func (l *loopFlags) train(stdout io.Writer, t *kiln.Trainer, model, optDesc string, data *dataset.Dataset, dataName string) error {
	trainSet, heldOut := data.Split(l.holdout, l.seed)
	if l.standardize {
		mean, std := trainSet.Standardize()
		heldOut.ApplyStandardize(mean, std)
	}
	if l.initPath != "" {
		if err := loadParams(t, l.initPath); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "model %s: %d params (%d values), batch %d, %s; %d training rows, %d held out\n",
		model, len(t.Plan.Params), countParams(t), t.BatchSize(), optDesc, trainSet.N, heldOut.N)
	ctx := context.Background()
	for e := 1; e <= l.epochs; e++ {
		start := time.Now()
		trainSet.Shuffle(l.seed + uint64(e))
		loss, acc, err := t.Epoch(ctx, trainSet)
		if err != nil {
			return fmt.Errorf("training on %s: %v", dataName, err)
		}
		hl, hacc, err := t.Evaluate(ctx, heldOut)
		if err != nil {
			return fmt.Errorf("evaluating on %s: %v", dataName, err)
		}
		fmt.Fprintf(stdout, "epoch %3d/%d  loss %.4f  train acc %s  held-out loss %.4f  acc %s  (%s)\n",
			e, l.epochs, loss, pct(acc), hl, pct(hacc), time.Since(start).Round(time.Millisecond))
	}
	_, hacc, err := t.Evaluate(ctx, heldOut)
	if err != nil {
		return fmt.Errorf("evaluating on %s: %v", dataName, err)
	}
	fmt.Fprintf(stdout, "held-out accuracy %s on %d rows\n", pct(hacc), heldOut.N)
	if l.savePath != "" {
		if err := saveParams(t, l.savePath, model); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "saved the trained params to %s\n", l.savePath)
	}
	return nil
}

// runTrain implements kiln train: with no model, the built-in digits MLP on
// the embedded digits data; otherwise MODEL.kir on -data FILE.csv.
func runTrain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	o0 := addO0Flag(fs)
	lf := addLoopFlags(fs)
	of := addOptimizerFlags(fs, "adam")
	cf := addCheckpointFlags(fs)
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := lf.check(); err != nil {
		return err
	}
	if err := checkWorkers(*workers); err != nil {
		return err
	}
	if err := checkDevice(*device); err != nil {
		return err
	}
	opt, err := of.config()
	if err != nil {
		return err
	}
	dbg, err := debugSwitches()
	if err != nil {
		return err
	}
	var g *ir.Graph
	switch len(pos) {
	case 0:
		if lf.dataPath != "" && lf.dataPath != digitsData {
			return usagef("-data needs a MODEL.kir to train")
		}
		if g, err = ir.Parse(examples.DigitsMLPFile, examples.DigitsMLP); err != nil {
			return err
		}
	case 1:
		if lf.dataPath == "" {
			return usagef("missing -data FILE.csv for %s", pos[0])
		}
		if g, err = loadGraph(pos[0]); err != nil {
			return err
		}
	default:
		return usagef("expected at most one MODEL.kir, found %d arguments", len(pos))
	}
	data, dataName, err := lf.data(len(pos) == 0)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fmt.Fprintf(stdout, "training the built-in example %s on the digits data (%d rows; UCI, CC BY 4.0)\n", examples.DigitsMLPFile, data.N)
	}
	opts := kiln.Options{Debug: dbg, O0: *o0, Workers: *workers, Device: *device}
	if err := cf.apply(&opts); err != nil {
		return err
	}
	var report *checkpoint.Report
	opts.OnCheckpoint = func(r *checkpoint.Report) {
		if report == nil {
			report = r // the training step's; the evaluation graph has no backward
		}
	}
	t, err := kiln.NewTrainer(g, *opt, lf.seed, opts)
	if err != nil {
		return err
	}
	defer t.Close()
	if report != nil && cf.active() {
		fmt.Fprint(stdout, report)
	}
	return lf.train(stdout, t, g.Name, fmt.Sprintf("%s lr %g", opt.Kind, opt.LR), data, dataName)
}

func pct(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2f%%", 100*v)
}

func countParams(t *kiln.Trainer) int {
	n := 0
	for _, i := range t.Plan.Params {
		n += t.Plan.Buffers[i].Type.Shape.NumElements()
	}
	return n
}

// loadParams sets params from a safetensors file; each tensor must name a
// param of the model with its exact type.
func loadParams(t *kiln.Trainer, path string) error {
	tensors, _, err := safetensors.ReadFile(path)
	if err != nil {
		return err
	}
	x := t.Executor()
	params := map[string]ir.Type{}
	for _, i := range t.Plan.Params {
		params[t.Plan.Buffers[i].Name] = t.Plan.Buffers[i].Type
	}
	for _, ts := range tensors {
		want, ok := params[ts.Name]
		if !ok {
			return fmt.Errorf("%s: tensor %q is not a param of the model", path, ts.Name)
		}
		if !want.Equal(ts.Type) {
			return fmt.Errorf("%s: tensor %q: expected %s, found %s", path, ts.Name, want, ts.Type)
		}
		if err := x.Set(ts.Name, kernels.Tensor{Type: ts.Type, Data: ts.Data}); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	return nil
}

func saveParams(t *kiln.Trainer, path, model string) error {
	x := t.Executor()
	var out []safetensors.Tensor
	for _, i := range t.Plan.Params {
		name := t.Plan.Buffers[i].Name
		v, err := x.Get(name)
		if err != nil {
			return err
		}
		out = append(out, safetensors.Tensor{Name: name, Type: v.Type, Data: append([]byte(nil), v.Data...)})
	}
	return safetensors.WriteFile(path, out, map[string]string{"graph": model})
}
