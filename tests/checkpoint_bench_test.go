package tests

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/checkpoint"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
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

// BenchmarkCheckpointMLP64 measures the checkpointing targets on a 64-layer
// MLP (width 1024, batch 256, f32, SGD): for keeping everything, √n, the
// budget mode at √n's arena and at half the keep-all arena, the plan's
// arena, the activations live at most (in MiB and in layers' worth: the
// keep-all activations over 64), the recompute FLOPs (percent of the
// forward's) and the time of one training step (ns/op; run with
// -benchtime=3x, a step takes seconds). BATCH=2048 in the sub-benchmark
// log is the same MLP at batch 2048, where activations dominate the arena,
// planned but not timed.
//
//	go test ./tests -run '^$' -bench CheckpointMLP64 -benchtime 3x -timeout 60m
func BenchmarkCheckpointMLP64(b *testing.B) {
	for _, batch := range []int{256, 2048} {
		g := benchMLP(b, 64, batch)
		sgd, _ := passes.DefaultOptimizer("sgd")
		var keepArena, sqrtArena int64
		for _, v := range []string{"keep all", "sqrt", "budget at sqrt's arena", "budget at half keep-all"} {
			opts := kiln.Options{Optimizer: &sgd}
			switch v {
			case "sqrt":
				opts.Checkpoint = "sqrt"
			case "budget at sqrt's arena":
				opts.MemoryBudget = sqrtArena
			case "budget at half keep-all":
				opts.MemoryBudget = keepArena / 2
			}
			var r *checkpoint.Report
			opts.OnCheckpoint = func(x *checkpoint.Report) {
				if r == nil {
					r = x
				}
			}
			start := time.Now()
			p, err := kiln.Compile(g, opts)
			compile := time.Since(start)
			name := fmt.Sprintf("batch=%d/%s", batch, v)
			if err != nil {
				b.Logf("%s: %v (%s)", name, err, compile.Round(time.Millisecond))
				continue
			}
			switch v {
			case "keep all":
				keepArena = p.ArenaBytes
			case "sqrt":
				sqrtArena = p.ArenaBytes
			}
			if r != nil {
				b.Logf("%s: compiled in %s\n%s", name, compile.Round(time.Millisecond), r)
			} else {
				b.Logf("%s: compiled in %s, arena %d", name, compile.Round(time.Millisecond), p.ArenaBytes)
			}
			if batch != 256 {
				continue // planning only: a step at batch 2048 takes tens of seconds here
			}
			b.Run(name, func(b *testing.B) {
				x, err := cpu.New(p, cpu.Options{Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				xs, _ := x.Get("x")
				vals := make([]float64, batch*1024)
				for i := range vals {
					vals[i] = math.Sin(float64(i))
				}
				kernels.SetFloat64s(xs, vals)
				ys, _ := x.Get("y")
				labels := make([]float64, batch)
				for i := range labels {
					labels[i] = float64(i % 10)
				}
				kernels.SetFloat64s(ys, labels)
				if err := x.Step(context.Background()); err != nil { // warm up
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if err := x.Step(context.Background()); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(p.ArenaBytes)/(1<<20), "arena-MiB")
				if r != nil {
					b.ReportMetric(float64(r.ActivationPeak)/(1<<20), "act-MiB")
					b.ReportMetric(float64(r.ActivationPeak)/(float64(r.KeepAllActivationPeak)/64), "act-layers")
					b.ReportMetric(100*r.RecomputeFLOPs/r.ForwardFLOPs, "recompute-%fwd")
				}
			})
		}
	}
}
