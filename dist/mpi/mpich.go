//go:build cgo && mpich && !mpi

package mpi

// This file alone names MPICH's pkg-config package: one file per
// implementation, since tag-guarded #cgo lines in one shared file are
// served stale from the build cache (golang/go#73033).

// #cgo pkg-config: mpich
import "C"

// Implementation names the MPI library kiln was built with.
const Implementation = "MPICH"
