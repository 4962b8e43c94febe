#!/bin/bash
# unwind.sh: benchmarks of the DWARF unwinder: BPF cost per sample (p50/p90/p99, and the
# kernel's run_time_ns / run_cnt) for --unwind=fp and both DWARF builds (bpf_loop, bounded)
# on ~30-frame and 127-frame stacks, and unwind-table build time and size.
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

cost() { # $1 = label, $2 = workload binary, $3 = unwind mode, $4 = DWARF build (loop, bounded), $5 = depth
	"$2" "${5:-25}" $((S + 5)) >/dev/null 2>&1 &
	local w=$! out p50 kern
	sleep 0.5
	out=$(PROWL_BPF_TIMING=1 PROWL_BPF_UNWINDER=${4:-} "$B/prowl" record -q --unwind="$3" -F 999 -p $w -d "${S}s" \
		-o "$TMP/x.pb.gz" 2>&1)
	p50=$(grep -oE 'p50 <= [0-9.]+ us, p90 <= [0-9.]+ us, p99 <= [0-9.]+ us' <<<"$out" | tail -1)
	kern=$(grep -oE '[0-9]+ runs, [0-9]+ of them samples, [0-9]+ ns per run' <<<"$out" | tail -1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	echo "| $1 | --unwind=$3${4:+ ($4)} | ${p50:-no timing line} | ${kern:-no kernel figure} |"
}

out=$B/bench/unwind.md
mkdir -p "$B/bench"
{
	echo "### BPF cost per sample (PROWL_BPF_TIMING=1, -F 999, ${S} s, unw_recurse: ~30 or 127 frames)"
	echo
	echo "p50/p90/p99: samples of the workload, timed in BPF (100 ns buckets). Kernel: run_time_ns / run_cnt"
	echo "of the sampling program over all its runs (-p: runs of other processes return early)."
	echo
	echo "| workload | mode | p50 / p90 / p99 | kernel's figure |"
	echo "|---|---|---|---|"
	cost "-O2 -fno-omit-frame-pointer build, ~30 frames" "$TMP/recurse_fp" fp
	cost "-O2 -fno-omit-frame-pointer build, ~30 frames" "$TMP/recurse_fp" dwarf loop
	cost "-O2 build without frame pointers, ~30 frames" "$B/workloads/unw_recurse" dwarf loop
	cost "-O2 build without frame pointers, ~30 frames" "$B/workloads/unw_recurse" dwarf bounded
	cost "-O2 build without frame pointers, 127 frames (depth limit)" "$B/workloads/unw_recurse" dwarf loop 200
	cost "-O2 build without frame pointers, 127 frames (depth limit)" "$B/workloads/unw_recurse" dwarf bounded 200
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
