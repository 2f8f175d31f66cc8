package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/planner"
)

// tfmBenchPlans keeps the compiled plans and executors across the runs
// the benchmark framework makes.
var tfmBenchPlans []*benchVariant

// BenchmarkTransformerReverse measures the Adam training step of
// examples/transformer/reverse.kir keeping every activation (planned as
// usual, and as recomputation plans are: in the graph's order, nothing in
// place), under -memory-budget 900KiB, at the least peak recomputation
// reaches, and with √n. It logs each plan's arena and checkpoint report, then runs the steps
// interleaved, one of each plan per round (b.N rounds) on the same batch,
// and reports per plan the fastest and the median wall-clock step and the
// mean CPU time per step, with their ratios to keeping everything.
//
//	go test ./tests -run '^$' -bench TransformerReverse -benchtime 300x -v
func BenchmarkTransformerReverse(b *testing.B) {
	if tfmBenchPlans == nil {
		g := tfmExample(b)
		adam := optimizer(b, "adam", 0.003)
		compile := func(name string, opts kiln.Options) *benchVariant {
			var r *checkpoint.Report
			opts.Optimizer = adam
			opts.OnCheckpoint = func(x *checkpoint.Report) {
				if r == nil {
					r = x
				}
			}
			start := time.Now()
			p, err := kiln.Compile(g, opts)
			if err != nil {
				b.Fatal(err)
			}
			b.Logf("%s: compiled in %s, arena %d, %d values recomputed\n%v", name, time.Since(start).Round(time.Millisecond), p.ArenaBytes, countClones(p), r)
			return &benchVariant{name: name, plan: p, rep: r}
		}
		tfmBenchPlans = []*benchVariant{
			compile("keep all", kiln.Options{Checkpoint: "none"}),
			// The planner options recomputation plans with: the graph's
			// order, no result in place of an argument.
			compile("keep all, topo", kiln.Options{Checkpoint: "none", Plan: planner.Options{Schedule: planner.ScheduleTopo, NoInPlace: true}}),
			compile("budget 900KiB", kiln.Options{MemoryBudget: 900 << 10}),
			compile("least peak", kiln.Options{MemoryBudget: leastPeak(b, g, kiln.Options{Optimizer: adam})}),
			compile("sqrt", kiln.Options{Checkpoint: "sqrt"}),
		}
	}
	vs := tfmBenchPlans
	ctx := context.Background()
	for _, v := range vs {
		v.wall, v.cpu = nil, nil
		if v.x != nil {
			continue
		}
		x, err := cpu.New(v.plan, cpu.Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		tx, _ := x.Get("x")
		ty, _ := x.Get("y")
		d := &reverseData{rng: rand.New(rand.NewPCG(1, 1)), seq: tfmSeq, vocab: tfmVocab}
		d.fill(kernels.View[int64](tx), kernels.View[int64](ty))
		if err := x.Step(ctx); err != nil { // warm up
			b.Fatal(err)
		}
		v.x = x
	}
	b.ResetTimer()
	for range b.N {
		for _, v := range vs {
			w, c := time.Now(), cpuTime()
			if err := v.x.Step(ctx); err != nil {
				b.Fatal(err)
			}
			v.wall = append(v.wall, time.Since(w))
			v.cpu = append(v.cpu, cpuTime()-c)
		}
	}
	b.StopTimer()
	median := func(ds []time.Duration) time.Duration {
		s := append([]time.Duration(nil), ds...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return s[len(s)/2]
	}
	mean := func(ds []time.Duration) time.Duration {
		var s time.Duration
		for _, d := range ds {
			s += d
		}
		return s / time.Duration(len(ds))
	}
	var lines []string
	for _, v := range vs {
		fast, med, c := slicesMin(v.wall), median(v.wall), mean(v.cpu)
		key := strings.ReplaceAll(v.name, " ", "-")
		b.ReportMetric(med.Seconds()*1e3, key+"-median-ms")
		b.ReportMetric(c.Seconds()*1e3, key+"-cpu-ms")
		ratio := func(f func([]time.Duration) time.Duration, ds []time.Duration) float64 {
			return float64(f(ds)) / float64(f(vs[0].wall))
		}
		line := fmt.Sprintf("%-15s arena %7d B  fastest %.3f ms (%.3fx)  median %.3f ms (%.3fx)  cpu %.3f ms (%.3fx)",
			v.name, v.plan.ArenaBytes, fast.Seconds()*1e3, ratio(slicesMin, v.wall), med.Seconds()*1e3, ratio(median, v.wall),
			c.Seconds()*1e3, float64(c)/float64(mean(vs[0].cpu)))
		if v.rep != nil && v.rep.ForwardFLOPs > 0 {
			line += fmt.Sprintf("  recompute %.3g FLOPs (%.1f%% of the forward)", v.rep.RecomputeFLOPs, 100*v.rep.RecomputeFLOPs/v.rep.ForwardFLOPs)
		}
		lines = append(lines, line)
	}
	b.Logf("%d rounds:\n%s", b.N, strings.Join(lines, "\n"))
}
