package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/planner"
)

// TestCompileRunMatchesTrain compiles the digits MLP to a plan file, trains
// from it with kiln run, and compares with kiln train: the same output lines
// and bitwise the same saved params.
func TestCompileRunMatchesTrain(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "m.kplan")
	r := runKiln(t, "compile", digitsMLP, "-o", plan)
	r.want(t, 0)
	containsAll(t, "compile output", r.stdout, "wrote "+plan, "training step of digits_mlp")
	p1, p2 := filepath.Join(dir, "run.safetensors"), filepath.Join(dir, "train.safetensors")
	run := runKiln(t, "run", plan, "-epochs", "2", "-save", p1)
	run.want(t, 0)
	train := runKiln(t, "train", "-epochs", "2", "-save", p2)
	train.want(t, 0)
	epochs := func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if strings.HasPrefix(l, "epoch") || strings.HasPrefix(l, "held-out") {
				// Drop the wall-clock time at the end of epoch lines.
				if i := strings.LastIndex(l, "  ("); i > 0 {
					l = l[:i]
				}
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	if a, b := epochs(run.stdout), epochs(train.stdout); a != b || a == "" {
		t.Errorf("kiln run and kiln train differ:\n%s\n---\n%s", a, b)
	}
	a, _ := os.ReadFile(p1)
	b, _ := os.ReadFile(p2)
	if len(a) == 0 || string(a) != string(b) {
		t.Error("the params trained by kiln run and kiln train differ")
	}
}

func TestRunRefusesBadPlans(t *testing.T) {
	dir := t.TempDir()
	plan := filepath.Join(dir, "m.kplan")
	runKiln(t, "compile", digitsMLP, "-o", plan).want(t, 0)
	data, _ := os.ReadFile(plan)
	truncated := filepath.Join(dir, "short.kplan")
	os.WriteFile(truncated, data[:len(data)-100], 0o644)
	corrupt := filepath.Join(dir, "corrupt.kplan")
	bad := append([]byte(nil), data...)
	bad[len(bad)-5] ^= 1
	os.WriteFile(corrupt, bad, 0o644)
	// Files whose checksum is right but whose plans lie.
	lie := func(name string, edit func(f *planner.File)) string {
		f, err := planner.Load(plan)
		if err != nil {
			t.Fatal(err)
		}
		edit(f)
		path := filepath.Join(dir, name+".kplan")
		if err := planner.Save(path, f); err != nil {
			t.Fatal(err)
		}
		return path
	}
	swapped := lie("swapped", func(f *planner.File) {
		f.Plans[planner.TrainPlan], f.Plans[planner.EvalPlan] = f.Plans[planner.EvalPlan], f.Plans[planner.TrainPlan]
	})
	noOutputs := lie("no-outputs", func(f *planner.File) { f.Plans[planner.TrainPlan].Outputs = nil })
	lossInput := lie("loss-input", func(f *planner.File) {
		p := f.Plans[planner.EvalPlan]
		p.Outputs[0].Buffer = p.Inputs[0]
	})
	farOffset := lie("far-offset", func(f *planner.File) {
		p := f.Plans[planner.EvalPlan]
		p.Buffers[p.Params[0]].Offset = 1<<63 - planner.Align
	})
	csv := filepath.Join(dir, "three.csv")
	os.WriteFile(csv, []byte(strings.Repeat("1,2,3,0\n", 100)), 0o644)
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"run", truncated}, 1, []string{truncated, "truncated plan file"}},
		{[]string{"run", corrupt}, 1, []string{corrupt, "checksum mismatch"}},
		{[]string{"run", digitsMLP}, 1, []string{digitsMLP, "not a kiln plan file"}},
		{[]string{"run", swapped}, 1, []string{swapped + `: plan "eval": not an evaluation graph: it updates`}},
		{[]string{"run", noOutputs}, 1, []string{noOutputs + `: plan "train": 0 outputs, the graph has 2 (%loss, %logits)`}},
		{[]string{"run", lossInput}, 1, []string{lossInput + `: plan "eval": output 0 (loss) is buffer 0 (%x), the graph's output 0 is %loss`}},
		{[]string{"run", farOffset}, 1, []string{farOffset + `: plan "eval": buffer %w1: 16384 bytes at offset 9223372036854775552 lie outside the arena`}},
		{[]string{"run", plan, "-data", csv}, 1, []string{"3 features per row", "takes 64"}},
		{[]string{"run"}, 2, []string{"missing FILE.kplan"}},
		{[]string{"compile", digitsMLP}, 2, []string{"missing -o"}},
	}
	for _, tc := range tests {
		r := runKiln(t, tc.args...)
		r.want(t, tc.code)
		containsAll(t, "stderr of "+strings.Join(tc.args, " "), r.stderr, tc.want...)
		if tc.code == 1 {
			oneLine(t, r.stderr)
		}
		if strings.Contains(r.stdout, "epoch") {
			t.Errorf("%v ran a step before refusing:\n%s", tc.args, r.stdout)
		}
	}
}
