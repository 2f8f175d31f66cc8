package main

import (
	"context"
	"flag"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// readStepOut reads kiln step's output: the tensors by name.
func readStepOut(t *testing.T, path string) map[string]safetensors.Tensor {
	t.Helper()
	ts, _, err := safetensors.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]safetensors.Tensor{}
	for _, x := range ts {
		m[x.Name] = x
	}
	return m
}

// TestStepMatchesTrainer runs kiln step on the linear regression and checks
// that the losses fall and that the params and losses are bitwise those of
// the same number of the trainer's steps on the same batch, for each
// optimizer.
func TestStepMatchesTrainer(t *testing.T) {
	model := writeFile(t, "linreg.kir", linregKir)
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeTensors(t, in, linregInputs(t, ir.F64))
	const steps = 5
	for _, args := range [][]string{
		{"-optimizer", "sgd", "-lr", "0.02", "-momentum", "0.5"},
		{"-optimizer", "adam", "-lr", "0.05", "-weight-decay", "0.01"},
	} {
		t.Run(args[1], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.safetensors")
			r := runKiln(t, append([]string{"step", model, "-inputs", in, "-out", out, "-steps", "5"}, args...)...)
			r.want(t, 0)
			got := readStepOut(t, out)
			loss := got["loss"]
			if !loss.Type.Equal(ir.Type{DType: ir.F64, Shape: ir.Shape{steps}}) {
				t.Fatalf("loss is %s, want f64[%d]", loss.Type, steps)
			}
			losses := loss.Float64s()
			for i := 1; i < steps; i++ {
				if !(losses[i] < losses[i-1]) {
					t.Errorf("losses do not fall: %v", losses)
				}
			}
			// The first loss is the initial params' loss.
			if want, _ := closedForm(linX, linT, linW); math.Abs(losses[0]-want) > 1e-12*want {
				t.Errorf("first loss %v, want %v", losses[0], want)
			}

			fs := flag.NewFlagSet("step", flag.ContinueOnError)
			of := addOptimizerFlags(fs, "adam")
			if err := fs.Parse(args); err != nil {
				t.Fatal(err)
			}
			opt, err := of.config()
			if err != nil {
				t.Fatal(err)
			}
			g, err := ir.Parse("linreg.kir", []byte(linregKir))
			if err != nil {
				t.Fatal(err)
			}
			tr, err := kiln.NewTrainer(g, *opt, 1, kiln.Options{Workers: 1})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			w := kernels.New(ir.Type{DType: ir.F64, Shape: ir.Shape{3}})
			if err := kernels.SetFloat64s(w, linW); err != nil {
				t.Fatal(err)
			}
			if err := tr.Executor().Set("w", w); err != nil {
				t.Fatal(err)
			}
			d := &dataset.Dataset{X: linX, R: linT, N: 4, D: 3, K: 1}
			for i := range steps {
				var a kiln.Tally
				if err := tr.TrainBatch(context.Background(), d, 0, &a); err != nil {
					t.Fatal(err)
				}
				if l, _ := a.Result(); l != losses[i] {
					t.Errorf("step %d: kiln step's loss %v, the trainer's %v", i+1, losses[i], l)
				}
			}
			tw, err := tr.Executor().Get("w")
			if err != nil {
				t.Fatal(err)
			}
			if g, w := got["w"].Float64s(), kernels.Float64s(tw); !slices.Equal(g, w) {
				t.Errorf("w: kiln step %v, the trainer %v", g, w)
			}
		})
	}
}

// TestStepSeedsMissingParams checks that params -inputs leaves out start
// from the seed: two seeds give different first losses, the same seed the
// same.
func TestStepSeedsMissingParams(t *testing.T) {
	model := writeFile(t, "linreg.kir", strings.Replace(linregKir, "f64[3]", `f64[3] {init="normal", scale=0.5}`, 1))
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeTensors(t, in, linregInputs(t, ir.F64)[:2]) // x and t, no w
	first := func(seed string) float64 {
		out := filepath.Join(t.TempDir(), "out.safetensors")
		runKiln(t, "step", model, "-inputs", in, "-out", out, "-seed", seed).want(t, 0)
		return readStepOut(t, out)["loss"].Float64s()[0]
	}
	a, b, c := first("1"), first("2"), first("1")
	if a == b || a != c {
		t.Errorf("first losses: seed 1 %v, seed 2 %v, seed 1 again %v", a, b, c)
	}
}

// TestStepErrors checks that bad calls of kiln step fail with one line.
func TestStepErrors(t *testing.T) {
	model := writeFile(t, "linreg.kir", linregKir)
	dir := t.TempDir()
	in := filepath.Join(dir, "in.safetensors")
	writeTensors(t, in, linregInputs(t, ir.F64))
	noX := filepath.Join(dir, "nox.safetensors")
	writeTensors(t, noX, linregInputs(t, ir.F64)[1:])
	named := writeFile(t, "named.kir", `graph named
input %x: f64[4,3]
input %t: f64[4]
param %loss: f64[3]
%p = matmul %x, %loss
%l = mse_loss %p, %t
output %l
`)
	out := filepath.Join(dir, "out.safetensors")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"step", model, "-inputs", in}, 2, "both -inputs and -out are required"},
		{[]string{"step", model, "-inputs", in, "-out", out, "-steps", "0"}, 2, "-steps must be at least 1, found 0"},
		{[]string{"step", model, "-inputs", in, "-out", out, "-optimizer", "rmsprop2"}, 2, `unknown optimizer "rmsprop2"`},
		{[]string{"step", model, "-inputs", noX, "-out", out}, 1, "missing tensor(s) for " + model + ": x (f64[4,3])"},
		{[]string{"step", named, "-inputs", in, "-out", out}, 1, "param %loss has the name kiln step writes the losses to"},
		{[]string{"step", writeFile(t, "noparams.kir", noParamsKir), "-inputs", in, "-out", out}, 1, "has no params to train"},
	} {
		r := runKiln(t, c.args...)
		r.want(t, c.code)
		line := r.stderr
		if c.code == 2 {
			line, _, _ = strings.Cut(line, "\n")
			line += "\n"
		}
		if l := oneLine(t, line); !strings.Contains(l, c.want) {
			t.Errorf("%v: %q lacks %q", c.args, l, c.want)
		}
	}
}
