package cpu

import (
	"unsafe"

	"github.com/kilnml/kiln/kernels"
)

// Prefetching for kernels that work in phases: a fused softmax computes a
// chunk of rows in cache after reading them, a sum of a whole tensor adds
// up blocks it computed into scratch. While a phase works in cache the
// hardware prefetchers, which follow the reads, fetch nothing, so the
// next phase's reads would wait on memory; instead each step of the
// phase in cache asks for a row of what the next phase reads
// (prefetchLines), so that the fetches overlap the arithmetic.

// prefetchArray is an array whose lines a kernel asks for ahead of use.
type prefetchArray struct {
	data  []byte
	size  int  // bytes per element
	write bool // asked for writable (prefetchLinesW): an output
}

// rowAhead prefetches the rows of a kernel's arguments: row(j) asks for
// row from+j of every array.
type rowAhead struct {
	arrays []prefetchArray
	dim    int // elements per row
	from   int
}

// of sets ra to prefetch rows of dim elements of the arguments of total
// elements (those read in place, not broadcast), up to element end (the
// part's last), and returns it; none where noPrefetch.
func (ra *rowAhead) of(args []kernels.Tensor, dim, end, total int) *rowAhead {
	ra.arrays, ra.dim, ra.from = ra.arrays[:0], dim, 0
	if noPrefetch {
		return ra
	}
	for _, a := range args {
		size := a.Type.DType.Size()
		if size > 0 && len(a.Data) == total*size {
			ra.arrays = append(ra.arrays, prefetchArray{data: a.Data[:min(end, total)*size], size: size})
		}
	}
	return ra
}

// row prefetches row from+j of each array.
func (ra *rowAhead) row(j int) {
	for _, a := range ra.arrays {
		lo, hi := (ra.from+j)*ra.dim*a.size, min((ra.from+j+1)*ra.dim*a.size, len(a.data))
		if lo < hi {
			prefetchLines(unsafe.Pointer(&a.data[lo]), (hi-lo+63)/64)
		}
	}
}

// elemSize returns the bytes of a T.
func elemSize[T float]() int {
	var x T
	return int(unsafe.Sizeof(x))
}

// ownAhead is how many elements ahead of its stores a kernel that writes
// its result over one of its arguments (an optimizer's update, in the
// param's memory) asks for the result's lines to be made writable
// (prefetchLinesW): two blocks of fused_elementwise, 4 KiB of f32.
//
// Such a result's lines were read before, often by both cores (a weight
// by a forward product cut by columns, its update cut by rows), and a
// core must take each line from the other's cache before it may write
// it. Each store waits for that unless the request went out ahead. On
// the 2-core Zen 5 machine, an SGD update of a [784,512] weight right
// after the forward product took 168 µs, and 38-44 µs once the lines were
// the core's alone (the same update run twice, exec/cpu, 500 calls);
// asked for ahead, the MLP step's two weight updates (kiln bench -trace,
// 2 workers) went from 0.20 and 0.10 ms to 0.08 and 0.06.
const ownAhead = 2 * fuseewBlock

// noPrefetch turns the kernels' prefetching off, for benchmarks that
// measure what it brings.
var noPrefetch = false

// overlapsAny reports whether the memory of b overlaps that of any of ts:
// a result written over an argument (the planner places a result in an
// argument's memory only whole, but any overlap counts).
func overlapsAny(b []byte, ts []kernels.Tensor) bool {
	if len(b) == 0 {
		return false
	}
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	hi := lo + uintptr(len(b))
	for _, t := range ts {
		if len(t.Data) == 0 {
			continue
		}
		tlo := uintptr(unsafe.Pointer(unsafe.SliceData(t.Data)))
		if tlo < hi && lo < tlo+uintptr(len(t.Data)) {
			return true
		}
	}
	return false
}
