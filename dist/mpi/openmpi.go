//go:build cgo && mpi && !mpich

package mpi

// This file alone names OpenMPI's pkg-config package: one file per
// implementation, since tag-guarded #cgo lines in one shared file are
// served stale from the build cache (golang/go#73033).

// #cgo pkg-config: ompi-c
import "C"

// Implementation names the MPI library kiln was built with.
const Implementation = "OpenMPI"
