// Package mpi is dist's MPI transport: the all-to-all, all-gather and
// broadcast that dist.Comm builds its rank-order sums on, run by MPI on
// MPI_COMM_WORLD, so that kiln trains across the processes and machines
// of a job started by mpirun, mpiexec or srun.
//
// # Builds
//
// Build with -tags mpi for OpenMPI (pkg-config ompi-c; Debian's
// openmpi-bin and libopenmpi-dev) or -tags mpich for MPICH (pkg-config
// mpich; mpich and libmpich-dev); cgo is required. Each implementation
// has one file of its own naming its pkg-config package, because
// tag-guarded #cgo lines in one shared file are served stale from the
// build cache (golang/go#73033). Without a tag (or with CGO_ENABLED=0)
// the package builds without MPI: Available reports false and Open
// returns an error saying how to build with it.
//
// # Threads
//
// Open calls MPI_Init_thread asking for MPI_THREAD_FUNNELED on a
// goroutine locked to its OS thread, checks the level provided, and from
// then on runs every MPI call on that thread: the transport's methods
// hand the call over a channel and wait for it, so they may be called
// from any goroutine, one at a time (a mutex orders overlapping calls).
// Close calls MPI_Finalize there. Abort prints its message and calls
// MPI_Abort on that thread when it is idle; when it is inside a collective
// (Abort called from another goroutine while a collective waits for a
// failed rank), MPI_Abort runs on the calling thread instead. The MPI
// standard does not sanction that at MPI_THREAD_FUNNELED, but OpenMPI 4.1
// and MPICH 4.0 both end the job with Abort's code (TestAbortEndsJob
// checks it); it is what keeps a failed rank from leaving the others
// waiting forever.
//
// MPI counts are C ints: messages of more than 1 GiB per rank are moved in
// pieces of at most 1 GiB each (a contiguous datatype resized to the
// block's stride keeps all-to-all and all-gather blocks in place), so
// byte lengths are 64-bit.
//
// # Launching
//
//	mpirun -np 4 --bind-to none kiln train ... -dist mpi
//	mpirun -np 8 --hostfile hosts --map-by ppr:1:node:PE=16 kiln train ... -dist mpi
//
// OpenMPI binds each rank to one core by default, and Go then uses one
// CPU: pass --bind-to none, or --map-by ppr:1:node:PE=C to give one rank
// per machine C cores; BindingWarning detects the binding. As root OpenMPI
// needs --allow-run-as-root (or OMPI_ALLOW_RUN_AS_ROOT=1 and
// OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment); more ranks than
// cores need --oversubscribe. MPICH's mpiexec does not bind by default.
//
// # Tests
//
// The tests run on every rank of a job: dist/mpi/run_tests.sh builds the
// test binary for each implementation and runs it alone and under the
// launcher on 2 and 4 ranks. They check that dist.Comm's sums over MPI are
// bit for bit the rank-order sum and what dist.Local gives, hence the
// same bits on OpenMPI, MPICH and in one process.
package mpi
