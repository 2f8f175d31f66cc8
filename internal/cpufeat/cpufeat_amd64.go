//go:build !purego

package cpufeat

// cpuid executes CPUID with the given EAX and ECX (cpufeat_amd64.s).
func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

// xgetbv returns XCR0, the state components the operating system saves
// (cpufeat_amd64.s); only valid when CPUID reports OSXSAVE.
func xgetbv() (eax, edx uint32)

// detect reads CPUID leaves 1 and 7 and XCR0.
func detect() (avx2, fma, avx512 bool) {
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false, false, false
	}
	_, _, ecx1, _ := cpuid(1, 0)
	const osxsave, avx, fma3 = 1 << 27, 1 << 28, 1 << 12
	if ecx1&osxsave == 0 || ecx1&avx == 0 {
		return false, false, false
	}
	xcr0, _ := xgetbv()
	if xcr0&6 != 6 { // SSE and AVX state
		return false, false, false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	avx2 = ebx7&(1<<5) != 0
	fma = avx2 && ecx1&fma3 != 0
	const f, dq, bw, vl = 1 << 16, 1 << 17, 1 << 30, 1 << 31
	avx512 = fma && ebx7&(f|dq|bw|vl) == f|dq|bw|vl && xcr0&0xe0 == 0xe0 // opmask, ZMM0-15 high halves, ZMM16-31
	return avx2, fma, avx512
}

// detectPrefetchW reads CPUID leaf 8000_0001h.
func detectPrefetchW() bool {
	if maxExt, _, _, _ := cpuid(0x80000000, 0); maxExt < 0x80000001 {
		return false
	}
	_, _, ecx, _ := cpuid(0x80000001, 0)
	return ecx&(1<<8) != 0
}
