// Package dist is kiln's data-parallel layer: the few collectives that
// training across processes needs, on a Transport that moves bytes between
// the processes (ranks) of a job. The reductions are kiln's own, built on
// the transport's all-to-all and all-gather, so that their summation order
// is fixed (rank order) and the result is the same bits whatever the
// transport or its algorithms: N ranks give bitwise what one process
// accumulating N steps gives.
//
// Transports: Local (goroutines in one process, for tests and the
// reference) and MPI (package dist/mpi, built with -tags mpi or mpich).
package dist

import (
	"fmt"
	"os"
	"strconv"
)

// Transport moves bytes between the ranks of a job. Every rank calls the
// same collectives in the same order with the same lengths; a transport is
// used by one goroutine at a time.
type Transport interface {
	// Rank is this process's rank, 0 to Size()-1.
	Rank() int
	// Size is the number of ranks in the job.
	Size() int
	// Alltoall sends the j-th of Size() equal blocks of send to rank j and
	// receives rank i's block for this rank into the i-th block of recv.
	// len(send) == len(recv), a multiple of Size().
	Alltoall(send, recv []byte) error
	// Allgather receives every rank's send into recv, rank i's at
	// recv[i*len(send):]. len(recv) == Size()*len(send).
	Allgather(send, recv []byte) error
	// Bcast copies root's buf into every rank's buf.
	Bcast(buf []byte, root int) error
	// Abort ends every rank of the job with exit code code, after this
	// rank prints msg on its standard error (MPI; Local's ranks return
	// errors instead). It does not return.
	Abort(code int, msg string)
	// Close ends this rank's part in the job (MPI_Finalize); the other
	// ranks must close too.
	Close() error
}

// LaunchedRanks returns the number of ranks the environment says this
// process was started as one of: OpenMPI's OMPI_COMM_WORLD_SIZE, MPICH's
// and Slurm's PMI_SIZE, PMIx's PMIX_SIZE; 1 when none is set. A binary
// without an MPI transport refuses to train when this is above 1, so that
// N unsynchronised copies never train silently.
func LaunchedRanks() int {
	for _, k := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"} {
		if n, err := strconv.Atoi(os.Getenv(k)); err == nil && n > 1 {
			return n
		}
	}
	return 1
}

func checkSize(what string, t Transport, ranks int) error {
	if t.Size() != ranks {
		return fmt.Errorf("%s was compiled for %d ranks, but this job has %d", what, ranks, t.Size())
	}
	return nil
}
