//go:build cgo && ((mpi && !mpich) || (mpich && !mpi))

package mpi

/*
#include <stdlib.h>
#include <mpi.h>

// The MPI handles are macros (pointers in OpenMPI, integers in MPICH), so
// every call that names one goes through a helper here.

static int kiln_init(int *provided) {
	int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
}
static int kiln_funneled(void) { return MPI_THREAD_FUNNELED; }
static int kiln_rank(int *r) { return MPI_Comm_rank(MPI_COMM_WORLD, r); }
static int kiln_size(int *n) { return MPI_Comm_size(MPI_COMM_WORLD, n); }
static int kiln_finalize(void) { return MPI_Finalize(); }
static int kiln_abort(int code) { return MPI_Abort(MPI_COMM_WORLD, code); }

// kiln_strided returns in *t a datatype of n bytes whose extent is stride
// bytes, so that block j of a collective starts j*stride bytes in.
static int kiln_strided(long long n, long long stride, MPI_Datatype *t) {
	MPI_Datatype c;
	int rc = MPI_Type_contiguous((int)n, MPI_BYTE, &c);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Type_create_resized(c, 0, (MPI_Aint)stride, t);
	MPI_Type_free(&c);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Type_commit(t);
}

// kiln_alltoall moves n bytes of each of the blocks of stride bytes that
// start at send and recv.
static int kiln_alltoall(void *send, void *recv, long long n, long long stride) {
	if (n == stride) {
		return MPI_Alltoall(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD);
	}
	MPI_Datatype t;
	int rc = kiln_strided(n, stride, &t);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Alltoall(send, 1, t, recv, 1, t, MPI_COMM_WORLD);
	MPI_Type_free(&t);
	return rc;
}

// kiln_allgather gathers n bytes from send into the blocks of stride bytes
// that start at recv.
static int kiln_allgather(void *send, void *recv, long long n, long long stride) {
	if (n == stride) {
		return MPI_Allgather(send, (int)n, MPI_BYTE, recv, (int)n, MPI_BYTE, MPI_COMM_WORLD);
	}
	MPI_Datatype t;
	int rc = kiln_strided(n, stride, &t);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Allgather(send, (int)n, MPI_BYTE, recv, 1, t, MPI_COMM_WORLD);
	MPI_Type_free(&t);
	return rc;
}

static int kiln_bcast(void *buf, long long n, int root) {
	return MPI_Bcast(buf, (int)n, MPI_BYTE, root, MPI_COMM_WORLD);
}

// kiln_allreduce_f32 is MPI's own sum, in place, whose order depends on
// the implementation's algorithm; only the benchmarks compare with it.
static int kiln_allreduce_f32(float *x, long long n) {
	return MPI_Allreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

static int kiln_error_string(int rc, char *buf) {
	int n = 0;
	if (MPI_Error_string(rc, buf, &n) != MPI_SUCCESS) n = 0;
	buf[n] = 0;
	return n;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kilnml/kiln/dist"
)

// maxChunk is the most bytes one MPI call moves per block: MPI counts are
// C ints, so larger messages go in several calls.
const maxChunk = 1 << 30

// Available reports whether this build has an MPI transport: true when
// kiln was built with -tags mpi or -tags mpich (and cgo).
func Available() bool { return true }

// opened is set by the first Open: MPI is initialized once per process.
var opened atomic.Bool

// Open initializes MPI (MPI_Init_thread with MPI_THREAD_FUNNELED) on an OS
// thread of its own and returns a transport on MPI_COMM_WORLD whose calls
// all run on that thread. A process may call Open once.
func Open() (dist.Transport, error) {
	if !opened.CompareAndSwap(false, true) {
		return nil, errors.New("mpi: Open was called a second time; MPI is initialized once per process")
	}
	t := &transport{calls: make(chan func()), chunk: maxChunk}
	ready := make(chan error)
	go t.loop(ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return t, nil
}

// transport is an MPI_COMM_WORLD transport. Every MPI call runs on the
// goroutine started by Open, locked to its OS thread (the thread that
// initialized MPI, as MPI_THREAD_FUNNELED requires); callers hand it
// functions over calls and wait for them.
type transport struct {
	rank, size int
	calls      chan func()
	// mu is held while a call runs on the MPI thread: one at a time.
	mu     sync.Mutex
	closed bool
	// chunk is the most bytes per block one MPI call moves (maxChunk;
	// tests lower it to exercise the split).
	chunk int
}

// loop initializes MPI, reports to ready, and then runs the calls.
func (t *transport) loop(ready chan<- error) {
	runtime.LockOSThread() // never unlocked: the thread stays MPI's
	var provided C.int
	if rc := C.kiln_init(&provided); rc != C.MPI_SUCCESS {
		ready <- fmt.Errorf("mpi: MPI_Init_thread failed: %s", errorString(rc))
		return
	}
	if provided < C.kiln_funneled() {
		C.kiln_finalize()
		ready <- fmt.Errorf("mpi: MPI_Init_thread provided thread level %d, expected MPI_THREAD_FUNNELED (%d) or above", int(provided), int(C.kiln_funneled()))
		return
	}
	var rank, size C.int
	if rc := C.kiln_rank(&rank); rc != C.MPI_SUCCESS {
		ready <- fmt.Errorf("mpi: MPI_Comm_rank failed: %s", errorString(rc))
		return
	}
	if rc := C.kiln_size(&size); rc != C.MPI_SUCCESS {
		ready <- fmt.Errorf("mpi: MPI_Comm_size failed: %s", errorString(rc))
		return
	}
	t.rank, t.size = int(rank), int(size)
	ready <- nil
	for f := range t.calls {
		f()
	}
}

// do runs f on the MPI thread and returns its error.
func (t *transport) do(what string, f func() C.int) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("mpi: %s after Close", what)
	}
	done := make(chan C.int)
	t.calls <- func() { done <- f() }
	if rc := <-done; rc != C.MPI_SUCCESS {
		return fmt.Errorf("mpi: %s failed on rank %d: %s", what, t.rank, errorString(rc))
	}
	return nil
}

func (t *transport) Rank() int { return t.rank }
func (t *transport) Size() int { return t.size }

func (t *transport) Alltoall(send, recv []byte) error {
	if len(send) != len(recv) || len(send)%t.size != 0 {
		return fmt.Errorf("mpi: alltoall: %d bytes to send and %d to receive, expected equal multiples of %d", len(send), len(recv), t.size)
	}
	if overlap(send, recv) {
		return errors.New("mpi: alltoall: the send and receive buffers overlap")
	}
	b := len(send) / t.size
	if b == 0 {
		return nil
	}
	return t.do("MPI_Alltoall", func() C.int {
		for o := 0; o < b; o += t.chunk {
			n := min(t.chunk, b-o)
			if rc := C.kiln_alltoall(unsafe.Pointer(&send[o]), unsafe.Pointer(&recv[o]), C.longlong(n), C.longlong(b)); rc != C.MPI_SUCCESS {
				return rc
			}
		}
		return C.MPI_SUCCESS
	})
}

func (t *transport) Allgather(send, recv []byte) error {
	if len(recv) != t.size*len(send) {
		return fmt.Errorf("mpi: allgather: %d bytes to send and %d to receive, expected %d ranks' worth", len(send), len(recv), t.size)
	}
	if overlap(send, recv) {
		return errors.New("mpi: allgather: the send and receive buffers overlap")
	}
	b := len(send)
	if b == 0 {
		return nil
	}
	return t.do("MPI_Allgather", func() C.int {
		for o := 0; o < b; o += t.chunk {
			n := min(t.chunk, b-o)
			if rc := C.kiln_allgather(unsafe.Pointer(&send[o]), unsafe.Pointer(&recv[o]), C.longlong(n), C.longlong(b)); rc != C.MPI_SUCCESS {
				return rc
			}
		}
		return C.MPI_SUCCESS
	})
}

func (t *transport) Bcast(buf []byte, root int) error {
	if root < 0 || root >= t.size {
		return fmt.Errorf("mpi: bcast: root %d, expected 0 to %d", root, t.size-1)
	}
	if len(buf) == 0 {
		return nil
	}
	return t.do("MPI_Bcast", func() C.int {
		for o := 0; o < len(buf); o += t.chunk {
			n := min(t.chunk, len(buf)-o)
			if rc := C.kiln_bcast(unsafe.Pointer(&buf[o]), C.longlong(n), C.int(root)); rc != C.MPI_SUCCESS {
				return rc
			}
		}
		return C.MPI_SUCCESS
	})
}

// allreduceF32 sums x over the ranks with MPI_Allreduce, in the order of
// the implementation's algorithm (not rank order): the benchmarks'
// comparison.
func (t *transport) allreduceF32(x []float32) error {
	if len(x) == 0 {
		return nil
	}
	return t.do("MPI_Allreduce", func() C.int {
		for o := 0; o < len(x); o += t.chunk / 4 {
			n := min(t.chunk/4, len(x)-o)
			if rc := C.kiln_allreduce_f32((*C.float)(unsafe.Pointer(&x[o])), C.longlong(n)); rc != C.MPI_SUCCESS {
				return rc
			}
		}
		return C.MPI_SUCCESS
	})
}

// Abort prints msg on standard error and ends the job with MPI_Abort. When
// the MPI thread is idle, MPI_Abort runs there; when it is inside a
// collective (Abort called from another goroutine), MPI_Abort runs on the
// calling thread, which MPI_THREAD_FUNNELED does not sanction but OpenMPI
// and MPICH both carry out (it is what ends a job that hangs in a
// collective). If MPI_Abort returns, the process exits with code.
func (t *transport) Abort(code int, msg string) {
	fmt.Fprintln(os.Stderr, msg)
	if t.mu.TryLock() {
		if !t.closed {
			t.calls <- func() {
				C.kiln_abort(C.int(code))
				os.Exit(code)
			}
			select {} // the MPI thread ends the process
		}
		os.Exit(code) // after MPI_Finalize, MPI_Abort may not be called
	}
	runtime.LockOSThread()
	C.kiln_abort(C.int(code))
	os.Exit(code)
}

// Close finalizes MPI (MPI_Finalize) on its thread. Later calls return
// errors.
func (t *transport) Close() error {
	err := t.do("MPI_Finalize", func() C.int { return C.kiln_finalize() })
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.closed = true
		close(t.calls)
	}
	return err
}

// errorString returns MPI's text for error code rc.
func errorString(rc C.int) string {
	buf := (*C.char)(C.malloc(C.MPI_MAX_ERROR_STRING + 1))
	defer C.free(unsafe.Pointer(buf))
	C.kiln_error_string(rc, buf)
	return fmt.Sprintf("%s (error %d)", C.GoString(buf), int(rc))
}

// overlap reports whether a and b share memory.
func overlap(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	pa, pb := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return pa < pb+uintptr(len(b)) && pb < pa+uintptr(len(a))
}
