#!/bin/sh
# bench/dist.sh measures data-parallel training on this machine: the
# samples per second of the MLP-784 step (bench/mlp784.kir, SGD) trained by
# one process on 2 workers against 2 ranks of 1 worker each under mpirun
# (-dist mpi), alternating the two ROUNDS times; and the optimizer state
# per rank of the GPT step (bench/gpt.kir, Adam) on 4 ranks with and
# without -dist-shard. Needs OpenMPI (openmpi-bin libopenmpi-dev) and
# python3 with numpy (to write the random data; PYTHON, default
# /usr/bin/python3).
#
# Usage: bench/dist.sh          (from anywhere in the repository)
#        ROUNDS=5 EPOCHS=4 bench/dist.sh
set -eu
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
epochs=${EPOCHS:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
go build -tags mpi -o "$tmp/kiln" ./cmd/kiln

# 128 batches of 128 rows of 784 features; 1% held out.
"${PYTHON:-/usr/bin/python3}" - "$tmp/data.npz" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(1)
np.savez(sys.argv[1], x=rng.standard_normal((128 * 129, 784), dtype=np.float32), y=rng.integers(0, 10, 128 * 129))
PY

# rate CMD...: the samples per second of the last epoch of a run: its
# training rows over its time (which includes the held-out evaluation).
rate() {
	"$@" -data "$tmp/data.npz" -holdout 0.008 -optimizer sgd -lr 0.01 -epochs "$epochs" bench/mlp784.kir 2>/dev/null |
		awk '/^model/ { rows = $(NF-5) } /epoch +[0-9]+\/[0-9]+ +loss/ { t = $NF; gsub(/[()]/, "", t); ms = t; if (t ~ /ms$/) { sub(/ms$/, "", ms) } else { sub(/s$/, "", ms); ms *= 1000 } }
			END { printf "%.0f", rows / (ms / 1000) }'
}
echo "| round | 1 rank x 2 workers | 2 ranks x 1 worker |"
echo "|---|---|---|"
for r in $(seq "$rounds"); do
	a=$(rate "$tmp/kiln" train -workers 2)
	b=$(rate mpirun -np 2 --bind-to none "$tmp/kiln" train -dist mpi -workers 1)
	echo "| $r | $a samples/s | $b samples/s |"
done

echo
echo "optimizer state a rank, bench/gpt.kir with Adam on 4 ranks:"
for shard in "" -dist-shard; do
	printf '  %-12s ' "${shard:-unsharded}"
	"$tmp/kiln" plan -report -optimizer adam -ranks 4 $shard bench/gpt.kir | grep '^params'
done
