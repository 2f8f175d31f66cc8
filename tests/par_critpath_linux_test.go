package tests

import (
	"syscall"
	"time"
	"unsafe"
)

// parThreadCPU returns the CPU time the calling OS thread has used, in
// nanoseconds (CLOCK_THREAD_CPUTIME_ID), or 0 where it cannot be read.
func parThreadCPU() time.Duration {
	var ts syscall.Timespec
	const clockThreadCPUTime = 3
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return time.Duration(ts.Nano())
}
