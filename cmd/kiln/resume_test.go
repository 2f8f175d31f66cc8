package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/safetensors"
)

// dropoutMLPKir is a digits MLP with dropout, so that its training steps
// depend on the executor's step count, and wide enough that a step takes
// a few milliseconds.
const dropoutMLPKir = `graph digits_dropout
input %x: f32[32,64]
input %y: i64[32]
param %w1: f32[64,256]
param %b1: f32[256]
param %w2: f32[256,10]
param %b2: f32[10]
%h = matmul %x, %w1
%a = add %h, %b1
%r = relu %a
%d = dropout %r {p=0.2, seed=3}
%z = matmul %d, %w2
%logits = add %z, %b2
%loss = softmax_cross_entropy %logits, %y
output %loss, %logits
`

// kilnBinary is the kiln binary the tests that need a real process share,
// built once by buildKiln into dir (removed by TestMain).
var kilnBinary struct {
	once      sync.Once
	dir, path string
	err       error
}

// buildKiln returns the path of the kiln binary, building it on first use.
func buildKiln(t *testing.T) string {
	t.Helper()
	b := &kilnBinary
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "kiln-test-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "kiln")
		if out, err := exec.Command("go", "build", "-o", b.path, ".").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// runUntil starts cmd and reads its stdout until a line that starts with
// prefix, calls at then, reads the rest and waits for cmd to end. It
// returns what cmd wrote to stdout and stderr and how it ended.
func runUntil(t *testing.T, cmd *exec.Cmd, prefix string, at func()) (stdout, stderr string, err error) {
	t.Helper()
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sc := bufio.NewScanner(pipe)
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.HasPrefix(sc.Text(), prefix) {
			at()
			break
		}
	}
	rest, _ := io.ReadAll(pipe)
	out.Write(rest)
	err = cmd.Wait()
	return out.String(), errBuf.String(), err
}

// manifestStep returns the step of the checkpoint in dir, or -1 when there
// is none (yet).
func manifestStep(dir string) int64 {
	data, err := os.ReadFile(filepath.Join(dir, kiln.CheckpointManifest))
	if err != nil {
		return -1
	}
	var m struct{ Step int64 }
	if json.Unmarshal(data, &m) != nil {
		return -1
	}
	return m.Step
}

// TestResumeAfterKill starts a real kiln train process that saves a
// checkpoint every step, kills it with SIGKILL mid-run (mid-save, most
// likely), resumes from the checkpoint and checks that the final params
// are bitwise those of a run that was never interrupted. The run follows a
// learning-rate schedule (warmup, then cosine), which the plan's state
// continues, and accumulates 3 batches an update, so that the kill comes
// mid-update two times in three and the resumed run continues the sums.
func TestResumeAfterKill(t *testing.T) {
	t.Parallel()
	bin := buildKiln(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "drop.kir")
	if err := os.WriteFile(model, []byte(dropoutMLPKir), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"train", model, "-data", "digits", "-epochs", "3", "-workers", "1", "-lr-schedule", "cosine", "-warmup", "20", "-accum", "3"}
	whole, resumed := filepath.Join(dir, "whole.safetensors"), filepath.Join(dir, "resumed.safetensors")
	r := runKiln(t, append(args, "-save", whole)...)
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "accumulating 3 batches an update: 14 updates an epoch\n")

	ckpt := filepath.Join(dir, "ckpt")
	cmd := exec.Command(bin, append(args, "-checkpoint", ckpt, "-save-every", "1")...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const total = 3 * 42 // 1438 training rows: 44 batches of 32 per epoch, 42 of them in whole updates
	deadline := time.Now().Add(60 * time.Second)
	for manifestStep(ckpt) < 30 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != -1 {
		t.Fatalf("the training process was not killed mid-run (%v):\n%s", err, out.String())
	}
	step := manifestStep(ckpt)
	if step < 30 || step >= total {
		t.Fatalf("killed at checkpoint step %d, want one in [30, %d)", step, total)
	}
	t.Logf("killed after the checkpoint of step %d of %d", step, total)

	r = runKiln(t, append(args, "-checkpoint", ckpt, "-resume", "-save", resumed)...)
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "resumed from "+ckpt+" at step ")
	a, _ := os.ReadFile(whole)
	b, _ := os.ReadFile(resumed)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("the resumed run's params differ from the uninterrupted run's")
	}
	// The resumed run's last lines match the uninterrupted run's.
	if a, b := lastEpochLine(t, runKiln(t, args...).stdout), lastEpochLine(t, r.stdout); a != b {
		t.Errorf("last epoch line %q after resuming, %q uninterrupted", b, a)
	}
}

// lastEpochLine returns the last epoch line of out without its time.
func lastEpochLine(t *testing.T, out string) string {
	t.Helper()
	m := epochLine.FindAllStringIndex(out, -1)
	if m == nil {
		t.Fatalf("no epoch line:\n%s", out)
	}
	line, _, _ := strings.Cut(out[m[len(m)-1][0]:], "\n")
	if i := strings.LastIndex(line, "  ("); i > 0 {
		line = line[:i]
	}
	return line
}

// TestResumeInProcess covers what the kill test does not: a graph with no
// inputs resumed bitwise, a resumed run with more epochs than the first,
// and the errors of resuming a different run.
func TestResumeInProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	seek := writeFile(t, "seek.kir", seekKir)
	tiny := writeFile(t, "tiny.kir", tinyMLPKir)
	data := writeFile(t, "blobs.csv", separableCSV(100, 2, 3))
	path := func(name string) string { return filepath.Join(dir, name) }
	same := func(a, b string) {
		t.Helper()
		x, _ := os.ReadFile(a)
		y, _ := os.ReadFile(b)
		if len(x) == 0 || !bytes.Equal(x, y) {
			t.Errorf("%s and %s differ", a, b)
		}
	}

	// No inputs: 40 steps, or 25 then 15 more.
	runKiln(t, "train", seek, "-steps", "40", "-save", path("seek40")).want(t, 0)
	runKiln(t, "train", seek, "-steps", "25", "-checkpoint", path("s"), "-save-every", "10").want(t, 0)
	if n := manifestStep(path("s")); n != 25 {
		t.Errorf("the run of 25 steps ended with a checkpoint of step %d", n)
	}
	r := runKiln(t, "train", seek, "-steps", "40", "-checkpoint", path("s"), "-resume", "-save", path("seek25+15"))
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "resumed from "+path("s")+" at step 25\n", "step    40/40")
	same(path("seek40"), path("seek25+15"))

	// Data: 4 epochs, or 2 (checkpoints at each epoch's end) then 2 more.
	runKiln(t, "train", tiny, "-data", data, "-epochs", "4", "-save", path("tiny4")).want(t, 0)
	runKiln(t, "train", tiny, "-data", data, "-epochs", "2", "-checkpoint", path("d")).want(t, 0)
	r = runKiln(t, "train", tiny, "-data", data, "-epochs", "4", "-checkpoint", path("d"), "-resume", "-save", path("tiny2+2"), "-workers", "3", "-recompute", "sqrt")
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "at step 20 (epoch 2, batch 10)", "epoch   4/4")
	same(path("tiny4"), path("tiny2+2"))

	// Settings that change the result are refused, each named with the
	// checkpoint's value and this run's; -workers and -recompute do not
	// change the result and may differ (above).
	tinyMoved := writeFile(t, "moved.kir", strings.Replace(tinyMLPKir, "tanh", "relu", 1))
	prefix := "kiln train: -resume: checkpoint " + path("d") + " was trained with "
	for _, tt := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"another seed", []string{tiny, "-data", data, "-seed", "2"}, 1, prefix + "-seed 1, this run has -seed 2"},
		{"another learning rate", []string{tiny, "-data", data, "-lr", "0.1"}, 1, prefix + "-lr 0.001, this run has -lr 0.1"},
		{"weight decay", []string{tiny, "-data", data, "-weight-decay", "0.01"}, 1, prefix + "-weight-decay 0, this run has -weight-decay 0.01"},
		{"clipping", []string{tiny, "-data", data, "-clip-grad", "1"}, 1, prefix + "-clip-grad 0, this run has -clip-grad 1"},
		{"norm clipping", []string{tiny, "-data", data, "-clip-norm", "1"}, 1, prefix + "-clip-norm (none), this run has -clip-norm 1"},
		{"accumulation", []string{tiny, "-data", data, "-accum", "2"}, 1, prefix + "-accum (none), this run has -accum 2"},
		{"beta1", []string{tiny, "-data", data, "-beta1", "0.8"}, 1, prefix + "-beta1 0.9, this run has -beta1 0.8"},
		{"eps and beta2", []string{tiny, "-data", data, "-eps", "1e-6", "-beta2", "0.99"}, 1, prefix + "-beta2 0.999, -eps 1e-08, this run has -beta2 0.99, -eps 1e-06"},
		{"sgd", []string{tiny, "-data", data, "-optimizer", "sgd"}, 1, prefix + "-lr 0.001, -optimizer adam, this run has -lr 0.01, -optimizer sgd"},
		{"amsgrad", []string{tiny, "-data", data, "-amsgrad"}, 1, prefix + "-amsgrad false, this run has -amsgrad true"},
		{"adamw", []string{tiny, "-data", data, "-optimizer", "adamw"}, 1, prefix + "-optimizer adam, -weight-decay 0, this run has -optimizer adamw, -weight-decay 0.01"},
		{"-O0", []string{tiny, "-data", data, "-O0"}, 1, prefix + "-O0 false, this run has -O0 true"},
		{"standardize", []string{tiny, "-data", data, "-standardize=false"}, 1, prefix + "-standardize true, this run has -standardize false"},
		{"another graph of the same name", []string{tinyMoved, "-data", data}, 1, prefix + "model sha256 "},
		{"another model", []string{seek}, 1, prefix + "batch 8, model tiny_mlp, model sha256 "},
		{"past the epochs", []string{tiny, "-data", data, "-epochs", "1"}, 1, "the run is at epoch 4, past -epochs 1"},
		{"no checkpoint", []string{tiny, "-data", data, "-checkpoint", path("none")}, 1, filepath.Join(path("none"), kiln.CheckpointManifest)},
	} {
		args := append([]string{"train", "-resume", "-checkpoint", path("d")}, tt.args...)
		r := runKiln(t, args...)
		r.want(t, tt.code)
		containsAll(t, tt.name, oneLine(t, r.stderr), tt.want)
	}
	// The data file edited in place is other data under the same -data.
	orig, err := os.ReadFile(data)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(data, []byte(separableCSV(100, 2, 4)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runKiln(t, "train", "-resume", "-checkpoint", path("d"), tiny, "-data", data)
	r.want(t, 1)
	containsAll(t, "edited data", oneLine(t, r.stderr), prefix+"data sha256 ")
	if err := os.WriteFile(data, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	// A checkpoint of an older kiln, which did not record every setting,
	// is refused.
	mpath := filepath.Join(path("d"), kiln.CheckpointManifest)
	js, err := os.ReadFile(mpath)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	m["config"] = map[string]string{"model": "tiny_mlp", "optimizer": "adam lr 0.001", "-seed": "1", "batch": "8"}
	old, _ := json.Marshal(m)
	if err := os.WriteFile(mpath, old, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runKiln(t, "train", tiny, "-data", data, "-epochs", "5", "-checkpoint", path("d"), "-resume")
	r.want(t, 1)
	containsAll(t, "older checkpoint", oneLine(t, r.stderr), "kiln train: -resume: checkpoint "+path("d")+" was saved by an older kiln, which did not record every setting that changes the result; start the run again")
	if err := os.WriteFile(mpath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-save-every", "5"}, "-save-every and -resume need -checkpoint DIR"},
		{[]string{"-resume"}, "-save-every and -resume need -checkpoint DIR"},
		{[]string{"-checkpoint", dir, "-save-every", "-1"}, "-save-every must be at least 1, found -1"},
		{[]string{"-checkpoint", dir, "-resume", "-init", path("tiny4")}, "-init and -resume both set the params"},
	} {
		r := runKiln(t, append([]string{"train"}, tt.args...)...)
		r.want(t, 2)
		containsAll(t, "stderr", r.stderr, tt.want)
	}
}

// TestRunResumeSettings resumes kiln train's checkpoint with kiln run from
// a plan file of the same model and settings (bitwise the same params as
// an uninterrupted run), and refuses a plan file compiled with another
// weight decay or with -clip-norm, naming it.
func TestRunResumeSettings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	tiny := writeFile(t, "tiny.kir", tinyMLPKir)
	data := writeFile(t, "blobs.csv", separableCSV(100, 2, 3))
	runKiln(t, "compile", tiny, "-o", path("a.kplan")).want(t, 0)
	runKiln(t, "compile", tiny, "-weight-decay", "0.01", "-o", path("wd.kplan")).want(t, 0)
	runKiln(t, "compile", tiny, "-clip-norm", "0.5", "-o", path("clip.kplan")).want(t, 0)

	runKiln(t, "train", tiny, "-data", data, "-epochs", "3", "-save", path("whole")).want(t, 0)
	runKiln(t, "train", tiny, "-data", data, "-epochs", "1", "-checkpoint", path("ck")).want(t, 0)
	r := runKiln(t, "run", path("a.kplan"), "-data", data, "-epochs", "3", "-checkpoint", path("ck"), "-resume", "-save", path("resumed"))
	r.want(t, 0)
	containsAll(t, "kiln run -resume", r.stdout, "resumed from "+path("ck")+" at step 10 (epoch 1, batch 10)")
	a, _ := os.ReadFile(path("whole"))
	b, _ := os.ReadFile(path("resumed"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("kiln run resumed from kiln train's checkpoint gives other params than kiln train uninterrupted")
	}

	r = runKiln(t, "run", path("wd.kplan"), "-data", data, "-epochs", "5", "-checkpoint", path("ck"), "-resume")
	r.want(t, 1)
	containsAll(t, "kiln run -resume with another weight decay", oneLine(t, r.stderr),
		"kiln run: -resume: checkpoint "+path("ck")+" was trained with -weight-decay 0, this run has -weight-decay 0.01")
	r = runKiln(t, "run", path("clip.kplan"), "-data", data, "-epochs", "5", "-checkpoint", path("ck"), "-resume")
	r.want(t, 1)
	containsAll(t, "kiln run -resume with norm clipping", oneLine(t, r.stderr),
		"kiln run: -resume: checkpoint "+path("ck")+" was trained with -clip-norm (none), this run has -clip-norm 0.5")
}

// TestInterrupt sends SIGINT to a real kiln train process after its first
// epoch line: it stops between steps, saves the checkpoint, says where,
// exits 1 and leaves no temporary file; resuming ends with bitwise the
// params of a run never interrupted.
func TestInterrupt(t *testing.T) {
	t.Parallel()
	bin := buildKiln(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "drop.kir")
	if err := os.WriteFile(model, []byte(dropoutMLPKir), 0o644); err != nil {
		t.Fatal(err)
	}
	const epochs = 10
	args := []string{"train", model, "-data", "digits", "-epochs", strconv.Itoa(epochs), "-workers", "1"}
	whole, resumed := filepath.Join(dir, "whole.safetensors"), filepath.Join(dir, "resumed.safetensors")
	ckpt := filepath.Join(dir, "ckpt")

	cmd := exec.Command(bin, append(args, "-checkpoint", ckpt, "-save", filepath.Join(dir, "never.safetensors"))...)
	stdout, stderr, err := runUntil(t, cmd, "epoch   1/", func() {
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
	})
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v after SIGINT, want status 1\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	const total = epochs * 44
	step := manifestStep(ckpt)
	if step < 44 || step >= total {
		t.Fatalf("checkpoint at step %d after SIGINT in epoch 2, want one in [44, %d)\nstderr:\n%s", step, total, stderr)
	}
	want := fmt.Sprintf("kiln train: interrupted at step %d; checkpoint saved in %s", step, ckpt)
	if got := oneLine(t, stderr); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	entries, _ := os.ReadDir(ckpt)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 || names[0] != kiln.CheckpointManifest || !strings.HasPrefix(names[1], "state-") {
		t.Errorf("the checkpoint directory holds %v, want the manifest and one state file", names)
	}
	if _, err := os.Stat(filepath.Join(dir, "never.safetensors")); err == nil {
		t.Error("-save was written by the interrupted run")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d entries in %s, want the model and the checkpoint", len(entries), dir)
	}
	t.Logf("interrupted at step %d of %d", step, total)

	runKiln(t, append(args, "-save", whole)...).want(t, 0)
	r := runKiln(t, append(args, "-checkpoint", ckpt, "-resume", "-save", resumed)...)
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, fmt.Sprintf("resumed from %s at step %d", ckpt, step))
	a, _ := os.ReadFile(whole)
	b, _ := os.ReadFile(resumed)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Error("the params resumed after SIGINT differ from the uninterrupted run's")
	}
}

// TestSaveFallback removes the directory of -save while a real kiln train
// process runs: the params go to a file in the temporary directory, the
// error names the path given and that file, and the process exits 1.
func TestSaveFallback(t *testing.T) {
	t.Parallel()
	bin := buildKiln(t)
	dir, tmp := t.TempDir(), t.TempDir()
	model := filepath.Join(dir, "drop.kir")
	if err := os.WriteFile(model, []byte(dropoutMLPKir), 0o644); err != nil {
		t.Fatal(err)
	}
	outDir := filepath.Join(dir, "out")
	if err := os.Mkdir(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	save := filepath.Join(outDir, "p.safetensors")
	cmd := exec.Command(bin, "train", model, "-data", "digits", "-epochs", "3", "-workers", "1", "-save", save)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	_, stderr, err := runUntil(t, cmd, "epoch   1/", func() {
		if err := os.RemoveAll(outDir); err != nil {
			t.Fatal(err)
		}
	})
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want status 1\nstderr:\n%s", err, stderr)
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 {
		t.Fatalf("%d files in TMPDIR, want the fallback\nstderr:\n%s", len(entries), stderr)
	}
	fallback := filepath.Join(tmp, entries[0].Name())
	want := "kiln train: -save " + save + ": no such file or directory; wrote the trained params to " + fallback + " instead"
	if got := oneLine(t, stderr); got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
	ts, _, err := safetensors.ReadFile(fallback)
	if err != nil || len(ts) != 4 {
		t.Errorf("the fallback holds %d tensors (%v), want the 4 params", len(ts), err)
	}
}
