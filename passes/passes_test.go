package passes_test

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// TestPassTableChecks checks that the start-up check of the pass table
// refuses an order that breaks a constraint, a duplicate and an unknown
// name, and accepts the table itself.
func TestPassTableChecks(t *testing.T) {
	if err := passes.CheckPassTable(passes.Passes, passes.Constraints); err != nil {
		t.Fatal(err)
	}
	swapped := slices.Clone(passes.Passes)
	for k := range swapped {
		if swapped[k].Name == "simplify" {
			swapped[k], swapped[k+1] = swapped[k+1], swapped[k] // fuse before simplify
			break
		}
	}
	for _, tt := range []struct {
		table []passes.PassInfo
		cons  []passes.Constraint
		want  string
	}{
		{swapped, passes.Constraints, "simplify must run before fuse"},
		{append(slices.Clone(passes.Passes), passes.Passes[0]), nil, "pass verify appears twice"},
		{passes.Passes, []passes.Constraint{{"verify", "nosuch", "-"}}, "names an unknown pass"},
	} {
		if err := passes.CheckPassTable(tt.table, tt.cons); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("error %v, want %q", err, tt.want)
		}
	}
}

func TestPipelineSelection(t *testing.T) {
	names := func(ps []passes.Pass) string {
		var s []string
		for _, p := range ps {
			s = append(s, p.Name)
		}
		return strings.Join(s, " ")
	}
	adam, _ := passes.DefaultOptimizer("adam")
	tests := []struct {
		opts passes.Options
		want string
	}{
		{passes.Options{}, "verify shapes canonicalize simplify fuse dce"},
		{passes.Options{O0: true}, "verify shapes dce"},
		{passes.Options{Grad: true}, "verify shapes canonicalize autodiff simplify fuse dce"},
		{passes.Options{Grad: true, O0: true}, "verify shapes autodiff dce"},
		{passes.Options{Optimizer: &adam}, "verify shapes canonicalize autodiff optimizer simplify fuse dce"},
		{passes.Options{Optimizer: &adam, Checkpoint: checkpoint.Config{Policy: checkpoint.Policy{Kind: checkpoint.Sqrt}}}, "verify shapes canonicalize autodiff optimizer simplify fuse remat dce"},
		{passes.Options{Grad: true, O0: true, Checkpoint: checkpoint.Config{Policy: checkpoint.Policy{Budget: 1 << 20}}}, "verify shapes autodiff remat dce"},
	}
	for _, tc := range tests {
		if got := names(passes.Pipeline(tc.opts)); got != tc.want {
			t.Errorf("Pipeline(%+v) = %q, want %q", tc.opts, got, tc.want)
		}
	}
}

func TestParseDebug(t *testing.T) {
	d, err := passes.ParseDebug("check, time,dump=autodiff,dump=dce")
	if err != nil {
		t.Fatal(err)
	}
	if !d.Check || !d.Time || !d.Dump["autodiff"] || !d.Dump["dce"] || d.Dump["shapes"] {
		t.Errorf("ParseDebug gave %+v", d)
	}
	for _, bad := range []string{"chek", "dump=nosuch", "dump"} {
		if _, err := passes.ParseDebug(bad); err == nil {
			t.Errorf("ParseDebug(%q) accepted", bad)
		}
	}
}

func mustParse(t *testing.T, src string) *ir.Graph {
	t.Helper()
	g, err := ir.Parse("t.kir", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

const mlp = `graph mlp
input %x: f32[4,3]
input %y: i64[4]
param %w: f32[3,2]
param %b: f32[2]
param %unused: f32[5]
%h = matmul %x, %w
%z = add %h, %b
%dead = exp %z
%loss = softmax_cross_entropy %z, %y
output %loss
`

// TestAutodiffRecordsEveryParam checks that every param gets a gradient of
// its own type, named PARAM.grad, including one the loss does not use (zero).
func TestAutodiffRecordsEveryParam(t *testing.T) {
	g := mustParse(t, mlp)
	if err := passes.Run(g, passes.Pipeline(passes.Options{Grad: true}), passes.Debug{Check: true}, nil); err != nil {
		t.Fatal(err)
	}
	if len(g.Grads) != 3 {
		t.Fatalf("got %d gradients, want 3:\n%s", len(g.Grads), g.Format())
	}
	for _, gp := range g.Grads {
		name := g.Value(gp.Param).Name
		if got := g.Value(gp.Grad).Name; got != name+".grad" {
			t.Errorf("gradient of %s is named %s, want %s.grad", name, got, name)
		}
	}
	if id, _ := g.Lookup("unused.grad"); g.Value(id).Op != ir.OpConst {
		t.Errorf("the gradient of an unused param should be a zero const, found %s", g.FormatValue(id))
	}
	if _, ok := g.Lookup("dead"); ok {
		t.Errorf("dce kept %%dead, which nothing needs")
	}
}

func TestAutodiffErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"graph g\nparam %w: f32[3]\n%e = exp %w\noutput %e\n", "the first output %e must be a float scalar (the loss), found f32[3]"},
		{"graph g\nparam %w: f32[3]\n", "the graph has no output"},
	}
	for _, tc := range tests {
		err := passes.Autodiff(mustParse(t, tc.src))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Autodiff: got %v, want %q", err, tc.want)
		}
	}
}

// TestOptimizerAppendsUpdates checks the state and updates each optimizer
// adds, and that the result passes the checker.
func TestOptimizerAppendsUpdates(t *testing.T) {
	tests := []struct {
		kind     string
		momentum float64
		states   []string
	}{
		{"sgd", 0, nil},
		{"sgd", 0.9, []string{"w.momentum", "b.momentum", "unused.momentum"}},
		{"adam", 0, []string{"adam.beta1_power.f32", "adam.beta2_power.f32", "w.adam_m", "w.adam_v", "b.adam_m", "b.adam_v", "unused.adam_m", "unused.adam_v"}},
	}
	for _, tc := range tests {
		t.Run(tc.kind, func(t *testing.T) {
			g := mustParse(t, mlp)
			c, _ := passes.DefaultOptimizer(tc.kind)
			c.Momentum = tc.momentum
			if err := passes.Run(g, passes.Pipeline(passes.Options{Optimizer: &c}), passes.Debug{Check: true}, nil); err != nil {
				t.Fatal(err)
			}
			var states []string
			for _, id := range g.IDsOf(ir.OpState) {
				states = append(states, g.Value(id).Name)
			}
			if strings.Join(states, " ") != strings.Join(tc.states, " ") {
				t.Errorf("states %v, want %v", states, tc.states)
			}
			if want := 3 + len(tc.states); len(g.Updates) != want {
				t.Errorf("%d updates, want %d", len(g.Updates), want)
			}
		})
	}
}

func TestOptimizerValidate(t *testing.T) {
	bad := []passes.OptimizerConfig{
		{Kind: "rmsprop", LR: 0.1},
		{Kind: "sgd", LR: 0},
		{Kind: "sgd", LR: 0.1, Momentum: 1},
		{Kind: "adam", LR: 0.1, Beta1: 1, Beta2: 0.9, Eps: 1e-8},
		{Kind: "adam", LR: 0.1, Beta1: 0.9, Beta2: 0.9, Eps: 0},
		{Kind: "adam", LR: 0.1, Beta1: 0.9, Beta2: 0.9, Eps: 1e-8, ClipGrad: -1},
		{Kind: "sgd", LR: 0.1, ClipGrad: math.NaN()},
		{Kind: "sgd", LR: 0.1, ClipGrad: math.Inf(1)},
		{Kind: "sgd", LR: 0.1, ClipNorm: -1},
		{Kind: "sgd", LR: 0.1, ClipNorm: math.NaN()},
		{Kind: "sgd", LR: 0.1, ClipNorm: math.Inf(1)},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted", c)
		}
	}
}

// TestRunNamesTheBrokenPass checks that with Check on, a pass that breaks the
// graph is named.
func TestRunNamesTheBrokenPass(t *testing.T) {
	g := mustParse(t, mlp)
	breaker := passes.Pass{Name: "breaker", Run: func(g *ir.Graph) error {
		g.Values[len(g.Values)-1].Type = ir.TensorOf(ir.F32, 7)
		return nil
	}}
	err := passes.Run(g, []passes.Pass{breaker}, passes.Debug{Check: true}, nil)
	if err == nil || !strings.Contains(err.Error(), "after pass breaker the graph is invalid") {
		t.Errorf("got %v", err)
	}
}

// TestDisablePass checks KILN_DEBUG=disable=PASS: the runner skips an
// optional pass (fuse leaves no fused op), and a required pass, an unknown
// one and a typo are refused.
func TestDisablePass(t *testing.T) {
	d, err := passes.ParseDebug("disable=fuse")
	if err != nil || !d.Disable["fuse"] {
		t.Fatalf("disable=fuse: %+v, %v", d, err)
	}
	src := "graph c\ninput %x: f32[8]\nparam %w: f32[8]\n%a = mul %x, %w\n%b = exp %a\n%c = add %b, %x\n%l = sum %c\noutput %l\n"
	for _, disable := range []bool{false, true} {
		g, err := ir.Parse("c.kir", []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		dbg := passes.Debug{Check: true}
		if disable {
			dbg = d
		}
		if err := passes.Run(g, passes.Pipeline(passes.Options{Grad: true}), dbg, nil); err != nil {
			t.Fatal(err)
		}
		if fused := len(g.IDsOf(ir.OpFusedElementwise)) + len(g.IDsOf(ir.OpFusedReduce)); (fused > 0) == disable {
			t.Errorf("disable fuse %v: %d fused ops", disable, fused)
		}
	}
	for _, tt := range []struct{ in, want string }{
		{"disable=autodiff", "pass autodiff cannot be disabled"},
		{"disable=nosuch", `unknown pass "nosuch"`},
		{"disable=", `unknown pass ""`},
	} {
		if _, err := passes.ParseDebug(tt.in); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseDebug(%q): %v, want %q", tt.in, err, tt.want)
		}
	}
}
