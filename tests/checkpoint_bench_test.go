package tests

import (
	"context"
	"fmt"
	"math"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
	"github.com/kilnml/kiln/planner"
)

// benchMLP is the MLP of the checkpointing targets: layers relu layers of
// width 1024 on batches of batch rows, f32.
func benchMLP(tb testing.TB, layers, batch int) *ir.Graph {
	b := frontends.NewBuilder(fmt.Sprintf("mlp%d", layers))
	x := b.Input("x", ir.F32, batch, 1024)
	y := b.Input("y", ir.I64, batch)
	h := x
	for i := range layers {
		h = b.Add(b.Matmul(h, b.Param(fmt.Sprintf("w%d", i), ir.F32, 1024, 1024)), b.Param(fmt.Sprintf("b%d", i), ir.F32, 1024))
		if i < layers-1 {
			h = b.Relu(h)
		}
	}
	b.Output(b.SoftmaxCrossEntropy(h, y), h)
	g, err := b.Build()
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// cpuTime returns the user and system time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPlans keeps the compiled plans and executors across the runs the
// benchmark framework makes (b.N = 1 first).
var benchPlans []*benchVariant

type benchVariant struct {
	name string
	plan *planner.Plan
	rep  *checkpoint.Report
	x    *cpu.Executor
	wall []time.Duration
	cpu  []time.Duration
}

// BenchmarkCheckpointMLP64 measures the checkpointing targets on a 64-layer
// MLP (width 1024, batch 256, f32, SGD). It compiles the training step
// keeping every activation, with √n, and with the budget mode at √n's arena
// and at half the keep-all arena, and logs each report (arena, activations,
// recompute FLOPs; run with -v). The same MLP at batch 2048, where
// activations dominate the arena, is planned the same ways and with the
// budget halfway between √n's arena and keeping everything (not run). Then
// it runs the batch-256 plans' steps interleaved, one step of each per round
// (b.N rounds; a step takes seconds), and reports per plan the fastest
// wall-clock step and the mean CPU time per step (the process's user+system
// time, less sensitive than wall time to other work on a shared machine),
// and their ratios to keeping everything.
//
//	go test ./tests -run '^$' -bench CheckpointMLP64 -benchtime 3x -v -timeout 60m
func BenchmarkCheckpointMLP64(b *testing.B) {
	sgd, _ := passes.DefaultOptimizer("sgd")
	compile := func(g *ir.Graph, name string, opts kiln.Options) (*planner.Plan, *checkpoint.Report) {
		var r *checkpoint.Report
		opts.Optimizer = &sgd
		opts.OnCheckpoint = func(x *checkpoint.Report) {
			if r == nil {
				r = x
			}
		}
		start := time.Now()
		p, err := kiln.Compile(g, opts)
		took := time.Since(start).Round(time.Millisecond)
		switch {
		case err != nil:
			b.Logf("%s: refused in %s: %v", name, took, err)
		case r != nil:
			b.Logf("%s: compiled in %s, arena %d\n%s", name, took, p.ArenaBytes, r)
		default:
			b.Logf("%s: compiled in %s, arena %d", name, took, p.ArenaBytes)
		}
		return p, r
	}
	plans := func(batch int) []*benchVariant {
		g := benchMLP(b, 64, batch)
		keep, _ := compile(g, fmt.Sprintf("batch %d keep all", batch), kiln.Options{})
		sq, sr := compile(g, fmt.Sprintf("batch %d sqrt", batch), kiln.Options{Checkpoint: "sqrt"})
		vs := []*benchVariant{{name: "keep all", plan: keep}, {name: "sqrt", plan: sq, rep: sr}}
		if p, r := compile(g, fmt.Sprintf("batch %d budget at sqrt's arena", batch), kiln.Options{MemoryBudget: sq.ArenaBytes}); p != nil {
			vs = append(vs, &benchVariant{name: "budget at sqrt's arena", plan: p, rep: r})
		}
		if p, r := compile(g, fmt.Sprintf("batch %d budget at half keep-all", batch), kiln.Options{MemoryBudget: keep.ArenaBytes / 2}); p != nil {
			vs = append(vs, &benchVariant{name: "budget at half keep-all", plan: p, rep: r})
		}
		if mid := (keep.ArenaBytes + sq.ArenaBytes) / 2; mid != keep.ArenaBytes {
			compile(g, fmt.Sprintf("batch %d budget halfway between sqrt and keep all", batch), kiln.Options{MemoryBudget: mid})
		}
		return vs
	}
	if benchPlans == nil {
		plans(2048)
		benchPlans = plans(256)
	}
	vs := benchPlans
	for _, v := range vs {
		v.wall, v.cpu = nil, nil
	}
	ctx := context.Background()
	for _, v := range vs {
		if v.x != nil {
			continue
		}
		x, err := cpu.New(v.plan, cpu.Options{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		xs, _ := x.Get("x")
		vals := make([]float64, 256*1024)
		for i := range vals {
			vals[i] = math.Sin(float64(i))
		}
		kernels.SetFloat64s(xs, vals)
		ys, _ := x.Get("y")
		labels := make([]float64, 256)
		for i := range labels {
			labels[i] = float64(i % 10)
		}
		kernels.SetFloat64s(ys, labels)
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
	minWall := func(v *benchVariant) float64 { return slicesMin(v.wall).Seconds() }
	meanCPU := func(v *benchVariant) float64 {
		var s time.Duration
		for _, d := range v.cpu {
			s += d
		}
		return s.Seconds() / float64(len(v.cpu))
	}
	var lines []string
	for _, v := range vs {
		key := strings.ReplaceAll(strings.ReplaceAll(v.name, " ", "-"), "'", "")
		b.ReportMetric(minWall(v), key+"-wall-s")
		b.ReportMetric(meanCPU(v), key+"-cpu-s")
		line := fmt.Sprintf("%-24s arena %6.1f MiB  wall min %.2fs (%.3fx)  cpu %.2fs (%.3fx)", v.name, float64(v.plan.ArenaBytes)/(1<<20),
			minWall(v), minWall(v)/minWall(vs[0]), meanCPU(v), meanCPU(v)/meanCPU(vs[0]))
		if v.rep != nil {
			line += fmt.Sprintf("  activations %.1f MiB = %.1f layers' worth, recompute %.1f%% of the forward",
				float64(v.rep.ActivationPeak)/(1<<20), float64(v.rep.ActivationPeak)/(float64(v.rep.KeepAllActivationPeak)/64), 100*v.rep.RecomputeFLOPs/v.rep.ForwardFLOPs)
		}
		lines = append(lines, line)
	}
	b.Logf("batch 256, %d rounds:\n%s", b.N, strings.Join(lines, "\n"))
}

func slicesMin(ds []time.Duration) time.Duration {
	m := ds[0]
	for _, d := range ds {
		m = min(m, d)
	}
	return m
}
