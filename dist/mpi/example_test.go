package mpi_test

import (
	"fmt"
	"os"
	"unsafe"

	"github.com/kilnml/kiln/dist"
	"github.com/kilnml/kiln/dist/mpi"
	"github.com/kilnml/kiln/ir"
)

// ExampleOpen sums a gradient over the ranks of an MPI job, in rank
// order: run it as mpirun -np 2 --bind-to none on a binary built with
// -tags mpi.
func ExampleOpen() {
	t, err := mpi.Open()
	if err != nil {
		fmt.Fprintln(os.Stderr, err) // a build without MPI
		return
	}
	defer t.Close()
	if w := mpi.BindingWarning(); w != "" {
		fmt.Fprintln(os.Stderr, w)
	}
	c := dist.NewComm(t)
	grad := []float32{1, 2, 3}
	if err := c.AllreduceSum(unsafe.Slice((*byte)(unsafe.Pointer(&grad[0])), 4*len(grad)), ir.F32); err != nil {
		t.Abort(1, fmt.Sprintf("rank %d: %v", t.Rank(), err))
	}
	if c.Rank() == 0 {
		fmt.Println(grad) // every rank's grad summed
	}
}

// ExampleBindingWarning warns when the launcher bound this process to one
// core of several.
func ExampleBindingWarning() {
	if w := mpi.BindingWarning(); w != "" {
		fmt.Fprintln(os.Stderr, w)
	}
}

// ExampleAvailable refuses to run as one of several ranks in a build
// without MPI, where the ranks could not work together.
func ExampleAvailable() {
	if n := dist.LaunchedRanks(); n > 1 && !mpi.Available() {
		fmt.Fprintf(os.Stderr, "started as one of %d ranks, but kiln was built without MPI; build it with -tags mpi (OpenMPI) or -tags mpich\n", n)
		os.Exit(1)
	}
	if mpi.Available() {
		fmt.Println("MPI:", mpi.Implementation)
	}
}
