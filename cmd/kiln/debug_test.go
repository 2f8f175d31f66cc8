package main

import (
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
)

// The tests in this file set KILN_DEBUG with t.Setenv, so none of them is
// parallel: they run before the parallel tests of the package resume.

// captureStderr runs f with os.Stderr redirected to a file, where the
// passes print their debug output, and returns what was written.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	file, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	saved := os.Stderr
	os.Stderr = file
	defer func() { os.Stderr = saved }()
	f()
	if _, err := file.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(file)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestDebugCheckTime(t *testing.T) {
	t.Setenv("KILN_DEBUG", "check,time")
	var r result
	debug := captureStderr(t, func() { r = runKiln(t, "plan", digitsMLP) })
	r.want(t, 0)
	if r.stderr != "" {
		t.Errorf("unexpected stderr from run:\n%s", r.stderr)
	}
	containsAll(t, "plan output", r.stdout, "arena ", "steps:")
	for _, p := range []string{"verify", "shapes", "autodiff", "simplify", "fuse", "dce"} {
		containsAll(t, "debug output", debug, "pass "+p+" ")
	}
	if strings.Contains(debug, "pass optimizer") {
		t.Errorf("the optimizer pass ran without -optimizer:\n%s", debug)
	}
	if n := strings.Count(debug, "\n"); n != 6 {
		t.Errorf("%d lines of timings, want one per pass (6):\n%s", n, debug)
	}
}

func TestDebugDump(t *testing.T) {
	t.Setenv("KILN_DEBUG", " dump=autodiff , check ")
	var r result
	debug := captureStderr(t, func() { r = runKiln(t, "dump", "-after", "autodiff", digitsMLP) })
	r.want(t, 0)
	// KILN_DEBUG=dump=PASS prints what dump -after PASS prints, with a header.
	if want := "# after autodiff\n" + r.stdout; debug != want {
		t.Errorf("KILN_DEBUG=dump=autodiff printed:\n%s\nwant:\n%s", debug, want)
	}
}

func TestDebugBadValue(t *testing.T) {
	model := writeFile(t, "linreg.kir", linregKir)
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeTensors(t, in, linregInputs(t, ir.F64))
	out := filepath.Join(t.TempDir(), "out.safetensors")
	for _, value := range []string{"bogus", "check,bogus", "dump=nosuch", "time,nan,dump"} {
		t.Run(value, func(t *testing.T) {
			t.Setenv("KILN_DEBUG", value)
			for _, args := range [][]string{
				{"plan", digitsMLP},
				{"dump", digitsMLP},
				{"grad", model, "-inputs", in, "-out", out},
				{"train", "-epochs", "1"},
			} {
				r := runKiln(t, args...)
				if r.code != 2 {
					t.Errorf("KILN_DEBUG=%s kiln %s: exit status %d, want 2\n%s", value, strings.Join(args, " "), r.code, r.stderr)
				}
				containsAll(t, "stderr", r.stderr, "kiln "+args[0]+": KILN_DEBUG: ")
				if strings.Contains(r.stdout, "\nepoch") {
					t.Errorf("KILN_DEBUG=%s kiln train trained", value)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("kiln grad wrote %s (%v)", out, err)
			}
		})
	}
}

// logKir takes the log of x*w, which is NaN for a negative product.
const logKir = `graph logs
input %x: f64[2]
param %w: f64[2]
%p = mul %x, %w
%l = log %p
%loss = mean %l
output %loss
`

func TestDebugNaN(t *testing.T) {
	model := writeFile(t, "log.kir", logKir)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	writeTensors(t, in, []safetensors.Tensor{
		tensor(t, "x", ir.F64, ir.Shape{2}, []float64{1, -1}),
		tensor(t, "w", ir.F64, ir.Shape{2}, []float64{2, 3}),
	})

	// Without the switch the NaN is written out.
	out := filepath.Join(dir, "out.safetensors")
	r := runKiln(t, "grad", model, "-inputs", in, "-out", out)
	r.want(t, 0)
	if loss := readTensors(t, out)["loss"].Float64s(); len(loss) != 1 || !math.IsNaN(loss[0]) {
		t.Errorf("loss = %v, want NaN", loss)
	}

	// With it the step stops at the log, which it names.
	t.Setenv("KILN_DEBUG", "nan")
	out = filepath.Join(dir, "out-nan.safetensors")
	r = runKiln(t, "grad", model, "-inputs", in, "-out", out)
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), model, "%l", "log", "non-finite value at element 1")
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a failed run wrote %s (%v)", out, err)
	}
}

// logFeaturesKir takes the log of standardized features, which are negative
// for about half the rows.
const logFeaturesKir = `graph log_features
input %x: f32[8,2]
input %y: i64[8]
param %w: f32[2,2]
%l = log %x
%logits = matmul %l, %w
%loss = softmax_cross_entropy %logits, %y
output %loss, %logits
`

func TestDebugNaNTrain(t *testing.T) {
	model := writeFile(t, "log.kir", logFeaturesKir)
	data := writeFile(t, "blobs.csv", separableCSV(40, 2, 3))

	// Without the switch the loss is NaN and training goes on.
	r := runKiln(t, "train", model, "-data", data, "-epochs", "1")
	r.want(t, 0)
	containsAll(t, "stdout", r.stdout, "loss NaN")

	// With it the first step stops at the log.
	t.Setenv("KILN_DEBUG", "nan")
	r = runKiln(t, "train", model, "-data", data, "-epochs", "1")
	r.want(t, 1)
	containsAll(t, "stderr", oneLine(t, r.stderr), "%l", "log", "non-finite value")
	if strings.Contains(r.stdout, "\nepoch") {
		t.Errorf("an epoch finished:\n%s", r.stdout)
	}
}
