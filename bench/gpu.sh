#!/bin/sh
# bench/gpu.sh records kiln's figures on a GPU: the GPT step
# (bench/gpt.kir, Adam), the MLP-784 step (bench/mlp784.kir, Adam) and an
# N×N×N f32 matmul (N=4096), on the device (kiln bench -device gpu) and,
# for the two steps, on the host's CPU cores beside it; it prints a
# Markdown table with each figure's share of the card's f32 peak (the
# target for the matmul: at least 30%). Run it by hand on a machine with a
# hardware GPU and record the table with the card's name; CI never runs it.
#
# The f32 peak (without tensor cores) comes from PEAK_TFLOPS, or else from
# a table of known cards by the adapter's name below; for a card it does
# not know, set PEAK_TFLOPS from the vendor's data sheet. A software
# adapter (Mesa's llvmpipe/lavapipe) has no peak: the table says so.
#
# On NVIDIA, the driver's Vulkan ICD file names libGLX_nvidia.so.0, which
# creates no instance without a display; unless VK_ICD_FILENAMES or
# VK_DRIVER_FILES is set, the script writes an ICD file naming
# libEGL_nvidia.so.0 and uses it. The Vulkan loader (libvulkan.so.1,
# Debian's libvulkan1) must be installed.
#
# Environment (defaults in parentheses):
#   KILN         a kiln binary to run (built from this checkout with go)
#   STEPS        timed steps per model (20)     WARMUP   untimed steps (3)
#   MATMUL       N of the matmul (4096)          CPU      0: skip the CPU rows (1)
#   GPT, MLP     the model files (bench/gpt.kir, bench/mlp784.kir)
#   PEAK_TFLOPS  the card's f32 peak in TFLOP/s (from the table)
#   SMALL=1      a check of the script on a slow or software adapter:
#                examples/transformer/reverse.kir and examples/digits/mlp.kir
#                for the models, MATMUL=256, STEPS=2, WARMUP=1
#
# Usage: bench/gpu.sh                  (from anywhere in the repository)
#        KILN=./kiln PEAK_TFLOPS=51.2 bench/gpu.sh
#        SMALL=1 CPU=0 bench/gpu.sh
set -eu
cd "$(dirname "$0")/.."
if [ "${SMALL:-0}" = 1 ]; then
	: "${GPT:=examples/transformer/reverse.kir}" "${MLP:=examples/digits/mlp.kir}"
	: "${MATMUL:=256}" "${STEPS:=2}" "${WARMUP:=1}"
fi
gpt=${GPT:-bench/gpt.kir}
mlp=${MLP:-bench/mlp784.kir}
matmul=${MATMUL:-4096}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
cpu=${CPU:-1}
if [ -n "${PEAK_TFLOPS:-}" ] && ! awk -v p="$PEAK_TFLOPS" 'BEGIN { exit !(p ~ /^[0-9]*\.?[0-9]+$/ && p + 0 > 0) }'; then
	echo "gpu.sh: PEAK_TFLOPS=$PEAK_TFLOPS: want the card's f32 peak in TFLOP/s, a positive number" >&2
	exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
kiln=${KILN:-}
if [ -z "$kiln" ]; then
	go build -o "$tmp/kiln" ./cmd/kiln
	kiln=$tmp/kiln
fi

if command -v ldconfig >/dev/null 2>&1 && ! ldconfig -p | grep -q 'libvulkan\.so\.1'; then
	echo "gpu.sh: no Vulkan loader (libvulkan.so.1) found; install it (Debian: apt-get install libvulkan1)" >&2
	exit 1
fi
if [ -z "${VK_ICD_FILENAMES:-}${VK_DRIVER_FILES:-}" ] && command -v nvidia-smi >/dev/null 2>&1; then
	echo '{"file_format_version":"1.0.1","ICD":{"library_path":"libEGL_nvidia.so.0","api_version":"1.3.0"}}' >"$tmp/nvidia_egl.json"
	VK_ICD_FILENAMES=$tmp/nvidia_egl.json
	export VK_ICD_FILENAMES
fi

# bench NAME OUT ARGS...: runs kiln bench ARGS into $tmp/OUT, or stops
# with kiln's message.
bench() {
	b_name=$1 b_out=$2
	shift 2
	if ! "$kiln" bench "$@" >"$tmp/$b_out" 2>"$tmp/err"; then
		echo "gpu.sh: $b_name: kiln bench $* failed:" >&2
		cat "$tmp/err" >&2
		exit 1
	fi
}

bench "the matmul" matmul -device gpu -matmul "$matmul" -steps 1 -warmup 0 "$mlp"
card=$(sed -n 's/^device *gpu: //p' "$tmp/matmul" | sed 's/ ([^()]*)$//')

peak=${PEAK_TFLOPS:-}
if [ -z "$peak" ]; then
	case "$card" in
	*llvmpipe* | *lavapipe* | *SwiftShader*) peak=software ;;
	*H200*) peak=66.9 ;;
	*H100*PCIe*) peak=51.2 ;;
	*H100*NVL*) peak=60 ;;
	*H100*) peak=66.9 ;; # SXM, e.g. "NVIDIA H100 80GB HBM3"
	*A100*) peak=19.5 ;;
	*L40S*) peak=91.6 ;;
	*L40*) peak=90.5 ;;
	*L4*) peak=30.3 ;;
	*A10G* | *A10*) peak=31.2 ;;
	*"RTX 4090"*) peak=82.6 ;;
	*"RTX 3090"*) peak=35.6 ;;
	*V100*PCIE* | *V100*PCIe*) peak=14 ;;
	*V100*) peak=15.7 ;;
	*T4*) peak=8.1 ;;
	*) peak=unknown ;;
	esac
fi

# of RATE: RATE (GFLOP/s) as a share of the peak.
of() {
	case "$peak" in
	software) echo "(software adapter)" ;;
	unknown) echo "(peak unknown: set PEAK_TFLOPS)" ;;
	*) awk -v r="$1" -v p="$peak" 'BEGIN { printf "%.1f%%", r / (p * 10) }' ;;
	esac
}

# row WHAT WHERE FILE ARGS...: times a model's step and prints its row.
row() {
	what=$1 where=$2
	shift 2
	bench "$what" step "$@"
	med=$(awk '$1 == "median" { print $2 }' "$tmp/step")
	rate=$(awk '$1 == "GFLOP/s" { print $2 }' "$tmp/step")
	if [ "$where" = cpu ]; then
		where="CPU, $(awk '$1 == "workers" { print $2 }' "$tmp/step") workers"
		share=
	else
		where=GPU share=$(of "$rate")
	fi
	echo "| $what | $where | \`kiln bench $*\` | $med | $rate | $share |"
}

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
	commit="$commit (with local changes)"
fi
host=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null | head -n 1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1 || true)
echo "Measured by \`bench/gpu.sh\` (STEPS=$steps, WARMUP=$warmup, MATMUL=$matmul) on $(date -u +%Y-%m-%d):"
echo "$card${driver:+, driver $driver}, f32 peak $(case "$peak" in software | unknown) echo "$peak" ;; *) echo "$peak TFLOP/s" ;; esac);"
echo "host ${host:-$(uname -m)}, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores; kiln $commit, $(go env GOVERSION 2>/dev/null || echo 'go ?')."
echo
echo "| what | where | command | median (ms) | GFLOP/s | of f32 peak |"
echo "|---|---|---|---|---|---|"
for m in "$gpt" "$mlp"; do
	model=$(basename "$m" .kir)
	row "$model step" gpu -device gpu -optimizer adam -steps "$steps" -warmup "$warmup" "$m"
	if [ "$cpu" != 0 ]; then
		row "$model step" cpu -optimizer adam -steps "$steps" -warmup "$warmup" "$m"
	fi
done
rate=$(awk '$1 == "matmul" { print $2 }' "$tmp/matmul")
echo "| f32 matmul ${matmul}³, best of 5 | GPU | \`kiln bench -device gpu -matmul $matmul -steps 1 -warmup 0 $mlp\` | | $rate | $(of "$rate") |"
