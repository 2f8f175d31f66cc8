#!/bin/sh
# bench/compare_pytorch.sh times the training step of bench/mlp784.kir (MLP
# 784-512-512-10, ReLU, cross-entropy, batch 128, f32, SGD) in PyTorch
# (bench/pytorch_mlp.py) and in kiln (kiln bench -optimizer sgd) on 1 and 2
# cores in one run, and prints a Markdown table of the median step times
# and PyTorch's over kiln's (above 1: kiln is faster).
#
# PyTorch has two thread counts: its own (torch.set_num_threads, OpenMP)
# and the BLAS's (a pthreads OpenBLAS fixes its count when it is loaded,
# from OPENBLAS_NUM_THREADS; unset, it uses every CPU). On n cores the
# script runs every split that uses at most n of them (1 core: 1 and 1;
# 2 cores: 1+2, 2+1 and 2+2), one process each, and compares kiln with
# PyTorch's fastest; the table names that split.
#
# Usage: bench/compare_pytorch.sh          (from anywhere in the repository)
#        STEPS=50 WARMUP=10 PYTHON=python3 bench/compare_pytorch.sh
set -eu
cd "$(dirname "$0")/.."
steps=${STEPS:-50}
warmup=${WARMUP:-10}
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/kiln" ./cmd/kiln

torch() { # torch THREADS BLAS_THREADS: one line of pytorch_mlp.py
	if ! "$python" bench/pytorch_mlp.py --steps "$steps" --warmup "$warmup" --threads "$1" --blas-threads "$2"; then
		echo "compare_pytorch.sh: bench/pytorch_mlp.py failed with $python; is PyTorch installed (apt-get install python3-torch)?" >&2
		exit 1
	fi
}

torchver=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "Measured by \`bench/compare_pytorch.sh\` (STEPS=$steps, WARMUP=$warmup) on $(date -u +%Y-%m-%d),"
echo "${cpu:-$(uname -m)}, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, $(go env GOVERSION), PyTorch $torchver ($python)."
echo
echo "| cores | PyTorch median (ms) | PyTorch threads + BLAS threads | kiln median (ms) | PyTorch / kiln | kiln GFLOP/s | kiln of peak |"
echo "|---|---|---|---|---|---|---|"
for n in 1 2; do
	: >"$tmp/torch$n"
	if [ "$n" = 1 ]; then
		torch 1 1 >>"$tmp/torch$n"
	else
		torch 1 2 >>"$tmp/torch$n"
		torch 2 1 >>"$tmp/torch$n"
		torch 2 2 >>"$tmp/torch$n"
	fi
	"$tmp/kiln" bench -optimizer sgd -workers "$n" -steps "$steps" -warmup "$warmup" bench/mlp784.kir >"$tmp/kiln$n"
	k=$(awk '$1 == "median" { print $2 }' "$tmp/kiln$n")
	rate=$(awk '$1 == "GFLOP/s" { print $2 }' "$tmp/kiln$n")
	frac=$(awk '$1 == "of" && $2 == "peak" { print $3 }' "$tmp/kiln$n")
	best=$(awk '$1 == "threads" && (b == "" || $6 + 0 < b + 0) { b = $6; s = $2 " + " $4 } END { print b, s }' "$tmp/torch$n")
	p=${best%% *}
	split=${best#* }
	ratio=$(awk -v p="$p" -v k="$k" 'BEGIN { printf "%.2f", p / k }')
	echo "| $n | $p | $split | $k | ${ratio}× | $rate | $frac |"
done
