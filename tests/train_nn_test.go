package tests

import (
	"context"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// nnDigitsCNN is a small CNN for the 8x8 digits: conv2d, batch_norm, relu,
// max_pool2d, dropout and a linear layer.
func nnDigitsCNN(t *testing.T, batch int) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("digits_cnn")
	x := b.Input("x", ir.F32, batch, 64)
	y := b.Input("y", ir.I64, batch)
	h := b.Conv2d(b.Reshape(x, batch, 1, 8, 8), b.Param("w1", ir.F32, 8, 1, 3, 3), b.Param("b1", ir.F32, 8), frontends.ConvOptions{Padding: []int{1}})
	h = b.BatchNorm(h, b.ParamInit("g1", ir.F32, []int{8}, "ones", 0), b.Param("s1", ir.F32, 8), 1e-5)
	h = b.MaxPool2d(b.Relu(h), frontends.PoolOptions{Kernel: []int{2}})
	h = b.Dropout(b.Reshape(h, batch, 8*4*4), 0.25, 1)
	logits := b.Add(b.Matmul(h, b.Param("w2", ir.F32, 128, 10)), b.Param("b2", ir.F32, 10))
	b.Output(b.SoftmaxCrossEntropy(logits, y), logits)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func nnCountOps(p *planner.Plan, op ir.Op) int {
	n := 0
	for _, st := range p.Steps {
		if st.Kind != planner.Copy && st.Op == op {
			n++
		}
	}
	return n
}

// TestTrainDigitsCNN trains the CNN with the Trainer: the loss falls, the
// held-out accuracy is high, and evaluation runs without dropout (the
// inference pass) while training runs with it.
func TestTrainDigitsCNN(t *testing.T) {
	data, err := dataset.Digits()
	if err != nil {
		t.Fatal(err)
	}
	train, held := data.Split(0.2, 1)
	mean, std := train.Standardize()
	held.ApplyStandardize(mean, std)
	tr, err := kiln.NewTrainer(nnDigitsCNN(t, 32), *optimizer(t, "adam", 0.01), 1, kiln.Options{Debug: passes.Debug{Check: true}})
	if err != nil {
		t.Fatal(err)
	}
	if n := nnCountOps(tr.Plan, ir.OpDropout); n != 2 {
		t.Errorf("the training plan has %d dropout steps, want 2 (forward and backward)", n)
	}
	if n := nnCountOps(tr.EvalPlan, ir.OpDropout); n != 0 {
		t.Errorf("the evaluation plan has %d dropout steps, want none", n)
	}
	var losses []float64
	for e := 1; e <= 4; e++ {
		train.Shuffle(uint64(1 + e))
		loss, _, err := tr.Epoch(context.Background(), train)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, loss)
	}
	_, acc, err := tr.Evaluate(context.Background(), held)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("losses %.4f, held-out accuracy %.4f", losses, acc)
	if !(losses[len(losses)-1] < losses[0]/2) || acc < 0.93 {
		t.Errorf("loss %.4f -> %.4f, accuracy %.4f; want the loss halved and >= 93%%", losses[0], losses[len(losses)-1], acc)
	}
}
