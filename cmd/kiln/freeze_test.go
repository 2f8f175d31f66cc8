package main

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// biasKir is the linear regression with a bias: two params, so that one
// can be frozen while the other trains.
const biasKir = `graph linbias
input %x: f64[4,3]
input %t: f64[4]
param %w: f64[3]
param %b: f64[4]
%p = matmul %x, %w
%q = add %p, %b
%loss = mse_loss %q, %t
output %loss
`

// TestFreezeStepGradKIR checks -freeze and -train on a .kir model with
// kiln step and kiln grad: the frozen param keeps its initial value bit
// for bit while the other changes, and no gradient of it is written.
func TestFreezeStepGradKIR(t *testing.T) {
	t.Parallel()
	model := writeFile(t, "linbias.kir", biasKir)
	in := filepath.Join(t.TempDir(), "in.safetensors")
	b0 := []float64{0.25, -0.5, 0.125, 1}
	writeTensors(t, in, append(linregInputs(t, ir.F64), tensor(t, "b", ir.F64, ir.Shape{4}, b0)))
	for _, tc := range []struct {
		flags          []string
		frozen, trains string
	}{
		{[]string{"-freeze", "^w$"}, "w", "b"},
		{[]string{"-train", "^w"}, "b", "w"},
		{[]string{"-freeze", "b", "-optimizer", "adamw", "-weight-decay", "0.1"}, "b", "w"},
	} {
		t.Run(strings.Join(tc.flags, " "), func(t *testing.T) {
			t.Parallel()
			init := map[string][]float64{"w": linW, "b": b0}
			out := filepath.Join(t.TempDir(), "out.safetensors")
			runKiln(t, append([]string{"step", model, "-inputs", in, "-out", out, "-steps", "3", "-lr", "0.05"}, tc.flags...)...).want(t, 0)
			got := readStepOut(t, out)
			if f := got[tc.frozen].Float64s(); !slices.Equal(f, init[tc.frozen]) {
				t.Errorf("frozen %s after 3 steps: %v, want its initial %v", tc.frozen, f, init[tc.frozen])
			}
			if f := got[tc.trains].Float64s(); slices.Equal(f, init[tc.trains]) {
				t.Errorf("trained %s did not change: %v", tc.trains, f)
			}

			gout := filepath.Join(t.TempDir(), "grad.safetensors")
			runKiln(t, append([]string{"grad", model, "-inputs", in, "-out", gout}, tc.flags[:2]...)...).want(t, 0)
			grads := readTensors(t, gout)
			if _, ok := grads["grad/"+tc.frozen]; ok {
				t.Errorf("kiln grad wrote grad/%s of the frozen param", tc.frozen)
			}
			if _, ok := grads["grad/"+tc.trains]; !ok {
				t.Errorf("kiln grad did not write grad/%s", tc.trains)
			}
		})
	}
}

// TestFreezeTrainCompileRunKIR checks -freeze on kiln train and on kiln
// compile then kiln run with a .kir model: the frozen param ends bitwise at
// its -init value and the others do not; the plan file records the pattern
// and holds no gradient, state or update for the frozen param, and its
// plan dump marks it.
func TestFreezeTrainCompileRunKIR(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	init := filepath.Join(dir, "init.safetensors")
	runKiln(t, "train", digitsMLP, "-data", "digits", "-epochs", "1", "-save", init).want(t, 0)
	want := readTensors(t, init)
	check := func(what, path string) {
		t.Helper()
		got := readTensors(t, path)
		for name, w := range want {
			same := bytes.Equal(got[name].Data, w.Data)
			if frozen := name == "w1"; same != frozen {
				t.Errorf("%s: %s unchanged %v, want %v", what, name, same, frozen)
			}
		}
	}

	trained := filepath.Join(dir, "trained.safetensors")
	r := runKiln(t, "train", digitsMLP, "-data", "digits", "-epochs", "2", "-init", init, "-freeze", "^w1$", "-save", trained)
	r.want(t, 0)
	containsAll(t, "kiln train's stdout", r.stdout, "model digits_mlp: 4 params (4810 values; frozen: %w1), batch 32")
	check("kiln train", trained)

	plan := filepath.Join(dir, "mlp.kplan")
	runKiln(t, "compile", digitsMLP, "-freeze", "^w1$", "-init", init, "-optimizer", "adam", "-o", plan).want(t, 0)
	f, err := planner.Load(plan)
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta["freeze"] != "^w1$" {
		t.Errorf("plan file meta freeze = %q, want ^w1$", f.Meta["freeze"])
	}
	tp := f.Plans[planner.TrainPlan]
	g := tp.Graph
	w1, _ := g.Lookup("w1")
	if !g.Frozen(w1) {
		t.Errorf("the train plan's w1 is not frozen")
	}
	if _, ok := g.GradOf(w1); ok {
		t.Errorf("the train plan has a gradient of frozen w1")
	}
	for _, u := range g.Updates {
		if u.Target == w1 {
			t.Errorf("the train plan updates frozen w1")
		}
	}
	for _, v := range g.Values {
		if v.Op == ir.OpState && strings.HasPrefix(v.Name, "w1.") || strings.HasPrefix(v.Name, "w1.grad") {
			t.Errorf("the train plan has %%%s for frozen w1", v.Name)
		}
	}
	marked := slices.ContainsFunc(strings.Split(tp.Format(), "\n"), func(l string) bool {
		return strings.HasPrefix(l, "  %w1 ") && strings.HasSuffix(l, " frozen")
	})
	if !marked || !strings.Contains(tp.Report(), "frozen params (no gradient, no update): %w1\n") {
		t.Errorf("the plan dump does not mark w1 frozen:\n%s\n%s", tp.Format(), tp.Report())
	}
	ran := filepath.Join(dir, "ran.safetensors")
	runKiln(t, "run", plan, "-epochs", "2", "-save", ran).want(t, 0)
	check("kiln run", ran)
}

// TestFreezeKIRErrors checks the errors of -freeze and -train on a .kir
// model: one line, exit status 2 for usage errors and 1 for a pattern that
// matches no param.
func TestFreezeKIRErrors(t *testing.T) {
	t.Parallel()
	model := writeFile(t, "linbias.kir", biasKir)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"dump", model, "-freeze", "("}, 2, "kiln dump: -freeze: error parsing regexp: missing closing ): `(`"},
		{[]string{"gradcheck", model, "-freeze", "w", "-train", "b"}, 2, "kiln gradcheck: -freeze and -train both choose the params that train; give one"},
		{[]string{"plan", model, "-train", "^z"}, 1, `kiln plan: ` + model + `: train pattern "^z" matches no param; the params are w, b`},
		{[]string{"compile", model, "-freeze", "q", "-o", "OUT"}, 1, `kiln compile: ` + model + `: freeze pattern "q" matches no param; the params are w, b`},
		{[]string{"dump", model, "-optimizer", "sgd", "-freeze", "."}, 1, "kiln dump: " + model + ": autodiff: all 2 params are frozen; nothing would train"},
		{[]string{"train", "-train", "fc"}, 1, `kiln train: examples/digits/mlp.kir: train pattern "fc" matches no param; the params are w1, b1, w2, b2`},
	} {
		args := tc.args
		for i, a := range args {
			if a == "OUT" {
				args[i] = filepath.Join(t.TempDir(), "out.kplan")
			}
		}
		r := runKiln(t, args...)
		if r.code != tc.code {
			t.Errorf("kiln %s: exit status %d, want %d\nstderr: %s", strings.Join(args, " "), r.code, tc.code, r.stderr)
			continue
		}
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if len(lines) != tc.code { // usage errors add the usage line
			t.Errorf("kiln %s: %d lines on stderr, want %d:\n%s", strings.Join(args, " "), len(lines), tc.code, r.stderr)
		}
		if lines[0] != tc.want {
			t.Errorf("kiln %s: stderr %q, want %q", strings.Join(args, " "), lines[0], tc.want)
		}
	}
}
