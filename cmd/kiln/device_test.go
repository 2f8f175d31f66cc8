package main

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/gpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"

	"github.com/kilnml/kiln/internal/gputest"
)

// TestTrainDeviceGPU trains the built-in example for two epochs on the GPU
// and on the CPU: the epoch losses agree within 1e-3 (the GPU sums in other
// orders) and both learn.
func TestTrainDeviceGPU(t *testing.T) {
	gputest.Need(t)
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
	for _, cmd := range []string{"train", "grad", "eval", "run", "bench", "compile"} {
		r := runKiln(t, cmd, "-device", "tpu", "x")
		r.want(t, 2)
		if first, _, _ := strings.Cut(r.stderr, "\n"); !strings.Contains(first, `-device must be cpu or gpu, found "tpu"`) {
			t.Errorf("kiln %s -device tpu: %q", cmd, r.stderr)
		}
	}
}

// TestCompileForGPURuns compiles the digits MLP with -device gpu: both
// plans of the file are placed in chunks of the device's binding size, and
// kiln run -device gpu trains from the file as kiln run does on the CPU
// (epoch losses within 1e-3: the GPU sums in other orders).
func TestCompileForGPURuns(t *testing.T) {
	gputest.Need(t)
	plan := filepath.Join(t.TempDir(), "m.kplan")
	r := runKiln(t, "compile", "-device", "gpu", digitsMLP, "-o", plan)
	r.want(t, 0)
	chunk, err := gpu.ChunkBytes()
	if err != nil {
		t.Fatal(err)
	}
	containsAll(t, "compile output", r.stdout, fmt.Sprintf("placed for the GPU in chunks of %d bytes", chunk))
	f, err := planner.Load(plan)
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range f.Plans {
		if p.ChunkBytes != chunk {
			t.Errorf("plan %q has chunks of %d bytes, want the device's %d", name, p.ChunkBytes, chunk)
		}
	}
	if f.Meta["device"] != "gpu" {
		t.Errorf("metadata device %q, want gpu", f.Meta["device"])
	}
	g := runKiln(t, "run", plan, "-device", "gpu", "-epochs", "1")
	g.want(t, 0)
	c := runKiln(t, "run", plan, "-epochs", "1")
	c.want(t, 0)
	gt, ct := parseTrain(t, g.stdout), parseTrain(t, c.stdout)
	if len(gt.losses) != 1 || len(ct.losses) != 1 {
		t.Fatalf("epoch lines: gpu %v, cpu %v", gt.losses, ct.losses)
	}
	if math.Abs(gt.losses[0]-ct.losses[0]) > 1e-3 {
		t.Errorf("epoch loss %.4f on the GPU, %.4f on the CPU", gt.losses[0], ct.losses[0])
	}
}

// TestRunGPUNeedsChunks: a plan file compiled for the CPU whose arena the
// GPU cannot bind as it is (a weight of about half a binding, so that
// some buffer straddles a binding boundary) is refused by kiln run -device
// gpu with one line that names the value and says how to compile it, before
// anything is allocated.
func TestRunGPUNeedsChunks(t *testing.T) {
	gputest.Need(t)
	chunk, err := gpu.ChunkBytes()
	if err != nil {
		t.Fatal(err)
	}
	n := chunk * 11 / 20 / (64 * 4) // w1 is 55% of a binding
	src := fmt.Sprintf(`graph wide
input %%x: f32[1,64]
input %%y: i64[1]
param %%w1: f32[64,%d]
param %%w2: f32[%d,10]
%%h = matmul %%x, %%w1
%%logits = matmul %%h, %%w2
%%loss = softmax_cross_entropy %%logits, %%y
output %%loss, %%logits
`, n, n)
	g, err := ir.Parse("wide.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	opt, err := passes.DefaultOptimizer("sgd")
	if err != nil {
		t.Fatal(err)
	}
	train, err := kiln.Compile(g, kiln.Options{Grad: true, Optimizer: &opt})
	if err != nil {
		t.Fatal(err)
	}
	eval, err := kiln.Compile(g, kiln.Options{Inference: true})
	if err != nil {
		t.Fatal(err)
	}
	straddles := ""
	for _, b := range train.Buffers {
		if b.Size > 0 && b.Offset/chunk != (b.Offset+b.Size-1)/chunk {
			straddles = b.Name
			break
		}
	}
	if straddles == "" {
		t.Fatalf("no buffer of the %d-byte arena straddles a %d-byte boundary; the test needs one", train.ArenaBytes, chunk)
	}
	plan := filepath.Join(t.TempDir(), "wide.kplan")
	if err := planner.Save(plan, &planner.File{Plans: map[string]*planner.Plan{"train": train, "eval": eval}}); err != nil {
		t.Fatal(err)
	}
	r := runKiln(t, "run", plan, "-device", "gpu", "-steps", "1")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), plan, "straddles", "binding boundary", "compile it with kiln compile -device gpu")
}

// TestBenchPeakGFLOPS: kiln bench -device gpu -peak-gflops X prints the
// matmul rate as a fraction of X, the fraction the printed rate gives.
func TestBenchPeakGFLOPS(t *testing.T) {
	gputest.Need(t)
	r := runKiln(t, "bench", "-device", "gpu", "-matmul", "64", "-peak-gflops", "1000", "-steps", "1", "-warmup", "0", digitsMLP)
	r.want(t, 0)
	m := regexp.MustCompile(`(?m)^matmul +([0-9.]+) GFLOP/s`).FindStringSubmatch(r.stdout)
	d := regexp.MustCompile(`(?m)^of device +([0-9.]+)% of the stated f32 peak \(1000 GFLOP/s\)$`).FindStringSubmatch(r.stdout)
	if m == nil || d == nil {
		t.Fatalf("no matmul or of device line:\n%s", r.stdout)
	}
	rate, _ := strconv.ParseFloat(m[1], 64)
	frac, _ := strconv.ParseFloat(d[1], 64)
	if math.Abs(frac-rate/10) > 0.051+rate/10*0.01 { // both printed rounded
		t.Errorf("matmul %.2f GFLOP/s is %.1f%% of 1000, printed %.1f%%", rate, rate/10, frac)
	}
}
