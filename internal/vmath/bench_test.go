package vmath

import (
	"math"
	"testing"
)

// BenchmarkRow measures each function over a row of 4096 inputs in
// [-10, 10] (positive for log and log1p): "vmath" is the f32 row function,
// "float64" the route the kernels took before, float32(math.F(float64(x)))
// per element. Both report ns/element.
func BenchmarkRow(b *testing.B) {
	const n = 4096
	mixed, pos := make([]float32, n), make([]float32, n)
	for i := range mixed {
		mixed[i] = float32(i)/n*20 - 10
		pos[i] = float32(i+1) / n * 10
	}
	for _, f := range fns32 {
		in := mixed
		if f.name == "Log32" || f.name == "Log1p32" {
			in = pos
		}
		out := make([]float32, n)
		b.Run(f.name+"/vmath", func(b *testing.B) {
			for b.Loop() {
				f.f(best, out, in)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
		})
		ref := f.ref
		b.Run(f.name+"/float64", func(b *testing.B) {
			for b.Loop() {
				for i, v := range in {
					out[i] = float32(ref(float64(v)))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
		})
	}
	_ = math.Pi
}

// BenchmarkGradRow measures the gelu gradients as BenchmarkRow does:
// "vmath" the f32 row function, "float64" the kernels' former route,
// float32(dy*f'(x)) per element in float64.
func BenchmarkGradRow(b *testing.B) {
	const n = 4096
	x, dy, out := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(i)/n*20 - 10
		dy[i] = 1 + float32(i%7)/8
	}
	for _, g := range grads32 {
		b.Run(g.name+"/vmath", func(b *testing.B) {
			for b.Loop() {
				g.f(best, out, dy, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
		})
		ref := g.ref
		b.Run(g.name+"/float64", func(b *testing.B) {
			for b.Loop() {
				for i, v := range x {
					out[i] = float32(float64(dy[i]) * ref(float64(v)))
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/elem")
		})
	}
}
