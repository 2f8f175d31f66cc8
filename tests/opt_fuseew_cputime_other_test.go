//go:build !linux

package tests

import "time"

// fuseewThreadCPU returns 0: the thread's CPU time is read on Linux only,
// and the benchmarks then report ns/op alone.
func fuseewThreadCPU() time.Duration { return 0 }
