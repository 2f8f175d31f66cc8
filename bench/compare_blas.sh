#!/bin/sh
# bench/compare_blas.sh times f32 and f64 n×n×n matmuls (n = 256, 512,
# 1024) on 1 and 2 threads in the system BLAS (through NumPy: OpenBLAS when
# Debian's libopenblas0 is installed; the best of 7 calls) and in kiln's
# matmul kernel split across as many workers of the executor's pool
# (BenchmarkMatmulKernel in exec/cpu; the best of 7 runs of 20 calls), in
# one run, and prints a Markdown table with kiln's share of the BLAS's
# GFLOP/s.
#
# Usage: bench/compare_blas.sh          (from anywhere in the repository)
#        PYTHON=python3 bench/compare_blas.sh
set -eu
cd "$(dirname "$0")/.."
python=${PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in 1 2; do
	if ! OPENBLAS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$python" bench/blas_matmul.py "$t" >>"$tmp/blas"; then
		echo "compare_blas.sh: bench/blas_matmul.py failed with $python; is NumPy installed (apt-get install python3-numpy libopenblas0)?" >&2
		exit 1
	fi
done
go test ./exec/cpu -run '^$' -bench 'MatmulKernel' -benchtime 20x -count 7 >"$tmp/kiln"
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || echo unknown)
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "Measured by \`bench/compare_blas.sh\` on $(date -u +%Y-%m-%d), ${cpu:-$(uname -m)},"
echo "$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, $(go env GOVERSION); BLAS: $blas."
echo
echo "| dtype | n | threads | BLAS GFLOP/s | kiln GFLOP/s | kiln / BLAS |"
echo "|---|---|---|---|---|---|"
while read -r dt n t g; do
	short=$(echo "$dt" | sed 's/float/f/')
	k=$(awk -v p="BenchmarkMatmulKernel/n=$n/$short/workers=$t" 'index($1, p) == 1 { for (i = 1; i < NF; i++) if ($(i+1) == "GFLOP/s" && $i + 0 > best) best = $i + 0 } END { print best }' "$tmp/kiln")
	r=$(awk -v k="$k" -v g="$g" 'BEGIN { printf "%.0f%%", 100 * k / g }')
	echo "| $short | $n | $t | $g | $k | $r |"
done <"$tmp/blas"
