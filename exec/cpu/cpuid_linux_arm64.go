package cpu

import (
	"syscall"
	"unsafe"
)

// currentCPU returns the number of the CPU the calling thread runs on
// (getcpu(2): about a microsecond on a virtual machine), and true.
func currentCPU() (int, bool) {
	var c uint32
	if _, _, e := syscall.RawSyscall(168, uintptr(unsafe.Pointer(&c)), 0, 0); e != 0 { // SYS_getcpu
		return 0, false
	}
	return int(c), true
}
