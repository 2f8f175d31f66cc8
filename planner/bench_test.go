package planner_test

import (
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// bigGraph is the training step (Adam) of a 160-layer MLP, about 10,000
// values: what BenchmarkPlan10k plans.
func bigGraph(b *testing.B) *ir.Graph {
	b.Helper()
	g, err := ir.Parse("mlp160", []byte(deepMLP(160, 64, 32)))
	if err != nil {
		b.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	tg, err := kiln.Transform(g, kiln.Options{Optimizer: &adam})
	if err != nil {
		b.Fatal(err)
	}
	return tg
}

// BenchmarkPlan10k times planner.New (both schedules, placement) on a
// graph of about 10,000 values.
func BenchmarkPlan10k(b *testing.B) {
	g := bigGraph(b)
	b.ReportMetric(float64(len(g.Values)), "values")
	for b.Loop() {
		if _, err := planner.New(g, planner.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlanWide times planner.New on the training step (Adam) of a
// wide graph, 4096 parallel branches: about 37,000 values, thousands of
// activations live at once.
func BenchmarkPlanWide(b *testing.B) {
	g, err := ir.Parse("wide", []byte(wideMLP(4096, 16, 8)))
	if err != nil {
		b.Fatal(err)
	}
	adam, _ := passes.DefaultOptimizer("adam")
	tg, err := kiln.Transform(g, kiln.Options{Optimizer: &adam})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(tg.Values)), "values")
	for b.Loop() {
		if _, err := planner.New(tg, planner.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheck10k times Plan.Check on the same plan.
func BenchmarkCheck10k(b *testing.B) {
	p, err := planner.New(bigGraph(b), planner.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := p.Check(); err != nil {
			b.Fatal(err)
		}
	}
}
