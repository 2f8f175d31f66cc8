package cpu

import (
	"runtime"
	"time"
	"unsafe"
)

// PeakGFLOPS measures the f32 floating-point rate one goroutine reaches for
// about d: with the gemm micro-kernel that runs the whole tiles of every
// matmul's inner loop (peakKernel: the AVX-512 one where the CPU has it,
// else the AVX2+FMA one) on L1-resident packed panels, as
// BenchmarkGemmMicroKernel does; so it is the ceiling of kiln's own gemm on
// one core, not a datasheet figure. Without the micro-kernels it times a
// scalar Go loop of independent multiply-adds. It returns GFLOP/s, counting
// a multiply-add as two.
func PeakGFLOPS(d time.Duration) float64 {
	if !gemmAsm {
		return peakGo(d)
	}
	kern, mr, nr := peakKernel()
	const kc = 256
	a := make([]float32, mr*kc)
	b := make([]float32, nr*kc)
	for i := range a {
		a[i] = float32(i%7) * 0.25
	}
	for i := range b {
		b[i] = float32(i%5) * 0.125
	}
	c := make([]float32, mr*nr)
	flops := 2 * float64(mr*nr*kc)
	n := 0
	start := time.Now()
	for {
		for range 64 {
			kern(kc, unsafe.Pointer(&a[0]), unsafe.Pointer(&b[0]), unsafe.Pointer(&c[0]), nr, 1)
		}
		n += 64
		if el := time.Since(start); el >= d {
			return flops * float64(n) / el.Seconds() / 1e9
		}
	}
}

// peakGo times eight independent chains of f32 multiply-adds.
func peakGo(d time.Duration) float64 {
	var s [8]float32
	x, y := float32(0.999), float32(1e-3)
	n := 0
	start := time.Now()
	for {
		for range 4096 {
			for i := range s {
				s[i] = s[i]*x + y
			}
		}
		n += 4096 * len(s)
		if el := time.Since(start); el >= d {
			runtime.KeepAlive(s) // the chains' results are used: the loop stays
			return 2 * float64(n) / el.Seconds() / 1e9
		}
	}
}

// peakKernel returns the f32 micro-kernel a gemmWork made now runs for its
// whole tiles, and its tile, MR×NR: gemmWide's when there is one, else
// gemmMicro's. It needs gemmAsm.
func peakKernel() (kern gemmKernel, mr, nr int) {
	kern, mr, nr = gemmMicro[float32]()
	if wide, rows := gemmWide[float32](); wide != nil {
		kern, mr = wide, rows
	}
	return kern, mr, nr
}
