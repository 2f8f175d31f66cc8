package planner_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/examples"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// deepMLP returns the .kir text of an MLP of the given depth: layers of
// width x width weights with a bias, relu between them, and softmax cross
// entropy over the last layer's width classes.
func deepMLP(depth, width, batch int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph mlp%d\ninput %%x: f32[%d,%d]\ninput %%y: i64[%d]\n", depth, batch, width, batch)
	for i := range depth {
		fmt.Fprintf(&b, "param %%w%d: f32[%d,%d]\nparam %%b%d: f32[%d]\n", i, width, width, i, width)
	}
	prev := "x"
	for i := range depth {
		fmt.Fprintf(&b, "%%h%d = matmul %%%s, %%w%d\n%%a%d = add %%h%d, %%b%d\n", i, prev, i, i, i, i)
		prev = fmt.Sprintf("a%d", i)
		if i < depth-1 {
			fmt.Fprintf(&b, "%%r%d = relu %%a%d\n", i, i)
			prev = fmt.Sprintf("r%d", i)
		}
	}
	fmt.Fprintf(&b, "%%loss = softmax_cross_entropy %%%s, %%y\noutput %%loss\n", prev)
	return b.String()
}

// ratioModel is one model the ratio target applies to.
type ratioModel struct {
	name string
	src  string
}

func ratioModels(t testing.TB) []ratioModel {
	lin, err := os.ReadFile("../examples/linreg/linreg.kir")
	if err != nil {
		t.Fatal(err)
	}
	return []ratioModel{
		{"digits/mlp", string(examples.DigitsMLP)},
		{"linreg", string(lin)},
		{"planner mlp", mlpSrc},
		{"mlp64x1024", deepMLP(64, 1024, 256)},
	}
}

// ratioModes are the compiles the ratio target applies to.
func ratioModes() []struct {
	name string
	opts kiln.Options
} {
	sgd, _ := passes.DefaultOptimizer("sgd")
	adam, _ := passes.DefaultOptimizer("adam")
	return []struct {
		name string
		opts kiln.Options
	}{
		{"forward", kiln.Options{}},
		{"grad", kiln.Options{Grad: true}},
		{"sgd", kiln.Options{Optimizer: &sgd}},
		{"adam", kiln.Options{Optimizer: &adam}},
	}
}

// TestRatio plans every model in every mode, checks each plan and asserts
// that the arena is within 5% of the lower bound. With -v it prints the
// table recorded in docs/PERFORMANCE.md.
func TestRatio(t *testing.T) {
	for _, m := range ratioModels(t) {
		g, err := ir.Parse(m.name, []byte(m.src))
		if err != nil {
			t.Fatal(err)
		}
		for _, mode := range ratioModes() {
			p, err := kiln.Compile(g, mode.opts)
			if err != nil {
				t.Fatalf("%s %s: %v", m.name, mode.name, err)
			}
			if err := p.Check(); err != nil {
				t.Fatalf("%s %s: Check: %v", m.name, mode.name, err)
			}
			ratio := p.Ratio()
			t.Logf("| %s | %s | %d | %d | %d | %.3f |", m.name, mode.name, len(p.Steps), p.ArenaBytes, p.LowerBound, ratio)
			if ratio > 1.05 {
				t.Errorf("%s %s: arena %d is %.3f times the lower bound %d, want at most 1.05", m.name, mode.name, p.ArenaBytes, ratio, p.LowerBound)
			}
		}
	}
}

// BenchmarkPlanRatio times planner.New on every ratio model and mode and
// reports the plan's arena, lower bound and their ratio (go test ./planner
// -run '^$' -bench PlanRatio -benchtime 1x).
func BenchmarkPlanRatio(b *testing.B) {
	for _, m := range ratioModels(b) {
		g, err := ir.Parse(m.name, []byte(m.src))
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range ratioModes() {
			tg, err := kiln.Transform(g, mode.opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(strings.ReplaceAll(m.name, " ", "_")+"/"+mode.name, func(b *testing.B) {
				var p *planner.Plan
				for b.Loop() {
					if p, err = planner.New(tg, planner.Options{}); err != nil {
						b.Fatal(err)
					}
				}
				if err := p.Check(); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(p.ArenaBytes), "arena-bytes")
				b.ReportMetric(float64(p.LowerBound), "bound-bytes")
				b.ReportMetric(p.Ratio(), "ratio")
			})
		}
	}
}
