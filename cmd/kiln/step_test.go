package main

import (
	"context"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends/dataset"
	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/internal/gputest"
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

// TestStepOptimizersGPU runs every optimizer's update and learning-rate
// schedule on the GPU and on the CPU, six steps of the f32 form of the torch.optim reference MLP: the
// params agree within 1e-5 + 1e-4*|cpu| (the two round f32 sums in other
// orders).
func TestStepOptimizersGPU(t *testing.T) {
	gputest.Need(t)
	dir := "../../tests/testdata/pytorch/optim"
	src, err := os.ReadFile(filepath.Join(dir, "mlp.kir"))
	if err != nil {
		t.Fatal(err)
	}
	model := writeFile(t, "mlp32.kir", strings.ReplaceAll(string(src), "f64", "f32"))
	ts, _, err := safetensors.ReadFile(filepath.Join(dir, "mlp.inputs.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	var in32 []safetensors.Tensor
	for _, x := range ts {
		in32 = append(in32, tensor(t, x.Name, ir.F32, x.Type.Shape, x.Float64s()))
	}
	in := filepath.Join(t.TempDir(), "in.safetensors")
	writeTensors(t, in, in32)
	for _, args := range []string{
		"-optimizer sgd -lr 0.1 -momentum 0.8 -dampening 0.3 -weight-decay 0.02",
		"-optimizer sgd -lr 0.1 -momentum 0.9 -nesterov",
		"-optimizer adam -lr 0.05 -amsgrad -beta1 0.8 -beta2 0.9",
		"-optimizer adamw -lr 0.05 -weight-decay 0.5 -amsgrad -beta2 0.9",
		"-optimizer rmsprop -lr 0.01 -centered -momentum 0.5 -eps 1e-6",
		"-optimizer adamw -lr 0.05 -lr-schedule cosine -warmup 2",
		"-optimizer sgd -lr 0.2 -lr-schedule step -warmup 1 -lr-step-size 2 -lr-gamma 0.5",
		"-optimizer adam -lr 0.05 -lr-schedule linear -warmup 2",
	} {
		out := map[string]map[string]safetensors.Tensor{}
		for _, d := range []string{"cpu", "gpu"} {
			path := filepath.Join(t.TempDir(), d+".safetensors")
			runKiln(t, append([]string{"step", model, "-inputs", in, "-out", path, "-steps", "6", "-device", d}, strings.Fields(args)...)...).want(t, 0)
			out[d] = readStepOut(t, path)
		}
		for name, c := range out["cpu"] {
			cv, gv := c.Float64s(), out["gpu"][name].Float64s()
			for i := range cv {
				if d := math.Abs(gv[i] - cv[i]); !(d <= 1e-5+1e-4*math.Abs(cv[i])) {
					t.Errorf("%s: %s[%d]: gpu %g, cpu %g", args, name, i, gv[i], cv[i])
				}
			}
		}
	}
}
