#!/bin/bash
# offcpu.sh: what off-CPU profiling costs (`make bench`, issue 30). Prints a Markdown section
# and writes it to $BUILD/bench/offcpu.md. Needs root, $BUILD/prowl, $BUILD/workloads/offsplit, bpftool.
#
#  a. cost per context switch: `prowl record --off-cpu -a` on a pipe ping-pong, the kernel's
#     BPF stats (kernel.bpf_stats_enabled) of its sched_switch and sys_exit programs:
#     (run time of both) / (runs of the sched_switch program, one per context switch);
#  b. the ping-pong's round trips per second with no profiler and under
#     `prowl record --off-cpu -a` (default threshold), interleaved in rounds; twice: its
#     two threads free to run on both CPUs (each waits for a wakeup across CPUs: the
#     hooks' cost hides in the idle time), and both on CPU 1 (taskset: no idle between
#     the switches, every nanosecond of the hooks shows);
#     In the same rounds, the floor: the two hooks prowl's off-CPU programs use
#     (tp_btf/sched_switch, raw_tp/sys_exit), attached with programs that do nothing
#     ($BUILD/bench/offcpu_floor), and sched_switch's alone: what any design with these
#     hooks costs before it does any work;
#  c. `prowl agent` CPU time and RSS with off_cpu true and false, the host busy with the
#     ping-pong, interleaved.
#
# Environment: OFFCPU_ROUNDS (5), OFFCPU_SECONDS (10), OFFCPU_AGENT_SECONDS (30),
# BENCH_QUICK=1 (2 rounds x 3 s, 8 s agent runs: to check the script, not to quote),
# PROWL_BUILD (build), OFFCPU_BEFORE (another prowl binary, e.g. an older build: a. and b.
# measure it too, in the same rounds, to compare two versions under the same load),
# OFFCPU_NO_AGENT=1 (skip c.).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/lib.sh

BUILD=${PROWL_BUILD:-build}
PROWL=$BUILD/prowl
PP=$BUILD/workloads/offsplit
FLOOR=$BUILD/bench/offcpu_floor
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	ROUNDS=${OFFCPU_ROUNDS:-2} SECS=${OFFCPU_SECONDS:-3} AGENT_S=${OFFCPU_AGENT_SECONDS:-8}
else
	ROUNDS=${OFFCPU_ROUNDS:-5} SECS=${OFFCPU_SECONDS:-10} AGENT_S=${OFFCPU_AGENT_SECONDS:-30}
fi
HZ=$(getconf CLK_TCK)
OUT=$BUILD/bench/offcpu.md
TMP=$(mktemp -d)

die() { echo "offcpu bench: error: $*" >&2; exit 1; }
cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	[ -n "${STATS_OLD:-}" ] && sysctl -qw kernel.bpf_stats_enabled="$STATS_OLD"
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

[ "$(id -u)" = 0 ] || die "must run as root: sudo make bench"
[ -x "$PROWL" ] && [ -x "$PP" ] || die "run 'make all workloads' first"
[ -x "$FLOOR" ] && [ -f "$FLOOR.bpf.o" ] || die "run 'make $FLOOR $FLOOR.bpf.o' first (make bench does)"
command -v bpftool >/dev/null || die "bpftool is missing (apt-get install bpftool)"
mkdir -p "$BUILD/bench"

# Starts `prowl record --off-cpu -a` in the background; waits until it records.
start_prowl() { # $1: log file; rest: more arguments. The binary: $BIN, else $PROWL.
	local log=$1 i
	shift
	"${BIN:-$PROWL}" record --off-cpu -a -o "$TMP/cap.pb.gz" "$@" 2>"$log" >/dev/null &
	PROWL_PID=$!
	BG_PIDS+=("$PROWL_PID")
	for i in $(seq 1 300); do
		grep -q "recording the off-CPU time" "$log" && return 0
		kill -0 "$PROWL_PID" 2>/dev/null || die "prowl exited: $(cat "$log")"
		nap 0.1
	done
	die "prowl did not start: $(cat "$log")"
}

# Attaches the floor's empty programs (all, or those named) in the background.
start_floor() {
	local i
	"$FLOOR" "$FLOOR.bpf.o" "$@" >"$TMP/floor.out" 2>&1 &
	FLOOR_PID=$!
	BG_PIDS+=("$FLOOR_PID")
	for i in $(seq 1 100); do
		grep -q attached "$TMP/floor.out" && return 0
		kill -0 "$FLOOR_PID" 2>/dev/null || die "offcpu_floor exited: $(cat "$TMP/floor.out")"
		nap 0.1
	done
	die "offcpu_floor did not attach"
}

stop_floor() {
	kill -TERM "$FLOOR_PID" 2>/dev/null
	wait "$FLOOR_PID" 2>/dev/null
	bg_forget "$FLOOR_PID"
}

stop_prowl() {
	kill -INT "$PROWL_PID" 2>/dev/null
	wait "$PROWL_PID" 2>/dev/null
	bg_forget "$PROWL_PID"
}

pingpong() { # round trips per second of one run of $1 seconds ($PIN: a taskset CPU list)
	${PIN:+taskset -c "$PIN"} "$PP" pingpong "$1" | awk '/^roundtrips/ {sub("per_s=", "", $3); print $3}'
}

# ---- a. BPF cost per context switch ----
# Sets SW_CNT SW_NS SX_CNT SX_NS KEPT for the binary $BIN.
switch_cost() {
	local IDS id name cnt ns
	start_prowl "$TMP/a.log"
	"$PP" pingpong "$SECS" >/dev/null
	# The program ids from prowl's own file descriptors (other prowls may run on the host).
	IDS=$(cat /proc/"$PROWL_PID"/fdinfo/* 2>/dev/null | awk '/^prog_id:/ {print $2}' | sort -u)
	SW_CNT=0 SW_NS=0 SX_CNT=0 SX_NS=0
	for id in $IDS; do
		read -r name cnt ns < <(bpftool prog show id "$id" -j | /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
print(p.get("name", "?"), p.get("run_cnt", 0), p.get("run_time_ns", 0))')
		case $name in
		prowl_offcpu_sw*) SW_CNT=$((SW_CNT + cnt)) SW_NS=$((SW_NS + ns)) ;;
		prowl_offcpu_sy*|prowl_offcpu_st*) SX_CNT=$((SX_CNT + cnt)) SX_NS=$((SX_NS + ns)) ;;
		esac
	done
	stop_prowl
	KEPT=$(sed -n 's/.*off-CPU: \([0-9]*\) waits kept, \([0-9]*\) shorter.*/\1 \2/p' "$TMP/a.log")
	[ "$SW_CNT" -gt 0 ] || die "no sched_switch runs counted (ids: $IDS)"
}
cost_rows() { # $1: label
	echo "| $1 sched_switch | $SW_CNT | $((SW_NS / 1000000)) ms | $((SW_NS / SW_CNT)) |"
	echo "| $1 sys_exit (+ its unwinder steps) | $SX_CNT | $((SX_NS / 1000000)) ms | $((SX_NS / SW_CNT)) |"
	echo "| $1 both | | | $(((SW_NS + SX_NS) / SW_CNT)) |"
}
STATS_OLD=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -qw kernel.bpf_stats_enabled=1
COST_BEFORE= KEPT_BEFORE=
if [ -n "${OFFCPU_BEFORE:-}" ]; then
	[ -x "$OFFCPU_BEFORE" ] || die "OFFCPU_BEFORE=$OFFCPU_BEFORE is not an executable"
	BIN=$OFFCPU_BEFORE switch_cost
	COST_BEFORE=$(cost_rows before) KEPT_BEFORE=$KEPT
fi
BIN= switch_cost
sysctl -qw kernel.bpf_stats_enabled="$STATS_OLD"
LOAD_AB=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- b. ping-pong slowdown, interleaved ----
BASE=() WITH=() OLD=() BASE1=() WITH1=() FL=() FL1=() FLS1=()
for r in $(seq 1 "$ROUNDS"); do
	BASE+=("$(pingpong "$SECS")")
	BASE1+=("$(PIN=1 pingpong "$SECS")")
	start_prowl "$TMP/b.log"
	WITH+=("$(pingpong "$SECS")")
	WITH1+=("$(PIN=1 pingpong "$SECS")")
	stop_prowl
	start_floor
	FL+=("$(pingpong "$SECS")")
	FL1+=("$(PIN=1 pingpong "$SECS")")
	stop_floor
	start_floor floor_switch
	FLS1+=("$(PIN=1 pingpong "$SECS")")
	stop_floor
	if [ -n "${OFFCPU_BEFORE:-}" ]; then
		BIN=$OFFCPU_BEFORE start_prowl "$TMP/b.log"
		OLD+=("$(pingpong "$SECS")")
		stop_prowl
	fi
done
mean() { printf '%s\n' "$@" | awk '{s += $1; n++} END {printf "%.0f", s / n}'; }
slower() { awk -v b="$1" -v w="$2" 'BEGIN {printf "%.1f", (b - w) / b * 100}'; }
MB=$(mean "${BASE[@]}") MW=$(mean "${WITH[@]}") MB1=$(mean "${BASE1[@]}") MW1=$(mean "${WITH1[@]}")
MF=$(mean "${FL[@]}") MF1=$(mean "${FL1[@]}") MFS1=$(mean "${FLS1[@]}")
LOAD_B=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- c. the agent, off_cpu on and off, the host busy ----
declare -A CPU RSS HWM
[ "${OFFCPU_NO_AGENT:-0}" = 1 ] && ROUNDS_C=0 || ROUNDS_C=$ROUNDS
[ "$ROUNDS_C" = 0 ] || "$PP" pingpong $((ROUNDS * 2 * (AGENT_S + 8))) >/dev/null &
LOAD=$!
[ "$ROUNDS_C" = 0 ] || BG_PIDS+=("$LOAD")
for r in $(seq 1 "$ROUNDS_C"); do
	for mode in false true; do
		st=$TMP/state-$mode-$r
		printf 'off_cpu: %s\nexporters:\n  dir:\n    enabled: true\n' "$mode" >"$TMP/agent.yaml"
		"$PROWL" agent --config "$TMP/agent.yaml" --state-dir "$st" --no-metrics \
			--interval 10s 2>"$TMP/agent.log" &
		AP=$!
		BG_PIDS+=("$AP")
		nap 5 # started, tables loaded
		t0=$(awk '{print $14 + $15}' /proc/$AP/stat)
		nap "$AGENT_S"
		t1=$(awk '{print $14 + $15}' /proc/$AP/stat)
		CPU[$mode]="${CPU[$mode]:-} $(awk -v a="$t0" -v b="$t1" -v hz="$HZ" -v s="$AGENT_S" 'BEGIN {printf "%.2f", (b - a) / hz / s * 100}')"
		RSS[$mode]="${RSS[$mode]:-} $(kib "$AP" VmRSS)"
		HWM[$mode]="${HWM[$mode]:-} $(kib "$AP" VmHWM)"
		kill -TERM "$AP"
		wait "$AP" 2>/dev/null
		bg_forget "$AP"
	done
done
[ "$ROUNDS_C" = 0 ] || kill "$LOAD" 2>/dev/null

{
	echo "### Off-CPU profiling (tests/bench/offcpu.sh, $(date -u +%Y-%m-%d), $(uname -r), $(nproc) CPUs)"
	echo
	echo "a. BPF cost per context switch (\`prowl record --off-cpu -a\`, ping-pong for ${SECS} s, kernel BPF stats; load average $LOAD_AB):"
	echo
	echo "| program | runs | run time | ns per context switch |"
	echo "|---|---|---|---|"
	[ -n "$COST_BEFORE" ] && echo "$COST_BEFORE"
	cost_rows "$([ -n "$COST_BEFORE" ] && echo after)"
	echo
	echo "Waits kept, sampled away: ${KEPT:-?}${KEPT_BEFORE:+ (before: $KEPT_BEFORE)}."
	echo
	echo "b. Ping-pong round trips per second, $ROUNDS interleaved rounds of ${SECS} s (load average $LOAD_B at the end):"
	echo "no profiler ${BASE[*]} (mean $MB); under \`prowl record --off-cpu -a\` ${WITH[*]} (mean $MW):"
	echo "slowdown $(slower "$MB" "$MW") %."
	echo "Both threads on CPU 1, in the same rounds: no profiler ${BASE1[*]} (mean $MB1); under prowl ${WITH1[*]} (mean $MW1):"
	echo "slowdown $(slower "$MB1" "$MW1") %."
	echo "The floor, in the same rounds (the same two hooks, programs that do nothing): free ${FL[*]}"
	echo "(mean $MF, slowdown $(slower "$MB" "$MF") %); on CPU 1 ${FL1[*]} (mean $MF1, slowdown $(slower "$MB1" "$MF1") %);"
	echo "on CPU 1 with the sched_switch hook alone ${FLS1[*]} (mean $MFS1, slowdown $(slower "$MB1" "$MFS1") %)."
	if [ -n "${OFFCPU_BEFORE:-}" ]; then
		MO=$(mean "${OLD[@]}")
		echo "Under $OFFCPU_BEFORE, in the same rounds: ${OLD[*]} (mean $MO): slowdown $(slower "$MB" "$MO") %."
	fi
	echo
	[ "$ROUNDS_C" = 0 ] && exit 0
	echo "c. \`prowl agent\` on the ping-pong-busy host, ${AGENT_S} s windows, $ROUNDS rounds each:"
	echo
	echo "| off_cpu | CPU (% of one CPU) | RSS (KiB) | peak RSS (KiB) |"
	echo "|---|---|---|---|"
	for mode in false true; do
		echo "| $mode |${CPU[$mode]} |${RSS[$mode]} |${HWM[$mode]} |"
	done
} | tee "$OUT"
