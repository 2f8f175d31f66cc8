package main

import (
	"math"
	"os"
	"strings"
	"testing"

	"github.com/kilnml/kiln/exec/gpu"
)

// TestTrainDeviceGPU trains the built-in example for two epochs on the GPU
// and on the CPU: the epoch losses agree within 1e-3 (the GPU sums in other
// orders) and both learn.
func TestTrainDeviceGPU(t *testing.T) {
	if _, err := gpu.Available(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI has no GPU adapter (install mesa-vulkan-drivers): %v", err)
		}
		t.Skipf("skipped: no GPU adapter on this machine (%v)", err)
	}
	g := runKiln(t, "train", "-device", "gpu", "-epochs", "2")
	g.want(t, 0)
	c := runKiln(t, "train", "-epochs", "2")
	c.want(t, 0)
	gt, ct := parseTrain(t, g.stdout), parseTrain(t, c.stdout)
	if len(gt.losses) != 2 || len(ct.losses) != 2 {
		t.Fatalf("epoch lines: gpu %v, cpu %v", gt.losses, ct.losses)
	}
	for i := range ct.losses {
		if math.Abs(gt.losses[i]-ct.losses[i]) > 1e-3 {
			t.Errorf("epoch %d loss %.4f on the GPU, %.4f on the CPU", i+1, gt.losses[i], ct.losses[i])
		}
	}
	if gt.accuracy < 50 {
		t.Errorf("held-out accuracy %.2f%% on the GPU after 2 epochs", gt.accuracy)
	}
}

func TestDeviceUsage(t *testing.T) {
	for _, cmd := range []string{"train", "grad", "run", "bench"} {
		r := runKiln(t, cmd, "-device", "tpu", "x")
		r.want(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.Contains(first, `-device must be cpu or gpu, found "tpu"`) {
			t.Errorf("kiln %s -device tpu: %q", cmd, r.stderr)
		}
	}
}
