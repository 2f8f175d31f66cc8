//go:build unix

package cpu

import "syscall"

// cpuSeconds returns the user and system CPU time the process has used
// (0 where it cannot tell): on a shared machine, work per CPU-second moves
// less with the load than work per second.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
