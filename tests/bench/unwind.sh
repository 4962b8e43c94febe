#!/bin/bash
# unwind.sh: benchmarks of the DWARF unwinder: BPF cost per sample (p50/p90/p99)
# for --unwind=fp and --unwind=dwarf on ~30-frame stacks, and unwind-table build time and size.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${PROWL_BUILD:-build}
[ "$(id -u)" = 0 ] || { echo "unwind.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
for f in "$B/prowl" "$B/workloads/unw_recurse" "$B/tests/test_unwind_table"; do
	[ -x "$f" ] || { echo "unwind.sh: error: $f is missing: run make all unit workloads" >&2; exit 1; }
done
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
S=${UNWIND_BENCH_SECONDS:-10}
gcc -O2 -g -fno-omit-frame-pointer -o "$TMP/recurse_fp" tests/workloads/unw_recurse.c

cost() { # $1 = label, $2 = workload binary, $3 = unwind mode
	"$2" 25 $((S + 5)) >/dev/null 2>&1 &
	local w=$! line
	sleep 0.5
	line=$(PROWL_BPF_TIMING=1 "$B/prowl" record -q --unwind="$3" -F 999 -p $w -d "${S}s" -o "$TMP/x.pb.gz" 2>&1 |
		grep -E 'p50' | tail -1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	echo "| $1 | --unwind=$3 | ${line:-no timing line} |"
}

out=$B/bench/unwind.md
mkdir -p "$B/bench"
{
	echo "### BPF cost per sample (PROWL_BPF_TIMING=1, -F 999, ${S} s, unw_recurse: ~30-frame stacks)"
	echo
	echo "| workload | mode | prowl's timing line |"
	echo "|---|---|---|"
	cost "-O2 -fno-omit-frame-pointer build" "$TMP/recurse_fp" fp
	cost "-O2 -fno-omit-frame-pointer build" "$TMP/recurse_fp" dwarf
	cost "-O2 build without frame pointers" "$B/workloads/unw_recurse" dwarf
	echo
	echo "### Unwind table build (build/tests/test_unwind_table FILE...)"
	echo
	# The largest object with call frame information (Go binaries have none).
	big=$(find /usr/lib /usr/bin /usr/sbin -type f -size +20M \( -name '*.so*' -o -perm -u+x \) 2>/dev/null |
		xargs -r ls -S 2>/dev/null | while read -r f; do
			readelf -S "$f" 2>/dev/null | grep -q '\.eh_frame ' && { echo "$f"; break; }
		done)
	echo '```'
	"$B/tests/test_unwind_table" /lib/x86_64-linux-gnu/libc.so.6 ${big:+"$big"} 2>&1 | tail -5 || true
	echo '```'
} | tee "$out"
