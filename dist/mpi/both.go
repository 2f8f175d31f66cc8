//go:build mpi && mpich

package mpi

// Building with both tags fails here: choose one MPI library.
var _ = build_with_tags_mpi_or_mpich_not_both
