#!/bin/sh
# bench/compare_pytorch.sh times the training step of a benchmark model in
# PyTorch (bench/pytorch_step.py, the same model) and in kiln (kiln bench)
# on 1 and 2 cores in one run, and prints a Markdown table of the median
# step times and PyTorch's over kiln's (above 1: kiln is faster). MODEL:
#   mlp784   bench/mlp784.kir: MLP 784-512-512-10, ReLU, cross-entropy,
#            batch 128, f32, SGD (the default)
#   cnn28    bench/cnn28.kir: two conv2d + max_pool2d blocks on 64 images
#            of 1×28×28, SGD
#   softmax  bench/softmax_step.kir: sum(softmax(x*w) * t) on [4096,1024],
#            SGD
#   gpt      bench/gpt.kir: a GPT-style transformer (4 blocks, width 256,
#            8 heads, MLP 1024, 16 sequences of 128 tokens, vocabulary
#            256), Adam; the attention mask PyTorch gets is the one
#            gpt.kir's "# pytorch_step.py flags:" line names
#
# PyTorch has two thread counts: its own (torch.set_num_threads, OpenMP)
# and the BLAS's (a pthreads OpenBLAS fixes its count when it is loaded,
# from OPENBLAS_NUM_THREADS; unset, it uses every CPU). On n cores the
# script runs every split that uses at most n of them (1 core: 1+1;
# 2 cores: 1+2, 2+1 and 2+2), one process each, and compares kiln with
# PyTorch's fastest split; the table names it, and gives 2+2 (what
# torch.set_num_threads(2) with the BLAS's default gets) as well.
#
# The host's load moves both sides' times from one process to the next,
# so the script runs ROUNDS rounds of every configuration, alternating
# PyTorch's and kiln's, and reports for each the median over the rounds of
# its per-process median step time.
#
# Usage: bench/compare_pytorch.sh          (from anywhere in the repository)
#        MODEL=cnn28 STEPS=20 WARMUP=5 ROUNDS=3 PYTHON=python3 bench/compare_pytorch.sh
#        MODEL=gpt STEPS=5 WARMUP=2 ROUNDS=1 bench/compare_pytorch.sh
set -eu
cd "$(dirname "$0")/.."
model=${MODEL:-mlp784}
steps=${STEPS:-50}
warmup=${WARMUP:-10}
rounds=${ROUNDS:-3}
python=${PYTHON:-/usr/bin/python3}
case "$model" in
mlp784 | cnn28) file=bench/$model.kir optimizer=sgd ;;
softmax) file=bench/softmax_step.kir optimizer=sgd ;;
gpt) file=bench/gpt.kir optimizer=adam ;;
*)
	echo "compare_pytorch.sh: MODEL=$model: want mlp784, cnn28, softmax or gpt" >&2
	exit 2
	;;
esac
# Flags the model file names for pytorch_step.py (gpt.kir: the mask).
# shellcheck disable=SC2046 # the flags are words on purpose
set -- $(sed -n 's/^# pytorch_step.py flags: *//p' "$file" | head -n 1)
pyflags="$*"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/kiln" ./cmd/kiln

# torch THREADS BLAS_THREADS: appends PyTorch's median to $tmp/torch.T+B.
torch() {
	# shellcheck disable=SC2086 # the flags are words on purpose
	if ! "$python" bench/pytorch_step.py --model "$model" --steps "$steps" --warmup "$warmup" --threads "$1" --blas-threads "$2" $pyflags >"$tmp/line"; then
		echo "compare_pytorch.sh: bench/pytorch_step.py failed with $python; is PyTorch installed (apt-get install python3-torch)?" >&2
		exit 1
	fi
	awk '$1 == "threads" { print $6 }' "$tmp/line" >>"$tmp/torch.$1+$2"
	awk '$1 == "threads" { print $12 }' "$tmp/line" >"$tmp/blas"
}

# kiln WORKERS: appends kiln's median, GFLOP/s and share of peak to $tmp/kiln.W.
kiln() {
	"$tmp/kiln" bench -optimizer "$optimizer" -workers "$1" -steps "$steps" -warmup "$warmup" "$file" >"$tmp/out"
	awk '$1 == "median" { m = $2 } $1 == "GFLOP/s" { g = $2 } $1 == "of" && $2 == "peak" { p = $3 } END { print m, g, p }' "$tmp/out" >>"$tmp/kiln.$1"
}

# median FILE: the line of FILE whose first field is the median (the lower
# middle one for an even count).
median() {
	sort -n "$1" | awk '{ l[NR] = $0 } END { print l[int((NR + 1) / 2)] }'
}

for _ in $(seq "$rounds"); do
	torch 1 1
	kiln 1
	torch 1 2
	torch 2 1
	torch 2 2
	kiln 2
done

torchver=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null || echo unknown)
cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
echo "Measured by \`bench/compare_pytorch.sh\` (MODEL=$model, STEPS=$steps, WARMUP=$warmup, ROUNDS=$rounds) on $(date -u +%Y-%m-%d),"
echo "${cpu:-$(uname -m)}, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?') at the end,"
echo "$(go env GOVERSION), PyTorch $torchver ($python${pyflags:+ $pyflags}) on $(cat "$tmp/blas"); kiln -optimizer $optimizer, PyTorch the same optimizer."
echo "Medians over the rounds; each round's figures in parentheses."
echo
echo "| cores | PyTorch (ms) | PyTorch threads + BLAS threads | kiln (ms) | PyTorch / kiln | kiln GFLOP/s | kiln of peak |"
echo "|---|---|---|---|---|---|---|"
for n in 1 2; do
	best="" split=""
	for f in "$tmp"/torch.*; do
		case "$f" in
		*torch.1+1) [ "$n" = 1 ] || continue ;;
		*) [ "$n" = 2 ] || continue ;;
		esac
		m=$(median "$f")
		if [ -z "$best" ] || awk -v a="$m" -v b="$best" 'BEGIN { exit !(a < b) }'; then
			best=$m split=${f##*torch.}
		fi
	done
	set -- $(median "$tmp/kiln.$n")
	k=$1 rate=$2 frac=$3
	all() { awk '{ printf "%s%s", sep, $1; sep = ", " }' "$1"; }
	ratio=$(awk -v p="$best" -v k="$k" 'BEGIN { printf "%.2f", p / k }')
	echo "| $n | $best ($(all "$tmp/torch.$split")) | $(echo "$split" | sed 's/+/ + /') | $k ($(all "$tmp/kiln.$n")) | ${ratio}× | $rate | $frac |"
	if [ "$n" = 2 ] && [ "$split" != "2+2" ]; then
		m=$(median "$tmp/torch.2+2")
		ratio=$(awk -v p="$m" -v k="$k" 'BEGIN { printf "%.2f", p / k }')
		echo "| 2 | $m ($(all "$tmp/torch.2+2")) | 2 + 2 | $k | ${ratio}× | | |"
	fi
done
