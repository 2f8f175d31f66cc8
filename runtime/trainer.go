package runtime

import (
	"context"
	"fmt"
	"math"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/internal/sysmem"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// Trainer trains a graph: on a dataset, or, for a graph with no inputs, by
// running its training step. The graph's signature is the convention, read
// from its inputs and outputs (see Signature):
//
//   - The first output is the loss.
//   - No inputs: the graph holds its own data (consts and params); each
//     training step is Step, and the loss is all there is to report.
//   - Two inputs, the features then the targets, both with the batch size B
//     as their first dimension. The features are floats [B,D], or of any
//     rank from 2 ([B,C,H,W] for images: each data row's features fill the
//     dims after the batch in order), or integer tokens [B,T] (i32 or i64). The targets are integer class labels [B],
//     integer labels per token [B,T], or float values [B] or [B,K]
//     (regression).
//   - An optional second output gives the metric: for labels [B], logits
//     [B,C] give the accuracy (the share of rows whose arg-max logit is the
//     label); for labels [B,T], logits [B,T,C] or [B*T,C] give the token
//     accuracy; for float targets, a prediction of the targets' size with B
//     as its first dimension ([B], [B,1], [B,K]) gives R² = 1 − SS_res/SS_tot,
//     pooled over the K columns, each around its own mean. A second output
//     of any other shape is not read.
//
// Any other signature is an error that names the input, what was expected
// and what was found.
type Trainer struct {
	Plan     *planner.Plan // the training step
	EvalPlan *planner.Plan // the forward graph without dropout, for evaluation

	sig         Signature
	accum       int // batches an update (the period of the plan's accumulation counter)
	comm        *dist.Comm
	ranks       int  // processes training together (1 without comm)
	sharded     bool // each rank keeps a shard of the optimizer state
	train, eval Executor
	xt, yt      kernels.Tensor // the batch fed to the executors (Set copies it in)
	x           []float64      // a batch of features
	y           []int64        // a batch of labels
	r           []float64      // a batch of float targets
	feedY       []float64      // the targets as float64s, for kernels.SetFloat64s
}

// TargetKind says what a trained graph's targets are.
type TargetKind int

const (
	// NoData marks a graph with no inputs.
	NoData TargetKind = iota
	// Labels are integer class labels [B].
	Labels
	// TokenLabels are integer labels per token [B,T].
	TokenLabels
	// Regression targets are float values [B] or [B,K].
	Regression
)

// Signature is the convention a trained graph follows (see Trainer).
type Signature struct {
	Kind              TargetKind
	Features, Targets string // the inputs' names; "" with NoData
	Batch             int    // B; 0 with NoData
	Width             int    // features (D, the dims after the batch together) or tokens (T) per row
	Tokens            bool   // the features are integer tokens
	K                 int    // targets per row: 1 for Labels, T for TokenLabels, K for Regression
	Output            string // the second output that gives the metric; "" when none
	Classes           int    // the logits' classes (Labels and TokenLabels with an Output)
}

// Metric names what the second output measures: "accuracy", "token
// accuracy", "R²", or "" when the graph has no such output.
func (s Signature) Metric() string {
	if s.Output == "" {
		return ""
	}
	switch s.Kind {
	case Labels:
		return "accuracy"
	case TokenLabels:
		return "token accuracy"
	case Regression:
		return "R²"
	}
	return ""
}

// InputSignature reads the training convention (see Trainer) from g's
// inputs: everything but the metric's output, which only a plan tells.
func InputSignature(g *ir.Graph) (Signature, error) {
	var s Signature
	ins := g.Inputs()
	switch len(ins) {
	case 0:
		return s, nil
	case 2:
	default:
		return s, fmt.Errorf("a trained graph takes no inputs, or two (features [B,D] or tokens [B,T], then targets [B], [B,T] or [B,K]); found %d", len(ins))
	}
	fx, ty := g.Type(ins[0]), g.Type(ins[1])
	s.Features, s.Targets = g.Value(ins[0]).Name, g.Value(ins[1]).Name
	features := fx.DType.IsFloat() && len(fx.Shape) >= 2
	tokens := (fx.DType == ir.I32 || fx.DType == ir.I64) && len(fx.Shape) == 2
	if !features && !tokens {
		return s, fmt.Errorf("the first input %%%s must be float features [B,D] (or [B,C,H,W], any rank from 2: a row's features fill the dims after the batch in order) or integer tokens [B,T], found %s", s.Features, fx)
	}
	s.Batch, s.Width, s.Tokens = fx.Shape[0], fx.Shape[1:].NumElements(), tokens
	if len(ty.Shape) == 0 || len(ty.Shape) > 2 || ty.Shape[0] != s.Batch || !(ty.DType.IsFloat() || ty.DType.IsInt()) {
		return s, fmt.Errorf("the second input %%%s must be targets of batch %d: integer labels [%d] or [%d,T], or float values [%d] or [%d,K]; found %s",
			s.Targets, s.Batch, s.Batch, s.Batch, s.Batch, s.Batch, ty)
	}
	s.K = ty.Shape.NumElements() / s.Batch
	switch {
	case ty.DType.IsFloat():
		s.Kind = Regression
	case len(ty.Shape) == 1:
		s.Kind = Labels
	default:
		s.Kind = TokenLabels
	}
	return s, nil
}

// signature reads the convention of a training plan, its metric's output
// included.
func signature(p *planner.Plan) (Signature, error) {
	s, err := InputSignature(p.Graph)
	if err != nil || s.Kind == NoData || len(p.Outputs) < 2 {
		return s, err
	}
	out := p.Outputs[1]
	ot := p.Buffers[out.Buffer].Type
	if !ot.DType.IsFloat() || len(ot.Shape) == 0 {
		return s, nil
	}
	c := ot.Shape[len(ot.Shape)-1]
	switch s.Kind {
	case Labels:
		if len(ot.Shape) == 2 && ot.Shape[0] == s.Batch {
			s.Output, s.Classes = out.Name, c
		}
	case TokenLabels:
		t := s.K
		if (len(ot.Shape) == 3 && ot.Shape[0] == s.Batch && ot.Shape[1] == t) || (len(ot.Shape) == 2 && ot.Shape[0] == s.Batch*t) {
			s.Output, s.Classes = out.Name, c
		}
	case Regression:
		if ot.Shape[0] == s.Batch && ot.Shape.NumElements() == s.Batch*s.K {
			s.Output = out.Name
		}
	}
	return s, nil
}

// NewTrainerFromPlans builds a trainer from compiled plans, as a plan file
// holds them: train is the training step, eval the forward graph for
// evaluation; both must follow the convention of Trainer and share their
// params by name. It needs no compiler. x configures both executors: the
// device, the seed of the params' initial values, the NaN check and the
// workers.
func NewTrainerFromPlans(train, eval *planner.Plan, x ExecOptions) (*Trainer, error) {
	t := &Trainer{Plan: train, EvalPlan: eval}
	if err := train.CheckTraining(); err != nil {
		return nil, fmt.Errorf("the training plan: %w", err)
	}
	if err := eval.CheckEvaluation(); err != nil {
		return nil, fmt.Errorf("the evaluation plan: %w", err)
	}
	sig, err := signature(train)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", train.Graph.Name, err)
	}
	t.sig = sig
	if t.accum, err = accumPeriod(train); err != nil {
		return nil, fmt.Errorf("plan %s: %w", train.Graph.Name, err)
	}
	if t.ranks, err = checkRanks(train, x.Comm); err != nil {
		return nil, fmt.Errorf("plan %s: %w", train.Graph.Name, err)
	}
	t.comm = x.Comm
	for _, st := range train.Steps {
		t.sharded = t.sharded || st.Op == ir.OpShard
	}
	if t.ranks > 1 && sig.Kind == NoData {
		return nil, fmt.Errorf("plan %s: the graph takes no inputs, and data-parallel training splits batches of data over the ranks: there is nothing to split", train.Graph.Name)
	}
	if err := sameSignature(train, eval); err != nil {
		return nil, err
	}
	if err := checkTrainerMemory(train, eval, sig, x.Device); err != nil {
		return nil, err
	}
	if t.train, err = NewExecutor(train, x); err != nil {
		return nil, err
	}
	if t.eval, err = NewExecutor(eval, x); err != nil {
		t.train.Close()
		return nil, err
	}
	t.x = make([]float64, sig.Batch*sig.Width)
	t.y = make([]int64, sig.Batch*sig.K)
	t.r = make([]float64, sig.Batch*sig.K)
	t.feedY = make([]float64, sig.Batch*sig.K)
	if sig.Kind != NoData {
		g := train.Graph
		ins := g.Inputs()
		t.xt = kernels.New(g.Type(ins[0]))
		t.yt = kernels.New(g.Type(ins[1]))
	}
	return t, nil
}

// sameSignature reports whether eval, the evaluation plan, takes what
// train, the training step, takes and has its params: the same inputs and
// params, by name and type, and the metric's output of the same type, so
// that the trainer can feed both, copy the trained params into eval, and
// read both alike.
func sameSignature(train, eval *planner.Plan) error {
	for _, l := range []struct {
		what      string
		train, ev []int
	}{{"input", train.Inputs, eval.Inputs}, {"param", train.Params, eval.Params}} {
		for _, i := range l.train {
			b := train.Buffers[i]
			j, ok := findBuffer(eval, b.Name)
			if !ok || eval.Buffers[j].Role != b.Role {
				return fmt.Errorf("the evaluation plan lacks %s %%%s: %s of the training plan", l.what, b.Name, b.Type)
			}
			if c := eval.Buffers[j]; !c.Type.Equal(b.Type) {
				return fmt.Errorf("the evaluation plan's %s %%%s is %s, the training plan's %s", l.what, b.Name, c.Type, b.Type)
			}
		}
		if len(l.ev) != len(l.train) {
			return fmt.Errorf("the evaluation plan has %d %ss, the training plan %d", len(l.ev), l.what, len(l.train))
		}
	}
	n := min(len(train.Outputs), 2) // the loss and the metric's output
	if len(eval.Outputs) < n {
		return fmt.Errorf("the evaluation plan has %d outputs, the training plan %d", len(eval.Outputs), len(train.Outputs))
	}
	for k := range n {
		a, b := train.Buffers[train.Outputs[k].Buffer], eval.Buffers[eval.Outputs[k].Buffer]
		if a.Name != b.Name || !a.Type.Equal(b.Type) {
			return fmt.Errorf("the evaluation plan's output %d is %%%s: %s, the training plan's %%%s: %s", k, b.Name, b.Type, a.Name, a.Type)
		}
	}
	return nil
}

// checkTrainerMemory refuses a trainer whose memory does not fit in the
// memory available, before any of it is allocated: the two arenas (on the
// CPU) and the batch buffers. Each executor checks its own arena, but the
// arenas are allocated one after the other and the memory available does
// not drop until they are written, so only their sum tells.
func checkTrainerMemory(train, eval *planner.Plan, sig Signature, device string) error {
	batches := 8 * int64(sig.Batch) * int64(sig.Width+3*sig.K)
	if sig.Kind != NoData {
		ins := train.Graph.Inputs()
		batches += int64(train.Graph.Type(ins[0]).Bytes() + train.Graph.Type(ins[1]).Bytes())
	}
	need, detail := batches, "batch buffers "+sysmem.Format(batches)
	if device == "" || device == "cpu" {
		need += train.ArenaBytes + eval.ArenaBytes
		detail = fmt.Sprintf("arenas %s and %s, %s", sysmem.Format(train.ArenaBytes), sysmem.Format(eval.ArenaBytes), detail)
	}
	if err := sysmem.Check("training memory", need); err != nil {
		return fmt.Errorf("plan %s: %w (%s)", train.Graph.Name, err, detail)
	}
	return nil
}

// Close stops the workers of the trainer's executors. The trainer cannot
// run steps after it.
func (t *Trainer) Close() error {
	t.train.Close()
	return t.eval.Close()
}

// accumPeriod returns the training steps of one update of p: the "period"
// attribute of the state that counts the steps of a gradient accumulation,
// or 1 when p updates at every step.
func accumPeriod(p *planner.Plan) (int, error) {
	period := 1
	for _, i := range p.States {
		a, ok := p.Graph.Value(p.Buffers[i].Value).Attrs.Get("period")
		if !ok {
			continue
		}
		if period != 1 || a.I < 1 {
			return 0, fmt.Errorf("state %%%s: expected one accumulation counter with a period of at least 1, found period %d", p.Buffers[i].Name, a.I)
		}
		period = int(a.I)
	}
	return period, nil
}

// Accum returns the batches of one update: TrainBatch adds each batch's
// gradients to the plan's accumulation, and the params change at every
// Accum-th batch (1 without accumulation).
func (t *Trainer) Accum() int { return t.accum }

// Signature returns the convention the trained graph follows.
func (t *Trainer) Signature() Signature { return t.sig }

// BatchSize returns the static batch size of the graph (0 for a graph with
// no inputs).
func (t *Trainer) BatchSize() int { return t.sig.Batch }

// Executor returns the training step's executor, for reading and setting
// params by name.
func (t *Trainer) Executor() Executor { return t.train }

// check reports data that does not fit the model. Training needs at least
// one full batch; evaluation pads partial batches and needs one row.
func (t *Trainer) check(d *dataset.Dataset, evaluate bool) error {
	s := t.sig
	if s.Kind == NoData {
		if d != nil {
			return fmt.Errorf("graph %s takes no inputs; it trains without data", t.Plan.Graph.Name)
		}
		return nil
	}
	if d == nil {
		return fmt.Errorf("graph %s trains on data (inputs %%%s and %%%s); no data given", t.Plan.Graph.Name, s.Features, s.Targets)
	}
	what := "features"
	if s.Tokens {
		what = "tokens"
	}
	if d.D != s.Width {
		return fmt.Errorf("the data has %d %s per row, the model's input %%%s takes %d", d.D, what, s.Features, s.Width)
	}
	switch {
	case s.Kind == Regression && d.R == nil:
		return fmt.Errorf("the model's input %%%s takes float targets, the data has integer labels", s.Targets)
	case s.Kind != Regression && d.Y == nil:
		return fmt.Errorf("the model's input %%%s takes integer labels, the data has float targets", s.Targets)
	case d.Targets() != s.K:
		return fmt.Errorf("the data has %d targets per row, the model's input %%%s takes %d", d.Targets(), s.Targets, s.K)
	}
	if d.N == 0 {
		return fmt.Errorf("the data has no rows")
	}
	if d.N < s.Batch && !evaluate {
		return fmt.Errorf("the data has %d rows, fewer than one batch of %d", d.N, s.Batch)
	}
	return nil
}

// feed sets the batch buffers as the executor's inputs.
func (t *Trainer) feed(x Executor) error {
	if t.sig.Tokens {
		for _, v := range t.x {
			if v != math.Trunc(v) || math.Abs(v) > math.MaxInt32 {
				return fmt.Errorf("the model's input %%%s takes integer tokens, the data has the feature %g", t.sig.Features, v)
			}
		}
	}
	if err := kernels.SetFloat64s(t.xt, t.x); err != nil {
		return err
	}
	if err := x.Set(t.sig.Features, t.xt); err != nil {
		return err
	}
	if t.sig.Kind == Regression {
		copy(t.feedY, t.r)
	} else {
		for i, v := range t.y {
			t.feedY[i] = float64(v)
		}
	}
	if err := kernels.SetFloat64s(t.yt, t.feedY); err != nil {
		return err
	}
	return x.Set(t.sig.Targets, t.yt)
}

// Tally accumulates the results of training or evaluation steps: the loss
// of each batch and what the metric needs. Its fields are plain data, so
// that a pass can be saved and continued.
type Tally struct {
	Loss    float64 // the sum of the batches' losses
	Batches int64   // steps counted
	// Accuracy: rows (or tokens) whose arg-max logit is the label, of Total.
	Correct, Total int64
	// R²: per target column, the count, mean and sum of squared deviations
	// of the targets (Welford's method) and the sum of squared residuals.
	Count             int64
	Mean, M2, Squares []float64
}

// Result returns the mean loss per batch and the metric: the accuracy, the
// token accuracy or R², NaN when the graph has none (or nothing was
// counted).
func (a *Tally) Result() (loss, metric float64) {
	loss, metric = math.NaN(), math.NaN()
	if a.Batches > 0 {
		loss = a.Loss / float64(a.Batches)
	}
	switch {
	case a.Total > 0:
		metric = float64(a.Correct) / float64(a.Total)
	case a.Count > 0:
		var res, tot float64
		for k := range a.M2 {
			res += a.Squares[k]
			tot += a.M2[k]
		}
		metric = 1 - res/tot
	}
	return loss, metric
}

// AddRegression adds rows rows of targets r and predictions p, k per row,
// to the sums R² is computed from.
func (a *Tally) AddRegression(r, p []float64, rows, k int) {
	if a.Mean == nil {
		a.Mean, a.M2, a.Squares = make([]float64, k), make([]float64, k), make([]float64, k)
	}
	for i := range rows {
		a.Count++
		n := float64(a.Count)
		for j := range k {
			v := r[i*k+j]
			d := v - a.Mean[j]
			a.Mean[j] += d / n
			a.M2[j] += d * (v - a.Mean[j])
			e := v - p[i*k+j]
			a.Squares[j] += e * e
		}
	}
}

// Epoch runs one pass over d's full batches in d's order and returns the
// mean loss and the training metric (NaN without one; see Tally.Result).
// With accumulation it runs the most batches that make whole updates, and
// with several ranks its share of them (EpochSteps); the result is the
// tally of every rank's batches.
func (t *Trainer) Epoch(ctx context.Context, d *dataset.Dataset) (loss, metric float64, err error) {
	if err := t.check(d, false); err != nil {
		return 0, 0, err
	}
	var a Tally
	for i := range t.EpochSteps(d.NumBatches(t.sig.Batch)) {
		if err := t.TrainBatch(ctx, d, i, &a); err != nil {
			return 0, 0, err
		}
	}
	if a, err = t.ReduceTally(a); err != nil {
		return 0, 0, err
	}
	loss, metric = a.Result()
	return loss, metric, nil
}

// EpochSteps returns the training steps of an epoch of n batches: each
// step trains one batch on every rank, and the steps make whole updates
// of Accum steps; the batches left over are dropped, so that every rank
// runs the same steps.
func (t *Trainer) EpochSteps(n int) int {
	n /= t.ranks
	return n - n%t.accum
}

// TrainBatch runs training step i of an epoch on d: on batch i (rows i*B
// to (i+1)*B), or with N ranks on batch i*N + Rank(), and adds its loss and
// metric to a.
func (t *Trainer) TrainBatch(ctx context.Context, d *dataset.Dataset, i int, a *Tally) error {
	if err := t.check(d, false); err != nil {
		return err
	}
	b := i*t.ranks + t.Rank()
	if nb := d.NumBatches(t.sig.Batch); i < 0 || b >= nb {
		return fmt.Errorf("batch %d is not one of the data's %d full batches", b, nb)
	}
	for r := range t.sig.Batch {
		d.CopyRow(r, b*t.sig.Batch+r, t.x, t.y, t.r)
	}
	if err := t.feed(t.train); err != nil {
		return err
	}
	if err := t.trainStep(ctx); err != nil {
		return err
	}
	return t.readout(t.train, t.sig.Batch, a)
}

// trainStep runs the training step. With N ranks the executor counts this
// rank's steps, but its kernels see the step's place among all the
// batches trained (step*N + rank), so that dropout draws the mask one
// process training every batch in turn would.
func (t *Trainer) trainStep(ctx context.Context) error {
	if t.ranks == 1 {
		return t.train.Step(ctx)
	}
	local := t.train.StepCount()
	if err := t.train.SetStepCount(local*int64(t.ranks) + int64(t.Rank())); err != nil {
		return err
	}
	err := t.train.Step(ctx)
	if err == nil {
		local++
	}
	if serr := t.train.SetStepCount(local); err == nil {
		err = serr
	}
	return err
}

// Step runs one training step of a graph with no inputs and adds its loss
// to a.
func (t *Trainer) Step(ctx context.Context, a *Tally) error {
	if err := t.check(nil, false); err != nil {
		return err
	}
	if err := t.trainStep(ctx); err != nil {
		return err
	}
	return t.readout(t.train, 0, a)
}

// readout adds the loss and the metric of the first rows rows of the step
// just run to a.
func (t *Trainer) readout(x Executor, rows int, a *Tally) error {
	lt, err := x.Get(x.Plan().Outputs[0].Name)
	if err != nil {
		return err
	}
	a.Loss += kernels.Float64s(lt)[0]
	a.Batches++
	if t.sig.Output == "" {
		return nil
	}
	out, err := x.Get(t.sig.Output)
	if err != nil {
		return err
	}
	k := t.sig.K
	switch t.sig.Kind {
	case Labels, TokenLabels:
		a.Correct += int64(countCorrect(out, t.sig.Classes, t.y[:rows*k]))
		a.Total += int64(rows * k)
	case Regression:
		a.AddRegression(t.r, kernels.Float64s(out), rows, k)
	}
	return nil
}

// countCorrect counts the labels that are the arg-max of their row of c
// logits.
func countCorrect(logits kernels.Tensor, c int, labels []int64) int {
	correct := 0
	row := func(i int) int {
		switch logits.Type.DType {
		case ir.F32:
			return argmax(kernels.View[float32](logits)[i*c : (i+1)*c])
		default:
			return argmax(kernels.View[float64](logits)[i*c : (i+1)*c])
		}
	}
	for i, l := range labels {
		if int64(row(i)) == l {
			correct++
		}
	}
	return correct
}

func argmax[T float32 | float64](v []T) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// Evaluate runs the forward graph over every row of d with the current
// params and returns the mean loss over batches and the metric over rows
// (NaN without one). The last partial batch is padded with d's first rows
// (repeated when d has fewer rows than a batch), which are not counted. For
// a graph with no inputs d must be nil: the forward graph runs once.
func (t *Trainer) Evaluate(ctx context.Context, d *dataset.Dataset) (loss, metric float64, err error) {
	if err := t.check(d, true); err != nil {
		return 0, 0, err
	}
	if err := t.syncEval(); err != nil {
		return 0, 0, err
	}
	var a Tally
	if t.sig.Kind == NoData {
		if err := t.eval.Step(ctx); err != nil {
			return 0, 0, err
		}
		if err := t.readout(t.eval, 0, &a); err != nil {
			return 0, 0, err
		}
		loss, metric = a.Result()
		return loss, metric, nil
	}
	err = t.evalBatches(ctx, d, t.ranks, func(rows int) error { return t.readout(t.eval, rows, &a) })
	if err != nil {
		return 0, 0, err
	}
	if a, err = t.ReduceTally(a); err != nil {
		return 0, 0, err
	}
	loss, metric = a.Result()
	return loss, metric, nil
}

// evalBatches runs the evaluation graph over every row of d in batches,
// the last padded with d's first rows, and calls f after each with the
// number of rows of d the batch holds. With ranks above 1 it runs this
// rank's share: batches Rank(), Rank()+ranks, ...
func (t *Trainer) evalBatches(ctx context.Context, d *dataset.Dataset, ranks int, f func(rows int) error) error {
	b, first := t.sig.Batch, 0
	if ranks > 1 {
		first = t.Rank()
	}
	for start := first * b; start < d.N; start += b * ranks {
		rows := min(b, d.N-start)
		for r := range b {
			src := start + r
			if r >= rows {
				src = (r - rows) % d.N
			}
			d.CopyRow(r, src, t.x, t.y, t.r)
		}
		if err := t.feed(t.eval); err != nil {
			return err
		}
		if err := t.eval.Step(ctx); err != nil {
			return err
		}
		if err := f(rows); err != nil {
			return err
		}
	}
	return nil
}

// Predict runs the forward graph over every row of d with the current
// params and returns the metric's output (Signature.Output: the logits,
// or the predicted values for float targets) of each row, row after row,
// as float64s: Signature.Batch rows of it per batch, the padding of the
// last batch left out. d's targets are fed to the loss but change nothing
// returned; without real ones, any valid values (zeros) do.
func (t *Trainer) Predict(ctx context.Context, d *dataset.Dataset) ([]float64, error) {
	if t.sig.Kind == NoData || t.sig.Output == "" {
		return nil, fmt.Errorf("graph %s has no predictions to return: it takes no features or has no second output read as logits or predictions", t.Plan.Graph.Name)
	}
	if err := t.check(d, true); err != nil {
		return nil, err
	}
	if err := t.syncEval(); err != nil {
		return nil, err
	}
	var out []float64
	err := t.evalBatches(ctx, d, 1, func(rows int) error {
		v, err := t.eval.Get(t.sig.Output)
		if err != nil {
			return err
		}
		all := kernels.Float64s(v)
		out = append(out, all[:len(all)/t.sig.Batch*rows]...)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// syncEval copies the trained params into the evaluation executor.
func (t *Trainer) syncEval() error {
	for _, i := range t.Plan.Params {
		name := t.Plan.Buffers[i].Name
		v, err := t.train.Get(name)
		if err != nil {
			return err
		}
		if err := t.eval.Set(name, v); err != nil {
			return err
		}
	}
	return nil
}

func findBuffer(p *planner.Plan, name string) (int, bool) {
	for i, b := range p.Buffers {
		if b.Name == name && b.Role != planner.Temp {
			return i, true
		}
	}
	return 0, false
}
