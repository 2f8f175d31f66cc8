//go:build amd64 && !purego

package cpu

import (
	"fmt"
	"testing"

	"github.com/kilnml/kiln/ir"
	"github.com/kilnml/kiln/kernels"
)

// BenchmarkMatmulHeads times the f32 matmuls of attention over 64 heads of
// 128 positions by 32 channels (a batch of 8 sequences, 8 heads) as the
// matmul kernel runs them, on 1 and 2 workers, with the AVX-512 and the
// AVX2 micro-kernels: the scores Q·Kᵀ (and the probabilities' gradient
// dO·Vᵀ, the same shape), P·V (and dS·K), their transposed-A gradients
// Pᵀ·dO and dSᵀ·Q, and a plain [128,32]·[32,128]. It reports GFLOP/s;
// BenchmarkGemmMicroKernel gives the peak they are a fraction of.
func BenchmarkMatmulHeads(b *testing.B) {
	const heads = 64
	for _, s := range []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"qk_128x128x32_tB", false, true, 128, 128, 32},
		{"pv_128x32x128", false, false, 128, 32, 128},
		{"dv_128x32x128_tA", true, false, 128, 32, 128},
		{"ab_128x128x32", false, false, 128, 128, 32},
	} {
		for _, avx512 := range []bool{true, false} {
			if avx512 && !gemmAVX512 {
				continue
			}
			for _, workers := range []int{1, 2} {
				b.Run(fmt.Sprintf("%s/avx512=%v/w%d", s.name, avx512, workers), func(b *testing.B) {
					defer func(v bool) { gemmAVX512 = v }(gemmAVX512)
					gemmAVX512 = avx512
					as, bs := ir.Shape{heads, s.m, s.k}, ir.Shape{heads, s.k, s.n}
					var attrs ir.Attrs
					if s.tA {
						as = ir.Shape{heads, s.k, s.m}
						attrs = attrs.With("transpose_a", ir.BoolAttr(true))
					}
					if s.tB {
						bs = ir.Shape{heads, s.n, s.k}
						attrs = attrs.With("transpose_b", ir.BoolAttr(true))
					}
					var par kernels.Parallel
					if workers > 1 {
						par = goPool(workers)
					}
					mp, err := newMatmulPlan[float32](as, bs, attrs, par)
					if err != nil {
						b.Fatal(err)
					}
					r := newRand(3)
					x := randVals[float32](r, heads*s.m*s.k, false)
					y := randVals[float32](r, heads*s.k*s.n, false)
					c := make([]float32, heads*s.m*s.n)
					cpu0 := cpuSeconds()
					for b.Loop() {
						mp.run(c, x, y, nil)
					}
					flops := 2 * float64(heads*s.m*s.n*s.k) * float64(b.N)
					b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
					reportPerCPU(b, flops/1e9, "GFLOP/cpu-s", cpu0)
				})
			}
		}
	}
}
