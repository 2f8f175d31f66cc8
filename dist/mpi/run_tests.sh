#!/usr/bin/env bash
# Runs dist/mpi's tests on MPI jobs: the test binary built with -tags mpi
# (OpenMPI) and with -tags mpich (MPICH), each run alone (a 1-rank job,
# which also starts TestAbortEndsJob's jobs) and under the launcher with 2
# and 4 ranks on this machine. Every rank runs every test; a launcher exits
# non-zero when any rank fails. Each run is killed after two minutes, so a
# hang fails instead of stalling. Needs openmpi-bin libopenmpi-dev mpich
# libmpich-dev.
set -euo pipefail
cd "$(dirname "$0")/../.."

for pc in ompi-c mpich; do
	if ! pkg-config --exists "$pc"; then
		echo "dist/mpi/run_tests.sh: pkg-config finds no $pc; install openmpi-bin libopenmpi-dev mpich libmpich-dev" >&2
		exit 1
	fi
done

# OpenMPI refuses to run as root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go vet -tags mpi ./dist/mpi
go vet -tags mpich ./dist/mpi
go test -tags mpi -c -o "$tmp/openmpi.test" ./dist/mpi
go test -tags mpich -c -o "$tmp/mpich.test" ./dist/mpi

run() {
	echo "dist/mpi: $*"
	timeout -k 10 120 "$@"
}
run "$tmp/openmpi.test"
run mpirun.openmpi -np 2 --bind-to none "$tmp/openmpi.test"
run mpirun.openmpi -np 4 --oversubscribe "$tmp/openmpi.test"
run "$tmp/mpich.test"
run mpiexec.mpich -np 2 "$tmp/mpich.test"
run mpiexec.mpich -np 4 "$tmp/mpich.test"
