package gpu

import "github.com/kilnml/kiln/kernels"

// Options configure an executor. They are one type with and without cgo,
// so that callers build either way.
type Options struct {
	// Seed selects the initial values of the params (see exec.InitialValues).
	Seed uint64
	// Comm is the communicator of a data-parallel job, which the plan's
	// collectives run on. The GPU has no collectives of its own: the
	// executor reads a collective's argument back to the host, reduces it
	// there and uploads the result, between two command buffers.
	Comm kernels.Collective
}
