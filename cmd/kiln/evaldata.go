package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/dataset"
)

// evalFlags are the training loop's flags for its held-out data: where it
// comes from, how often it is evaluated, and where the best params go.
type evalFlags struct {
	evalPath   string
	evalEvery  int
	saveBest   string
	holdoutSet bool
}

func (e *evalFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&e.evalPath, "eval-data", "", "held-out data to evaluate on, in a form -data takes (CSV, .safetensors, .npz); the model then trains on every row of -data (default: -holdout of -data's rows)")
	fs.IntVar(&e.evalEvery, "eval-every", 0, "also evaluate on the held-out data every N training steps, printing the loss and metric on a line of their own (default: at the end of each epoch only)")
	fs.StringVar(&e.saveBest, "save-best", "", "write the params (as -save does) with the best held-out metric so far (the lower loss breaks a tie; the lowest loss when the model has no metric) to this safetensors file, atomically, at each evaluation that improves it")
}

// check checks the flags' values; fs tells which were set.
func (e *evalFlags) check(fs *flag.FlagSet) error {
	fs.Visit(func(f *flag.Flag) { e.holdoutSet = e.holdoutSet || f.Name == "holdout" })
	if e.evalEvery < 0 {
		return usagef("-eval-every must be at least 1, found %d", e.evalEvery)
	}
	if e.evalPath != "" && e.holdoutSet {
		return usagef("-eval-data and -holdout both choose the held-out rows; give one")
	}
	return nil
}

// checkFor refuses the flags for a graph with no inputs, which has no
// held-out data.
func (e *evalFlags) checkFor(sig kiln.Signature) error {
	if sig.Kind != kiln.NoData {
		return nil
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"-eval-data", e.evalPath != ""}, {"-eval-every", e.evalEvery > 0}, {"-save-best", e.saveBest != ""}} {
		if f.set {
			return usagef("%s: the graph takes no inputs, so there is no held-out data", f.name)
		}
	}
	return nil
}

// The keys of the held-out data's identity in a run's settings, recorded
// only with -eval-data, and of the best evaluation so far (with
// -save-best; not a setting, so -resume does not compare it).
const (
	evalDataKey     = "-eval-data"
	evalDataHashKey = "eval data sha256"
	bestKey         = "best held-out"
)

// split returns the rows to train on and the held-out rows: -eval-data's,
// with every row of data to train on (in the order Split gives), else
// -holdout of data's rows. With -eval-data it records the file and its
// rows' hash (as loaded, as dataHash does for -data) in cfg.
func (l *loopFlags) split(t *kiln.Trainer, data *dataset.Dataset, dataName string, cfg map[string]string) (train, heldOut *dataset.Dataset, err error) {
	if l.evalPath == "" {
		train, heldOut = data.Split(l.holdout, l.seed)
		return train, heldOut, nil
	}
	heldOut, err = l.loadDataFile(t, l.evalPath)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case heldOut.D != data.D:
		return nil, nil, fmt.Errorf("-eval-data %s: expected %d features per row, as %s has, found %d", l.evalPath, data.D, dataName, heldOut.D)
	case heldOut.Targets() != data.Targets():
		return nil, nil, fmt.Errorf("-eval-data %s: expected %d targets per row, as %s has, found %d", l.evalPath, data.Targets(), dataName, heldOut.Targets())
	}
	cfg[evalDataKey], cfg[evalDataHashKey] = l.evalPath, dataHash(heldOut)
	train, _ = data.Split(0, l.seed)
	return train, heldOut, nil
}

// evaluator applies -eval-every and -save-best during a run.
type evaluator struct {
	l       *loopFlags
	t       *kiln.Trainer
	model   string
	heldOut *dataset.Dataset
}

// every evaluates after step st.Step when -eval-every says so, printing a
// line, and applies -save-best.
func (e *evaluator) every(ctx context.Context, stdout io.Writer, st *kiln.TrainState, bar *progress) error {
	if e.l.evalEvery == 0 || st.Step%int64(e.l.evalEvery) != 0 {
		return nil
	}
	loss, m, err := e.t.Evaluate(ctx, e.heldOut)
	bar.clear()
	if err != nil {
		return fmt.Errorf("evaluating on the held-out data: %v", err)
	}
	sig := e.t.Signature()
	short, _ := metricNames(sig)
	fmt.Fprintf(stdout, "step %5d  held-out loss %.4f  %s %s\n", st.Step, loss, short, metric(sig, m))
	return e.consider(st, loss, m)
}

// consider applies -save-best to an evaluation after st.Step with the
// held-out loss and metric m: when it is the best so far (the highest
// metric, the lower loss breaking a tie, or the lowest loss when the model
// has no metric), it writes the params and records the evaluation in
// st.Config, so that a checkpoint keeps it for -resume.
func (e *evaluator) consider(st *kiln.TrainState, loss, m float64) error {
	if e.l.saveBest == "" {
		return nil
	}
	if e.t.Signature().Output == "" {
		m = 0 // the loss alone decides
	}
	if math.IsNaN(m) || math.IsNaN(loss) {
		return nil
	}
	if s, ok := st.Config[bestKey]; ok {
		var step int64
		var bm, bl float64
		if _, err := fmt.Sscan(s, &step, &bm, &bl); err != nil {
			return fmt.Errorf("-resume: checkpoint %s: bad %q %q", e.l.ckptDir, bestKey, s)
		}
		if !(m > bm || (m == bm && loss < bl)) {
			return nil
		}
	}
	data, err := encodeParams(e.t, e.model)
	if err != nil {
		return err
	}
	if err := writeOutput("-save-best", e.l.saveBest, "the best params", e.model, data); err != nil {
		return err
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	st.Config[bestKey] = strconv.FormatInt(st.Step, 10) + " " + f(m) + " " + f(loss)
	return nil
}

// report prints where -save-best's params came from.
func (e *evaluator) report(stdout io.Writer, st kiln.TrainState) {
	if e.l.saveBest == "" {
		return
	}
	s, ok := st.Config[bestKey]
	if !ok {
		fmt.Fprintf(stdout, "no held-out evaluation gave a number; %s not written\n", e.l.saveBest)
		return
	}
	var step int64
	var m, loss float64
	fmt.Sscan(s, &step, &m, &loss)
	sig := e.t.Signature()
	_, long := metricNames(sig)
	what := fmt.Sprintf("held-out loss %.4f", loss)
	if sig.Output != "" {
		what += ", " + long + " " + metric(sig, m)
	}
	fmt.Fprintf(stdout, "saved the best params (step %d, %s) to %s\n", step, what, e.l.saveBest)
}
