package tests

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	"github.com/kilnml/kiln/passes"
)

// BenchmarkMLP784Step times the training step of bench/mlp784.kir (MLP
// 784-512-512-10, batch 128, f32, SGD) on 1 and 2 workers, as kiln bench
// does, and reports besides the wall time per step the process's CPU time
// per step (user + system, from getrusage): on a shared machine the CPU
// time of one worker varies less with the load than the wall time.
func BenchmarkMLP784Step(b *testing.B) { benchTrainStep(b, "../bench/mlp784.kir") }

// BenchmarkCNN28Step times the training step of bench/cnn28.kir (two
// conv2d + max_pool2d blocks on 64 images of 1×28×28, SGD) the same way.
func BenchmarkCNN28Step(b *testing.B) { benchTrainStep(b, "../bench/cnn28.kir") }

// benchTrainStep times the SGD training step of the model at path on 1 and
// 2 workers, reporting the CPU time per step beside the wall time.
func benchTrainStep(b *testing.B, path string) {
	src, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	g, err := ir.Parse(path, src)
	if err != nil {
		b.Fatal(err)
	}
	opt, err := passes.DefaultOptimizer("sgd")
	if err != nil {
		b.Fatal(err)
	}
	p, err := kiln.Compile(g.Clone(), kiln.Options{Optimizer: &opt})
	if err != nil {
		b.Fatal(err)
	}
	feeds := kiln.RandomFeeds(g, 1)
	for _, workers := range []int{1, 2} {
		b.Run(fmt.Sprintf("workers%d", workers), func(b *testing.B) {
			x, err := cpu.New(p, cpu.Options{Seed: 1, Workers: workers})
			if err != nil {
				b.Fatal(err)
			}
			defer x.Close()
			for _, i := range p.Inputs {
				name := p.Buffers[i].Name
				v, err := x.Get(name)
				if err != nil {
					b.Fatal(err)
				}
				if err := kernels.SetFloat64s(v, feeds[name]); err != nil {
					b.Fatal(err)
				}
			}
			ctx := context.Background()
			for range 3 {
				if err := x.Step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			cpu0 := cpuTime()
			for b.Loop() {
				if err := x.Step(ctx); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/step")
		})
	}
}
