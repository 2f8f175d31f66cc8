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
	epochs, steps      int
	rows, vocab        int
	seed               uint64
	holdout            float64
	standardize        bool
	standardizeSet     bool
	initPath, savePath string
}

func addLoopFlags(fs *flag.FlagSet) *loopFlags {
	l := &loopFlags{}
	fs.StringVar(&l.dataPath, "data", "", "the data: a CSV file (optionally gzipped) of features then an integer label per row, or a built-in set: \"digits\" (8x8 images, 10 classes), \"kan2d\" (exp(sin(πx)+y²) on [-1,1]²), \"reverse\" (token sequences and their reversals)")
	fs.IntVar(&l.epochs, "epochs", 30, "passes over the training data (for a graph with no inputs: training steps, unless -steps is given)")
	fs.IntVar(&l.steps, "steps", 0, "training steps of a graph with no inputs (default: -epochs)")
	fs.IntVar(&l.rows, "rows", 0, "rows of a generated data set (default: 2000 for kan2d, 4000 for reverse)")
	fs.IntVar(&l.vocab, "vocab", 0, "tokens of -data reverse (default: the classes of the model's logits)")
	fs.Uint64Var(&l.seed, "seed", 1, "seed of the param initialization, the split and the shuffles")
	fs.Float64Var(&l.holdout, "holdout", 0.2, "fraction of the rows held out for evaluation")
	fs.BoolVar(&l.standardize, "standardize", true, "scale each feature to mean 0, std 1 (statistics of the training rows); default true for CSV files and digits, false for the generated sets and never for token inputs")
	fs.StringVar(&l.initPath, "init", "", "safetensors file with initial values for some or all params")
	fs.StringVar(&l.savePath, "save", "", "write the trained params to this safetensors file")
	return l
}

// check checks the flags' values; fs tells which were set.
func (l *loopFlags) check(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) { l.standardizeSet = l.standardizeSet || f.Name == "standardize" })
	if l.epochs < 1 {
		return usagef("-epochs must be at least 1, found %d", l.epochs)
	}
	if l.steps < 0 {
		return usagef("-steps must be at least 1, found %d", l.steps)
	}
	if l.rows < 0 {
		return usagef("-rows must be positive, found %d", l.rows)
	}
	if l.vocab < 0 || l.vocab == 1 {
		return usagef("-vocab must be at least 2, found %d", l.vocab)
	}
	if !(l.holdout > 0 && l.holdout < 1) {
		return usagef("-holdout must be in (0,1), found %g", l.holdout)
	}
	return nil
}

// The -data values that name built-in data sets.
const (
	digitsData  = "digits"
	kan2dData   = "kan2d"
	reverseData = "reverse"
)

// The generated data sets' default sizes and their fixed seed.
const (
	kan2dRows     = 2000
	reverseRows   = 4000
	generatedSeed = 1
)

// data loads -data for a model of signature sig, or the embedded digits
// data when it is "digits" or when it is not given and builtin is set; it
// returns the data and its name for messages. A graph with no inputs takes
// no data: it returns nil.
func (l *loopFlags) data(sig kiln.Signature, builtin bool) (*dataset.Dataset, string, error) {
	if sig.Kind == kiln.NoData {
		if l.dataPath != "" {
			return nil, "", usagef("-data %s: the graph takes no inputs; it trains without data", l.dataPath)
		}
		return nil, "", nil
	}
	if l.steps != 0 {
		return nil, "", usagef("-steps is for graphs with no inputs; this one trains on data for -epochs")
	}
	rows := func(def int) int {
		if l.rows > 0 {
			return l.rows
		}
		return def
	}
	switch l.dataPath {
	case "", digitsData:
		if l.dataPath == "" && !builtin {
			return nil, "", usagef("missing -data FILE.csv")
		}
		d, err := dataset.Digits()
		return d, "the digits data", err
	case kan2dData:
		d, err := dataset.KAN2D(rows(kan2dRows), generatedSeed)
		return d, "the kan2d data", err
	case reverseData:
		vocab := l.vocab
		if vocab == 0 {
			vocab = sig.Classes
		}
		if vocab < 2 {
			return nil, "", usagef("-data reverse needs -vocab N: the model has no logits output to read the vocabulary from")
		}
		d, err := dataset.Reverse(rows(reverseRows), sig.Width, vocab, generatedSeed)
		return d, "the reverse data", err
	}
	d, err := dataset.LoadCSV(l.dataPath)
	return d, l.dataPath, err
}

// generated reports whether -data names a generated data set.
func (l *loopFlags) generated() bool { return l.dataPath == kan2dData || l.dataPath == reverseData }

// train splits data, applies -init, runs the epochs with a progress line
// each, reports the held-out metric and applies -save. A graph with no
// inputs runs its steps instead (see trainSteps).
func (l *loopFlags) train(stdout io.Writer, t *kiln.Trainer, model, optDesc string, data *dataset.Dataset, dataName string) error {
	if l.initPath != "" {
		if err := loadParams(t, l.initPath); err != nil {
			return err
		}
	}
	sig := t.Signature()
	if sig.Kind == kiln.NoData {
		return l.trainSteps(stdout, t, model, optDesc)
	}
	trainSet, heldOut := data.Split(l.holdout, l.seed)
	standardize := l.standardize && !l.generated()
	if l.standardizeSet {
		standardize = l.standardize
	}
	if standardize && (sig.Tokens || data.Vocab > 0) {
		if l.standardizeSet {
			return usagef("-standardize: the model's input %%%s takes tokens, which are not scaled", sig.Features)
		}
		standardize = false
	}
	if standardize {
		mean, std := trainSet.Standardize()
		heldOut.ApplyStandardize(mean, std)
	}
	fmt.Fprintf(stdout, "model %s: %d params (%d values), batch %d, %s; %d training rows, %d held out\n",
		model, len(t.Plan.Params), countParams(t), t.BatchSize(), optDesc, trainSet.N, heldOut.N)
	short, long := metricNames(sig)
	ctx := context.Background()
	for e := 1; e <= l.epochs; e++ {
		start := time.Now()
		trainSet.Shuffle(l.seed + uint64(e))
		loss, m, err := t.Epoch(ctx, trainSet)
		if err != nil {
			return fmt.Errorf("training on %s: %v", dataName, err)
		}
		hl, hm, err := t.Evaluate(ctx, heldOut)
		if err != nil {
			return fmt.Errorf("evaluating on %s: %v", dataName, err)
		}
		fmt.Fprintf(stdout, "epoch %3d/%d  loss %.4f  train %s %s  held-out loss %.4f  %s %s  (%s)\n",
			e, l.epochs, loss, short, metric(sig, m), hl, short, metric(sig, hm), time.Since(start).Round(time.Millisecond))
	}
	_, hm, err := t.Evaluate(ctx, heldOut)
	if err != nil {
		return fmt.Errorf("evaluating on %s: %v", dataName, err)
	}
	rows := fmt.Sprintf("%d rows", heldOut.N)
	if sig.Kind == kiln.TokenLabels {
		rows += fmt.Sprintf(" (%d tokens)", heldOut.N*sig.K)
	}
	fmt.Fprintf(stdout, "held-out %s %s on %s\n", long, metric(sig, hm), rows)
	return l.save(stdout, t, model)
}

// trainSteps trains a graph with no inputs for -steps (or -epochs) steps,
// printing the loss about 20 times, and reports the loss of the forward
// graph at the end.
func (l *loopFlags) trainSteps(stdout io.Writer, t *kiln.Trainer, model, optDesc string) error {
	steps := l.steps
	if steps == 0 {
		steps = l.epochs
	}
	fmt.Fprintf(stdout, "model %s: %d params (%d values), %s; no inputs: %d training steps\n",
		model, len(t.Plan.Params), countParams(t), optDesc, steps)
	ctx := context.Background()
	every := max(1, (steps+19)/20)
	var a kiln.Tally
	start := time.Now()
	for s := 1; s <= steps; s++ {
		if err := t.Step(ctx, &a); err != nil {
			return fmt.Errorf("training step %d: %v", s, err)
		}
		if s%every == 0 || s == steps {
			loss, _ := a.Result()
			fmt.Fprintf(stdout, "step %5d/%d  loss %.6g  (%s)\n", s, steps, loss, time.Since(start).Round(time.Millisecond))
			a, start = kiln.Tally{}, time.Now()
		}
	}
	loss, _, err := t.Evaluate(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "final loss %.6g after %d steps\n", loss, steps)
	return l.save(stdout, t, model)
}

// save applies -save.
func (l *loopFlags) save(stdout io.Writer, t *kiln.Trainer, model string) error {
	if l.savePath == "" {
		return nil
	}
	if err := saveParams(t, l.savePath, model); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved the trained params to %s\n", l.savePath)
	return nil
}

// metricNames returns the short (epoch lines) and long (final line) names
// of sig's metric.
func metricNames(sig kiln.Signature) (short, long string) {
	switch sig.Kind {
	case kiln.TokenLabels:
		return "token acc", "token accuracy"
	case kiln.Regression:
		return "R²", "R²"
	}
	return "acc", "accuracy"
}

// metric formats a value of sig's metric: a percentage for accuracies,
// four decimals for R², n/a for NaN.
func metric(sig kiln.Signature, v float64) string {
	if sig.Kind == kiln.Regression && !math.IsNaN(v) {
		return fmt.Sprintf("%.4f", v)
	}
	return pct(v)
}

// runTrain implements kiln train: with no model, the built-in digits MLP on
// the embedded digits data; otherwise MODEL.kir on -data, or with no data
// when the model takes no inputs.
func runTrain(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("train", flag.ContinueOnError)
	o0 := addO0Flag(fs)
	lf := addLoopFlags(fs)
	of := addOptimizerFlags(fs, "adam")
	cf := addCheckpointFlags(fs)
	workers := addWorkersFlag(fs)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := lf.check(fs); err != nil {
		return err
	}
	if err := checkWorkers(*workers); err != nil {
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
		if g, err = loadGraph(pos[0]); err != nil {
			return err
		}
		if lf.dataPath == "" && len(g.Inputs()) > 0 {
			return usagef("missing -data FILE.csv for %s", pos[0])
		}
	default:
		return usagef("expected at most one MODEL.kir, found %d arguments", len(pos))
	}
	opts := kiln.Options{Debug: dbg, O0: *o0, Workers: *workers}
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
	data, dataName, err := lf.data(t.Signature(), len(pos) == 0)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		fmt.Fprintf(stdout, "training the built-in example %s on the digits data (%d rows; UCI, CC BY 4.0)\n", examples.DigitsMLPFile, data.N)
	}
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
