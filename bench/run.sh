#!/bin/sh
# bench/run.sh runs kiln bench on every bench/*.kir and on the digits MLP
# (examples/digits/mlp.kir with -optimizer adam), each with the default
# passes and with -O0, and prints a Markdown table for docs/PERFORMANCE.md:
# the median step times, their ratio (how many times faster the default
# is) and the estimated memory traffic per step both ways.
#
# Usage: bench/run.sh              (from anywhere in the repository)
#        STEPS=50 WARMUP=5 bench/run.sh
#
# A .kir file may carry a line "# kiln bench flags: -optimizer sgd -batch 64"
# with extra flags for its runs.
set -eu
cd "$(dirname "$0")/.."
steps=${STEPS:-20}
warmup=${WARMUP:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/kiln" ./cmd/kiln

# The header names the machine: /proc/cpuinfo's model name, family and
# model (the same name has covered different generations here), the widest
# vector extension (the kernels pick theirs at run time) and the cores.
info() { sed -n "s/^$1[[:space:]]*: *//p" /proc/cpuinfo 2>/dev/null | head -n 1; }
cpu=$(info 'model name')
[ -n "$cpu" ] && cpu="$cpu (family $(info 'cpu family') model $(info model))"
flags=" $(info flags) "
case $flags in
*" avx512f "*) simd=AVX-512 ;;
*" avx2 "*) simd=AVX2 ;;
*) simd="no AVX2" ;;
esac
echo "Measured by \`bench/run.sh\` (STEPS=$steps, WARMUP=$warmup) on $(date -u +%Y-%m-%d),"
echo "${cpu:-$(uname -m)}, $simd, $(getconf _NPROCESSORS_ONLN 2>/dev/null || echo '?') cores, $(go env GOVERSION)."
echo
echo "| model | flags | default median (ms) | -O0 median (ms) | speedup | traffic default (MB/step) | traffic -O0 (MB/step) |"
echo "|---|---|---|---|---|---|---|"

# field KEY reads the first word after KEY in kiln bench's report on stdin.
field() { awk -v k="$1" '$1 == k { print $2; exit }'; }

# bench NAME FILE [FLAGS...] prints one row of the table.
bench() {
	name=$1 file=$2
	shift 2
	if ! "$tmp/kiln" bench -steps "$steps" -warmup "$warmup" "$@" "$file" >"$tmp/def" 2>"$tmp/err" ||
		! "$tmp/kiln" bench -O0 -steps "$steps" -warmup "$warmup" "$@" "$file" >"$tmp/o0" 2>>"$tmp/err"; then
		echo "| $name | $* | failed: $(head -n 1 "$tmp/err") | | | | |"
		return
	fi
	d=$(field median <"$tmp/def") o=$(field median <"$tmp/o0")
	td=$(field traffic <"$tmp/def") to=$(field traffic <"$tmp/o0")
	ratio=$(awk -v d="$d" -v o="$o" 'BEGIN { if (d > 0) printf "%.2f×", o / d; else print "?" }')
	echo "| $name | $* | $d | $o | $ratio | $td | $to |"
}

for f in bench/*.kir; do
	[ -e "$f" ] || continue
	# shellcheck disable=SC2046 # the flags are words on purpose
	bench "$(basename "$f" .kir)" "$f" $(sed -n 's/^# kiln bench flags: *//p' "$f" | head -n 1)
done
bench digits_mlp examples/digits/mlp.kir -optimizer adam
