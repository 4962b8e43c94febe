#!/bin/bash
# python.sh: benchmarks of the CPython walk (issue 12): BPF cost per sample with 30 Python
# frames against the same process with --python=off, side by side and interleaved; then
# the user-space resolution of a program with 10,000 code objects (prowl's CPU time and
# its code-object cache) against --python=off. Writes build/bench/python.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${PROWL_BUILD:-build}
PY=/usr/bin/python3.11
[ "$(id -u)" = 0 ] || { echo "python.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
[ -x "$B/prowl" ] || { echo "python.sh: error: $B/prowl is missing: run make all" >&2; exit 1; }
[ -x "$PY" ] || { echo "python.sh: error: $PY is missing: apt-get install python3.11" >&2; exit 1; }
S=${PY_BENCH_SECONDS:-10}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
W=tests/workloads/python

cost() { # $1 = on|off: BPF cost per sample of rec() at depth 27 (30 Python frames)
	"$PY" "$W/pywork.py" recurse $((S + 5)) 27 >/dev/null 2>&1 &
	local w=$! out
	sleep 1
	out=$(PROWL_BPF_TIMING=1 "$B/prowl" record -q --python="$1" -F 999 -p $w -d "${S}s" -o "$TMP/x.pb.gz" 2>&1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	echo "| 30 Python frames | --python=$1 | $(grep -oE 'p50 <= [0-9.]+ us, p90 <= [0-9.]+ us, p99 <= [0-9.]+ us' <<<"$out" | tail -1) |"
}

resolve() { # $1 = on|off: prowl's CPU time over 10,000 code objects at 999 Hz
	"$PY" "$W/pymany.py" $((S + 8)) 10000 >/dev/null 2>&1 &
	local w=$! out
	sleep 3 # the 10,000 functions are compiled first
	out=$( { /usr/bin/time -f 'TIME %U %S %M' "$B/prowl" record -v --python="$1" -F 999 -p $w -d "${S}s" \
		-o "$TMP/m.pb.gz" >/dev/null; } 2>&1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	read -r _ u s m <<<"$(grep '^TIME' <<<"$out")"
	echo "| 10,000 code objects | --python=$1 | $(awk -v u="$u" -v s="$s" 'BEGIN{printf "%.2f", u+s}') s | $((m / 1024)) MiB | $(grep -oE 'python: [0-9]+ code objects cached.*' <<<"$out" | sed 's/^python: //' || echo -) |"
}

out=$B/bench/python.md
mkdir -p "$(dirname "$out")"
{
	echo "### BPF cost per sample ($S s at 999 Hz each, interleaved)"
	echo
	echo "| stack | mode | cost |"
	echo "|---|---|---|"
	for round in 1 2; do cost on; cost off; done
	echo
	echo "### Resolution ($S s at 999 Hz each)"
	echo
	echo "| program | mode | prowl CPU | peak RSS | code-object cache |"
	echo "|---|---|---|---|---|"
	resolve on
	resolve off
} | tee "$out"
