//go:build !kiln_nogpu

package runtime_test

import (
	"context"
	"math"
	"testing"

	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/internal/gputest"
	"github.com/kilnml/kiln/runtime"
)

// TestDeviceGPU trains the digits plan on the GPU and on the CPU from the
// same seed: each batch's loss, and the logits Predict returns after ten
// batches, agree within 1e-3 (the GPU sums in other orders, in f32).
func TestDeviceGPU(t *testing.T) {
	gputest.Need(t)
	p, err := runtime.Load(digitsPlan)
	if err != nil {
		t.Fatal(err)
	}
	var trainers [2]*runtime.Trainer
	for i, dev := range []string{"cpu", "gpu"} {
		if trainers[i], err = runtime.NewTrainer(p, runtime.ExecOptions{Device: dev, Seed: p.Seed, Workers: 1}); err != nil {
			t.Fatalf("%s: %v", dev, err)
		}
		defer trainers[i].Close()
	}
	d, err := dataset.Digits()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 10 {
		var a, b runtime.Tally
		if err := trainers[0].TrainBatch(ctx, d, i, &a); err != nil {
			t.Fatal(err)
		}
		if err := trainers[1].TrainBatch(ctx, d, i, &b); err != nil {
			t.Fatal(err)
		}
		if math.Abs(a.Loss-b.Loss) > 1e-3 {
			t.Fatalf("batch %d: loss %v on the GPU, %v on the CPU", i, b.Loss, a.Loss)
		}
	}
	cpu, err := trainers[0].Predict(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := trainers[1].Predict(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(cpu) != len(gpu) {
		t.Fatalf("%d logits on the GPU, %d on the CPU", len(gpu), len(cpu))
	}
	for i := range cpu {
		if math.Abs(cpu[i]-gpu[i]) > 1e-3 {
			t.Fatalf("logit %d: %v on the GPU, %v on the CPU", i, gpu[i], cpu[i])
		}
	}
}
