package cpu

import "testing"

// BenchmarkGemmMLP784 times the f32 blocked gemm on one thread at the
// products of the 784-512-512-10 MLP's training step (batch 128): the
// forward layers, the activation gradients (B transposed) and the weight
// gradients (A transposed), and reports GFLOP/s.
func BenchmarkGemmMLP784(b *testing.B) {
	if !gemmAsm {
		b.Skip("no AVX2+FMA")
	}
	for _, s := range []struct {
		name    string
		tA, tB  bool
		m, n, k int
	}{
		{"fwd1_128x512x784", false, false, 128, 512, 784},
		{"fwd2_128x512x512", false, false, 128, 512, 512},
		{"dx2_128x512x512_tB", false, true, 128, 512, 512},
		{"dw1_784x512x128_tA", true, false, 784, 512, 128},
		{"dw2_512x512x128_tA", true, false, 512, 512, 128},
		{"dw1_784x512x128", false, false, 784, 512, 128},
	} {
		b.Run(s.name, func(b *testing.B) {
			r := newRand(5)
			a := randVals[float32](r, s.m*s.k, false)
			bb := randVals[float32](r, s.k*s.n, false)
			c := make([]float32, s.m*s.n)
			lda, ldb := s.k, s.n
			if s.tA {
				lda = s.m
			}
			if s.tB {
				ldb = s.k
			}
			w := newGemmWork[float32](s.m, s.n, s.k)
			for b.Loop() {
				w.gemm(s.tA, s.tB, s.m, s.n, s.k, a, lda, bb, ldb, 0, c, s.n)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
