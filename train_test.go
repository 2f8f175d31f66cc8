package kiln_test

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// newTrainer builds g with b and a trainer for it with Adam at lr.
func newTrainer(t *testing.T, b *frontends.Builder, lr float64) *kiln.Trainer {
	t.Helper()
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	adam, err := passes.DefaultOptimizer("adam")
	if err != nil {
		t.Fatal(err)
	}
	adam.LR = lr
	tr, err := kiln.NewTrainer(g, adam, 1, kiln.Options{Debug: passes.Debug{Check: true}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// regressionMLP is a 2-32-1 tanh MLP with float targets [B] and its
// prediction [B] as the second output.
func regressionMLP(batch int) *frontends.Builder {
	b := frontends.NewBuilder("regress")
	x := b.Input("x", ir.F32, batch, 2)
	y := b.Input("y", ir.F32, batch)
	h := b.Tanh(b.Add(b.Matmul(x, b.Param("w1", ir.F32, 2, 32)), b.Param("b1", ir.F32, 32)))
	p := b.Reshape(b.Add(b.Matmul(h, b.Param("w2", ir.F32, 32, 1)), b.Param("b2", ir.F32, 1)), batch)
	b.Output(b.MSELoss(p, y), p)
	return b
}

// TestTrainerRegression trains a small MLP on the kan2d data: the held-out
// R² rises from below 0.5 to at least 0.97 (0.991 observed), and the
// held-out loss agrees with it.
func TestTrainerRegression(t *testing.T) {
	t.Parallel()
	tr := newTrainer(t, regressionMLP(32), 0.05)
	sig := tr.Signature()
	if sig.Kind != kiln.Regression || sig.K != 1 || sig.Metric() != "R²" {
		t.Fatalf("signature %+v, want regression with R²", sig)
	}
	data, err := dataset.KAN2D(1000, 3)
	if err != nil {
		t.Fatal(err)
	}
	train, held := data.Split(0.2, 1)
	ctx := context.Background()
	_, r0, err := tr.Evaluate(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	for e := range 50 {
		train.Shuffle(uint64(e))
		if _, _, err := tr.Epoch(ctx, train); err != nil {
			t.Fatal(err)
		}
	}
	loss, r2, err := tr.Evaluate(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	if !(r0 < 0.5) || !(r2 >= 0.97) {
		t.Errorf("held-out R² %.4f before training and %.4f after; want below 0.5, then at least 0.97", r0, r2)
	}
	// The mean squared error over the held-out rows equals (1-R²)·Var(y);
	// the loss is a mean over batches, so it matches only roughly (the last
	// batch is partial).
	var mean, ss float64
	for _, v := range held.R {
		mean += v
	}
	mean /= float64(held.N)
	for _, v := range held.R {
		ss += (v - mean) * (v - mean)
	}
	if mse := (1 - r2) * ss / float64(held.N); math.Abs(mse-loss) > 0.5*mse {
		t.Errorf("held-out loss %.5f, but R² %.5f means a mean squared error of %.5f", loss, r2, mse)
	}
}

// TestTrainerImageFeatures checks that features of rank above 2 take each
// data row in order: an MLP whose input is [B,1,2,1] (reshaped to [B,2]
// inside) trains bitwise as the same MLP on [B,2].
func TestTrainerImageFeatures(t *testing.T) {
	t.Parallel()
	image := frontends.NewBuilder("regress")
	x := image.Reshape(image.Input("x", ir.F32, 32, 1, 2, 1), 32, 2)
	y := image.Input("y", ir.F32, 32)
	h := image.Tanh(image.Add(image.Matmul(x, image.Param("w1", ir.F32, 2, 32)), image.Param("b1", ir.F32, 32)))
	p := image.Reshape(image.Add(image.Matmul(h, image.Param("w2", ir.F32, 32, 1)), image.Param("b2", ir.F32, 1)), 32)
	image.Output(image.MSELoss(p, y), p)
	data, err := dataset.KAN2D(200, 3)
	if err != nil {
		t.Fatal(err)
	}
	var losses [2][]float64
	for k, b := range []*frontends.Builder{regressionMLP(32), image} {
		tr := newTrainer(t, b, 0.05)
		if w := tr.Signature().Width; w != 2 {
			t.Fatalf("model %d: signature width %d, want 2", k, w)
		}
		for range 3 {
			loss, _, err := tr.Epoch(context.Background(), data)
			if err != nil {
				t.Fatal(err)
			}
			losses[k] = append(losses[k], loss)
		}
	}
	if !slices.Equal(losses[0], losses[1]) || !(losses[0][2] < losses[0][0]) {
		t.Errorf("epoch losses %v on [B,2] and %v on [B,1,2,1]; want them equal and falling", losses[0], losses[1])
	}
}

// TestTallyR2 checks the streamed R² against the two-pass formula on
// targets far from zero (where a naive sum of squares loses digits).
func TestTallyR2(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const rows, k = 300, 3
	y, p := make([]float64, rows*k), make([]float64, rows*k)
	for i := range y {
		y[i] = 1e6 + float64(i%k) + rng.NormFloat64()
		p[i] = y[i] + 0.3*rng.NormFloat64()
	}
	var a kiln.Tally
	for start := 0; start < rows; start += 7 {
		n := min(7, rows-start)
		a.AddRegression(y[start*k:], p[start*k:], n, k)
	}
	var res, tot float64
	for j := range k {
		var mean float64
		for i := range rows {
			mean += y[i*k+j]
		}
		mean /= rows
		for i := range rows {
			tot += (y[i*k+j] - mean) * (y[i*k+j] - mean)
			res += (y[i*k+j] - p[i*k+j]) * (y[i*k+j] - p[i*k+j])
		}
	}
	want := 1 - res/tot
	if _, got := a.Result(); math.Abs(got-want) > 1e-9 {
		t.Errorf("R² %.12f, want %.12f", got, want)
	}
}

// tokenModel maps token sequences [B,T] over vocab tokens to logits
// [B*T, vocab] through an embedding and one linear layer: enough to learn
// any fixed permutation of the positions, such as reversal.
func tokenModel(batch, T, vocab int) *frontends.Builder {
	b := frontends.NewBuilder("tokens")
	x := b.Input("x", ir.I64, batch, T)
	y := b.Input("y", ir.I64, batch, T)
	e := b.Reshape(b.Embedding(b.Param("emb", ir.F32, vocab, 8), x), batch, T*8)
	z := b.Add(b.Matmul(e, b.Param("w", ir.F32, T*8, T*vocab)), b.Param("c", ir.F32, T*vocab))
	logits := b.Reshape(z, batch*T, vocab)
	b.Output(b.SoftmaxCrossEntropy(logits, b.Reshape(y, batch*T)), logits)
	return b
}

// TestTrainerTokens trains the token model on the reverse data: the
// held-out token accuracy goes from about chance (1/6) to at least 99%.
func TestTrainerTokens(t *testing.T) {
	t.Parallel()
	const T, vocab = 5, 6
	tr := newTrainer(t, tokenModel(16, T, vocab), 0.02)
	sig := tr.Signature()
	if sig.Kind != kiln.TokenLabels || sig.K != T || !sig.Tokens || sig.Classes != vocab || sig.Metric() != "token accuracy" {
		t.Fatalf("signature %+v, want token labels with token accuracy", sig)
	}
	data, err := dataset.Reverse(1500, T, vocab, 1)
	if err != nil {
		t.Fatal(err)
	}
	train, held := data.Split(0.2, 1)
	ctx := context.Background()
	_, acc0, err := tr.Evaluate(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	for e := range 10 {
		train.Shuffle(uint64(e))
		if _, _, err := tr.Epoch(ctx, train); err != nil {
			t.Fatal(err)
		}
	}
	_, acc, err := tr.Evaluate(ctx, held)
	if err != nil {
		t.Fatal(err)
	}
	if !(acc0 < 0.4) || !(acc >= 0.99) {
		t.Errorf("held-out token accuracy %.4f before training and %.4f after; want below 0.4, then at least 0.99", acc0, acc)
	}
	// Logits [B,T,C] give the same metric.
	b3 := frontends.NewBuilder("tokens3")
	x := b3.Input("x", ir.I64, 4, T)
	y := b3.Input("y", ir.I64, 4, T)
	logits := b3.Reshape(b3.Embedding(b3.Param("emb", ir.F32, vocab, vocab), x), 4, T, vocab)
	b3.Output(b3.SoftmaxCrossEntropy(b3.Reshape(logits, 4*T, vocab), b3.Reshape(y, 4*T)), logits)
	if s := newTrainer(t, b3, 0.01).Signature(); s.Output != logits.Name() || s.Classes != vocab {
		t.Errorf("logits [B,T,C]: signature %+v, want them as the output", s)
	}
}

// TestTrainerNoInputs trains a graph without inputs (its target is a
// const): the loss falls by more than 100 times in 200 steps, and
// Evaluate computes it with the forward graph.
func TestTrainerNoInputs(t *testing.T) {
	t.Parallel()
	b := frontends.NewBuilder("seek")
	w := b.Param("w", ir.F32, 4)
	target := b.Const(ir.F32, []int{4}, 0.5, -1, 2, 0.25)
	b.Output(b.MSELoss(b.Tanh(w), b.Mul(target, b.Const(ir.F32, nil, 0.4))))
	tr := newTrainer(t, b, 0.05)
	if s := tr.Signature(); s.Kind != kiln.NoData || s.Batch != 0 {
		t.Fatalf("signature %+v, want no data", s)
	}
	ctx := context.Background()
	l0, _, err := tr.Evaluate(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var first kiln.Tally
	if err := tr.Step(ctx, &first); err != nil {
		t.Fatal(err)
	}
	if l, _ := first.Result(); l != l0 {
		t.Errorf("the first step's loss %v differs from the forward graph's %v", l, l0)
	}
	var a kiln.Tally
	for range 200 {
		if err := tr.Step(ctx, &a); err != nil {
			t.Fatal(err)
		}
	}
	l, _, err := tr.Evaluate(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !(l < l0/100) {
		t.Errorf("loss %.6g after 200 steps, from %.6g; want it 100 times lower", l, l0)
	}
	if _, _, err := tr.Epoch(ctx, &dataset.Dataset{N: 1, D: 1, X: []float64{0}, Y: []int64{0}}); err == nil || !strings.Contains(err.Error(), "takes no inputs") {
		t.Errorf("training a graph without inputs on data: error %v", err)
	}
}

// TestTrainerSignatureErrors checks graphs that fit no convention and data
// that does not fit the model: one line naming the input, what was expected
// and what was found.
func TestTrainerSignatureErrors(t *testing.T) {
	t.Parallel()
	loss := func(b *frontends.Builder, vs ...frontends.Value) {
		w := b.Param("w", ir.F32)
		s := b.Mul(w, w)
		for _, v := range vs {
			s = b.Add(s, b.Sum(b.Mul(v, w), nil, false))
		}
		b.Output(s)
	}
	tests := []struct {
		name  string
		build func(b *frontends.Builder)
		want  []string
	}{
		{"one input", func(b *frontends.Builder) { loss(b, b.Input("x", ir.F32, 4, 2)) }, []string{"no inputs, or two", "found 1"}},
		{"three inputs", func(b *frontends.Builder) {
			loss(b, b.Input("x", ir.F32, 4, 2), b.Input("y", ir.F32, 4), b.Input("z", ir.F32, 4))
		}, []string{"found 3"}},
		{"features of rank 1", func(b *frontends.Builder) { loss(b, b.Input("x", ir.F32, 4), b.Input("y", ir.F32, 4)) },
			[]string{"%x", "float features [B,D]", "or integer tokens [B,T]", "found f32[4]"}},
		{"tokens of rank 3", func(b *frontends.Builder) {
			x := b.Input("x", ir.I64, 4, 2, 2)
			loss(b, b.Where(b.Greater(x, b.Scalar(0, ir.I64)), b.Const(ir.F32, []int{4, 2, 2}, make([]float64, 16)...), b.Const(ir.F32, []int{4, 2, 2}, make([]float64, 16)...)), b.Input("y", ir.F32, 4))
		}, []string{"%x", "integer tokens [B,T]", "found i64[4,2,2]"}},
		{"bool features", func(b *frontends.Builder) {
			x := b.Input("x", ir.Bool, 4, 2)
			one := b.Const(ir.F32, []int{4, 2}, 1, 1, 1, 1, 1, 1, 1, 1)
			loss(b, b.Where(x, one, one), b.Input("y", ir.F32, 4))
		}, []string{"%x", "found bool[4,2]"}},
		{"targets of another batch", func(b *frontends.Builder) { loss(b, b.Input("x", ir.F32, 4, 2), b.Input("y", ir.F32, 3)) },
			[]string{"%y", "targets of batch 4", "found f32[3]"}},
		{"targets of rank 3", func(b *frontends.Builder) {
			loss(b, b.Input("x", ir.F32, 4, 2), b.Input("y", ir.F32, 4, 2, 2))
		}, []string{"%y", "[4] or [4,T]", "found f32[4,2,2]"}},
		{"scalar targets", func(b *frontends.Builder) { loss(b, b.Input("x", ir.F32, 4, 2), b.Input("y", ir.F32)) },
			[]string{"%y", "found f32[]"}},
	}
	adam, _ := passes.DefaultOptimizer("adam")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := frontends.NewBuilder("bad")
			tt.build(b)
			g, err := b.Build()
			if err != nil {
				t.Fatal(err)
			}
			_, err = kiln.NewTrainer(g, adam, 1, kiln.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error of more than one line: %q", msg)
			}
			for _, w := range append([]string{"graph bad:"}, tt.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}

	// Data that does not fit the model.
	reg := newTrainer(t, regressionMLP(4), 0.01)
	tok := newTrainer(t, tokenModel(4, 3, 5), 0.01)
	labels := &dataset.Dataset{X: make([]float64, 8), Y: make([]int64, 4), N: 4, D: 2, Classes: 1}
	floats := &dataset.Dataset{X: []float64{0, 1, 2, 3.5, 4, 0, 1, 2, 3, 4, 0, 1}, R: make([]float64, 12), N: 4, D: 3, K: 3}
	seqs, _ := dataset.Reverse(4, 3, 5, 1)
	long, _ := dataset.Reverse(4, 3, 5, 1)
	long.K, long.Y = 1, long.Y[:4]
	data := []struct {
		name string
		tr   *kiln.Trainer
		d    *dataset.Dataset
		want string
	}{
		{"labels for a regression", reg, labels, "input %y takes float targets, the data has integer labels"},
		{"floats for labels", tok, floats, "input %y takes integer labels, the data has float targets"},
		{"one label per row for tokens", tok, long, "the data has 1 targets per row, the model's input %y takes 3"},
		{"tokens of another length", reg, seqs, "the data has 3 features per row, the model's input %x takes 2"},
		{"no data", reg, nil, "no data given"},
	}
	for _, tt := range data {
		if _, _, err := tt.tr.Epoch(context.Background(), tt.d); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	floats.Y, floats.R = make([]int64, 12), nil
	if _, _, err := tok.Epoch(context.Background(), floats); err == nil || !strings.Contains(err.Error(), "input %x takes integer tokens, the data has the feature 3.5") {
		t.Errorf("fractional tokens: error %v", err)
	}
}

// TestNewTrainerFromPlansRefusesWrongPlans: plans that are not a training
// step and its evaluation graph, as a plan file may hold them, are refused
// with an error, not a panic at the first step or a run that trains
// nothing.
func TestNewTrainerFromPlansRefusesWrongPlans(t *testing.T) {
	t.Parallel()
	compile := func(t *testing.T, b *frontends.Builder, opts kiln.Options) *planner.Plan {
		t.Helper()
		g, err := b.Build()
		if err != nil {
			t.Fatal(err)
		}
		p, err := kiln.Compile(g, opts)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	adam, _ := passes.DefaultOptimizer("adam")
	train := compile(t, regressionMLP(4), kiln.Options{Optimizer: &adam})
	eval := compile(t, regressionMLP(4), kiln.Options{Inference: true})
	other := compile(t, regressionMLP(8), kiln.Options{Inference: true})
	noOutputs := *eval
	noOutputs.Outputs = nil
	lossOnly := compile(t, regressionMLP(4), kiln.Options{Inference: true})
	lossOnly.Graph.Outputs = lossOnly.Graph.Outputs[:1]
	lossOnly.Outputs = lossOnly.Outputs[:1]
	tests := []struct {
		name        string
		train, eval *planner.Plan
		want        string
	}{
		{"evaluation graph as the training step", eval, eval, "not a training step: it updates none of its 4 params (%w1, %b1, %w2 and 1 more)"},
		{"training step as the evaluation graph", train, train, "not an evaluation graph: it updates"},
		{"evaluation graph without outputs", train, &noOutputs, "not an evaluation graph: it has no output"},
		{"evaluation graph without the metric", train, lossOnly, "the evaluation plan has 1 outputs, the training plan 2"},
		{"evaluation graph of another batch", train, other, "the evaluation plan's input %x is f32[8,2], the training plan's f32[4,2]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := kiln.NewTrainerFromPlans(tc.train, tc.eval, kiln.ExecOptions{Workers: 1})
			if err == nil {
				tr.Close()
				t.Fatalf("no error; want one containing %q", tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}
