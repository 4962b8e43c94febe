#!/bin/bash
# run.sh: prowl's overhead benchmarks (`make bench`). Prints a Markdown section and
# writes it to $BUILD/bench/results.md. Needs root, $BUILD/prowl,
# $BUILD/workloads/spin, perf, bpftool and GNU time (/usr/bin/time).
#
#  a. throughput of the spin workload (one thread per CPU) with no profiler, under
#     `prowl record -a -F 99` and under `perf record -a -g -F 99`, interleaved in
#     rounds whose order rotates, so slow drift of the host hits every mode alike;
#  b. prowl's BPF program cost per sample, from the kernel's BPF stats;
#  c. prowl's CPU time and peak RSS for a whole-host capture;
#  d. the same for perf record, and both output sizes.
#
# Environment: BENCH_ROUNDS (5), BENCH_SECONDS (10), BENCH_CAPTURE_SECONDS (60),
# BENCH_BPF_SECONDS (20), BENCH_QUICK=1 (2 rounds x 3 s, 10 s captures: to check the
# script, not to quote), PROWL_BUILD (build).
set -u -o pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh

BUILD=${PROWL_BUILD:-build}
PROWL=$BUILD/prowl
SPIN=$BUILD/workloads/spin
FREQ=99
if [ "${BENCH_QUICK:-0}" = 1 ]; then
	ROUNDS=${BENCH_ROUNDS:-2} SECONDS_PER_RUN=${BENCH_SECONDS:-3}
	CAP_S=${BENCH_CAPTURE_SECONDS:-10} BPF_S=${BENCH_BPF_SECONDS:-10}
else
	ROUNDS=${BENCH_ROUNDS:-5} SECONDS_PER_RUN=${BENCH_SECONDS:-10}
	CAP_S=${BENCH_CAPTURE_SECONDS:-60} BPF_S=${BENCH_BPF_SECONDS:-20}
fi
NCPU=$(nproc)
THREADS=$NCPU     # every CPU busy
SETTLE=1          # seconds between a profiler being ready and the workload starting
CLK_TCK=$(getconf CLK_TCK)

die() { echo "bench: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (BPF, perf events, sysctl): sudo make bench"
[ -x "$PROWL" ] || die "$PROWL is missing: run 'make' first"
[ -x "$SPIN" ] || die "$SPIN is missing: run 'make workloads' first"
for t in perf bpftool sysctl awk; do
	command -v $t >/dev/null || die "'$t' is missing: run packaging/install-deps.sh"
done
[ -x /usr/bin/time ] || die "/usr/bin/time (GNU time) is missing: apt-get install time"
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer (got '$2')"; }
posint BENCH_ROUNDS "$ROUNDS"
posint BENCH_SECONDS "$SECONDS_PER_RUN"
posint BENCH_CAPTURE_SECONDS "$CAP_S"
posint BENCH_BPF_SECONDS "$BPF_S"
[ "$CAP_S" -ge 5 ] || die "BENCH_CAPTURE_SECONDS must be at least 5"
[ "$BPF_S" -ge 5 ] || die "BENCH_BPF_SECONDS must be at least 5"

TMP=$(mktemp -d /tmp/prowl-bench.XXXXXX) || die "cannot create a temporary directory"
# Run copies, so that a rebuild of the tree during the bench cannot change them.
cp "$PROWL" "$TMP/prowl" && cp "$SPIN" "$TMP/spin" || die "cannot copy the binaries to $TMP"
PROWL_SHOWN=$PROWL SPIN_SHOWN=$SPIN
PROWL=$TMP/prowl SPIN=$TMP/spin
OLD_BPF_STATS=$(sysctl -n kernel.bpf_stats_enabled 2>/dev/null || echo "")
BPF_STATS_CHANGED=0

log() { echo "bench: $*" >&2; }

# Kills a process and its direct children (GNU time does not forward signals).
kill_tree() {
	local pid=$1 c
	for c in $(pgrep -P "$pid" 2>/dev/null); do kill -TERM "$c" 2>/dev/null; done
	kill -TERM "$pid" 2>/dev/null
	for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	for c in $(pgrep -P "$pid" 2>/dev/null); do kill -KILL "$c" 2>/dev/null; done
	kill -KILL "$pid" 2>/dev/null
}

restore_bpf_stats() {
	if [ $BPF_STATS_CHANGED = 1 ] && [ -n "$OLD_BPF_STATS" ]; then
		sysctl -q -w kernel.bpf_stats_enabled="$OLD_BPF_STATS" >/dev/null
		BPF_STATS_CHANGED=0
	fi
}

cleanup() {
	local p
	trap - EXIT INT TERM
	[ -n "$NAP_PID" ] && kill "$NAP_PID" 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill_tree "$p"; done
	wait 2>/dev/null
	restore_bpf_stats
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "bench: interrupted" >&2; exit 130' INT TERM


# "busy steal" jiffies of the whole host, from /proc/stat.
host_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8, $9; exit}' /proc/stat; }
# utime+stime jiffies of one process (all its threads).
pid_ticks() { sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{print $12+$13}'; }
# ids of the BPF programs a process holds open.
pid_prog_ids() { grep -h '^prog_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -un; }
# BPF programs of type perf_event loaded by anyone (other profilers distort the figures).
perf_event_progs() { bpftool prog show -j 2>/dev/null | /usr/bin/python3 -c '
import json, sys
try:
    print(sum(1 for p in json.load(sys.stdin) if p.get("type") == "perf_event"))
except Exception:
    print("?")'; }

mean_sd() { # prints "mean stdev" of the arguments
	printf '%s\n' "$@" | awk '{v[n++]=$1; s+=$1} END {m=s/n; for(i=0;i<n;i++) d+=(v[i]-m)^2;
		printf "%.6f %.6f\n", m, (n>1 ? sqrt(d/(n-1)) : 0)}'
}
calc() { awk "BEGIN {printf \"%s\", $*}"; }

# ---------------------------------------------------------------------------------
# a. throughput: baseline / prowl / perf, interleaved
# ---------------------------------------------------------------------------------
PROF_PID=
start_profiler() { # $1 = mode; sets PROF_PID, waits until the profiler samples
	local mode=$1 i
	PROF_PID=
	case $mode in
	base) return 0 ;;
	prowl|prowlfp)
		"$PROWL" record -a -F $FREQ -q --unwind="$([ $mode = prowl ] && echo dwarf || echo fp)" \
			-o "$TMP/tp.pb.gz" >"$TMP/prof.log" 2>&1 &
		PROF_PID=$! ;;
	perf|perfdwarf)
		rm -f "$TMP/perf.data"
		perf record -a $([ $mode = perf ] && echo -g || echo --call-graph dwarf) -F $FREQ -q \
			-o "$TMP/perf.data" >"$TMP/prof.log" 2>&1 &
		PROF_PID=$! ;;
	esac
	BG_PIDS+=("$PROF_PID")
	for i in $(seq 150); do
		kill -0 "$PROF_PID" 2>/dev/null || die "$mode failed to start: $(tail -3 "$TMP/prof.log" | tr '\n' ' ')"
		case $mode in
		prowl|prowlfp) [ -n "$(pid_prog_ids "$PROF_PID")" ] && return 0 ;;
		perf|perfdwarf) [ -s "$TMP/perf.data" ] && return 0 ;;
		esac
		sleep 0.1
	done
	die "$mode did not start sampling within 15 s"
}

stop_profiler() { # $1 = mode
	local mode=$1 rc
	[ -n "$PROF_PID" ] || return 0
	kill -INT "$PROF_PID" 2>/dev/null || die "$mode exited during the run: $(tail -3 "$TMP/prof.log" | tr '\n' ' ')"
	wait "$PROF_PID"
	rc=$?
	bg_forget "$PROF_PID"
	PROF_PID=
	case $mode in
	prowl|prowlfp) [ $rc = 0 ] && [ -s "$TMP/tp.pb.gz" ] || die "prowl record failed (exit $rc): $(tail -3 "$TMP/prof.log" | tr '\n' ' ')" ;;
	perf|perfdwarf) [ -s "$TMP/perf.data" ] || die "perf record failed (exit $rc): $(tail -3 "$TMP/prof.log" | tr '\n' ' ')" ;;
	esac
}

declare -A OPS EFF PROFCPU OTHER STEAL
NOISY_RUNS=0
run_mode() { # $1 = mode, $2 = round
	local mode=$1 r=$2 h0 h1 s0 s1 p0 p1 ops cpu wall steal prof other spid
	start_profiler "$mode"
	nap $SETTLE
	read -r h0 s0 < <(host_ticks)
	p0=0; [ -n "$PROF_PID" ] && p0=$(pid_ticks "$PROF_PID")
	"$SPIN" -t "$THREADS" -s "$SECONDS_PER_RUN" >"$TMP/spin.out" 2>"$TMP/spin.err" &
	spid=$!; BG_PIDS+=("$spid")
	wait $spid || die "spin failed: $(cat "$TMP/spin.err")"
	bg_forget "$spid"
	read -r h1 s1 < <(host_ticks)
	p1=0; [ -n "$PROF_PID" ] && p1=$(pid_ticks "$PROF_PID")
	[ -n "$p0" ] && [ -n "$p1" ] || die "$mode exited during the run: $(tail -3 "$TMP/prof.log" | tr '\n' ' ')"
	stop_profiler "$mode"
	ops=$(sed -n 's/^ops_per_sec=//p' "$TMP/spin.out")
	cpu=$(sed -n 's/.*cpu_s=\([0-9.]*\).*/\1/p' "$TMP/spin.err")
	wall=$(sed -n 's/.*wall_s=\([0-9.]*\).*/\1/p' "$TMP/spin.err")
	# % of one CPU used by the profiler while the workload ran, and by everything
	# else (neither the workload nor the profiler) in % of the whole host.
	prof=$(calc "($p1 - $p0) / $CLK_TCK / $wall * 100")
	other=$(calc "(($h1 - $h0) / $CLK_TCK - $cpu - ($p1 - $p0) / $CLK_TCK) / ($wall * $NCPU) * 100")
	steal=$(calc "($s1 - $s0) / $CLK_TCK / ($wall * $NCPU) * 100")
	OPS[$mode]+="$ops "
	# work units per CPU-second of the workload: what other processes take away
	# does not count, what the profiler costs inside the workload's time slices
	# (sampling interrupt, BPF program or perf's unwinding, cache) does.
	EFF[$mode]+="$(calc "$ops * $wall / $cpu") "
	PROFCPU[$mode]+="$prof "
	OTHER[$mode]+="$other "
	STEAL[$mode]+="$steal "
	ROUND_OPS[$r]+="$mode=$ops,$(calc "sprintf(\"%.0f\", $ops * $wall / $cpu)") "
	if awk "BEGIN{exit !($other > 2)}"; then NOISY_RUNS=$((NOISY_RUNS + 1)); fi
	log "round $r $(printf '%-5s' "$mode"): $ops ops/s, $(calc "sprintf(\"%.0f\", $ops * $wall / $cpu)") ops/cpu-s  (profiler $(printf '%.2f' "$prof")% of a CPU, others $(printf '%.1f' "$other")% of host, steal $(printf '%.1f' "$steal")%)"
	nap $SETTLE
}

DATE=$(date -u '+%Y-%m-%d %H:%M UTC')
KERNEL=$(uname -r)
CPU_MODEL=$(awk -F': *' '/^model name/{print $2; exit}' /proc/cpuinfo)
PROWL_VER=$("$PROWL" --version 2>/dev/null | head -1)
[ -n "$PROWL_VER" ] || PROWL_VER="prowl $(cat VERSION 2>/dev/null)"
if git rev-parse --git-dir >/dev/null 2>&1; then
	PROWL_VER+=", tree $(git rev-parse --short HEAD 2>/dev/null)"
	git diff --quiet HEAD -- bpf agent lib symbolizer proto 2>/dev/null || PROWL_VER+=" with uncommitted changes"
fi
PERF_VER=$(perf --version 2>/dev/null)
PMU=$(perf stat -e cycles true 2>&1)
case $PMU in
*"not supported"*) PMU="no hardware PMU (perf record samples on cpu-clock, like prowl)" ;;
*) PMU="hardware PMU present (perf record samples on cycles, prowl on cpu-clock)" ;;
esac
START_OTHERS=$(other_profilers)
START_PROGS=$(perf_event_progs)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
# How busy the host is with nothing of ours running (3 s).
read -r h0 _ < <(host_ticks); nap 3; read -r h1 _ < <(host_ticks)
IDLE_BUSY=$(calc "sprintf(\"%.1f\", ($h1 - $h0) / $CLK_TCK / (3 * $NCPU) * 100)")
T_START=$(date +%s)

log "$ROUNDS rounds x ${SECONDS_PER_RUN}s x 5 modes, then ${BPF_S}s BPF stats, then 2 x ${CAP_S}s captures"
[ "$START_OTHERS" = 0 ] || log "warning: $START_OTHERS other perf/prowl process(es) running: figures will be noisy"
"$SPIN" -t "$THREADS" -s 1 >/dev/null 2>&1 || die "$SPIN does not run"   # warm-up

declare -A ROUND_OPS
MODES=(base prowl prowlfp perf perfdwarf)
for ((r = 1; r <= ROUNDS; r++)); do
	for ((k = 0; k < ${#MODES[@]}; k++)); do
		run_mode "${MODES[$(((r - 1 + k) % ${#MODES[@]}))]}" "$r"
	done
done

# ---------------------------------------------------------------------------------
# b. BPF cost per sample
# ---------------------------------------------------------------------------------
log "BPF stats: prowl record -a -F $FREQ for ${BPF_S}s with the workload"
[ -n "$OLD_BPF_STATS" ] || die "kernel.bpf_stats_enabled is not available on this kernel"
BPF_STATS_CHANGED=1
sysctl -q -w kernel.bpf_stats_enabled=1 >/dev/null || die "cannot set kernel.bpf_stats_enabled"
"$SPIN" -t "$THREADS" -s $((BPF_S + 3)) >/dev/null 2>&1 &
SPIN_PID=$!; BG_PIDS+=("$SPIN_PID")
nap 0.5
"$PROWL" record -a -F $FREQ -d "${BPF_S}s" -q -o "$TMP/bpf.pb.gz" >"$TMP/bpf.log" 2>&1 &
BPF_PID=$!; BG_PIDS+=("$BPF_PID")
T0=$(date +%s.%N)
nap 2
PROG_IDS=$(pid_prog_ids "$BPF_PID")
SAMPLE_ID=
for id in $PROG_IDS; do
	bpftool prog show id "$id" 2>/dev/null | grep -q 'name prowl_sample' && SAMPLE_ID=$id
done
[ -n "$SAMPLE_ID" ] || die "prowl_sample not found among prowl's BPF programs (ids: ${PROG_IDS:-none})"
nap "$(calc "$BPF_S - 2 - 1.5")"    # read ~1.5 s before prowl stops
read -r RUN_NS RUN_CNT < <(bpftool prog show id "$SAMPLE_ID" -j | /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
print(p.get("run_time_ns", 0), p.get("run_cnt", 0))')
T1=$(date +%s.%N)
wait "$BPF_PID" || die "prowl record failed in the BPF stats run: $(tail -3 "$TMP/bpf.log" | tr '\n' ' ')"
bg_forget "$BPF_PID"
restore_bpf_stats
wait "$SPIN_PID"; bg_forget "$SPIN_PID"
[ "${RUN_CNT:-0}" -gt 0 ] || die "prowl_sample ran 0 times (run_cnt=0): are BPF stats working?"
NS_PER_SAMPLE=$(calc "$RUN_NS / $RUN_CNT")
RUNS_PER_S=$(calc "$RUN_CNT / ($T1 - $T0)")

# ---------------------------------------------------------------------------------
# c, d. CPU time and peak RSS of a whole capture
# ---------------------------------------------------------------------------------
# $1 = name, rest = command (wrapped in GNU time); sets W U S RSS STEADY
capture() {
	local name=$1 tpid ppid t0 e0 e1 steady_ticks=
	shift
	"$SPIN" -t "$THREADS" -s $((CAP_S + 4)) >/dev/null 2>&1 &
	local spid=$!; BG_PIDS+=("$spid")
	nap 1
	/usr/bin/time -v -o "$TMP/$name.time" "$@" >"$TMP/$name.log" 2>&1 &
	tpid=$!; BG_PIDS+=("$tpid")
	nap 1
	ppid=$(pgrep -P "$tpid" | head -1)
	# CPU used while sampling, read 1 s before the capture ends (before the
	# end-of-capture symbolization/encode of prowl, or the build-id pass of perf).
	nap $((CAP_S - 2))
	[ -n "$ppid" ] && steady_ticks=$(pid_ticks "$ppid")
	wait "$tpid" || die "$name capture failed: $(tail -3 "$TMP/$name.log" | tr '\n' ' ')"
	bg_forget "$tpid"
	kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null; bg_forget "$spid"
	U=$(awk -F': ' '/User time/{print $2}' "$TMP/$name.time")
	S=$(awk -F': ' '/System time/{print $2}' "$TMP/$name.time")
	RSS=$(awk -F': ' '/Maximum resident set size/{print $2}' "$TMP/$name.time")
	W=$(awk -F': ' '/Elapsed \(wall clock\)/{n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; print s}' "$TMP/$name.time")
	STEADY=$(calc "${steady_ticks:-0} / $CLK_TCK")
}

log "capture: prowl record -a -F $FREQ -d ${CAP_S}s under GNU time"
capture prowl "$PROWL" record -a -F $FREQ -d "${CAP_S}s" -q -o "$TMP/cap.pb.gz"
P_W=$W P_U=$U P_S=$S P_RSS=$RSS P_STEADY=$STEADY P_SIZE=$(stat -c %s "$TMP/cap.pb.gz")
log "capture: perf record -a -g -F $FREQ -- sleep $CAP_S under GNU time"
capture perf perf record -a -g -F $FREQ -q -o "$TMP/cap.perf.data" -- sleep "$CAP_S"
F_W=$W F_U=$U F_S=$S F_RSS=$RSS F_STEADY=$STEADY F_SIZE=$(stat -c %s "$TMP/cap.perf.data")
END_OTHERS=$(other_profilers)
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
T_END=$(date +%s)

# ---------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------
read -r B_M B_SD < <(mean_sd ${OPS[base]})
read -r BE_M BE_SD < <(mean_sd ${EFF[base]})
slowdown() { # base_mean base_sd mean sd -> "+x.xx % ± y.yy %" (± standard error)
	calc "sprintf(\"%+.2f %% ± %.2f %%\", ($1 - $3) / $1 * 100, sqrt($2^2 / $ROUNDS + $4^2 / $ROUNDS) / $1 * 100)"
}
fmt_eff() { # $1 = mode -> table row of the per-CPU-second figures
	local m sd pm est
	read -r m sd < <(mean_sd ${EFF[$1]})
	read -r pm _ < <(mean_sd ${PROFCPU[$1]})
	if [ "$1" = base ]; then
		printf '| %s | %.0f ± %.0f (%.2f %%) | — | — |\n' "$2" "$m" "$sd" "$(calc "$sd / $m * 100")"
	else
		est=$(calc "sprintf(\"%+.2f %%\", ($BE_M - $m) / $BE_M * 100 + $pm / $NCPU)")
		printf '| %s | %.0f ± %.0f (%.2f %%) | %s | %s |\n' "$2" "$m" "$sd" "$(calc "$sd / $m * 100")" \
			"$(slowdown "$BE_M" "$BE_SD" "$m" "$sd")" "$est"
	fi
}
fmt_mode() { # $1 = mode -> table row
	local m sd pm om stm slow
	read -r m sd < <(mean_sd ${OPS[$1]})
	read -r pm _ < <(mean_sd ${PROFCPU[$1]})
	read -r om _ < <(mean_sd ${OTHER[$1]})
	read -r stm _ < <(mean_sd ${STEAL[$1]})
	if [ "$1" = base ]; then
		slow="—"
	else
		slow=$(slowdown "$B_M" "$B_SD" "$m" "$sd")
	fi
	printf '| %s | %.0f ± %.0f (%.2f %%) | %s | %s | %.1f %% | %.1f %% |\n' \
		"$2" "$m" "$sd" "$(calc "$sd / $m * 100")" "$slow" \
		"$([ "$1" = base ] && echo "—" || printf '%.2f %%' "$pm")" "$om" "$stm"
}
mib() { calc "sprintf(\"%.1f MiB\", $1 / 1024)"; }
size() { calc "sprintf(\"%.2f MiB (%d bytes)\", $1 / 1048576, $1)"; }
cap_row() { # name W U S RSS STEADY SIZE
	printf '| %s | %.1f s | %.2f s | %.2f s | %.2f %% | %.2f %% | %.2f s | %s | %s |\n' "$1" "$2" "$3" "$4" \
		"$(calc "($3 + $4) / $2 * 100")" "$(calc "$6 / ($CAP_S - 1) * 100")" \
		"$(calc "$2 - $CAP_S")" "$(mib "$5")" "$(size "$7")"
}

mkdir -p "$BUILD/bench"
{
	echo "## Benchmark results ($DATE)"
	echo
	echo "- host: kernel \`$KERNEL\`, $NCPU × $CPU_MODEL, $PMU"
	echo "- prowl: $PROWL_VER; $PERF_VER"
	echo "- mode: $([ "${BENCH_QUICK:-0}" = 1 ] && echo "**quick (BENCH_QUICK=1): for checking the script, not for quoting**" || echo full);" \
		"$ROUNDS rounds × ${SECONDS_PER_RUN} s per mode, BPF stats over ${BPF_S} s, captures of ${CAP_S} s; took $((T_END - T_START)) s"
	echo "- load average at start / end: $LOAD0 / $LOAD1; other perf/prowl processes at start / end: $START_OTHERS / $END_OTHERS;" \
		"perf_event BPF programs loaded at start (not ours): $START_PROGS"
	echo "- host busy before the bench (nothing of ours running): $IDLE_BUSY %;" \
		"throughput runs where other processes used > 2 % of the host: $NOISY_RUNS of $((ROUNDS * 3))"
	if [ "$NOISY_RUNS" -gt 0 ]; then
		echo "- **warning: other processes competed for the CPUs during $NOISY_RUNS run(s): the throughput figures of (a) are unreliable;" \
			"the CPU-accounting estimate below is less sensitive to this**"
	fi
	echo
	echo "### a. Workload throughput (spin, $THREADS threads = all CPUs busy, ${SECONDS_PER_RUN} s per run)"
	echo
	echo "| mode | ops/s, mean ± stdev (CV) | slowdown vs baseline ± s.e. | profiler CPU (% of one CPU) | others' CPU (% of host) | steal |"
	echo "|---|---|---|---|---|---|"
	fmt_mode base "baseline (no profiler)"
	fmt_mode prowl "prowl record -a -F $FREQ (--unwind=dwarf, the default)"
	fmt_mode prowlfp "prowl record -a -F $FREQ --unwind=fp"
	fmt_mode perf "perf record -a -g -F $FREQ"
	fmt_mode perfdwarf "perf record -a --call-graph dwarf -F $FREQ"
	echo
	echo "Work units per CPU-second of the workload (less sensitive to other processes, which take CPU time away from" \
		"the workload but do not make its CPU time less productive); the estimate adds the profiler process's share" \
		"of the host (its CPU % / $NCPU CPUs) to the loss of productivity:"
	echo
	echo "| mode | ops per workload CPU-second, mean ± stdev (CV) | loss vs baseline ± s.e. | estimated slowdown of an all-busy host |"
	echo "|---|---|---|---|"
	fmt_eff base "baseline (no profiler)"
	fmt_eff prowl "prowl record -a -F $FREQ (--unwind=dwarf, the default)"
	fmt_eff prowlfp "prowl record -a -F $FREQ --unwind=fp"
	fmt_eff perf "perf record -a -g -F $FREQ"
	fmt_eff perfdwarf "perf record -a --call-graph dwarf -F $FREQ"
	echo
	read -r pm _ < <(mean_sd ${PROFCPU[prowl]})
	echo "CPU-accounting estimate of prowl's cost on this all-busy host: $(calc "sprintf(\"%.2f\", $pm / $NCPU + $NS_PER_SAMPLE * $RUNS_PER_S / 1e9 / $NCPU * 100)") % of the host" \
		"= prowl's process $(calc "sprintf(\"%.2f\", $pm / $NCPU)") % (from the table) + BPF program" \
		"$(calc "sprintf(\"%.3f\", $NS_PER_SAMPLE * $RUNS_PER_S / 1e9 / $NCPU * 100)") % (from b: ns per sample × runs/s)."
	echo
	echo "Per round (order rotates each round):"
	echo
	for ((r = 1; r <= ROUNDS; r++)); do echo "- round $r (ops/s, ops per workload CPU-second): ${ROUND_OPS[$r]}"; done
	echo
	echo "### b. BPF cost per sample (kernel.bpf_stats_enabled=1, ${BPF_S} s, workload running)"
	echo
	echo "| prog | run_cnt | run_time_ns | ns per sample | runs/s (expected $FREQ × $NCPU = $((FREQ * NCPU))) |"
	echo "|---|---|---|---|---|"
	printf '| prowl_sample | %d | %d | %.0f | %.1f |\n' "$RUN_CNT" "$RUN_NS" "$NS_PER_SAMPLE" "$RUNS_PER_S"
	echo
	echo "### c/d. Cost of a ${CAP_S} s whole-host capture at $FREQ Hz (workload running)"
	echo
	echo "| profiler | wall | user | sys | CPU, whole run (% of one CPU) | CPU until 1 s before the end: startup + sampling (% of one CPU) | time after the ${CAP_S} s (finalize) | peak RSS | output |"
	echo "|---|---|---|---|---|---|---|---|---|"
	cap_row "prowl (symbolized pprof)" "$P_W" "$P_U" "$P_S" "$P_RSS" "$P_STEADY" "$P_SIZE"
	cap_row "perf record -g (raw perf.data)" "$F_W" "$F_U" "$F_S" "$F_RSS" "$F_STEADY" "$F_SIZE"
	echo
	echo "### Commands"
	echo
	echo '```'
	echo "# a. $ROUNDS rounds, each runs these three in a rotated order:"
	echo "$SPIN_SHOWN -t $THREADS -s $SECONDS_PER_RUN"
	echo "$PROWL_SHOWN record -a -F $FREQ -q -o /tmp/…/tp.pb.gz &  ($SPIN_SHOWN -t $THREADS -s $SECONDS_PER_RUN; then kill -INT)"
	echo "perf record -a -g -F $FREQ -q -o /tmp/…/perf.data &  ($SPIN_SHOWN -t $THREADS -s $SECONDS_PER_RUN; then kill -INT)"
	echo "# b."
	echo "sysctl -w kernel.bpf_stats_enabled=1; $SPIN_SHOWN -t $THREADS -s $((BPF_S + 3)) &"
	echo "$PROWL_SHOWN record -a -F $FREQ -d ${BPF_S}s -q -o /tmp/…/bpf.pb.gz &"
	echo "bpftool prog show id <prowl_sample's id, from /proc/PID/fdinfo> -j   # ~1.5 s before the end"
	echo "# c, d. each with $SPIN_SHOWN -t $THREADS -s $((CAP_S + 4)) running:"
	echo "/usr/bin/time -v $PROWL_SHOWN record -a -F $FREQ -d ${CAP_S}s -q -o /tmp/…/cap.pb.gz"
	echo "/usr/bin/time -v perf record -a -g -F $FREQ -q -o /tmp/…/cap.perf.data -- sleep $CAP_S"
	echo '```'
} | tee "$BUILD/bench/results.md"
log "written to $BUILD/bench/results.md"
