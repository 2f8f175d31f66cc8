//go:build !purego

package cpu

import "unsafe"

// The AVX2+FMA micro-kernels of gemm_avx2_amd64.s, used by the blocked gemm
// (gemm.go) when the CPU has AVX2 and FMA and the operating system saves
// the YMM registers.

//go:noescape
func sgemmKernel6x16(kc int, a, b, c unsafe.Pointer, ldc, mode int)

//go:noescape
func dgemmKernel6x8(kc int, a, b, c unsafe.Pointer, ldc, mode int)

// gemmCopyRows64 copies rows 64-byte rows, stride bytes apart at src, to
// dst one after another (packing a whole B panel row by row).
//
//go:noescape
func gemmCopyRows64(dst, src unsafe.Pointer, stride, rows int)

// gemmPackTB16 packs steps (a multiple of 8) steps of a 16-column f32
// panel of Bᵀ: column j of the panel is row j of B, stride bytes apart at
// src; the panel's rows of 16 values go one after another at dst.
//
//go:noescape
func gemmPackTB16(dst, src unsafe.Pointer, stride, steps int)

// gemmPackA6 packs steps (a multiple of 4) steps of a 6-row f32 panel of
// A: row r of the panel is at src + r*stride bytes; the panel's groups of
// 6 values, one per row, go one after another at dst.
//
//go:noescape
func gemmPackA6(dst, src unsafe.Pointer, stride, steps int)

// gemmPackAT6 packs steps steps of a 6-row f32 panel of Aᵀ: step p's 6
// values are contiguous at src + p*stride bytes and go to dst + 24*p.
//
//go:noescape
func gemmPackAT6(dst, src unsafe.Pointer, stride, steps int)

// cpuHasFMA reports whether the CPU has FMA3 (CPUID.1:ECX bit 12); AVX
// support is checked by cpuHasAVX2.
func cpuHasFMA() bool {
	_, _, ecx1, _ := cpuid(1, 0)
	return ecx1&(1<<12) != 0
}

// gemmAsm is whether the blocked gemm with the AVX2+FMA micro-kernels runs;
// gonum's BLAS runs otherwise.
var gemmAsm = cpuHasAVX2() && cpuHasFMA()

// gemmMicro returns the micro-kernel for T and its tile, MR×NR.
func gemmMicro[T float]() (kern gemmKernel, mr, nr int) {
	var z T
	if _, ok := any(z).(float32); ok {
		return sgemmKernel6x16, 6, 16
	}
	return dgemmKernel6x8, 6, 8
}
