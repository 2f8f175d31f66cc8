//go:build !purego

package cpu

import (
	"unsafe"

	"github.com/kilnml/kiln/internal/cpufeat"
)

// prefetchLines asks for the n cache lines from p on to be brought into
// the cache (PREFETCHT0), without waiting for them.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)

// prefetchLinesW asks for the n cache lines from p on in a state they can
// be written in (PREFETCHW), without waiting for them. Only where
// prefetchW says the CPU has the instruction.
//
//go:noescape
func prefetchLinesW(p unsafe.Pointer, n int)

// prefetchW is whether the CPU has PREFETCHW (prefetchLinesW).
var prefetchW = cpufeat.PrefetchW
