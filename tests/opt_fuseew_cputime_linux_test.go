package tests

import (
	"syscall"
	"time"
)

// fuseewThreadCPU returns the CPU time the calling OS thread has used, or 0
// where it cannot be read. Benchmarks lock their goroutine to its thread
// and report the difference as cpu-ns/op, which, unlike ns/op, does not
// count the time other processes on a shared machine hold the core.
func fuseewThreadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
