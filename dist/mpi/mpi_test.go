//go:build cgo && ((mpi && !mpich) || (mpich && !mpi))

package mpi

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/ir"
)

// The tests run on every rank of a job (mpirun -np N on the test binary;
// alone, a 1-rank job). Every rank runs the same collectives in the same
// order, so a failed check reports with t.Errorf and goes on: a rank that
// stopped early would leave the others waiting.

var (
	worldOnce sync.Once
	world     *transport
	worldErr  error
)

// testWorld returns the job's transport, opened on first use.
func testWorld(t testing.TB) *transport {
	worldOnce.Do(func() {
		var tr dist.Transport
		tr, worldErr = Open()
		if worldErr == nil {
			world = tr.(*transport)
		}
	})
	if worldErr != nil {
		t.Fatal(worldErr)
	}
	return world
}

func TestMain(m *testing.M) {
	code := m.Run()
	if world != nil {
		if err := world.Close(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// rankData returns rank r's n values for a test: of widely different
// magnitudes, so that the order of a sum changes its bits.
func rankData[T float32 | float64](r, n int) []T {
	rng := rand.New(rand.NewPCG(uint64(r), 11))
	x := make([]T, n)
	for i := range x {
		x[i] = T(rng.NormFloat64() * scales[rng.IntN(len(scales))])
	}
	return x
}

var scales = [...]float64{1e-3, 1e-2, 1e-1, 1, 1e1, 1e2, 1e3}

// allRankData returns every rank's rankData.
func allRankData[T float32 | float64](ranks, n int) [][]T {
	xs := make([][]T, ranks)
	for r := range xs {
		xs[r] = rankData[T](r, n)
	}
	return xs
}

// rankOrderSum returns ((x0 + x1) + x2) + ... over xs.
func rankOrderSum[T float32 | float64](xs [][]T) []T {
	sum := slices.Clone(xs[0])
	for _, x := range xs[1:] {
		for i, v := range x {
			sum[i] += v
		}
	}
	return sum
}

// localAllreduce returns rank 0's result of AllreduceSum on dist.Local
// with xs[r] on rank r: the in-process reference.
func localAllreduce[T float32 | float64](xs [][]T, dt ir.DType) ([]T, error) {
	var (
		wg   sync.WaitGroup
		out  = make([][]T, len(xs))
		errs = make([]error, len(xs))
	)
	for _, tr := range dist.Local(len(xs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := tr.Rank()
			out[r] = slices.Clone(xs[r])
			errs[r] = dist.NewComm(tr).AllreduceSum(asBytes(out[r]), dt)
		}()
	}
	wg.Wait()
	return out[0], errors.Join(errs...)
}

func asBytes[T any](x []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), len(x)*int(unsafe.Sizeof(z)))
}

// sameBits reports the first element where got and want differ in bits.
func sameBits[T float32 | float64](got, want []T) (int, bool) {
	if len(got) != len(want) {
		return -1, false
	}
	if !bytes.Equal(asBytes(got), asBytes(want)) {
		for i := range got {
			if !bytes.Equal(asBytes(got[i:i+1]), asBytes(want[i:i+1])) {
				return i, false
			}
		}
	}
	return 0, true
}

// lengths are the element counts the sums are checked on: one element, an
// odd count, one that no rank count divides, and a few MB.
var lengths = []int{1, 7, 4099, 1<<19 + 5}

func TestAllreduceSumF32(t *testing.T) { testAllreduceSum[float32](t, ir.F32) }
func TestAllreduceSumF64(t *testing.T) { testAllreduceSum[float64](t, ir.F64) }

// testAllreduceSum checks that AllreduceSum over MPI gives every rank the
// rank-order sum of all ranks' data bit for bit, and the bits dist.Local
// gives: the same bits on OpenMPI, MPICH and in one process.
func testAllreduceSum[T float32 | float64](t *testing.T, dt ir.DType) {
	w := testWorld(t)
	c := dist.NewComm(w)
	for _, n := range lengths {
		// The references first, so that the ranks reach the collective
		// together rather than wait in it for each other's arithmetic.
		xs := allRankData[T](w.Size(), n)
		want := rankOrderSum(xs)
		local, err := localAllreduce(xs, dt)
		if err != nil {
			t.Fatal(err)
		}
		x := slices.Clone(xs[w.Rank()])
		if err := c.AllreduceSum(asBytes(x), dt); err != nil {
			t.Fatal(err)
		}
		if i, ok := sameBits(x, want); !ok {
			t.Errorf("rank %d of %d, %d elements: element %d = %v, want the rank-order sum %v", w.Rank(), w.Size(), n, i, x[i], want[i])
		}
		if i, ok := sameBits(x, local); !ok {
			t.Errorf("rank %d of %d, %d elements: element %d = %v, dist.Local gives %v", w.Rank(), w.Size(), n, i, x[i], local[i])
		}
	}
}

// TestReduceScatterAllgather checks that each rank's shard is its part of
// the rank-order sum and that gathering the shards restores the sum.
func TestReduceScatterAllgather(t *testing.T) {
	w := testWorld(t)
	c := dist.NewComm(w)
	for _, n := range lengths {
		xs := allRankData[float32](w.Size(), n)
		want := rankOrderSum(xs)
		x := xs[w.Rank()]
		shard := make([]float32, ir.ShardLen(n, w.Size()))
		if err := c.ReduceScatter(asBytes(x), ir.F32, asBytes(shard)); err != nil {
			t.Fatal(err)
		}
		lo, hi := dist.ShardRange(n, w.Size(), w.Rank())
		if i, ok := sameBits(shard[:hi-lo], want[lo:hi]); !ok {
			t.Errorf("rank %d of %d, %d elements: shard element %d = %v, want %v", w.Rank(), w.Size(), n, lo+i, shard[i], want[lo+i])
		}
		all := make([]float32, n)
		if err := c.Allgather(asBytes(shard), asBytes(all)); err != nil {
			t.Fatal(err)
		}
		if i, ok := sameBits(all, want); !ok {
			t.Errorf("rank %d of %d, %d elements: gathered element %d = %v, want %v", w.Rank(), w.Size(), n, i, all[i], want[i])
		}
	}
}

// TestBcast checks a broadcast from every root.
func TestBcast(t *testing.T) {
	w := testWorld(t)
	c := dist.NewComm(w)
	for root := range w.Size() {
		for _, n := range []int{1, 4099, 1 << 19} {
			x := rankData[float32](w.Rank(), n)
			if err := c.Bcast(asBytes(x), root); err != nil {
				t.Fatal(err)
			}
			if i, ok := sameBits(x, rankData[float32](root, n)); !ok {
				t.Errorf("rank %d of %d, bcast from %d of %d elements: element %d differs", w.Rank(), w.Size(), root, n, i)
			}
		}
	}
}

// pattern is the byte that rank from sends to rank to at offset i of its
// block.
func pattern(from, to, i int) byte { return byte(from*131 + to*31 + i*7 + i/251) }

// TestChunkedCollectives checks the split of messages larger than one MPI
// call's count (maxChunk; lowered here) on the transport's own
// collectives: every byte reaches its place, with block sizes that are and
// are not multiples of the chunk.
func TestChunkedCollectives(t *testing.T) {
	w := testWorld(t)
	defer func(c int) { w.chunk = c }(w.chunk)
	p, me := w.Size(), w.Rank()
	for _, chunk := range []int{maxChunk, 64} {
		w.chunk = chunk
		for _, b := range []int{1, 7, 64, 1000, 4099} {
			send, recv := make([]byte, p*b), make([]byte, p*b)
			for to := range p {
				for i := range b {
					send[to*b+i] = pattern(me, to, i)
				}
			}
			if err := w.Alltoall(send, recv); err != nil {
				t.Fatal(err)
			}
			for from := range p {
				for i := range b {
					if got, want := recv[from*b+i], pattern(from, me, i); got != want {
						t.Errorf("rank %d, chunk %d, block %d: alltoall byte %d from rank %d = %d, want %d", me, chunk, b, i, from, got, want)
						break
					}
				}
			}
			all := make([]byte, p*b)
			if err := w.Allgather(send[:b], all); err != nil {
				t.Fatal(err)
			}
			for from := range p {
				for i := range b {
					if got, want := all[from*b+i], pattern(from, 0, i); got != want {
						t.Errorf("rank %d, chunk %d, block %d: allgather byte %d from rank %d = %d, want %d", me, chunk, b, i, from, got, want)
						break
					}
				}
			}
			buf := bytes.Clone(send[:b])
			if err := w.Bcast(buf, p-1); err != nil {
				t.Fatal(err)
			}
			for i := range b {
				if got, want := buf[i], pattern(p-1, 0, i); got != want {
					t.Errorf("rank %d, chunk %d, block %d: bcast byte %d = %d, want %d", me, chunk, b, i, got, want)
					break
				}
			}
		}
	}
}

// TestTransportErrors checks the errors for buffers that do not fit, found
// before any MPI call (so every rank returns them and none waits).
func TestTransportErrors(t *testing.T) {
	w := testWorld(t)
	p := w.Size()
	buf := make([]byte, 8*p+1)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"alltoall lengths", w.Alltoall(buf[:4*p], buf[4*p:5*p]), fmt.Sprintf("mpi: alltoall: %d bytes to send and %d to receive, expected equal multiples of %d", 4*p, p, p)},
		{"alltoall overlap", w.Alltoall(buf[:2*p], buf[p:3*p]), "mpi: alltoall: the send and receive buffers overlap"},
		{"allgather lengths", w.Allgather(buf[:4], buf[:4*p+1]), fmt.Sprintf("mpi: allgather: 4 bytes to send and %d to receive, expected %d ranks' worth", 4*p+1, p)},
		{"allgather overlap", w.Allgather(buf[:4], buf[:4*p]), "mpi: allgather: the send and receive buffers overlap"},
		{"bcast root", w.Bcast(buf, p), fmt.Sprintf("mpi: bcast: root %d, expected 0 to %d", p, p-1)},
	} {
		if tc.err == nil || tc.err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

// TestOpenTwice checks that a second Open is refused: MPI is initialized
// once per process.
func TestOpenTwice(t *testing.T) {
	testWorld(t)
	if tr, err := Open(); tr != nil || err == nil {
		t.Errorf("second Open() = %v, %v; want an error", tr, err)
	}
	if !Available() || Implementation == "" {
		t.Errorf("Available() = %v, Implementation = %q in an MPI build", Available(), Implementation)
	}
}

type point struct{ x int }

//go:noinline
func deref(p *point) int { return p.x }

// TestPanicsAfterOpen checks that Go's run-time panics that come from
// signals (a nil dereference is a SIGSEGV) still reach recover after MPI
// is initialized: MPI libraries may install signal handlers of their own.
func TestPanicsAfterOpen(t *testing.T) {
	testWorld(t)
	defer func() {
		if e := recover(); e == nil || !strings.Contains(fmt.Sprint(e), "nil pointer dereference") {
			t.Errorf("recovered %v, want a nil pointer dereference", e)
		}
	}()
	deref(nil)
	t.Error("deref(nil) returned")
}
