package tests

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/exec/cpu"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// BenchmarkKANLayer times the SGD training step of one KAN layer (cubic
// splines on the default grid, f32) whose input x is a param, so the step
// also computes dx through bspline's gradient as an inner layer does, with
// the loss sum(r * y) for an input r; on 1 and 2 workers. Besides the wall
// time it reports the process's CPU time (user + system) per step.
//
//	go test ./tests -run '^$' -bench KANLayer -benchtime 20x
func BenchmarkKANLayer(b *testing.B) {
	for _, sh := range []struct{ batch, in, out int }{
		{256, 32, 1024}, {256, 1024, 16}, {256, 256, 256}, {64, 1024, 1024},
	} {
		g := kanLayerNet(b, ir.F32, sh.batch, []int{sh.in, sh.out}, nil)
		p, err := kiln.Compile(g, kiln.Options{Optimizer: optimizer(b, "sgd", 1e-3)})
		if err != nil {
			b.Fatal(err)
		}
		for _, w := range []int{1, 2} {
			b.Run(fmt.Sprintf("batch%d_%dx%d/workers%d", sh.batch, sh.in, sh.out, w), func(b *testing.B) {
				x, err := cpu.New(p, cpu.Options{Seed: 1, Workers: w})
				if err != nil {
					b.Fatal(err)
				}
				defer x.Close()
				for _, name := range []string{"x", "r"} {
					tn, err := x.Get(name)
					if err != nil {
						b.Fatal(err)
					}
					v := make([]float64, tn.Type.Shape.NumElements())
					for i := range v {
						v[i] = math.Sin(float64(i))
					}
					kernels.SetFloat64s(tn, v)
				}
				ctx := context.Background()
				if err := x.Step(ctx); err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				c := cpuTime()
				for range b.N {
					if err := x.Step(ctx); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(cpuTime()-c)/1e6/float64(b.N), "cpu-ms/op")
			})
		}
	}
}
