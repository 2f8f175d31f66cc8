//go:build !amd64 || purego

package cpu

import "unsafe"

// rowMaxAsm is false: rowMax's Go lanes run.
const rowMaxAsm = false

// rowMaxF32 is never called when rowMaxAsm is false.
func rowMaxF32(x unsafe.Pointer, n int) float32 {
	panic("cpu: no row maximum kernel on this platform")
}
