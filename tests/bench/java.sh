#!/bin/bash
# java.sh: benchmarks of the HotSpot walk (issue 28): BPF cost per sample with 30 Java
# frames (Split deep) against the same JVM with --java=off, interleaved; the user-space
# naming of a JVM with 20,000 compiled methods (first reads, cache memory; record -v);
# and the throughput of a fixed amount of Java work (one JVM per CPU) with no profiler and
# under `prowl record -a` at its default rate, interleaved in rounds: the ratio per round
# and its spread. Writes build/bench/java.md. JAVA_BENCH_PARTS picks parts (default
# "cost names throughput"); JAVA_BENCH_WORK is each JVM's rounds of Split's work.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
B=${PROWL_BUILD:-build}
JAVA=${JAVA:-/usr/lib/jvm/java-17-openjdk-amd64/bin/java}
JAVAC=${JAVAC:-/usr/lib/jvm/java-17-openjdk-amd64/bin/javac}
[ "$(id -u)" = 0 ] || { echo "java.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
[ -x "$B/prowl" ] || { echo "java.sh: error: $B/prowl is missing: run make all" >&2; exit 1; }
[ -x "$JAVA" ] && [ -x "$JAVAC" ] || { echo "java.sh: error: no JDK at $JAVA: apt-get install openjdk-17-jdk-headless" >&2; exit 1; }
[ -e "$B/workloads/java/Split.class" ] || { echo "java.sh: error: run make workloads" >&2; exit 1; }
S=${JAVA_BENCH_SECONDS:-8}
ROUNDS=${JAVA_BENCH_ROUNDS:-3}
PARTS=${JAVA_BENCH_PARTS:-cost names throughput}
WORK=${JAVA_BENCH_WORK:-2000}
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
OUT=$B/bench/java.md
mkdir -p "$B/bench"

cost() { # $1 = on|off: Split deep (30 Java frames under main), BPF cost per sample at 999 Hz
	"$JAVA" -cp "$B/workloads/java" Split $((S + 6)) deep >/dev/null 2>&1 &
	local w=$!
	sleep 3
	echo "| 30 Java frames | --java=$1 | $(bpf_cost $w --java="$1") |"
}

# 20 classes of 1,000 methods, each a small loop kept out of its caller (dontinline),
# all called in turn: 20,000 compiled methods.
many_source() {
	local c i
	for c in $(seq 0 19); do
		{
			echo "public class M$c {"
			for i in $(seq 0 999); do
				echo "static long f$i(long x) { for (int k = 0; k < 40; k++) x = x * 31 + $i; return x; }"
			done
			echo "static long all(long x) {"
			for i in $(seq 0 999); do echo "x = f$i(x);"; done
			echo "return x; } }"
		} >"$TMP/M$c.java"
	done
	{
		echo "public class Many { static volatile long sink; public static void main(String[] a) {"
		echo "long end = System.nanoTime() + (long)(Double.parseDouble(a[0]) * 1e9); long x = 1;"
		echo "while (System.nanoTime() < end) {"
		for c in $(seq 0 19); do echo "x = M$c.all(x);"; done
		echo "} sink = x; } }"
	} >"$TMP/Many.java"
	"$JAVAC" -d "$TMP" "$TMP"/*.java
}

names() { # prowl's CPU time and the Java name cache over 20,000 compiled methods, 999 Hz
	"$JAVA" -XX:CompileCommand=quiet '-XX:CompileCommand=dontinline,M*::f*' -cp "$TMP" Many $((S + 30)) \
		>/dev/null 2>&1 &
	local w=$! out
	sleep 20 # the 20,000 methods are compiled first
	out=$( { /usr/bin/time -f 'TIME %U %S %M' "$B/prowl" record -v -F 999 -p $w -d "${S}s" -o "$TMP/m.pb.gz"; } 2>&1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	local t
	t=$(grep -oE '^TIME .*' <<<"$out")
	echo "| 20,000 compiled methods | $(awk '{printf "%.2f s | %d MiB", $2 + $3, $4 / 1024}' <<<"$t") | $(grep -oE 'java: [0-9]+ names cached.*' <<<"$out" | tail -1) |"
}

# One `Split WORK fixed` JVM per CPU (the same work every run); with prowl, a whole-host
# `prowl record -a` at its default rate runs from before the JVMs start until they end.
# Prints the JVMs' wall and CPU milliseconds for the work, summed, and prowl's CPU ms
# while they ran (its start and its writing of the profile are outside).
throughput() { # $1 = none|prowl
	local pids=() wall=0 cpu=0 p i rec= pcpu=0 t0=0 w c
	if [ "$1" = prowl ]; then
		"$B/prowl" record -q -a -d 1h -o "$TMP/t.pb.gz" >/dev/null 2>"$TMP/rec.err" &
		rec=$!
		sleep 3
		t0=$(ticks "$rec")
	fi
	for i in $(seq "$(nproc)"); do
		"$JAVA" -cp "$B/workloads/java" Split "$WORK" fixed >"$TMP/fixed.$i" 2>/dev/null &
		pids+=($!)
	done
	for p in "${pids[@]}"; do wait "$p"; done
	if [ -n "$rec" ]; then
		pcpu=$((($(ticks "$rec") - t0) * 1000 / $(getconf CLK_TCK)))
		kill -INT "$rec"
		wait "$rec" || { echo "java.sh: error: prowl record failed: $(cat "$TMP/rec.err")" >&2; exit 1; }
		[ -s "$TMP/t.pb.gz" ] || { echo "java.sh: error: prowl record wrote no profile" >&2; exit 1; }
	fi
	for i in $(seq "$(nproc)"); do
		read -r w c <"$TMP/fixed.$i"
		wall=$((wall + w)) cpu=$((cpu + c))
	done
	echo "$wall $cpu $pcpu"
}

# A process's CPU time (user + system) in clock ticks.
ticks() {
	awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"
}

# Median, smallest and largest of the numbers on stdin, one a line.
spread() {
	sort -g | awk '{ v[NR] = $1 } END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
		printf "%.4f (%.4f to %.4f)", m, v[1], v[NR] }'
}

{
	if [[ " $PARTS " == *" cost "* ]]; then
		echo "BPF cost per sample (PROWL_BPF_TIMING=1), Split deep (30 Java frames), ${S} s at 999 Hz:"
		echo
		echo "| stack | mode | cost |"
		echo "|---|---|---|"
		for r in 1 2; do cost on; cost off; done
		echo
	fi
	if [[ " $PARTS " == *" names "* ]]; then
		many_source
		echo "Naming 20,000 compiled methods, ${S} s at 999 Hz (prowl's CPU and peak RSS, record -v):"
		echo
		echo "| program | prowl CPU | peak RSS | Java name cache |"
		echo "|---|---|---|---|"
		names
		echo
	fi
	if [[ " $PARTS " == *" throughput "* ]]; then
		echo "Throughput: $(nproc) JVMs (one per CPU) of \`Split $WORK fixed\`, no profiler and" \
			"\`prowl record -a\` (default rate), $ROUNDS rounds, order alternating; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
		echo
		echo "| round | no profiler: wall ms, CPU ms | prowl: wall ms, CPU ms | prowl's CPU ms meanwhile | throughput ratio, wall | CPU |"
		echo "|---|---|---|---|---|---|"
		: >"$TMP/ratios.wall"
		: >"$TMP/ratios.cpu"
		: >"$TMP/ratios.own"
		for r in $(seq "$ROUNDS"); do
			for m in $([ $((r % 2)) = 1 ] && echo none prowl || echo prowl none); do
				read -r w c pc <<<"$(throughput "$m")"
				eval "w_$m=$w c_$m=$c pc_$m=$pc"
			done
			# Throughput with prowl over without: the same work's time without over with.
			rw=$(awk -v a="$w_none" -v b="$w_prowl" 'BEGIN { printf "%.4f", a / b }')
			rc=$(awk -v a="$c_none" -v b="$c_prowl" 'BEGIN { printf "%.4f", a / b }')
			echo "$rw" >>"$TMP/ratios.wall"
			echo "$rc" >>"$TMP/ratios.cpu"
			awk -v p="$pc_prowl" -v c="$c_prowl" 'BEGIN { printf "%.4f\n", p / c }' >>"$TMP/ratios.own"
			echo "| $r | $w_none, $c_none | $w_prowl, $c_prowl | $pc_prowl | $rw | $rc |"
		done
		echo
		echo "Throughput ratio (prowl / no profiler), median (smallest to largest) over $ROUNDS rounds:" \
			"wall $(spread <"$TMP/ratios.wall"), CPU $(spread <"$TMP/ratios.cpu"); prowl's CPU over the JVMs'" \
			"$(spread <"$TMP/ratios.own"); load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	fi
} | tee "$OUT"
