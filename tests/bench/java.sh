#!/bin/bash
# java.sh: benchmarks of the HotSpot walk (issue 28): BPF cost per sample with 30 Java
# frames (Split deep) against the same JVM with --java=off, interleaved; the user-space
# naming of a JVM with 20,000 compiled methods (first reads, cache memory; record -v);
# and the throughput of a Java workload (one JVM per CPU) with no profiler and under
# `prowl record -a -F 99`, interleaved in rounds. Writes build/bench/java.md.
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

# One Split JVM per CPU for S seconds; prints Split's rounds summed.
throughput() { # $1 = none|prowl: one per CPU for S seconds; the rounds summed
	per_cpu_rounds "$1" "$S" "$JAVA" -cp "$B/workloads/java" Split "$S" count
}

{
	echo "BPF cost per sample (PROWL_BPF_TIMING=1), Split deep (30 Java frames), ${S} s at 999 Hz:"
	echo
	echo "| stack | mode | cost |"
	echo "|---|---|---|"
	for r in 1 2; do cost on; cost off; done
	echo
	many_source
	echo "Naming 20,000 compiled methods, ${S} s at 999 Hz (prowl's CPU and peak RSS, record -v):"
	echo
	echo "| program | prowl CPU | peak RSS | Java name cache |"
	echo "|---|---|---|---|"
	names
	echo
	echo "Throughput, one Split JVM per CPU, ${S} s, rounds in turn ($ROUNDS rounds):"
	echo
	declare -A sum=([none]=0 [prowl]=0)
	for r in $(seq "$ROUNDS"); do
		for m in $([ $((r % 2)) = 1 ] && echo none prowl || echo prowl none); do
			v=$(throughput "$m")
			sum[$m]=$((sum[$m] + v))
			echo "round $r $m: $v"
		done
	done
	echo
	echo "| mode | rounds (sum of $ROUNDS runs) | against no profiler |"
	echo "|---|---|---|"
	echo "| no profiler | ${sum[none]} | 1.0000 |"
	echo "| prowl record -a -F 99 | ${sum[prowl]} | $(awk -v a="${sum[prowl]}" -v b="${sum[none]}" 'BEGIN { printf "%.4f", a / b }') |"
} | tee "$OUT"
