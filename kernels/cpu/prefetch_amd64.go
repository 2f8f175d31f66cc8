//go:build !purego

package cpu

import "unsafe"

// prefetchLines asks for the n cache lines from p on to be brought into
// the cache (PREFETCHT0), without waiting for them.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)
