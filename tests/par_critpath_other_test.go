//go:build !linux

package tests

import "time"

// parThreadCPU returns 0: the thread's CPU time is read on Linux only.
func parThreadCPU() time.Duration { return 0 }
