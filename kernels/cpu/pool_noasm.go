//go:build !amd64 || purego

package cpu

import "unsafe"

// maxPoolAsm is false: the Go loops of maxPoolArgmaxes run.
const maxPoolAsm = false

// maxPool22F32 is never called when maxPoolAsm is false.
func maxPool22F32(at, x unsafe.Pointer, base, w, n int) {
	panic("cpu: no max-pool kernel on this platform")
}
