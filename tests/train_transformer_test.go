package tests

import (
	"bytes"
	"context"
	"github.com/kilnml/kiln/internal/golden"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// tfmReverse builds the sequence-reversal model: tokens x [batch,seq] in
// [0,vocab), targets y [batch,seq], loss and logits [batch·seq, vocab].
func tfmReverse(t *testing.T, batch, seq int, o frontends.TransformerOptions) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("reverse")
	x := b.Input("x", ir.I64, batch, seq)
	y := b.Input("y", ir.I64, batch, seq)
	logits := b.Transformer(x, o)
	b.Output(b.Rename(b.SoftmaxCrossEntropy(logits, b.Reshape(y, batch*seq)), "loss"), logits)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The example examples/transformer/reverse.kir: batches of 32 sequences of
// 8 tokens in [0,10), width 32, two blocks of 4 heads with an MLP of 64.
const (
	tfmExampleFile                = "../examples/transformer/reverse.kir"
	tfmBatch, tfmSeq, tfmVocab    = 32, 8, 10
	tfmWidth, tfmBlocks, tfmHeads = 32, 2, 4
	tfmHidden                     = 64
)

func tfmExampleOptions() frontends.TransformerOptions {
	return frontends.TransformerOptions{Vocab: tfmVocab, DModel: tfmWidth, Blocks: tfmBlocks,
		BlockOptions: frontends.BlockOptions{Heads: tfmHeads, Hidden: tfmHidden}}
}

// tfmSmallOptions is the example's model, narrower (width 16, MLP 32).
func tfmSmallOptions() frontends.TransformerOptions {
	return frontends.TransformerOptions{Vocab: tfmVocab, DModel: 16, Blocks: tfmBlocks,
		BlockOptions: frontends.BlockOptions{Heads: tfmHeads, Hidden: 32}}
}

const tfmExampleHeader = `# A pre-norm transformer that learns to reverse sequences of 8 tokens in
# [0,10). Token and learned position embeddings of width 32; two blocks of
#   h = x + attention(layer_norm(x))        4 heads of width 8, softmax
#   y = h + fc2(gelu(fc1(layer_norm(h))))   hidden width 64
# then a final layer_norm and a linear map to the 10 logits of each of the
# 32*8 positions. Every position attends to every position (no mask).
#   %x: the tokens [32,8]; %y: the same rows reversed [32,8]
#   outputs: the loss (mean cross-entropy over the 256 positions), logits
# Generated from the Go builder (frontends.Builder.Transformer) by
#   go test ./tests -run TestReverseExample -update
`

// TestReverseExample checks that examples/transformer/reverse.kir is the
// graph frontends.Builder.Transformer builds (-update rewrites it).
func TestReverseExample(t *testing.T) {
	g := tfmReverse(t, tfmBatch, tfmSeq, tfmExampleOptions())
	want := g.Format()
	if golden.Update() {
		if err := os.MkdirAll("../examples/transformer", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(tfmExampleFile, []byte(tfmExampleHeader+want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	src, err := os.ReadFile(tfmExampleFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), tfmExampleHeader) {
		t.Errorf("%s: the header comment is stale; run go test ./tests -run TestReverseExample -update", tfmExampleFile)
	}
	parsed, err := ir.Parse(tfmExampleFile, src)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(parsed.Format(), want); d != "" {
		t.Errorf("%s is not the builder's graph; run go test ./tests -run TestReverseExample -update (-file +builder):\n%s", tfmExampleFile, d)
	}
}

// reverseData draws sequences of seq tokens in [0,vocab) and their
// reversals.
type reverseData struct {
	rng        *rand.Rand
	seq, vocab int
	exclude    map[string]bool // sequences never drawn (the held-out set)
}

func (d *reverseData) fill(x, y []int64) {
	for r := 0; r < len(x)/d.seq; r++ {
		row, rev := x[r*d.seq:(r+1)*d.seq], y[r*d.seq:(r+1)*d.seq]
		for {
			for i := range row {
				row[i] = int64(d.rng.IntN(d.vocab))
			}
			if !d.exclude[seqKey(row)] {
				break
			}
		}
		for i := range row {
			rev[d.seq-1-i] = row[i]
		}
	}
}

// tfmExample parses examples/transformer/reverse.kir.
func tfmExample(t testing.TB) *ir.Graph {
	t.Helper()
	src, err := os.ReadFile(tfmExampleFile)
	if err != nil {
		t.Fatal(err)
	}
	g, err := ir.Parse(tfmExampleFile, src)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// tfmTrainer runs a compiled reversal model: a training step and, for the
// accuracy, the forward graph (compiled for inference) with the training
// step's params.
type tfmTrainer struct {
	t          *testing.T
	train      *cpu.Executor
	eval       *cpu.Executor
	seq, vocab int
}

func newTfmTrainer(t *testing.T, train, eval *planner.Plan, seed uint64) *tfmTrainer {
	t.Helper()
	tx, err := cpu.New(train, cpu.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Close() })
	ex, err := cpu.New(eval, cpu.Options{Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	xt := train.Buffers[train.Inputs[0]].Type
	lt := train.Buffers[train.Outputs[1].Buffer].Type
	return &tfmTrainer{t: t, train: tx, eval: ex, seq: xt.Shape[1], vocab: lt.Shape[1]}
}

// tokens returns the int64 elements of x's tensor name.
func (tr *tfmTrainer) tokens(x *cpu.Executor, name string) []int64 {
	tn, err := x.Get(name)
	if err != nil {
		tr.t.Fatal(err)
	}
	return kernels.View[int64](tn)
}

// step trains on one batch drawn from d and returns the loss.
func (tr *tfmTrainer) step(d *reverseData) float64 {
	d.fill(tr.tokens(tr.train, "x"), tr.tokens(tr.train, "y"))
	if err := tr.train.Step(context.Background()); err != nil {
		tr.t.Fatal(err)
	}
	lt, _ := tr.train.Get("loss")
	return kernels.Float64s(lt)[0]
}

// accuracy returns the fraction of the tokens of y that the model predicts
// for the sequences x (whole batches).
func (tr *tfmTrainer) accuracy(x, y []int64) float64 {
	p := tr.train.Plan()
	for _, i := range p.Params {
		name := p.Buffers[i].Name
		v, err := tr.train.Get(name)
		if err != nil {
			tr.t.Fatal(err)
		}
		if err := tr.eval.Set(name, v); err != nil {
			tr.t.Fatal(err)
		}
	}
	bx, by := tr.tokens(tr.eval, "x"), tr.tokens(tr.eval, "y")
	correct := 0
	for k := 0; k < len(x); k += len(bx) {
		copy(bx, x[k:k+len(bx)])
		copy(by, y[k:k+len(by)])
		if err := tr.eval.Step(context.Background()); err != nil {
			tr.t.Fatal(err)
		}
		lt, _ := tr.eval.Get("logits")
		l := kernels.Float64s(lt)
		for r := range by {
			best := 0
			for c := 1; c < tr.vocab; c++ {
				if l[r*tr.vocab+c] > l[r*tr.vocab+best] {
					best = c
				}
			}
			if int64(best) == by[r] {
				correct++
			}
		}
	}
	return float64(correct) / float64(len(y))
}

// TestTrainTransformerReverse trains examples/transformer/reverse.kir with
// Adam on random sequences to >= 99% token accuracy on 512 held-out
// sequences, which the training batches never contain. It trains a second
// copy under a memory budget halfway between the least peak recomputation
// reaches and keeping every activation, on the same batches: that plan's
// arena is smaller, it recomputes activations, and its loss at every step
// and its params at the end are bitwise those of keeping everything.
func TestTrainTransformerReverse(t *testing.T) {
	const steps, heldBatches = 150, 16
	g := tfmExample(t)
	adam := optimizer(t, "adam", 0.003)
	keep, err := kiln.Compile(g, kiln.Options{Optimizer: adam, Checkpoint: "none", Debug: passes.Debug{Check: true}})
	if err != nil {
		t.Fatal(err)
	}
	least := leastPeak(t, g, kiln.Options{Optimizer: adam})
	budget := (least + keep.ArenaBytes) / 2
	var report *checkpoint.Report
	bud, err := kiln.Compile(g, kiln.Options{Optimizer: adam, MemoryBudget: budget, Debug: passes.Debug{Check: true},
		OnCheckpoint: func(r *checkpoint.Report) { report = r }})
	if err != nil {
		t.Fatal(err)
	}
	if err := bud.Check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("arena: keep all %d bytes, budget %d, budgeted plan %d (%d values recomputed), least %d", keep.ArenaBytes, budget, bud.ArenaBytes, countClones(bud), least)
	if bud.ArenaBytes > budget || bud.ArenaBytes >= keep.ArenaBytes || countClones(bud) == 0 {
		t.Errorf("budgeted arena %d bytes with %d values recomputed; want at most the budget %d, below keep-all %d, and something recomputed",
			bud.ArenaBytes, countClones(bud), budget, keep.ArenaBytes)
	}
	if report == nil || report.Clones != countClones(bud) {
		t.Errorf("the checkpoint report %+v does not count the plan's %d clones", report, countClones(bud))
	}
	eval, err := kiln.Compile(g, kiln.Options{Inference: true})
	if err != nil {
		t.Fatal(err)
	}
	a, b := newTfmTrainer(t, keep, eval, 1), newTfmTrainer(t, bud, eval, 1)

	held := &reverseData{rng: rand.New(rand.NewPCG(2, 2)), seq: tfmSeq, vocab: tfmVocab}
	heldX := make([]int64, heldBatches*tfmBatch*tfmSeq)
	heldY := make([]int64, len(heldX))
	held.fill(heldX, heldY)
	exclude := map[string]bool{}
	for r := 0; r < len(heldX); r += tfmSeq {
		exclude[seqKey(heldX[r:r+tfmSeq])] = true
	}
	da := &reverseData{rng: rand.New(rand.NewPCG(1, 1)), seq: tfmSeq, vocab: tfmVocab, exclude: exclude}
	db := &reverseData{rng: rand.New(rand.NewPCG(1, 1)), seq: tfmSeq, vocab: tfmVocab, exclude: exclude}
	var first, last float64
	for s := 1; s <= steps; s++ {
		la, lb := a.step(da), b.step(db)
		if la != lb {
			t.Fatalf("step %d: loss %v under the budget, %v keeping everything", s, lb, la)
		}
		if s == 1 {
			first = la
		}
		last = la
	}
	for _, i := range keep.Params {
		name := keep.Buffers[i].Name
		pa, _ := a.train.Get(name)
		pb, err := b.train.Get(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(pa.Data, pb.Data) {
			t.Errorf("param %s after %d steps differs between the budgeted and keep-all plans", name, steps)
		}
	}
	acc := a.accuracy(heldX, heldY)
	t.Logf("loss %.4f -> %.4f after %d steps; held-out token accuracy %.4f", first, last, steps, acc)
	if acc < 0.99 {
		t.Errorf("held-out token accuracy %.4f after %d steps, want >= 0.99", acc, steps)
	}
}

func seqKey(row []int64) string {
	key := make([]byte, len(row))
	for i, v := range row {
		key[i] = byte(v)
	}
	return string(key)
}

// TestGradientTransformer checks the gradient of every param of a tiny
// reversal model (two blocks of two heads, exact and tanh gelu) against
// central differences, all in float64, with DESIGN.md's bound (1e-7
// relative, 1e-10 absolute). The model has no kink (layer_norm, softmax,
// gelu and the loss are smooth), so no element may be skipped.
func TestGradientTransformer(t *testing.T) {
	for _, gelu := range []string{"none", "tanh"} {
		t.Run("gelu "+gelu, func(t *testing.T) {
			const batch, seq = 2, 4
			g := tfmReverse(t, batch, seq, frontends.TransformerOptions{Vocab: 5, DModel: 8, Blocks: 2,
				BlockOptions: frontends.BlockOptions{Heads: 2, Hidden: 12, Gelu: gelu}})
			f := kiln.RandomFeeds(g, 5)
			for r := 0; r < batch; r++ {
				for i := 0; i < seq; i++ {
					f["y"][r*seq+seq-1-i] = f["x"][r*seq+i]
				}
			}
			res, err := kiln.GradCheck(g, f, kiln.GradCheckOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if len(res) != len(g.Params()) {
				t.Fatalf("%d params checked, the model has %d", len(res), len(g.Params()))
			}
			worst := res[0]
			for _, r := range res {
				if !r.OK() || r.Skipped > 0 {
					t.Errorf("grad/%s[%d]: analytic %.12g, numeric %.12g (%d elements not smooth)", r.Param, r.Index, r.Analytic, r.Numeric, r.Skipped)
				}
				if r.Excess > worst.Excess {
					worst = r
				}
			}
			t.Logf("%d params; worst grad/%s[%d]: analytic %.12g, numeric %.12g", len(res), worst.Param, worst.Index, worst.Analytic, worst.Numeric)
		})
	}
}
