//go:build cgo && mpi && !mpich

package mpi

// launchers are the commands that start an OpenMPI job, Debian's name
// first; launchFlags are what TestAbortEndsJob's 2-rank job passes them.
var (
	launchers   = []string{"mpirun.openmpi", "mpirun"}
	launchFlags = []string{"-np", "2", "--oversubscribe", "--bind-to", "none"}
)
