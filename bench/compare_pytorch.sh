#!/bin/sh
# bench/compare_pytorch.sh times the training step of bench/mlp784.kir (MLP
# 784-512-512-10, ReLU, cross-entropy, batch 128, f32, SGD) in PyTorch
# (bench/pytorch_mlp.py, 1 and 2 threads) and in kiln (kiln bench
# -optimizer sgd, -workers 1 and 2) in one run, and prints a Markdown table
# of the median step times and PyTorch's over kiln's (above 1: kiln is
# faster).
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

if ! "$python" bench/pytorch_mlp.py --steps "$steps" --warmup "$warmup" --threads 1,2 >"$tmp/torch"; then
	echo "compare_pytorch.sh: bench/pytorch_mlp.py failed with $python; is PyTorch installed (apt-get install python3-torch)?" >&2
	exit 1
fi
torchver=$("$python" -c 'import torch; print(torch.__version__)')
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "Measured by \`bench/compare_pytorch.sh\` (STEPS=$steps, WARMUP=$warmup) on $(date -u +%Y-%m-%d),"
echo "${cpu:-$(uname -m)}, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, $(go env GOVERSION), PyTorch $torchver ($python)."
echo
echo "| cores | PyTorch median (ms) | kiln median (ms) | PyTorch / kiln | kiln GFLOP/s | kiln of peak |"
echo "|---|---|---|---|---|---|"
for n in 1 2; do
	"$tmp/kiln" bench -optimizer sgd -workers "$n" -steps "$steps" -warmup "$warmup" bench/mlp784.kir >"$tmp/kiln$n"
	k=$(awk '$1 == "median" { print $2 }' "$tmp/kiln$n")
	rate=$(awk '$1 == "GFLOP/s" { print $2 }' "$tmp/kiln$n")
	frac=$(awk '$1 == "of" && $2 == "peak" { print $3 }' "$tmp/kiln$n")
	p=$(awk -v n="$n" '$1 == "threads" && $2 == n { print $4 }' "$tmp/torch")
	ratio=$(awk -v p="$p" -v k="$k" 'BEGIN { printf "%.2f", p / k }')
	echo "| $n | $p | $k | ${ratio}× | $rate | $frac |"
done
