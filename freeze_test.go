package kiln_test

import (
	"context"
	"fmt"
	"log"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// seekGraph is a graph with no inputs whose two params w and v train
// towards a target through their sum.
func seekGraph(t *testing.T) *ir.Graph {
	t.Helper()
	b := frontends.NewBuilder("seek2")
	w := b.ParamInit("w", ir.F64, []int{3}, "normal", 0.5)
	v := b.ParamInit("v", ir.F64, []int{3}, "normal", 0.5)
	b.Output(b.MSELoss(b.Add(w, v), b.Const(ir.F64, []int{3}, 0.5, -0.25, 1)))
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestTrainerFreeze checks Options.Freeze and Options.Train: the frozen
// param keeps its initial value bit for bit through training with each
// optimizer while the other changes, and the training step has no
// gradient, state or update of it.
func TestTrainerFreeze(t *testing.T) {
	for _, tc := range []struct {
		name           string
		opts           kiln.Options
		optimizer      string
		frozen, trains string
	}{
		{"freeze v adam", kiln.Options{Freeze: regexp.MustCompile(`^v$`)}, "adam", "v", "w"},
		{"train v sgd", kiln.Options{Train: regexp.MustCompile(`v`)}, "sgd", "w", "v"},
		{"freeze w adamw", kiln.Options{Freeze: regexp.MustCompile(`w`)}, "adamw", "w", "v"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := passes.DefaultOptimizer(tc.optimizer)
			if err != nil {
				t.Fatal(err)
			}
			opt.WeightDecay = 0.01
			tc.opts.Workers = 1
			tr, err := kiln.NewTrainer(seekGraph(t), opt, 7, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			get := func(name string) []float64 {
				x, err := tr.Executor().Get(name)
				if err != nil {
					t.Fatal(err)
				}
				return kernels.Float64s(x)
			}
			frozen0, trains0 := get(tc.frozen), get(tc.trains)
			var a kiln.Tally
			for range 5 {
				if err := tr.Step(context.Background(), &a); err != nil {
					t.Fatal(err)
				}
			}
			if got := get(tc.frozen); !slices.Equal(got, frozen0) {
				t.Errorf("frozen %s: %v after 5 steps, want its initial %v", tc.frozen, got, frozen0)
			}
			if got := get(tc.trains); slices.Equal(got, trains0) {
				t.Errorf("%s did not train: %v", tc.trains, got)
			}
			g := tr.Plan.Graph
			id, _ := g.Lookup(tc.frozen)
			if !g.Frozen(id) {
				t.Errorf("%s is not marked frozen in the plan", tc.frozen)
			}
			if _, ok := g.GradOf(id); ok {
				t.Errorf("the plan has a gradient of frozen %s", tc.frozen)
			}
			for _, u := range g.Updates {
				if u.Target == id {
					t.Errorf("the plan updates frozen %s", tc.frozen)
				}
			}
			for _, s := range g.IDsOf(ir.OpState) {
				if n := g.Value(s).Name; strings.HasPrefix(n, tc.frozen+".") {
					t.Errorf("the plan has state %%%s of frozen %s", n, tc.frozen)
				}
			}
		})
	}
}

// TestCompileFreezeErrors checks the errors of Options.Freeze and Train.
func TestCompileFreezeErrors(t *testing.T) {
	sgd, _ := passes.DefaultOptimizer("sgd")
	for _, tc := range []struct {
		opts kiln.Options
		want string
	}{
		{kiln.Options{Freeze: regexp.MustCompile("a"), Train: regexp.MustCompile("b")}, "graph seek2: both a freeze and a train pattern are given; give one"},
		{kiln.Options{Train: regexp.MustCompile("z")}, `graph seek2: train pattern "z" matches no param; the params are w, v`},
		{kiln.Options{Freeze: regexp.MustCompile("x")}, `graph seek2: freeze pattern "x" matches no param; the params are w, v`},
		{kiln.Options{Freeze: regexp.MustCompile("."), Optimizer: &sgd}, `graph seek2: autodiff: all 2 params are frozen; nothing would train`},
	} {
		if _, err := kiln.Compile(seekGraph(t), tc.opts); err == nil || err.Error() != tc.want {
			t.Errorf("Compile: error %v, want %q", err, tc.want)
		}
	}
}

// Freeze the first layer of a perceptron: its params keep their initial
// values, so the training step has Adam state and an update for the second
// layer's params alone.
func ExampleOptions_freeze() {
	b := frontends.NewBuilder("mlp")
	x := b.Input("x", ir.F32, 8, 4)
	y := b.Input("y", ir.I64, 8)
	h := b.Relu(b.Add(b.Matmul(x, b.Param("w1", ir.F32, 4, 16)), b.Param("b1", ir.F32, 16)))
	logits := b.Add(b.Matmul(h, b.Param("w2", ir.F32, 16, 3)), b.Param("b2", ir.F32, 3))
	b.Output(b.SoftmaxCrossEntropy(logits, y), logits)
	g, err := b.Build()
	if err != nil {
		log.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	p, err := kiln.Compile(g, kiln.Options{Optimizer: &adam, Freeze: regexp.MustCompile(`1$`)})
	if err != nil {
		log.Fatal(err)
	}
	for _, i := range p.Params {
		id := p.Buffers[i].Value
		fmt.Println(p.Graph.NameOf(id), "frozen:", p.Graph.Frozen(id))
	}
	fmt.Println("updates:", len(p.Graph.Updates)) // w2, b2, their m and v, the two powers
	fmt.Println("training step:", p.CheckTraining() == nil)
	// Output:
	// %w1 frozen: true
	// %b1 frozen: true
	// %w2 frozen: false
	// %b2 frozen: false
	// updates: 8
	// training step: true
}
