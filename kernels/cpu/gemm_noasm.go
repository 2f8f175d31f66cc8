//go:build !amd64 || purego

package cpu

import "unsafe"

// Without the micro-kernels of gemm_kernels_amd64.s, matmul and the
// convolutions call gonum's BLAS.

// gemmAsm is false: gonum's BLAS runs.
const gemmAsm = false

// gemmMicro is never called when gemmAsm is false.
func gemmMicro[T float]() (kern gemmKernel, mr, nr int) {
	panic("cpu: no gemm micro-kernel on this platform")
}

// gemmWide reports no AVX-512 micro-kernel.
func gemmWide[T float]() (kern gemmKernel, rows int) { return nil, 0 }

// gemmDirect reports no AVX-512 micro-kernel.
func gemmDirect[T float]() (t, n gemmDirectKernel) { return nil, nil }

// gemmCopyRows64 is never called when gemmAsm is false.
func gemmCopyRows64(dst, src unsafe.Pointer, stride, rows int) {
	panic("cpu: no gemm packing on this platform")
}

// gemmPackTB16 is never called when gemmAsm is false.
func gemmPackTB16(dst, src unsafe.Pointer, stride, steps int) {
	panic("cpu: no gemm packing on this platform")
}

// gemmPackA6 is never called when gemmAsm is false.
func gemmPackA6(dst, src unsafe.Pointer, stride, steps int) {
	panic("cpu: no gemm packing on this platform")
}

// gemmPackAT6 is never called when gemmAsm is false.
func gemmPackAT6(dst, src unsafe.Pointer, stride, steps int) {
	panic("cpu: no gemm packing on this platform")
}
