//go:build cgo && mpich && !mpi

package mpi

// launchers are the commands that start an MPICH job, Debian's name first;
// launchFlags are what TestAbortEndsJob's 2-rank job passes them.
var (
	launchers   = []string{"mpiexec.mpich", "mpiexec"}
	launchFlags = []string{"-np", "2"}
)
