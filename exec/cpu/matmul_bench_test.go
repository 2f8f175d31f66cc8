package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
	kcpu "github.com/kilnml/kiln/kernels/cpu"
)

// BenchmarkMatmulKernel times the matmul kernel as the executor runs it,
// split across 1 and 2 workers of the executor's pool (the calling
// goroutine and a runner worker), on n×n×n products: the figures to
// compare with a BLAS at the same thread count (bench/compare_blas.sh).
func BenchmarkMatmulKernel(b *testing.B) {
	for _, n := range []int{256, 512, 1024} {
		for _, dt := range []ir.DType{ir.F32, ir.F64} {
			for _, w := range []int{1, 2} {
				b.Run(fmt.Sprintf("n=%d/%s/workers=%d", n, dt, w), func(b *testing.B) {
					p, stop := startHelpers(w)
					defer stop()
					typ := ir.TensorOf(dt, n, n)
					r := rand.New(rand.NewPCG(5, 0))
					x, y := kernels.New(typ), kernels.New(typ)
					for _, t := range []kernels.Tensor{x, y} {
						v := make([]float64, n*n)
						for i := range v {
							v[i] = r.Float64()*2 - 1
						}
						if err := kernels.SetFloat64s(t, v); err != nil {
							b.Fatal(err)
						}
					}
					f, err := kcpu.Kernels.Build(&kernels.Node{Op: ir.OpMatmul, Args: []ir.Type{typ, typ}, Out: typ, Par: p})
					if err != nil {
						b.Fatal(err)
					}
					out := kernels.New(typ)
					args := []kernels.Tensor{x, y}
					for range 3 { // untimed: b.Loop starts the clock
						if err := f(out, args); err != nil {
							b.Fatal(err)
						}
					}
					for b.Loop() {
						if err := f(out, args); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(2*float64(n)*float64(n)*float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
				})
			}
		}
	}
}
