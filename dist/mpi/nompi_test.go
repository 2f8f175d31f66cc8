//go:build !cgo || !(mpi || mpich)

package mpi

import "testing"

func TestOpenWithoutMPI(t *testing.T) {
	if Available() {
		t.Error("Available() = true in a build without MPI")
	}
	tr, err := Open()
	if tr != nil || err == nil {
		t.Fatalf("Open() = %v, %v; want an error", tr, err)
	}
	if want := "kiln was built without MPI; build it with -tags mpi (OpenMPI) or -tags mpich"; err.Error() != want {
		t.Errorf("Open() error = %q, want %q", err, want)
	}
}
