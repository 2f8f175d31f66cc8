//go:build !cgo || !(mpi || mpich)

package mpi

import (
	"errors"

	"github.com/kilnml/kiln/dist"
)

// Implementation names the MPI library kiln was built with: empty without
// one.
const Implementation = ""

// Available reports whether this build has an MPI transport: true when
// kiln was built with -tags mpi or -tags mpich (and cgo).
func Available() bool { return false }

// Open returns an error: this build has no MPI.
func Open() (dist.Transport, error) {
	return nil, errors.New("kiln was built without MPI; build it with -tags mpi (OpenMPI) or -tags mpich")
}
