package checkpoint_test

import (
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

func mlp(t testing.TB, layers, width, batch int) *ir.Graph {
	b := frontends.NewBuilder("mlp")
	x := b.Input("x", ir.F32, batch, width)
	y := b.Input("y", ir.I64, batch)
	h := x
	for i := 0; i < layers; i++ {
		h = b.Add(b.Matmul(h, b.Param("w"+itoa(i), ir.F32, width, width)), b.Param("b"+itoa(i), ir.F32, width))
		if i < layers-1 {
			h = b.Relu(h)
		}
	}
	b.Output(b.SoftmaxCrossEntropy(h, y), h)
	g, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func itoa(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

func TestExplore(t *testing.T) {
	g := mlp(t, 8, 64, 512)
	sgd, _ := passes.DefaultOptimizer("sgd")
	tg, err := kiln.Transform(g, kiln.Options{Optimizer: &sgd})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := planner.New(tg, planner.Options{})
	t.Logf("keep-all: arena %d lower %d mirror %d", p.ArenaBytes, p.LowerBound, checkpoint.LivePeak(tg))
	c := checkpoint.ChainOf(tg, 256)
	t.Logf("m=%d saved=%d", c.M(), c.SavedCuts())
	lp, lsg := c.LeastPeak()
	t.Logf("least model peak %d: %v", lp, lsg)
	for _, sg := range []checkpoint.Segmentation{{Modes: []int{0}}, c.Evenly(3), c.Evenly(1), {Modes: []int{1}}, lsg} {
		mp, cost := c.ModelPeak(sg)
		h, err := c.Rewrite(sg)
		if err != nil {
			t.Fatal(err)
		}
		passes.DCE(h)
		q, err := planner.New(h, planner.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%v: model %d cost %g | plan lower %d arena %d mirror %d", sg, mp, cost, q.LowerBound, q.ArenaBytes, checkpoint.LivePeak(h))
	}
}

func TestExplore64(t *testing.T) {
	g := mlp(t, 64, 1024, 256)
	sgd, _ := passes.DefaultOptimizer("sgd")
	for _, pol := range []kiln.Options{{}, {Checkpoint: "sqrt"}, {Checkpoint: "segments=4"}} {
		pol.Optimizer = &sgd
		var rep *checkpoint.Report
		pol.OnCheckpoint = func(r *checkpoint.Report) { rep = r }
		p, err := kiln.Compile(g, pol)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%q: arena %d lower %d steps %d", pol.Checkpoint, p.ArenaBytes, p.LowerBound, len(p.Steps))
		if rep != nil {
			t.Log(rep)
		}
	}
}

func TestExploreBudget(t *testing.T) {
	g := mlp(t, 64, 1024, 2048)
	sgd, _ := passes.DefaultOptimizer("sgd")
	for _, pol := range []kiln.Options{{MemoryBudget: 827076864}, {MemoryBudget: 700 << 20}, {MemoryBudget: 654 << 20}} {
		pol.Optimizer = &sgd
		var rep *checkpoint.Report
		pol.OnCheckpoint = func(r *checkpoint.Report) { rep = r }
		start := time.Now()
		p, err := kiln.Compile(g, pol)
		if err != nil {
			t.Log(err)
			continue
		}
		t.Logf("%q %d: arena %d lower %d steps %d (%s)", pol.Checkpoint, pol.MemoryBudget, p.ArenaBytes, p.LowerBound, len(p.Steps), time.Since(start))
		if rep != nil {
			t.Log(rep)
		}
	}
}

func TestExploreDP(t *testing.T) {
	g := mlp(t, 64, 1024, 2048)
	sgd, _ := passes.DefaultOptimizer("sgd")
	tg, err := kiln.Transform(g, kiln.Options{Optimizer: &sgd})
	if err != nil {
		t.Fatal(err)
	}
	c := checkpoint.ChainOf(tg, 256)
	for _, b := range []int64{827076864, 827076864 - 4<<20, 830000000, 840000000, 900000000} {
		start := time.Now()
		sg, cost, ok := c.Solve(b)
		if !ok {
			t.Logf("%d: infeasible", b)
			continue
		}
		mp, _ := c.ModelPeak(sg)
		h, _ := c.Rewrite(sg)
		passes.DCE(h)
		q, _ := planner.New(h, planner.Options{})
		t.Logf("%d: cost %g model %d lower %d arena %d kept %d (%s)", b, cost, mp, q.LowerBound, q.ArenaBytes, len(sg.Kept), time.Since(start))
	}
	start := time.Now()
	lp, _ := c.LeastPeak()
	t.Logf("least %d (%s)", lp, time.Since(start))
}
