package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/onnx"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// loopFlags are the flags of the training loop, shared by kiln train and
// kiln run.
type loopFlags struct {
	dataPath           string
	header             string
	epochs, steps      int
	rows, vocab        int
	seed               uint64
	holdout            float64
	standardize        bool
	standardizeSet     bool
	initPath, savePath string
	ckptDir            string
	saveEvery          int
	resume             bool
	plotPath           string
	// saveONNX is kiln train's -save-onnx; onnxModel and modelPath are the
	// ONNX model it writes back.
	saveONNX  string
	onnxModel *onnx.Model
	modelPath string
	evalFlags // -eval-data, -eval-every, -save-best
}

func addLoopFlags(fs *flag.FlagSet) *loopFlags {
	l := &loopFlags{}
	fs.StringVar(&l.dataPath, "data", "", "the data: a CSV file (optionally gzipped) of features then an integer label (a float target for a model whose targets are float) per row, a .safetensors or .npz file of arrays named as the model's inputs (examples along the first axis), or a built-in set: \"digits\" (8x8 images, 10 classes), \"kan2d\" (exp(sin(πx)+y²) on [-1,1]²), \"reverse\" (token sequences and their reversals)")
	fs.StringVar(&l.header, "header", "auto", "whether the -data CSV file's first row is a header: yes, no, or auto (a header when some field is not a number and all such fields are names, which start with a letter or '_')")
	fs.IntVar(&l.epochs, "epochs", 30, "passes over the training data (for a graph with no inputs: training steps, unless -steps is given)")
	fs.IntVar(&l.steps, "steps", 0, "training steps of a graph with no inputs (default: -epochs)")
	fs.IntVar(&l.rows, "rows", 0, "rows of a generated data set (default: 2000 for kan2d, 4000 for reverse)")
	fs.IntVar(&l.vocab, "vocab", 0, "tokens of -data reverse (default: the classes of the model's logits)")
	fs.Uint64Var(&l.seed, "seed", 1, "seed of the param initialization, the split and the shuffles")
	fs.Float64Var(&l.holdout, "holdout", 0.2, "fraction of the rows held out for evaluation (unless -eval-data gives the held-out rows)")
	fs.BoolVar(&l.standardize, "standardize", true, "scale each feature to mean 0, std 1 (statistics of the training rows); default true for CSV files and digits, false for the generated sets and never for token inputs")
	fs.StringVar(&l.initPath, "init", "", "safetensors file with initial values for some or all params")
	fs.StringVar(&l.savePath, "save", "", "write the trained params to this safetensors file")
	fs.StringVar(&l.ckptDir, "checkpoint", "", "save the training state (params, optimizer state, step, data order) in this directory, atomically: at the end of each epoch, or every -save-every steps")
	fs.IntVar(&l.saveEvery, "save-every", 0, "with -checkpoint, save the training state every N training steps (default: at the end of each epoch, or of the run for a graph with no inputs)")
	fs.BoolVar(&l.resume, "resume", false, "continue the run saved in -checkpoint: the same flags give bitwise the same params as a run never stopped")
	fs.StringVar(&l.plotPath, "plot", "", "draw the loss and the metric per epoch (the loss per step for a graph with no inputs) in this PNG file")
	l.evalFlags.add(fs)
	return l
}

// check checks the flags' values; fs tells which were set.
func (l *loopFlags) check(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) { l.standardizeSet = l.standardizeSet || f.Name == "standardize" })
	if _, err := dataset.ParseHeader(l.header); err != nil {
		return usagef("-header: %v", err)
	}
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
	if l.saveEvery < 0 {
		return usagef("-save-every must be at least 1, found %d", l.saveEvery)
	}
	if l.ckptDir == "" && (l.saveEvery > 0 || l.resume) {
		return usagef("-save-every and -resume need -checkpoint DIR")
	}
	if l.resume && l.initPath != "" {
		return usagef("-init and -resume both set the params; give one")
	}
	if !(l.holdout > 0 && l.holdout < 1) {
		return usagef("-holdout must be in (0,1), found %g", l.holdout)
	}
	return l.evalFlags.check(fs)
}

// checkFiles checks the loop's outputs (-save, -save-onnx, -plot, -save-best,
// -checkpoint) against its inputs (model, -data, -init, -eval-data) and each other, and that each can be
// written (see the function checkFiles).
func (l *loopFlags) checkFiles(model fileArg) error {
	ins := []fileArg{model, {"-init", l.initPath}, {"-eval-data", l.evalPath}}
	switch l.dataPath {
	case digitsData, kan2dData, reverseData:
	default:
		ins = append(ins, fileArg{"-data", l.dataPath})
	}
	return checkFiles(ins, []fileArg{{"-save", l.savePath}, {"-save-onnx", l.saveONNX}, {"-plot", l.plotPath}, {"-save-best", l.saveBest}, {"-checkpoint" + dirArg, l.ckptDir}})
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

// data loads -data for the model t trains, or the embedded digits
// data when it is "digits" or when it is not given and builtin is set; it
// returns the data and its name for messages. A graph with no inputs takes
// no data: it returns nil.
func (l *loopFlags) data(t *kiln.Trainer, builtin bool) (*dataset.Dataset, string, error) {
	sig := t.Signature()
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
	d, err := l.loadDataFile(t, l.dataPath)
	return d, l.dataPath, err
}

// generated reports whether -data names a generated data set.
func (l *loopFlags) generated() bool { return l.dataPath == kan2dData || l.dataPath == reverseData }

// train splits data, applies -init or -resume, runs the epochs with a
// progress line each, reports the held-out metric and applies -save,
// -checkpoint and -plot. A graph with no inputs runs its steps instead
// (see trainSteps).
//
// settings are the run's settings that change its result and that the
// command knows (see trainSettings); a checkpoint records them with the
// loop's own, and -resume refuses a run whose settings differ.
func (l *loopFlags) train(stdout io.Writer, t *kiln.Trainer, model, optDesc string, settings map[string]string, data *dataset.Dataset, dataName string) error {
	if t.Rank() != 0 {
		// Rank 0 alone writes; every rank still computes what it writes.
		// With sharded optimizer state each rank checkpoints its own
		// shard, rank r in DIR/rankR.
		l.savePath, l.saveONNX, l.plotPath, l.saveBest = "", "", "", ""
		if t.Sharded() && l.ckptDir != "" {
			l.ckptDir = filepath.Join(l.ckptDir, fmt.Sprintf("rank%d", t.Rank()))
		}
	}
	if l.initPath != "" {
		if err := t.LoadParams(l.initPath); err != nil {
			return err
		}
	}
	sig := t.Signature()
	if err := l.evalFlags.checkFor(sig); err != nil {
		return err
	}
	if sig.Kind == kiln.NoData {
		return l.trainSteps(stdout, t, model, optDesc, settings)
	}
	cfg := l.config(model, settings, t)
	trainSet, heldOut, err := l.split(t, data, dataName, cfg)
	if err != nil {
		return err
	}
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
	cfg["-standardize"] = strconv.FormatBool(standardize)
	cfg[dataHashKey] = dataHash(data)
	nb := trainSet.NumBatches(t.BatchSize())
	fmt.Fprintf(stdout, "model %s: %s, batch %d, %s; %d training rows, %d held out\n",
		model, paramsDesc(t), t.BatchSize(), optDesc, trainSet.N, heldOut.N)
	if nb == 0 {
		return fmt.Errorf("training on %s: the data has %d training rows, fewer than one batch of %d", dataName, trainSet.N, t.BatchSize())
	}
	// With -accum K, an epoch runs the batches that make whole updates;
	// with N ranks, each step trains N batches, one on each.
	if k, n := t.Accum(), t.Ranks(); k > 1 || n > 1 {
		if nb = t.EpochSteps(nb); nb == 0 {
			return fmt.Errorf("training on %s: the data has %d training rows, fewer than one update of %d batches of %d", dataName, trainSet.N, k*n, t.BatchSize())
		}
		if n > 1 {
			fmt.Fprintf(stdout, "data-parallel on %d ranks: %d batches a step, one on each rank; %d steps an epoch\n", n, n, nb)
		}
		if k > 1 {
			fmt.Fprintf(stdout, "accumulating %d batches an update: %d updates an epoch\n", k, nb/k)
		}
	}
	st := kiln.TrainState{Epoch: 1, Config: cfg}
	ev := &evaluator{l, t, model, heldOut}
	total := int64(l.epochs) * int64(nb)
	scheduled := scheduleTotal(t, total/int64(t.Accum()), cfg)
	if l.resume {
		if st, err = l.restore(stdout, t, cfg); err != nil {
			return err
		}
		if st.Epoch > l.epochs {
			return fmt.Errorf("checkpoint %s: the run is at epoch %d, past -epochs %d", l.ckptDir, st.Epoch, l.epochs)
		}
	}
	if err := scheduled(); err != nil {
		return err
	}
	if err := t.Broadcast(); err != nil {
		return err
	}
	short, long := metricNames(sig)
	ctx := context.Background()
	interrupt, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	bar := newProgress(stdout, total, t.BatchSize(), st.Step)
	var curves plotData
	for e := 1; e <= l.epochs; e++ {
		// The order of epoch e is the shuffles of epochs 1..e applied in
		// turn: a resumed run replays those of the epochs it skips.
		trainSet.Shuffle(l.seed + uint64(e))
		if e < st.Epoch {
			continue
		}
		start := time.Now()
		if e > st.Epoch {
			st.Epoch, st.Batch, st.Tally = e, 0, kiln.Tally{}
		}
		for st.Batch < nb {
			if err := t.TrainBatch(ctx, trainSet, st.Batch, &st.Tally); err != nil {
				bar.clear()
				return fmt.Errorf("training on %s: %v", dataName, err)
			}
			st.Batch++
			st.Step++
			loss, _ := st.Tally.Result()
			bar.update(st.Step, fmt.Sprintf("epoch %d/%d batch %d/%d", e, l.epochs, st.Batch, nb), loss)
			if err := ev.every(ctx, stdout, &st, bar); err != nil {
				return err
			}
			if l.saveEvery > 0 && st.Step%int64(l.saveEvery) == 0 {
				if err := saveCheckpoint(t, l.ckptDir, st); err != nil {
					bar.clear()
					return err
				}
			}
			if interrupt.Err() != nil && st.Step < total {
				stop() // a second signal ends the process at once
				bar.clear()
				return l.interrupted(t, st)
			}
		}
		// Save at the end of each epoch without -save-every, and at the end
		// of the run with it.
		if l.ckptDir != "" && (l.saveEvery == 0 || (e == l.epochs && st.Step%int64(l.saveEvery) != 0)) {
			if err := saveCheckpoint(t, l.ckptDir, st); err != nil {
				bar.clear()
				return err
			}
		}
		epoch, err := t.ReduceTally(st.Tally)
		if err != nil {
			return err
		}
		loss, m := epoch.Result()
		hl, hm, err := t.Evaluate(ctx, heldOut)
		bar.clear()
		if err != nil {
			return fmt.Errorf("evaluating on %s: %v", dataName, err)
		}
		fmt.Fprintf(stdout, "epoch %3d/%d  loss %.4f  train %s %s  held-out loss %.4f  %s %s  (%s)\n",
			e, l.epochs, loss, short, metric(sig, m), hl, short, metric(sig, hm), time.Since(start).Round(time.Millisecond))
		curves.add(float64(e), loss, hl, m, hm)
		if err := ev.consider(&st, hl, hm); err != nil {
			return err
		}
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
	if n := t.Ranks(); n > 1 {
		sum, err := t.SameParams()
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "all %d ranks hold the same params (sha256 %x)\n", n, sum[:8])
	}
	ev.report(stdout, st)
	return l.finish(stdout, t, model, "epoch", long, curves)
}

// settingsVersion marks a checkpoint whose config records every setting
// that changes the result (settingsKey). A checkpoint without it was saved
// by an older kiln that recorded fewer, and is not resumed.
const (
	settingsKey     = "settings"
	settingsVersion = "4"
)

// config returns what a checkpoint records of the run, which a resumed run
// must match: every setting that changes the result. settings are the
// command's (the model's identity, the optimizer and its hyperparameters,
// -device); config adds the batch, the seed, the data and how it is split.
// -workers and -recompute are not recorded: the result is bitwise the same
// for any value.
func (l *loopFlags) config(model string, settings map[string]string, t *kiln.Trainer) map[string]string {
	cfg := map[string]string{
		settingsKey: settingsVersion, "model": model,
		"-seed": strconv.FormatUint(l.seed, 10), "batch": strconv.Itoa(t.BatchSize()),
	}
	maps.Copy(cfg, settings)
	if t.Signature().Kind != kiln.NoData {
		data := l.dataPath
		if data == "" {
			data = digitsData
		}
		cfg["-data"] = data
		cfg["-holdout"] = strconv.FormatFloat(l.holdout, 'g', -1, 64)
		cfg["-rows"] = strconv.Itoa(l.rows)
		cfg["-vocab"] = strconv.Itoa(l.vocab)
	}
	return cfg
}

// trainSettings returns the settings of kiln train that change the result
// and that the loop's flags do not hold: the model's identity (modelHash),
// the ONNX import flags mf, the optimizer with every hyperparameter it
// reads, -O0 and -device. The
// keys are the flags' names. -O0 is one because canonicalize, which it
// turns off, changes results in their last bits (docs/ARCHITECTURE.md).
func trainSettings(g *ir.Graph, mf *modelFlags, opt passes.OptimizerConfig, o0 bool, device string) map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	s := map[string]string{
		modelHashKey: modelHash(g), "-optimizer": opt.Kind, "-lr": f(opt.LR),
		"-weight-decay": f(opt.WeightDecay), "-clip-grad": f(opt.ClipGrad),
		"-O0": strconv.FormatBool(o0), "-device": device,
	}
	if opt.ClipNorm > 0 { // recorded when set: older checkpoints and plans lack it
		s["-clip-norm"] = f(opt.ClipNorm)
	}
	if opt.Accum > 1 { // likewise
		s["-accum"] = strconv.FormatInt(opt.Accum, 10)
	}
	mf.settings(s)
	b := strconv.FormatBool
	switch opt.Kind {
	case "adam", "adamw":
		s["-beta1"], s["-beta2"], s["-eps"], s["-amsgrad"] = f(opt.Beta1), f(opt.Beta2), f(opt.Eps), b(opt.AMSGrad)
	case "rmsprop":
		s["-alpha"], s["-eps"], s["-momentum"], s["-centered"] = f(opt.Alpha), f(opt.Eps), f(opt.Momentum), b(opt.Centered)
	default:
		s["-momentum"], s["-dampening"], s["-nesterov"] = f(opt.Momentum), f(opt.Dampening), b(opt.Nesterov)
	}
	s["-lr-schedule"], s["-warmup"] = cmp.Or(opt.Schedule, "constant"), strconv.FormatInt(opt.Warmup, 10)
	if opt.Schedule == "step" {
		s["-lr-step-size"], s["-lr-gamma"] = strconv.FormatInt(opt.StepSize, 10), f(opt.Gamma)
	}
	return s
}

// scheduleTotalKey names T, the run's number of updates, in a run's
// settings when its learning-rate schedule reads it: a resumed run with
// another -epochs would follow another schedule.
const scheduleTotalKey = "schedule updates"

// scheduleTotal records total, the run's number of updates, in cfg when
// the training plan's schedule reads it (passes.ScheduleTotal), and returns
// the function that sets those states to it, to call after -resume restores
// the state.
func scheduleTotal(t *kiln.Trainer, total int64, cfg map[string]string) func() error {
	var names []string
	for _, i := range t.Plan.States {
		if b := t.Plan.Buffers[i]; strings.HasPrefix(b.Name, passes.ScheduleTotal+".") {
			names = append(names, b.Name)
		}
	}
	if len(names) > 0 {
		cfg[scheduleTotalKey] = strconv.FormatInt(total, 10)
	}
	return func() error {
		for _, n := range names {
			v, err := t.Executor().Get(n)
			if err != nil {
				return err
			}
			v = kernels.New(v.Type)
			if err := kernels.SetFloat64s(v, []float64{float64(total)}); err != nil {
				return err
			}
			if err := t.Executor().Set(n, v); err != nil {
				return err
			}
		}
		return nil
	}
}

// dataHashKey names the data's identity in a run's settings: a file
// edited in place, or read with another -header, is other data under the
// same -data.
const dataHashKey = "data sha256"

// dataHash returns the first 16 hex digits of the SHA-256 of d's rows as
// loaded (before the split and standardization, which other settings
// record).
func dataHash(d *dataset.Dataset) string {
	h := sha256.New()
	var b [8]byte
	put := func(u uint64) {
		binary.LittleEndian.PutUint64(b[:], u)
		h.Write(b[:])
	}
	for _, n := range []int{d.N, d.D, d.K, d.Classes, d.Vocab, len(d.X), len(d.Y), len(d.R)} {
		put(uint64(n))
	}
	for _, v := range d.X {
		put(math.Float64bits(v))
	}
	for _, v := range d.Y {
		put(uint64(v))
	}
	for _, v := range d.R {
		put(math.Float64bits(v))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// modelHashKey names the model's identity in a run's settings.
const modelHashKey = "model sha256"

// modelHash returns the first 16 hex digits of the SHA-256 of g's text:
// two models of the same name but different ops, shapes or consts differ.
func modelHash(g *ir.Graph) string {
	sum := sha256.Sum256([]byte(g.Format()))
	return hex.EncodeToString(sum[:8])
}

// restore checks that the checkpoint in -checkpoint was made by a run with
// the settings cfg and loads it. A difference is one line naming every
// setting that differs, with the checkpoint's value and this run's.
func (l *loopFlags) restore(stdout io.Writer, t *kiln.Trainer, cfg map[string]string) (kiln.TrainState, error) {
	saved, err := kiln.ReadCheckpoint(l.ckptDir)
	if err != nil {
		return saved, err
	}
	if saved.Config[settingsKey] != settingsVersion {
		return saved, fmt.Errorf("-resume: checkpoint %s was saved by an older kiln, which did not record every setting that changes the result; start the run again", l.ckptDir)
	}
	best, hasBest := saved.Config[bestKey] // not a setting: carried over
	delete(saved.Config, bestKey)
	if was, has := settingsDiff(saved.Config, cfg); was != "" {
		return saved, fmt.Errorf("-resume: checkpoint %s was trained with %s, this run has %s", l.ckptDir, was, has)
	}
	st, err := t.LoadCheckpoint(l.ckptDir)
	if err != nil {
		return st, err
	}
	if t.Rank() != 0 {
		st.Tally = kiln.Tally{} // the checkpoint's is every rank's, kept by rank 0
	}
	st.Config = cfg
	if hasBest {
		cfg[bestKey] = best
	}
	where := ""
	if st.Epoch > 0 {
		where = fmt.Sprintf(" (epoch %d, batch %d)", st.Epoch, st.Batch)
	}
	fmt.Fprintf(stdout, "resumed from %s at step %d%s\n", l.ckptDir, st.Step, where)
	return st, nil
}

// settingsDiff lists the settings whose values differ between a checkpoint's
// config old and this run's cfg, in key order, as "KEY VALUE, ..." for
// each side; both are "" when they agree. A setting one side lacks is
// listed only when no setting both have differs (sgd records -momentum,
// adam its betas: a change of optimizer names the optimizer).
func settingsDiff(old, cfg map[string]string) (was, has string) {
	keys := slices.Collect(maps.Keys(cfg))
	for k := range old {
		if _, ok := cfg[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var both, one []string
	for _, k := range keys {
		o, ok1 := old[k]
		c, ok2 := cfg[k]
		switch {
		case ok1 && ok2 && o != c:
			both = append(both, k)
		case ok1 != ok2:
			one = append(one, k)
		}
	}
	if len(both) == 0 {
		both = one
	}
	value := func(m map[string]string, k string) string {
		if v, ok := m[k]; ok {
			return k + " " + v
		}
		return k + " (none)"
	}
	var a, b []string
	for _, k := range both {
		a, b = append(a, value(old, k)), append(b, value(cfg, k))
	}
	return strings.Join(a, ", "), strings.Join(b, ", ")
}

// trainSteps trains a graph with no inputs for -steps (or -epochs) steps,
// printing the loss about 20 times, and reports the loss of the forward
// graph at the end.
func (l *loopFlags) trainSteps(stdout io.Writer, t *kiln.Trainer, model, optDesc string, settings map[string]string) error {
	steps := int64(l.steps)
	if steps == 0 {
		steps = int64(l.epochs)
	}
	if k := int64(t.Accum()); steps%k != 0 {
		return usagef("%d steps are not whole updates of -accum %d steps", steps, k)
	}
	fmt.Fprintf(stdout, "model %s: %s, %s; no inputs: %d training steps\n",
		model, paramsDesc(t), optDesc, steps)
	cfg := l.config(model, settings, t)
	st := kiln.TrainState{Config: cfg}
	scheduled := scheduleTotal(t, steps/int64(t.Accum()), cfg)
	if l.resume {
		var err error
		if st, err = l.restore(stdout, t, cfg); err != nil {
			return err
		}
		if st.Step > steps {
			return fmt.Errorf("checkpoint %s: the run is at step %d, past %d steps", l.ckptDir, st.Step, steps)
		}
	}
	if err := scheduled(); err != nil {
		return err
	}
	ctx := context.Background()
	interrupt, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	every := max(1, (steps+19)/20)
	bar := newProgress(stdout, steps, 0, st.Step)
	var curves plotData
	start := time.Now()
	for st.Step < steps {
		if err := t.Step(ctx, &st.Tally); err != nil {
			bar.clear()
			return fmt.Errorf("training step %d: %v", st.Step+1, err)
		}
		st.Step++
		loss, _ := st.Tally.Result()
		bar.update(st.Step, "", loss)
		if st.Step%every == 0 || st.Step == steps {
			bar.clear()
			fmt.Fprintf(stdout, "step %5d/%d  loss %.6g  (%s)\n", st.Step, steps, loss, time.Since(start).Round(time.Millisecond))
			curves.add(float64(st.Step), loss, math.NaN(), math.NaN(), math.NaN())
			st.Tally, start = kiln.Tally{}, time.Now()
		}
		if (l.saveEvery > 0 && st.Step%int64(l.saveEvery) == 0) || (l.ckptDir != "" && st.Step == steps) {
			if err := saveCheckpoint(t, l.ckptDir, st); err != nil {
				bar.clear()
				return err
			}
		}
		if interrupt.Err() != nil && st.Step < steps {
			stop() // a second signal ends the process at once
			bar.clear()
			return l.interrupted(t, st)
		}
	}
	bar.clear()
	loss, _, err := t.Evaluate(ctx, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "final loss %.6g after %d steps\n", loss, steps)
	return l.finish(stdout, t, model, "step", "", curves)
}

// finish applies -save and -save-onnx, then -plot, so that a plot that
// fails loses no params; a write that fails goes to a fallback file (see
// writeOutput).
func (l *loopFlags) finish(stdout io.Writer, t *kiln.Trainer, model, x, metricName string, curves plotData) error {
	if err := l.save(stdout, t, model); err != nil {
		return err
	}
	if err := l.saveModel(stdout, t, model); err != nil {
		return err
	}
	return l.plot(stdout, model, x, metricName, curves)
}

// interrupted ends a run stopped by SIGINT or SIGTERM after the step st
// records: it saves the checkpoint when -checkpoint is given and returns
// the error that says so (the command exits 1). The signal is only looked
// at between steps, so the checkpoint holds whole steps, and a run resumed
// from it ends as one never interrupted would.
func (l *loopFlags) interrupted(t *kiln.Trainer, st kiln.TrainState) error {
	if l.ckptDir == "" {
		return fmt.Errorf("interrupted at step %d; nothing saved (-checkpoint DIR saves the run for -resume)", st.Step)
	}
	if t.Ranks() > 1 {
		// The ranks see the signal at different steps: a checkpoint would
		// wait for the others in a collective.
		return fmt.Errorf("interrupted at step %d; nothing saved (with -dist, -checkpoint saves at the end of each epoch or every -save-every steps)", st.Step)
	}
	if err := t.SaveCheckpoint(l.ckptDir, st); err != nil {
		return fmt.Errorf("interrupted at step %d; saving the checkpoint: %v", st.Step, err)
	}
	return fmt.Errorf("interrupted at step %d; checkpoint saved in %s", st.Step, l.ckptDir)
}

// save applies -save.
func (l *loopFlags) save(stdout io.Writer, t *kiln.Trainer, model string) error {
	if l.savePath == "" {
		return nil
	}
	data, err := encodeParams(t, model)
	if err != nil {
		return err
	}
	if err := writeOutput("-save", l.savePath, "the trained params", model, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved the trained params to %s\n", l.savePath)
	return nil
}

// saveModel applies -save-onnx: the ONNX model the run trained, with its
// initializers replaced by the trained params and the running statistics
// training updated.
func (l *loopFlags) saveModel(stdout io.Writer, t *kiln.Trainer, model string) error {
	if l.saveONNX == "" {
		return nil
	}
	src, err := os.ReadFile(l.modelPath)
	if err != nil {
		return fmt.Errorf("-save-onnx: reading the model again: %v", err)
	}
	bufs := slices.Clone(t.Plan.Params)
	for _, i := range t.Plan.States {
		if slices.ContainsFunc(l.onnxModel.States, func(s safetensors.Tensor) bool { return s.Name == t.Plan.Buffers[i].Name }) {
			bufs = append(bufs, i) // a running statistic, not the optimizer's
		}
	}
	tensors, err := t.Tensors(bufs)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := l.onnxModel.WriteTrained(src, tensors, &b); err != nil {
		return fmt.Errorf("-save-onnx: %s: %v", l.modelPath, err)
	}
	if err := writeOutput("-save-onnx", l.saveONNX, "the trained model", model, b.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "saved the trained model to %s\n", l.saveONNX)
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
	cflags := addCompileFlags(fs, withTraining|withRecompute)
	lf := addLoopFlags(fs)
	fs.StringVar(&lf.saveONNX, "save-onnx", "", "write the ONNX model trained (MODEL.onnx) with its initializers replaced by the trained params to this file")
	workers := addWorkersFlag(fs)
	device := addDeviceFlag(fs)
	df := addDistFlags(fs, true)
	pos, err := parseFlags(fs, args, stdout)
	if err != nil {
		return err
	}
	if err := lf.check(fs); err != nil {
		return err
	}
	if err := checkRun(*workers, *device); err != nil {
		return err
	}
	if err := df.check(); err != nil {
		return err
	}
	opt, err := cflags.optimizer()
	if err != nil {
		return err
	}
	dbg, err := debugSwitches()
	if err != nil {
		return err
	}
	var (
		g      *ir.Graph
		params []safetensors.Tensor // the initial values the model file carries
	)
	switch len(pos) {
	case 0:
		if lf.dataPath != "" && lf.dataPath != digitsData {
			return usagef("-data needs a MODEL.kir to train")
		}
		if given := cflags.model.onnxOnly(); len(given) > 0 || lf.saveONNX != "" {
			if lf.saveONNX != "" {
				given = append(given, "-save-onnx")
			}
			return usagef("%s is for ONNX models; give a MODEL.onnx", strings.Join(given, ", "))
		}
		if err := lf.checkFiles(fileArg{}); err != nil {
			return err
		}
		if g, err = ir.Parse(examples.DigitsMLPFile, examples.DigitsMLP); err != nil {
			return err
		}
		if err := cflags.model.freezeKIR(examples.DigitsMLPFile, g); err != nil {
			return err
		}
	case 1:
		if lf.saveONNX != "" && !isONNX(pos[0]) {
			return usagef("-save-onnx writes an ONNX model back; %s is not a .onnx file (-save writes the params)", pos[0])
		}
		if err := lf.checkFiles(fileArg{"MODEL.kir", pos[0]}); err != nil {
			return err
		}
		if g, params, lf.onnxModel, err = loadModel(pos[0], cflags.model); err != nil {
			return err
		}
		lf.modelPath = pos[0]
		if lf.dataPath == "" && len(g.Inputs()) > 0 {
			return usagef("missing -data FILE.csv for %s", pos[0])
		}
	default:
		return usagef("expected at most one MODEL.kir, found %d arguments", len(pos))
	}
	bucket, _ := df.bucketBytes() // checked
	return df.run(stdout, func(stdout io.Writer, comm *dist.Comm) error {
		opts := kiln.Options{Debug: dbg, O0: *cflags.o0, Workers: *workers, Device: *device, Comm: comm, BucketBytes: bucket, Shard: df.shard}
		if err := cflags.ckpt.apply(&opts); err != nil {
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
		if err := setModelParams(t, params); err != nil {
			return err
		}
		l := *lf // each rank's own
		data, dataName, err := l.data(t, len(pos) == 0)
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			fmt.Fprintf(stdout, "training the built-in example %s on the digits data (%d rows; UCI, CC BY 4.0)\n", examples.DigitsMLPFile, data.N)
		}
		if report != nil && cflags.ckpt.active() {
			fmt.Fprint(stdout, report)
		}
		settings := trainSettings(g, cflags.model, *opt, *cflags.o0, *device)
		if n := t.Ranks(); n > 1 {
			settings["-dist ranks"] = strconv.Itoa(n)
			settings["-dist-shard"] = strconv.FormatBool(df.shard)
		}
		return l.train(stdout, t, g.Name, fmt.Sprintf("%s lr %g", opt.Kind, opt.LR), settings, data, dataName)
	})
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

// encodeParams returns the trained params of t as a safetensors file.
func encodeParams(t *kiln.Trainer, model string) ([]byte, error) {
	out, err := t.Params()
	if err != nil {
		return nil, err
	}
	return safetensors.Encode(out, map[string]string{"graph": model})
}
