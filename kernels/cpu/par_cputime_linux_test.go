package cpu

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time the calling OS thread has used, or 0
// where it cannot be read.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
