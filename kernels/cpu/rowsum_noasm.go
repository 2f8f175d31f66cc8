//go:build !amd64 || purego

package cpu

import "unsafe"

// rowsumAsm is false: the Go loops of the lane sums and sqrtRow run.
const rowsumAsm = false

func laneSumF32(*[laneCount]float32, unsafe.Pointer, int) {
	panic("cpu: no lane sum kernel on this platform")
}

func laneSumF64(*[laneCount]float64, unsafe.Pointer, int) {
	panic("cpu: no lane sum kernel on this platform")
}

func laneDotF32(*[laneCount]float32, unsafe.Pointer, unsafe.Pointer, int) {
	panic("cpu: no lane sum kernel on this platform")
}

func laneDotF64(*[laneCount]float64, unsafe.Pointer, unsafe.Pointer, int) {
	panic("cpu: no lane sum kernel on this platform")
}

func sqrtF32(unsafe.Pointer, unsafe.Pointer, int) {
	panic("cpu: no square root kernel on this platform")
}

func sqrtF64(unsafe.Pointer, unsafe.Pointer, int) {
	panic("cpu: no square root kernel on this platform")
}
