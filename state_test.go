package kiln_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/ir"
)

// dropoutMLP is a small classifier on the kan2d points (the label is
// whether f > e) with dropout, so that its steps depend on the executor's
// step count.
func dropoutMLP() *frontends.Builder {
	b := frontends.NewBuilder("drop_mlp")
	x := b.Input("x", ir.F32, 8, 2)
	y := b.Input("y", ir.I64, 8)
	h := b.Dropout(b.Tanh(b.Add(b.Matmul(x, b.Param("w1", ir.F32, 2, 16)), b.Param("b1", ir.F32, 16))), 0.3, 5)
	logits := b.Add(b.Matmul(h, b.Param("w2", ir.F32, 16, 2)), b.Param("b2", ir.F32, 2))
	b.Output(b.SoftmaxCrossEntropy(logits, y), logits)
	return b
}

func labelledPoints(t *testing.T) *dataset.Dataset {
	t.Helper()
	d, err := dataset.KAN2D(80, 2)
	if err != nil {
		t.Fatal(err)
	}
	d.Y, d.Classes = make([]int64, d.N), 2
	for i, v := range d.R {
		if v > 2.718 {
			d.Y[i] = 1
		}
	}
	d.R = nil
	return d
}

// snapshot returns the bytes of the trainer's params and state.
func snapshot(t *testing.T, tr *kiln.Trainer) []byte {
	t.Helper()
	var out []byte
	for _, i := range slices.Concat(tr.Plan.Params, tr.Plan.States) {
		v, err := tr.Executor().Get(tr.Plan.Buffers[i].Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v.Data...)
	}
	return out
}

// TestCheckpointResume trains 20 batches in one go, and 7 then (from a
// checkpoint, in a new trainer) 13: the params, optimizer state and tally
// are bitwise the same. Without the restored step count (dropout's masks)
// they are not.
func TestCheckpointResume(t *testing.T) {
	t.Parallel()
	data := labelledPoints(t)
	ctx := context.Background()
	run := func(tr *kiln.Trainer, from, to int, a *kiln.Tally) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := tr.TrainBatch(ctx, data, i%data.NumBatches(8), a); err != nil {
				t.Fatal(err)
			}
		}
	}
	whole := newTrainer(t, dropoutMLP(), 0.01)
	var wa kiln.Tally
	run(whole, 0, 20, &wa)

	dir := t.TempDir()
	first := newTrainer(t, dropoutMLP(), 0.01)
	var fa kiln.Tally
	run(first, 0, 7, &fa)
	cfg := map[string]string{"seed": "1", "data": "points"}
	if err := first.SaveCheckpoint(dir, kiln.TrainState{Step: 7, Epoch: 1, Batch: 7, Tally: fa, Config: cfg}); err != nil {
		t.Fatal(err)
	}
	resume := func() (*kiln.Trainer, kiln.TrainState) {
		tr := newTrainer(t, dropoutMLP(), 0.01)
		st, err := tr.LoadCheckpoint(dir)
		if err != nil {
			t.Fatal(err)
		}
		return tr, st
	}
	second, st := resume()
	if st.Step != 7 || st.Epoch != 1 || st.Batch != 7 || st.Config["data"] != "points" || second.Executor().StepCount() != 7 {
		t.Fatalf("restored state %+v, step count %d", st, second.Executor().StepCount())
	}
	run(second, 7, 20, &st.Tally)
	if !bytes.Equal(snapshot(t, second), snapshot(t, whole)) {
		t.Error("the resumed run's params and state differ from the uninterrupted run's")
	}
	l1, m1 := wa.Result()
	if l2, m2 := st.Tally.Result(); l1 != l2 || m1 != m2 {
		t.Errorf("tally: loss %v, accuracy %v resumed; %v, %v uninterrupted", l2, m2, l1, m1)
	}

	// The step count matters: dropout draws other masks without it.
	third, st := resume()
	if err := third.Executor().SetStepCount(0); err != nil {
		t.Fatal(err)
	}
	run(third, 7, 20, &st.Tally)
	if bytes.Equal(snapshot(t, third), snapshot(t, whole)) {
		t.Error("resuming with the step count reset gave the same params: the test cannot see dropout's step")
	}
}

// TestCheckpointCrash checks what a save killed midway leaves: a temporary
// file, or a complete state file the manifest does not name yet. Either
// way the previous checkpoint loads, and the next save removes the debris.
// A corrupt state file or manifest is an error naming the file.
func TestCheckpointCrash(t *testing.T) {
	t.Parallel()
	data := labelledPoints(t)
	ctx := context.Background()
	tr := newTrainer(t, dropoutMLP(), 0.01)
	var a kiln.Tally
	if err := tr.TrainBatch(ctx, data, 0, &a); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := tr.SaveCheckpoint(dir, kiln.TrainState{Step: 1, Epoch: 1, Batch: 1, Tally: a}); err != nil {
		t.Fatal(err)
	}
	saved := snapshot(t, tr)
	if err := tr.TrainBatch(ctx, data, 1, &a); err != nil {
		t.Fatal(err)
	}
	// A save of step 2 killed before its manifest: the state file is there
	// (whole or partial), and a temporary manifest.
	state1, err := os.ReadFile(filepath.Join(dir, "state-00000001.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"state-00000002.safetensors":               state1[:len(state1)/2],
		".state-00000003.safetensors.tmp-12345":    state1[:10],
		"." + kiln.CheckpointManifest + ".tmp-999": []byte(`{"format": "kiln chec`),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fresh := newTrainer(t, dropoutMLP(), 0.01)
	st, err := fresh.LoadCheckpoint(dir)
	if err != nil {
		t.Fatalf("the previous checkpoint does not load: %v", err)
	}
	if st.Step != 1 || !bytes.Equal(snapshot(t, fresh), saved) {
		t.Errorf("loaded step %d and other params, want the checkpoint of step 1", st.Step)
	}
	if err := tr.SaveCheckpoint(dir, kiln.TrainState{Step: 2, Epoch: 1, Batch: 2, Tally: a}); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{kiln.CheckpointManifest, "state-00000002.safetensors"}; !slices.Equal(names, want) {
		t.Errorf("after the next save the directory holds %v, want %v", names, want)
	}
	if st, err := fresh.LoadCheckpoint(dir); err != nil || st.Step != 2 || !bytes.Equal(snapshot(t, fresh), snapshot(t, tr)) {
		t.Errorf("the new checkpoint: step %d, error %v", st.Step, err)
	}

	// Corruption is an error that names the file.
	state := filepath.Join(dir, "state-00000002.safetensors")
	good, _ := os.ReadFile(state)
	bad := slices.Clone(good)
	bad[len(bad)-1] ^= 1
	os.WriteFile(state, bad, 0o644)
	if _, err := fresh.LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), state+": SHA-256 ") {
		t.Errorf("a corrupt state file: error %v", err)
	}
	os.WriteFile(state, good, 0o644)
	manifest := filepath.Join(dir, kiln.CheckpointManifest)
	os.WriteFile(manifest, []byte(`{"format": "kiln chec`), 0o644)
	if _, err := fresh.LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), manifest+": not a checkpoint manifest") {
		t.Errorf("a truncated manifest: error %v", err)
	}
	other := newTrainer(t, regressionMLP(8), 0.01)
	if err := tr.SaveCheckpoint(dir, kiln.TrainState{Step: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := other.LoadCheckpoint(dir); err == nil || !strings.Contains(err.Error(), "the checkpoint is of graph drop_mlp, the model is regress") {
		t.Errorf("another model's checkpoint: error %v", err)
	}
}
