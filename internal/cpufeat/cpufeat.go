// Package cpufeat reports the vector instruction sets the CPU and the
// operating system support, for the kernels that choose their loops at run
// time: AVX2 with FMA, or AVX-512 (F, BW, DQ and VL); and PREFETCHW. It
// reads CPUID and XCR0 once, at start-up; a purego build and other
// architectures report none.
package cpufeat

// What the CPU can run. AVX512 implies AVX2 and FMA.
var (
	// AVX2 is true when the CPU has AVX and AVX2 and the operating system
	// saves the YMM registers.
	AVX2 bool
	// FMA is true when the CPU has FMA3 (and AVX2 is usable).
	FMA bool
	// AVX512 is true when the CPU has AVX-512 F, BW, DQ and VL and the
	// operating system saves the ZMM and opmask registers.
	AVX512 bool
	// PrefetchW is true when the CPU has PREFETCHW (CPUID leaf
	// 8000_0001h, ECX bit 8; Linux's 3dnowprefetch flag).
	PrefetchW bool
)

func init() {
	AVX2, FMA, AVX512 = detect()
	PrefetchW = detectPrefetchW()
}
