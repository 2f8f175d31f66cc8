//go:build !amd64 || purego

package cpu

import "unsafe"

// prefetchLines does nothing where there is no prefetch instruction to
// give: the hardware's prefetchers are all there is.
func prefetchLines(unsafe.Pointer, int) {}

// prefetchLinesW is never called: prefetchW is false.
func prefetchLinesW(unsafe.Pointer, int) {}

// prefetchW is false where there is no prefetch instruction to give.
const prefetchW = false
