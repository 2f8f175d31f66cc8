//go:build cgo && ((mpi && !mpich) || (mpich && !mpi))

package mpi

import (
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/ir"
)

// The benchmarks run on every rank of a job, e.g.
//
//	go test -tags mpi -c -o mpi.test ./dist/mpi
//	mpirun -np 2 --bind-to none mpi.test -test.run '^$' -test.bench Allreduce -test.benchtime 20x
//
// On more than one rank they need a fixed iteration count (-test.benchtime
// Nx): with a time target each rank would pick its own counts and the
// ranks' collectives would no longer match. MB/s is the buffer's size over
// the time of one sum.

// benchSizes are the buffers summed, in MB of f32.
var benchSizes = []int{1, 16, 64}

// checkBenchtime fails b on several ranks without a fixed iteration count.
func checkBenchtime(b *testing.B, w *transport) {
	if f := flag.Lookup("test.benchtime"); w.Size() > 1 && (f == nil || !strings.HasSuffix(f.Value.String(), "x")) {
		b.Fatalf("on %d ranks, run with a fixed iteration count, e.g. -test.benchtime 20x", w.Size())
	}
}

// BenchmarkAllreduce measures Comm.AllreduceSum, kiln's rank-order sum
// (all-to-all, sums, all-gather), on f32 buffers.
func BenchmarkAllreduce(b *testing.B) {
	w := testWorld(b)
	checkBenchtime(b, w)
	c := dist.NewComm(w)
	for _, mb := range benchSizes {
		b.Run(fmt.Sprintf("%dMB/ranks=%d", mb, w.Size()), func(b *testing.B) {
			x := make([]float32, mb<<20/4)
			b.SetBytes(int64(len(x)) * 4)
			for b.Loop() {
				if err := c.AllreduceSum(asBytes(x), ir.F32); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMPIAllreduce measures MPI_Allreduce on the same buffers, for
// comparison: MPI's own algorithms, whose order of summation kiln does not
// use.
func BenchmarkMPIAllreduce(b *testing.B) {
	w := testWorld(b)
	checkBenchtime(b, w)
	for _, mb := range benchSizes {
		b.Run(fmt.Sprintf("%dMB/ranks=%d", mb, w.Size()), func(b *testing.B) {
			x := make([]float32, mb<<20/4)
			b.SetBytes(int64(len(x)) * 4)
			for b.Loop() {
				if err := w.allreduceF32(x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
