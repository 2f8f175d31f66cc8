package kiln_test

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln"
	"github.com/kilnml/kiln/frontends"
	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/passes"
)

// benchDeepGraph returns a model of at least n values (before autodiff): a
// deep residual MLP on f32[8,16] whose layers are written the way people
// write them, with the redundancy that gives the optimizing passes work:
//
//	z = matmul(h, transpose(w)) + b      (w stored [out, in])
//	a = tanh(z)
//	c = a - mean(a, axes=[1], keepdims)  (centering)
//	h = h + c * 0.5
//
// and the loss mean(h * h). Each layer is 11 values (2 params, 9 ops); its
// training step with Adam is about 7 times as many.
func benchDeepGraph(n int) *ir.Graph {
	b := frontends.NewBuilder(fmt.Sprintf("deep%d", n))
	h := b.Input("x", ir.F32, 8, 16)
	for i := 0; 2+11*i < n; i++ {
		w := b.Param(fmt.Sprintf("w%d", i), ir.F32, 16, 16)
		bias := b.Param(fmt.Sprintf("b%d", i), ir.F32, 16)
		a := b.Tanh(b.Add(b.Matmul(h, b.Transpose(w, 1, 0)), bias))
		c := b.Sub(a, b.Mean(a, []int{1}, true))
		h = b.Add(h, b.Mul(c, b.Scalar(0.5, ir.F32)))
	}
	b.Output(b.Mean(b.Mul(h, h), nil, false))
	g, err := b.Build()
	if err != nil {
		panic(err)
	}
	return g
}

func benchAdam(b *testing.B) *passes.OptimizerConfig {
	c, err := passes.DefaultOptimizer("adam")
	if err != nil {
		b.Fatal(err)
	}
	return &c
}

// BenchmarkCompile10k compiles a 10,000-value model's training step with
// Adam through the whole pipeline: every pass, then the planner.
func BenchmarkCompile10k(b *testing.B) {
	g := benchDeepGraph(10000)
	opts := kiln.Options{Optimizer: benchAdam(b)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kiln.Compile(g, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCompileScale compiles the same kind of model at growing sizes
// (values before autodiff; the training step has about 2.1 times as many
// after dce), to show how compile time grows with the graph.
func BenchmarkCompileScale(b *testing.B) {
	for _, n := range []int{10000, 20000, 40000, 80000, 100000} {
		b.Run(fmt.Sprintf("values=%d", n), func(b *testing.B) {
			g := benchDeepGraph(n)
			opts := kiln.Options{Optimizer: benchAdam(b)}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := kiln.Compile(g, opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTransform10k runs the pass pipeline alone on the same model
// (verify, shapes, autodiff, optimizer, simplify, fuse, dce), without the
// planner.
func BenchmarkTransform10k(b *testing.B) {
	g := benchDeepGraph(10000)
	opts := kiln.Options{Optimizer: benchAdam(b)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := kiln.Transform(g, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimplify10k runs the simplify pass alone on the same model's
// training step as the optimizer pass leaves it (about 70,000 values).
func BenchmarkSimplify10k(b *testing.B) {
	g := benchDeepGraph(10000)
	var before *ir.Graph
	_, err := kiln.Transform(g, kiln.Options{Optimizer: benchAdam(b), O0: true, After: func(pass string, g *ir.Graph) {
		if pass == "optimizer" {
			before = g.Clone()
		}
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		h := before.Clone()
		b.StartTimer()
		if err := passes.Simplify(h); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(before.Values)), "values")
}

// TestBenchDeepGraph keeps the benchmark's model honest: 10,000 values,
// and its training step simplifies to a valid graph.
func TestBenchDeepGraph(t *testing.T) {
	g := benchDeepGraph(10000)
	if n := len(g.Values); n < 10000 || n > 10011 {
		t.Errorf("the benchmark model has %d values, want 10,000", n)
	}
	small := benchDeepGraph(100)
	c, _ := passes.DefaultOptimizer("adam")
	if _, err := kiln.Transform(small, kiln.Options{Optimizer: &c, Debug: passes.Debug{Check: true}}); err != nil {
		t.Fatal(err)
	}
}
