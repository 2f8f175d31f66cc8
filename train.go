package kiln

import (
	"context"
	"fmt"
	"math"

	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// Trainer trains a classifier or regressor graph on a dataset. The graph's
// signature is the convention kiln train uses: one float input of shape
// [B, D] (the features), one integer or float input of shape [B] or [B, ...]
// (the targets), the loss as the first output and, optionally, the logits
// [B, C] as the second output, which gives the accuracy. B is the batch size.
type Trainer struct {
	Plan     *planner.Plan // the training step
	EvalPlan *planner.Plan // the forward graph without dropout, for evaluation

	train, eval      Executor
	features, target string
	xt, yt           kernels.Tensor // the batch fed to the executors
	batch, width     int
	logits           string // "" when the graph has no logits output
	x                []float64
	y                []int64
	yf               []float64
}

// NewTrainer compiles g twice, as a training step with opt's update and as a
// forward-only graph for evaluation (with the inference pass, so without
// dropout), and initializes the params from seed.
//
// opts carries what the two compiles share (O0, Debug, Plan); NewTrainer
// sets Optimizer and Inference itself.
func NewTrainer(g *ir.Graph, opt passes.OptimizerConfig, seed uint64, opts Options) (*Trainer, error) {
	if _, _, err := trainSignature(g); err != nil {
		return nil, fmt.Errorf("%s: %w", where(g), err)
	}
	train, eval := opts, opts
	train.Optimizer, train.Grad, train.Inference = &opt, true, false
	eval.Optimizer, eval.Grad, eval.Inference = nil, false, true
	tp, err := Compile(g, train)
	if err != nil {
		return nil, err
	}
	ep, err := Compile(g, eval)
	if err != nil {
		return nil, err
	}
	return NewTrainerFromPlans(tp, ep, ExecOptions{Device: opts.Device, Seed: seed, CheckNaN: opts.Debug.NaN, Workers: opts.Workers})
}

// trainSignature checks the convention of a trained graph and returns its
// features and labels inputs.
func trainSignature(g *ir.Graph) (features, labels ir.ID, err error) {
	ins := g.Inputs()
	if len(ins) != 2 {
		return 0, 0, fmt.Errorf("a trained graph takes two inputs (features [B,D] and targets [B]), found %d", len(ins))
	}
	fx, ty := g.Type(ins[0]), g.Type(ins[1])
	if !fx.DType.IsFloat() || len(fx.Shape) != 2 {
		return 0, 0, fmt.Errorf("the first input %s must be float features [B,D], found %s", g.NameOf(ins[0]), fx)
	}
	if len(ty.Shape) != 1 || ty.Shape[0] != fx.Shape[0] || !ty.DType.IsInt() {
		return 0, 0, fmt.Errorf("the second input %s must be integer labels [%d], found %s", g.NameOf(ins[1]), fx.Shape[0], ty)
	}
	return ins[0], ins[1], nil
}

// NewTrainerFromPlans builds a trainer from compiled plans, as a plan file
// holds them: train is the training step, eval the forward graph for
// evaluation; both must follow the convention of NewTrainer and share their
// params by name. It needs no compiler. x configures both executors: the
// device, the seed of the params' initial values, the NaN check and the
// workers.
func NewTrainerFromPlans(train, eval *planner.Plan, x ExecOptions) (*Trainer, error) {
	t := &Trainer{Plan: train, EvalPlan: eval}
	g := train.Graph
	fid, lid, err := trainSignature(g)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", g.Name, err)
	}
	fx := g.Type(fid)
	t.features, t.target = g.Value(fid).Name, g.Value(lid).Name
	t.batch, t.width = fx.Shape[0], fx.Shape[1]
	if len(train.Outputs) > 1 {
		if lt := train.Buffers[train.Outputs[1].Buffer].Type; len(lt.Shape) == 2 && lt.Shape[0] == t.batch && lt.DType.IsFloat() {
			t.logits = train.Outputs[1].Name
		}
	}
	for _, i := range train.Params {
		b := train.Buffers[i]
		j, ok := findBuffer(eval, b.Name)
		if !ok || !eval.Buffers[j].Type.Equal(b.Type) {
			return nil, fmt.Errorf("the evaluation plan lacks param %%%s: %s of the training plan", b.Name, b.Type)
		}
	}
	if t.train, err = NewExecutor(train, x); err != nil {
		return nil, err
	}
	if t.eval, err = NewExecutor(eval, x); err != nil {
		t.train.Close()
		return nil, err
	}
	t.x = make([]float64, t.batch*t.width)
	t.y = make([]int64, t.batch)
	t.yf = make([]float64, t.batch)
	t.xt = kernels.New(train.Buffers[fid].Type)
	t.yt = kernels.New(train.Buffers[lid].Type)
	return t, nil
}

// Close stops the workers of the trainer's executors. The trainer cannot
// run steps after it.
func (t *Trainer) Close() error {
	t.train.Close()
	return t.eval.Close()
}

// BatchSize returns the static batch size of the graph.
func (t *Trainer) BatchSize() int { return t.batch }

// Executor returns the training step's executor, for reading and setting
// params by name.
func (t *Trainer) Executor() Executor { return t.train }

// check reports data that does not fit the model. Training needs at least
// one full batch; evaluation pads partial batches and needs one row.
func (t *Trainer) check(d *dataset.Dataset, evaluate bool) error {
	if d.D != t.width {
		return fmt.Errorf("the data has %d features per row, the model's input %%%s takes %d", d.D, t.features, t.width)
	}
	if d.N == 0 {
		return fmt.Errorf("the data has no rows")
	}
	if d.N < t.batch && !evaluate {
		return fmt.Errorf("the data has %d rows, fewer than one batch of %d", d.N, t.batch)
	}
	return nil
}

func (t *Trainer) feed(x Executor, d *dataset.Dataset, i int) error {
	d.Batch(i, t.batch, t.x, t.y)
	return t.feedRows(x)
}

func (t *Trainer) feedRows(x Executor) error {
	if err := kernels.SetFloat64s(t.xt, t.x); err != nil {
		return err
	}
	if err := x.Set(t.features, t.xt); err != nil {
		return err
	}
	for i, v := range t.y {
		t.yf[i] = float64(v)
	}
	if err := kernels.SetFloat64s(t.yt, t.yf); err != nil {
		return err
	}
	return x.Set(t.target, t.yt)
}

// Epoch runs one pass over d's full batches in d's order and returns the
// mean loss and the training accuracy (NaN without logits).
func (t *Trainer) Epoch(ctx context.Context, d *dataset.Dataset) (loss, acc float64, err error) {
	if err := t.check(d, false); err != nil {
		return 0, 0, err
	}
	nb := d.NumBatches(t.batch)
	correct := 0
	for i := 0; i < nb; i++ {
		if err := t.feed(t.train, d, i); err != nil {
			return 0, 0, err
		}
		if err := t.train.Step(ctx); err != nil {
			return 0, 0, err
		}
		l, c, err := t.readout(t.train, t.batch)
		if err != nil {
			return 0, 0, err
		}
		loss += l
		correct += c
	}
	return loss / float64(nb), t.accuracy(correct, nb*t.batch), nil
}

func (t *Trainer) accuracy(correct, n int) float64 {
	if t.logits == "" {
		return math.NaN()
	}
	return float64(correct) / float64(n)
}

// readout returns the loss and the number of the first rows rows whose
// arg-max logit is the label.
func (t *Trainer) readout(x Executor, rows int) (float64, int, error) {
	p := x.Plan()
	lt, err := x.Get(p.Outputs[0].Name)
	if err != nil {
		return 0, 0, err
	}
	loss := kernels.Float64s(lt)[0]
	if t.logits == "" {
		return loss, 0, nil
	}
	lg, err := x.Get(t.logits)
	if err != nil {
		return 0, 0, err
	}
	return loss, countCorrect(lg, t.y[:rows]), nil
}

func countCorrect(logits kernels.Tensor, labels []int64) int {
	c := logits.Type.Shape[1]
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
// params and returns the mean loss over batches and the accuracy over rows
// (NaN without logits). The last partial batch is padded with d's first
// rows (repeated when d has fewer rows than a batch), which are not counted.
func (t *Trainer) Evaluate(ctx context.Context, d *dataset.Dataset) (loss, acc float64, err error) {
	if err := t.check(d, true); err != nil {
		return 0, 0, err
	}
	for _, i := range t.Plan.Params {
		name := t.Plan.Buffers[i].Name
		v, err := t.train.Get(name)
		if err != nil {
			return 0, 0, err
		}
		if err := t.eval.Set(name, v); err != nil {
			return 0, 0, err
		}
	}
	correct, batches := 0, 0
	for start := 0; start < d.N; start += t.batch {
		rows := min(t.batch, d.N-start)
		for r := 0; r < t.batch; r++ {
			src := start + r
			if r >= rows {
				src = (r - rows) % d.N
			}
			copy(t.x[r*t.width:(r+1)*t.width], d.X[src*d.D:(src+1)*d.D])
			t.y[r] = d.Y[src]
		}
		if err := t.feedRows(t.eval); err != nil {
			return 0, 0, err
		}
		if err := t.eval.Step(ctx); err != nil {
			return 0, 0, err
		}
		l, c, err := t.readout(t.eval, rows)
		if err != nil {
			return 0, 0, err
		}
		loss += l
		correct += c
		batches++
	}
	return loss / float64(batches), t.accuracy(correct, d.N), nil
}

func findBuffer(p *planner.Plan, name string) (int, bool) {
	for i, b := range p.Buffers {
		if b.Name == name && b.Role != planner.Temp {
			return i, true
		}
	}
	return 0, false
}
