#!/bin/bash
# python.sh: benchmarks of the CPython walk (issue 12): BPF cost per sample with 30 Python
# frames against the same process with --python=off, side by side and interleaved; then
# the user-space resolution of a program with 10,000 code objects (prowl's CPU time and
# its code-object cache) against --python=off; then the throughput of a Python workload
# (one process per CPU) with no profiler, under `prowl record -a -F 99` and under the
# same with --python=off, interleaved in rounds; and the BPF cost at 30 Python frames on
# every CPython the suite runs (PY_BENCH_ONLY=versions: that part alone). Writes
# build/bench/python.md.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${PROWL_BUILD:-build}
PY=/usr/bin/python3.11
[ "$(id -u)" = 0 ] || { echo "python.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
[ -x "$B/prowl" ] || { echo "python.sh: error: $B/prowl is missing: run make all" >&2; exit 1; }
[ -x "$PY" ] || { echo "python.sh: error: $PY is missing: apt-get install python3.11" >&2; exit 1; }
S=${PY_BENCH_SECONDS:-10}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
W=tests/workloads/python

cost_of() { # $1 = label, $2 = on|off, then the workload's command: BPF cost per sample
	local label=$1 mode=$2 w out
	shift 2
	"$@" >/dev/null 2>&1 &
	w=$!
	sleep 1
	out=$(PROWL_BPF_TIMING=1 "$B/prowl" record -q --python="$mode" -F 999 -p $w -d "${S}s" -o "$TMP/x.pb.gz" 2>&1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	echo "| $label | --python=$mode | $(grep -oE 'p50 <= [0-9.]+ us, p90 <= [0-9.]+ us, p99 <= [0-9.]+ us' <<<"$out" | tail -1) |"
}

cost() { # $1 = on|off: rec() at depth 27 (30 Python frames)
	cost_of "30 Python frames" "$1" "$PY" "$W/pywork.py" recurse $((S + 5)) 27
}

# Every CPython the suite runs (tests/e2e/test_python_versions.py): label, then command.
versions() {
	local v py d
	for v in 3.6 3.7 3.8 3.9 3.10 3.11 3.12 3.13; do
		py=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/$v.*/bin/python$v 2>/dev/null | tail -1)
		[ -n "$py" ] && echo "$v (pyenv)|$py"
	done
	echo "3.11 (Debian 12)|$PY"
	d=$B/pydebs/forky-3.14
	[ -e "$d/.complete" ] && echo "3.14 (Debian testing)|env PYTHONHOME=$d/usr $d/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $d/usr/lib/x86_64-linux-gnu $d/usr/bin/python3.14"
	return 0
}

cost_version() { # $1 = label, $2 = command, $3 = on|off: pyversions.py rec30 (30 Python frames)
	# shellcheck disable=SC2086 # $2 is a command line
	cost_of "$1" "$3" $2 "$W/pyversions.py" rec30 $((S + 5))
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

throughput() { # $1 = base|on|off: calls per second of all CPUs' Python workers
	local prof= pids=() n total=0
	if [ "$1" != base ]; then
		"$B/prowl" record -a -q -F 99 --python="$1" -o "$TMP/a.pb.gz" >/dev/null 2>&1 &
		prof=$!
		sleep 2
	fi
	for _ in $(seq "$(nproc)"); do
		"$PY" "$W/pywork.py" count "$S" >"$TMP/count.$_" &
		pids+=($!)
	done
	wait "${pids[@]}"
	[ -n "$prof" ] && { kill -INT $prof; wait $prof || true; }
	for n in "$TMP"/count.*; do total=$((total + $(cat "$n"))); done
	rm -f "$TMP"/count.*
	echo $((total / ${S%.*}))
}

by_version() {
	echo "### BPF cost per sample by CPython version (30 Python frames, $S s at 999 Hz each)"
	echo
	echo "| CPython | mode | cost |"
	echo "|---|---|---|"
	versions | while IFS='|' read -r label cmd; do cost_version "$label" "$cmd" on; cost_version "$label" "$cmd" off; done
}

mkdir -p "$B/bench"
if [ "${PY_BENCH_ONLY:-}" = versions ]; then
	by_version | tee "$B/bench/python-versions.md"
	exit 0
fi
out=$B/bench/python.md
{
	echo "### BPF cost per sample ($S s at 999 Hz each, interleaved)"
	echo
	echo "| stack | mode | cost |"
	echo "|---|---|---|"
	for round in 1 2; do cost on; cost off; done
	echo
	by_version
	echo
	echo "### Resolution ($S s at 999 Hz each)"
	echo
	echo "| program | mode | prowl CPU | peak RSS | code-object cache |"
	echo "|---|---|---|---|---|"
	resolve on
	resolve off
	echo
	echo "### Whole-host overhead at 99 Hz ($(nproc) Python workers, $S s per run, 3 rounds, order rotating)"
	echo
	declare -A sum=([base]=0 [on]=0 [off]=0)
	for round in 1 2 3; do
		case $round in 1) order="base on off" ;; 2) order="on off base" ;; *) order="off base on" ;; esac
		for m in $order; do
			v=$(throughput "$m")
			sum[$m]=$((sum[$m] + v))
			echo "round $round, $m: $v calls/s" >&2
		done
	done
	echo "| mode | calls/s (mean of 3) | against no profiler |"
	echo "|---|---|---|"
	for m in base on off; do
		echo "| $([ $m = base ] && echo 'no profiler' || echo "prowl record -a -F 99 --python=$m") | $((sum[$m] / 3)) | $(awk -v a="${sum[$m]}" -v b="${sum[base]}" 'BEGIN{printf "%.4f", a/b}') |"
	done
} | tee "$out"
