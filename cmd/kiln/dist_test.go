package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/kilnml/kiln/ir"
)

// sameFile fails unless the files at a and b hold the same bytes.
func sameFile(t *testing.T, what, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x, y) {
		t.Errorf("%s: %s and %s differ", what, a, b)
	}
}

// TestDistEqualsAccum checks kiln train -dist local:N against -accum N:
// bitwise the same saved params, with SGD and Adam, on the digits MLP and
// the transformer example, for N = 2 and 4, with the optimizer state
// sharded (-dist-shard) or not. (The MPI transport gives the
// same bits: dist/mpi's tests check its sums against dist.Local's, and
// dist/mpi/run_tests.sh runs kiln train under mpirun.)
func TestDistEqualsAccum(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"digits/sgd", []string{"-optimizer", "sgd", "-lr", "0.1", "-momentum", "0.9", "-epochs", "2"}},
		{"digits/adam", []string{"-optimizer", "adam", "-lr", "0.01", "-epochs", "1"}},
		{"transformer/adamw", []string{"../../examples/transformer/reverse.kir", "-data", "reverse", "-rows", "512", "-optimizer", "adamw", "-lr", "0.003",
			"-lr-schedule", "cosine", "-warmup", "2", "-clip-norm", "1", "-epochs", "1"}},
		{"digits/sgd/shard", []string{"-dist-shard", "-optimizer", "sgd", "-lr", "0.1", "-momentum", "0.9", "-epochs", "2"}},
		{"transformer/adam/shard", []string{"-dist-shard", "../../examples/transformer/reverse.kir", "-data", "reverse", "-rows", "512", "-optimizer", "adam", "-lr", "0.003",
			"-lr-schedule", "linear", "-warmup", "2", "-epochs", "1"}},
	} {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/%d", tc.name, n), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				accum, distP := filepath.Join(dir, "accum.safetensors"), filepath.Join(dir, "dist.safetensors")
				one := tc.args
				if one[0] == "-dist-shard" {
					one = one[1:]
				}
				a := runKiln(t, append([]string{"train", "-accum", fmt.Sprint(n), "-save", accum}, one...)...)
				a.want(t, 0)
				d := runKiln(t, append([]string{"train", "-dist", fmt.Sprintf("local:%d", n), "-dist-bucket", "4KB", "-save", distP}, tc.args...)...)
				d.want(t, 0)
				sameFile(t, "-dist against -accum", distP, accum)
				containsAll(t, "stdout", d.stdout, fmt.Sprintf("data-parallel on %d ranks", n), "held-out")
			})
		}
	}
}

// TestDistPlanFile checks a plan compiled for N ranks: kiln run -dist
// local:N trains it as kiln train -dist does, and runs with another count
// or without -dist are refused, naming both counts.
func TestDistPlanFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	plan := filepath.Join(dir, "p.kplan")
	runKiln(t, "compile", "../../examples/digits/mlp.kir", "-ranks", "2", "-o", plan).want(t, 0)
	ran, trained := filepath.Join(dir, "run.safetensors"), filepath.Join(dir, "train.safetensors")
	runKiln(t, "run", "-dist", "local:2", "-epochs", "1", "-save", ran, plan).want(t, 0)
	runKiln(t, "train", "-dist", "local:2", "-epochs", "1", "-save", trained).want(t, 0)
	sameFile(t, "kiln run against kiln train", ran, trained)
	r := runKiln(t, "run", "-dist", "local:4", plan)
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), "rank ", plan, "compiled for 2 ranks, but this job has 4")
	r = runKiln(t, "run", plan)
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), plan, "compiled for data-parallel training on 2 ranks", "-dist mpi")
	single := filepath.Join(dir, "single.kplan")
	runKiln(t, "compile", "../../examples/digits/mlp.kir", "-o", single).want(t, 0)
	r = runKiln(t, "run", "-dist", "local:2", single)
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), single, "compiled for one process, but this job has 2 ranks", "kiln compile -ranks 2")
	r = runKiln(t, "plan", "-optimizer", "sgd", "-ranks", "2", "-dist-bucket", "1KB", "../../examples/digits/mlp.kir")
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "allreduce %b2.grad {ranks=2}", "allreduce %w1.grad, %dp")
}

// TestDistResume checks -resume with -dist: a run of 2 ranks stopped
// after its first epoch and resumed ends bitwise where an uninterrupted
// one does, with the optimizer state sharded (each rank checkpointing its
// own shard) or not.
func TestDistResume(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, shard := range [][]string{nil, {"-dist-shard"}} {
		whole, resumed, ckpt := filepath.Join(dir, "whole.safetensors"), filepath.Join(dir, "resumed.safetensors"), filepath.Join(dir, fmt.Sprint("ckpt", len(shard)))
		runKiln(t, append([]string{"train", "-dist", "local:2", "-epochs", "2", "-save", whole}, shard...)...).want(t, 0)
		runKiln(t, append([]string{"train", "-dist", "local:2", "-epochs", "1", "-checkpoint", ckpt}, shard...)...).want(t, 0)
		r := runKiln(t, append([]string{"train", "-dist", "local:2", "-epochs", "2", "-checkpoint", ckpt, "-resume", "-save", resumed}, shard...)...)
		r.want(t, 0)
		sameFile(t, fmt.Sprintf("resumed %v against uninterrupted", shard), resumed, whole)
	}
	ckpt := filepath.Join(dir, "ckpt0")
	r := runKiln(t, "train", "-dist", "local:4", "-epochs", "2", "-checkpoint", ckpt, "-resume")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), "-resume", "-dist ranks 2", "-dist ranks 4")
}

// TestDistErrors checks the usage errors of -dist and -dist-bucket, and
// a graph with no inputs, which has no data to split.
func TestDistErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"train", "-dist", "tcp"}, 2, `-dist: expected mpi or local:N, found "tcp"`},
		{[]string{"train", "-dist", "local:0"}, 2, `-dist local:N: expected N from 1 to 1024, found "0"`},
		{[]string{"train", "-dist", "local:2", "-dist-bucket", "lots"}, 2, `-dist-bucket: expected a positive size such as 25MB, found "lots"`},
		{[]string{"plan", "-ranks", "-3", "../../examples/digits/mlp.kir"}, 2, "-ranks: expected 1 or more, found -3"},
		{[]string{"plan", "-dist-shard", "../../examples/digits/mlp.kir"}, 2, "-dist-shard needs -ranks of 2 or more"},
		{[]string{"train", "-dist-shard"}, 2, "-dist-shard needs -dist"},
		{[]string{"train", "-dist", "local:2", "-dist-shard", "-clip-norm", "1"}, 1, "sharded optimizer state (-dist-shard) does not take -clip-norm"},
		{[]string{"train", "-dist", "local:2", "-steps", "4", writeFile(t, "seek.kir", seekKir)}, 1, "takes no inputs, and data-parallel training splits batches"},
	} {
		r := runKiln(t, tc.args...)
		r.want(t, tc.code)
		containsAll(t, "stderr", r.stderr, tc.want)
	}
}

// TestDistLaunchedWithoutDist checks that a process the environment says
// is one of several ranks refuses to train without -dist mpi.
func TestDistLaunchedWithoutDist(t *testing.T) {
	t.Setenv("OMPI_COMM_WORLD_SIZE", "3")
	r := runKiln(t, "train", "-epochs", "1")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), "one of 3 ranks of a parallel job, but -dist mpi is not given", "unsynchronised")
}

// TestDistStep checks kiln step -dist local:N against -accum N on the
// optimizer fixtures' MLP (float64; N batches of 8/N rows in one inputs
// file): bitwise the same params and losses, sharded or not, and that
// -accum is refused with -dist.
func TestDistStep(t *testing.T) {
	t.Parallel()
	for _, n := range []int{2, 4} {
		model, in := optimMLP(t, 8/n, ir.F64)
		for _, extra := range [][]string{{"-optimizer", "adamw", "-lr", "0.05", "-lr-schedule", "cosine", "-warmup", "1", "-clip-norm", "0.5"},
			{"-optimizer", "sgd", "-lr", "0.1", "-momentum", "0.9", "-dist-shard"}} {
			dir := t.TempDir()
			accum, distP := filepath.Join(dir, "accum.safetensors"), filepath.Join(dir, "dist.safetensors")
			one := extra
			if one[len(one)-1] == "-dist-shard" {
				one = one[:len(one)-1]
			}
			runKiln(t, append([]string{"step", model, "-inputs", in, "-out", accum, "-steps", "3", "-accum", fmt.Sprint(n)}, one...)...).want(t, 0)
			runKiln(t, append([]string{"step", model, "-inputs", in, "-out", distP, "-steps", "3", "-dist", fmt.Sprintf("local:%d", n)}, extra...)...).want(t, 0)
			sameFile(t, fmt.Sprintf("kiln step -dist local:%d %v against -accum", n, extra), distP, accum)
		}
	}
	model, in := optimMLP(t, 4, ir.F64)
	r := runKiln(t, "step", model, "-inputs", in, "-out", filepath.Join(t.TempDir(), "o.safetensors"), "-dist", "local:2", "-accum", "2")
	r.want(t, 2)
	containsAll(t, "stderr", r.stderr, "kiln step -dist takes no -accum")
}
