package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// runTrain implements kiln train: with no model, the built-in digits MLP on
// the embedded digits data; otherwise MODEL.kir on -data FILE.csv.
func runTrain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	o0 := addO0Flag(fs)
	dataPath := fs.String("data", "", "CSV file (optionally gzipped): features then an integer label per row")
	epochs := fs.Int("epochs", 30, "passes over the training data")
	seed := fs.Uint64("seed", 1, "seed of the param initialization, the split and the shuffles")
	holdout := fs.Float64("holdout", 0.2, "fraction of the rows held out for evaluation")
	standardize := fs.Bool("standardize", true, "scale each feature to mean 0, std 1 (statistics of the training rows)")
	initPath := fs.String("init", "", "safetensors file with initial values for some or all params")
	savePath := fs.String("save", "", "write the trained params to this safetensors file")
	of := addOptimizerFlags(fs, "adam")
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if *epochs < 1 {
		return usagef("-epochs must be at least 1, found %d", *epochs)
	}
	if !(*holdout > 0 && *holdout < 1) {
		return usagef("-holdout must be in (0,1), found %g", *holdout)
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
	var data *dataset.Dataset
	dataName := *dataPath
	switch len(pos) {
	case 0:
		if *dataPath != "" {
			return usagef("-data needs a MODEL.kir to train")
		}
		if g, err = ir.Parse(examples.DigitsMLPFile, examples.DigitsMLP); err != nil {
			return err
		}
		if data, err = dataset.Digits(); err != nil {
			return err
		}
		dataName = "the digits data"
		fmt.Fprintf(stdout, "training the built-in example %s on the digits data (%d rows; UCI, CC BY 4.0)\n", examples.DigitsMLPFile, data.N)
	case 1:
		if *dataPath == "" {
			return usagef("missing -data FILE.csv for %s", pos[0])
		}
		if g, err = loadGraph(pos[0]); err != nil {
			return err
		}
		if data, err = dataset.LoadCSV(*dataPath); err != nil {
			return err
		}
	default:
		return usagef("expected at most one MODEL.kir, found %d arguments", len(pos))
	}
	trainSet, heldOut := data.Split(*holdout, *seed)
	if *standardize {
		mean, std := trainSet.Standardize()
		heldOut.ApplyStandardize(mean, std)
	}
	t, err := kiln.NewTrainer(g, *opt, *seed, kiln.Options{Debug: dbg, O0: *o0})
	if err != nil {
		return err
	}
	if *initPath != "" {
		if err := loadParams(t, *initPath); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "model %s: %d params (%d values), batch %d, %s lr %g; %d training rows, %d held out\n",
		g.Name, len(t.Plan.Params), countParams(t), t.BatchSize(), opt.Kind, opt.LR, trainSet.N, heldOut.N)
	ctx := context.Background()
	for e := 1; e <= *epochs; e++ {
		start := time.Now()
		trainSet.Shuffle(*seed + uint64(e))
		loss, acc, err := t.Epoch(ctx, trainSet)
		if err != nil {
			return fmt.Errorf("training on %s: %v", dataName, err)
		}
		hl, hacc, err := t.Evaluate(ctx, heldOut)
		if err != nil {
			return fmt.Errorf("evaluating on %s: %v", dataName, err)
		}
		fmt.Fprintf(stdout, "epoch %3d/%d  loss %.4f  train acc %s  held-out loss %.4f  acc %s  (%s)\n",
			e, *epochs, loss, pct(acc), hl, pct(hacc), time.Since(start).Round(time.Millisecond))
	}
	_, hacc, err := t.Evaluate(ctx, heldOut)
	if err != nil {
		return fmt.Errorf("evaluating on %s: %v", dataName, err)
	}
	fmt.Fprintf(stdout, "held-out accuracy %s on %d rows\n", pct(hacc), heldOut.N)
	if *savePath != "" {
		if err := saveParams(t, *savePath, g.Name); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "saved the trained params to %s\n", *savePath)
	}
	return nil
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
