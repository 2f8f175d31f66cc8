package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kilnml/kiln/frontends/safetensors"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/planner"
)

// deepKir is a 4-layer MLP with one layer marked for recomputation.
const deepKir = `graph deep
input %x: f32[16,8]
input %y: i64[16]
param %w1: f32[8,8]
param %w2: f32[8,8]
param %w3: f32[8,8]
param %w4: f32[8,4]
%h1 = matmul %x, %w1
%a1 = tanh %h1
%h2 = matmul %a1, %w2
%a2 = tanh %h2
%h3 = matmul %a2, %w3
%a3 = tanh %h3
%h4 = matmul %a3, %w4
%loss = softmax_cross_entropy %h4, %y
output %loss
recompute %h1, %a1
`

// TestCheckpointFlags runs every command that builds a plan with
// -recompute and -memory-budget.
func TestCheckpointFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	model := writeFile(t, "deep.kir", deepKir)

	// kiln plan prints the report, then a plan that passes its check.
	r := runKiln(t, "plan", "-recompute", "sqrt", "-optimizer", "sgd", model)
	r.want(t, 0)
	containsAll(t, "plan -recompute sqrt", r.stdout, "checkpoint sqrt: sqrt, chain of ", "recomputed ", "activations live at most", "arena ", ".remat")
	r = runKiln(t, "plan", model) // the marks alone
	r.want(t, 0)
	containsAll(t, "plan with recompute marks", r.stdout, "checkpoint manual: manual", "%a1.remat")
	r = runKiln(t, "plan", "-recompute", "none", model)
	r.want(t, 0)
	if strings.Contains(r.stdout, ".remat") {
		t.Errorf("-recompute none recomputed:\n%s", r.stdout)
	}
	r = runKiln(t, "plan", "-memory-budget", "1MiB", model)
	r.want(t, 0)
	containsAll(t, "plan -memory-budget 1MiB", r.stdout, "checkpoint budget=1048576: keep all (fits the budget)")
	// At the least peak (3840 bytes with SGD) the DP recomputes a value
	// twice.
	r = runKiln(t, "plan", "-optimizer", "sgd", "-memory-budget", "1", model)
	r.want(t, 1)
	containsAll(t, "plan -memory-budget 1", r.stderr, "is below the least peak recomputation reaches: 3840 bytes")
	r = runKiln(t, "plan", "-optimizer", "sgd", "-memory-budget", "3840", model)
	r.want(t, 0)
	containsAll(t, "plan -memory-budget 3840", r.stdout, "chain DP (multi-level)", "a value up to 2 times", ".remat2")

	// kiln dump shows the clones after the remat pass.
	r = runKiln(t, "dump", "-after", "remat", "-recompute", "segments=2", model)
	r.want(t, 0)
	containsAll(t, "dump -after remat", r.stdout, ".remat: f32[16,8] = ")

	// kiln grad: the same bits with and without recomputation.
	in := filepath.Join(dir, "in.safetensors")
	var ts []safetensors.Tensor
	for i, name := range []string{"x", "w1", "w2", "w3"} {
		v := make([]float64, 64)
		if name == "x" {
			v = make([]float64, 128)
		}
		for j := range v {
			v[j] = float64((j*7+i*3)%11)/10 - 0.5
		}
		shape := ir.Shape{8, 8}
		if name == "x" {
			shape = ir.Shape{16, 8}
		}
		ts = append(ts, tensor(t, name, ir.F32, shape, v))
	}
	ts = append(ts, tensor(t, "w4", ir.F32, ir.Shape{8, 4}, make([]float64, 32)), tensor(t, "y", ir.I64, ir.Shape{16}, make([]float64, 16)))
	writeTensors(t, in, ts)
	outs := map[string]string{}
	for _, args := range [][]string{{"-recompute", "none"}, {"-recompute", "sqrt"}, {"-memory-budget", "1.5GB"}, {}} {
		out := filepath.Join(dir, strings.Join(args, "")+".safetensors")
		r := runKiln(t, append([]string{"grad", model, "-inputs", in, "-out", out}, args...)...)
		r.want(t, 0)
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		outs[strings.Join(args, " ")] = string(data)
	}
	for k, v := range outs {
		if v != outs["-recompute none"] {
			t.Errorf("kiln grad %s wrote different bytes from -recompute none", k)
		}
	}

	// kiln compile records the policy in the plan file's metadata.
	plan := filepath.Join(dir, "deep.kplan")
	r = runKiln(t, "compile", model, "-o", plan, "-recompute", "sqrt", "-memory-budget", "64MiB")
	r.want(t, 0)
	containsAll(t, "compile output", r.stdout, "checkpoint sqrt,budget=67108864: sqrt")
	f, err := planner.Load(plan)
	if err != nil {
		t.Fatal(err)
	}
	if f.Meta["checkpoint"] != "sqrt" || f.Meta["memory_budget"] != "67108864" {
		t.Errorf("plan file meta %v lacks the checkpoint policy", f.Meta)
	}
	if !bytes.Contains([]byte(f.Plans["train"].Graph.Format()), []byte(".remat")) {
		t.Error("the compiled training step recomputes nothing")
	}

	// kiln train takes the flags too (the built-in digits MLP).
	r = runKiln(t, "train", "-epochs", "1", "-recompute", "sqrt")
	r.want(t, 0)
	containsAll(t, "train -recompute sqrt", r.stdout, "checkpoint sqrt:", "held-out accuracy")
}

func TestCheckpointFlagErrors(t *testing.T) {
	t.Parallel()
	model := writeFile(t, "deep.kir", deepKir)
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"plan", "-recompute", "bogus", model}, 2, []string{`-recompute: unknown checkpoint policy "bogus"`}},
		{[]string{"plan", "-recompute", "segments=0", model}, 2, []string{"segments=K needs an integer K >= 1"}},
		{[]string{"grad", "-memory-budget", "12x", "-inputs", "a", "-out", "b", model}, 2, []string{`-memory-budget: byte count "12x": unknown unit "x"`}},
		{[]string{"train", "-memory-budget", "-3", "-epochs", "1"}, 2, []string{"must be positive"}},
		{[]string{"plan", "-memory-budget", "4KiB", model}, 1, []string{model, "memory budget 4096 bytes (4.0 KiB) is below the least peak recomputation reaches: "}},
		{[]string{"compile", model, "-o", filepath.Join(t.TempDir(), "x.kplan"), "-recompute", "sqrt", "-memory-budget", "4KiB"}, 1, []string{"the plan of checkpoint policy sqrt needs"}},
	}
	for _, tc := range tests {
		r := runKiln(t, tc.args...)
		r.want(t, tc.code)
		containsAll(t, "stderr of "+strings.Join(tc.args, " "), r.stderr, tc.want...)
	}
}

// TestPlanTransformerBudget runs kiln plan on the transformer example
// with Adam, keeping every activation and under -memory-budget 900KiB: the
// budgeted plan recomputes activations and its arena fits the budget,
// below the one that keeps everything.
func TestPlanTransformerBudget(t *testing.T) {
	t.Parallel()
	const model, budget = "../../examples/transformer/reverse.kir", 900 << 10
	arena := func(stdout string) int64 {
		t.Helper()
		var n int64
		for _, l := range strings.Split(stdout, "\n") {
			if _, err := fmt.Sscanf(l, "arena %d bytes,", &n); err == nil {
				return n
			}
		}
		t.Fatalf("no arena line in\n%s", stdout)
		return 0
	}
	keep := runKiln(t, "plan", "-optimizer", "adam", "-report", model)
	keep.want(t, 0)
	r := runKiln(t, "plan", "-optimizer", "adam", "-report", "-memory-budget", "900KiB", model)
	r.want(t, 0)
	containsAll(t, "plan -memory-budget 900KiB", r.stdout, "checkpoint budget=921600: ", "recomputed ", ".remat ")
	if strings.Contains(keep.stdout, ".remat") || strings.Contains(keep.stdout, "checkpoint") {
		t.Errorf("the plan without a budget recomputes:\n%s", keep.stdout)
	}
	if a, k := arena(r.stdout), arena(keep.stdout); a > budget || a >= k {
		t.Errorf("arena %d bytes under a budget of %d; keeping everything %d", a, budget, k)
	}
}
