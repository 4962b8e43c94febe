#!/bin/bash
# agent.sh: resource cost of `prowl agent` (continuous whole-host profiling) over long
# runs. Prints a Markdown section and writes it to $BUILD/bench/agent.md. Needs root,
# $BUILD/prowl, $BUILD/workloads/spin, $BUILD/workloads/churn and curl.
#
#  1. All CPUs busy: `spin` runs one thread per CPU, in back-to-back pieces of 5 s, for
#     the whole phase. After a baseline, two agents start side by side, one at 19 Hz and
#     one at 100 Hz, so both see the same load; each has its own state directory and
#     metrics port and exports every 10 s to its directory. Every 10 s the script reads
#     each agent's utime+stime (/proc/PID/stat), VmRSS and VmHWM (/proc/PID/status) and
#     its /metrics. Reported: CPU in % of one CPU over the whole run (start-up included)
#     and over the second half (the last 5 minutes of a full run), RSS at start / median
#     / max / end and peak (VmHWM), samples and lost samples; and spin's throughput
#     without agents (before and after) and with both agents.
#  2. Process churn: `churn` forks and execs ~300 short-lived processes per second (each
#     burns 1-5 ms of CPU), with one agent at its default settings (19 Hz). Reported:
#     RSS start / max / end, CPU, lost samples, the agent's process and symbolizer cache
#     metrics over time (they must stay bounded), and whether the agent is alive and
#     /healthz answers 200 at the end.
#
# Environment: AGENT_BENCH_SECONDS (600: length of each phase),
# AGENT_BENCH_BASELINE_SECONDS (30: spin alone before and after the agents),
# AGENT_BENCH_CHURN_RATE (300 processes/s), AGENT_BENCH_VARIETY (1: run a mix of
# distinct programs during the churn; 0: churn alone), AGENT_BENCH_QUICK=1 (60 s phases, 10 s
# baselines: to check the script, not to quote), PROWL_BUILD (build).
# Exit status: 0 if the bench ran and every agent stayed up, answered /healthz and
# exited cleanly; 1 on a setup error or if an agent crashed or was unhealthy. Figures
# above their targets do not fail it (it is a benchmark, not a test).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/lib.sh

BUILD=${PROWL_BUILD:-build}
PROWL=$BUILD/prowl
SPIN=$BUILD/workloads/spin
CHURN=$BUILD/workloads/churn
QUICK=${AGENT_BENCH_QUICK:-0}
if [ "$QUICK" = 1 ]; then
	SECS=${AGENT_BENCH_SECONDS:-60} BASE_S=${AGENT_BENCH_BASELINE_SECONDS:-10}
else
	SECS=${AGENT_BENCH_SECONDS:-600} BASE_S=${AGENT_BENCH_BASELINE_SECONDS:-30}
fi
CHURN_RATE=${AGENT_BENCH_CHURN_RATE:-300}
VARIETY=${AGENT_BENCH_VARIETY:-1}
STEP=10            # seconds between two readings of the agents
CHUNK=5            # seconds per spin piece in phase 1
FREQS=(19 100)     # phase 1 agents
TARGET_CPU=([19]=0.5 [100]=1.0)   # % of one CPU
TARGET_RSS_MIB=50
NCPU=$(nproc)
CLK_TCK=$(getconf CLK_TCK)

die() { echo "agent-bench: error: $*" >&2; exit 1; }
log() { echo "agent-bench: $*" >&2; }

[ "$(id -u)" = 0 ] || die "must run as root (the agent loads BPF programs): sudo $0"
[ -x "$PROWL" ] || die "$PROWL is missing: run 'make' first"
[ -x "$SPIN" ] || die "$SPIN is missing: run 'make workloads' first"
[ -x "$CHURN" ] || die "$CHURN is missing: run 'make workloads' first"
for t in curl awk ss; do
	command -v $t >/dev/null || die "'$t' is missing"
done
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || die "$1 must be a positive integer (got '$2')"; }
posint AGENT_BENCH_SECONDS "$SECS"
posint AGENT_BENCH_BASELINE_SECONDS "$BASE_S"
posint AGENT_BENCH_CHURN_RATE "$CHURN_RATE"
[ "$SECS" -ge $((2 * STEP)) ] || die "AGENT_BENCH_SECONDS must be at least $((2 * STEP))"
[ "$BASE_S" -ge "$CHUNK" ] || die "AGENT_BENCH_BASELINE_SECONDS must be at least $CHUNK"

TMP=$(mktemp -d /tmp/prowl-agent-bench.XXXXXX) || die "cannot create a temporary directory"
# Run copies, so that a rebuild of the tree during the bench cannot change them.
mkdir "$TMP/bin" && cp "$PROWL" "$SPIN" "$CHURN" "$TMP/bin/" || die "cannot copy the binaries to $TMP/bin"
PROWL_SHOWN=$PROWL SPIN_SHOWN=$SPIN CHURN_SHOWN=$CHURN
PROWL=$TMP/bin/prowl SPIN=$TMP/bin/spin CHURN=$TMP/bin/churn
mkdir -p "$BUILD/bench" || die "cannot create $BUILD/bench"

now() { date +%s.%N; }
# (numbers with 16 significant digits: the times are epoch seconds with decimals)
calc() { awk -v CONVFMT=%.16g -v OFMT=%.16g "BEGIN {printf \"%s\", $*}"; }
nap_until() { # $1 = epoch seconds
	local d
	d=$(calc "$1 - $(now)")
	awk "BEGIN{exit !($d > 0)}" && nap "$d"
	return 0
}

# Stops a process: SIGTERM, then SIGKILL if it is still there after $2 s (default 10).
# (The load loop stops its spin on SIGTERM, churn reaps its children, the agent flushes.)
stop_proc() {
	local pid=$1 i
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < ${2:-10} * 10; i++)); do
		alive "$pid" || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null
}

cleanup() {
	local p
	trap - EXIT INT TERM
	[ -n "$NAP_PID" ] && kill "$NAP_PID" 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	for p in "${BG_PIDS[@]}"; do stop_proc "$p"; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "agent-bench: interrupted" >&2; exit 130' INT TERM


# A process is alive if it exists and is not a zombie (our children stay zombies
# until we wait for them, and kill -0 succeeds on a zombie).
alive() {
	local s
	s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]
}
# "busy" jiffies of the whole host, from /proc/stat (user nice system irq softirq steal).
host_busy() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat; }
free_port() { # an unused TCP port on 127.0.0.1, not in $*
	local p
	for _ in $(seq 100); do
		p=$((20000 + RANDOM % 40000))
		[[ " $* " == *" $p "* ]] && continue
		[ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
	done
	die "cannot find a free TCP port"
}
healthz() { # $1 = port -> HTTP status (000 if no answer)
	curl -s -m 3 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/healthz" 2>/dev/null || true
}

# Metrics the script records at each reading, in this order (after t ticks rss hwm anon file).
METRICS=(prowl_samples_total prowl_lost_samples_total prowl_processes prowl_processes_exited_total
	prowl_processes_evicted_total prowl_series prowl_stacks prowl_symbol_modules prowl_symbol_open_modules
	prowl_symbol_cache_entries 'prowl_symbol_cache_evictions_total{cache="frames"}'
	'prowl_symbol_cache_evictions_total{cache="modules"}' 'prowl_symbol_cache_evictions_total{cache="processes"}'
	prowl_symbolizer_bytes prowl_aggregation_bytes process_cpu_seconds_total process_resident_memory_bytes
	prowl_stack_errors_total'{stack="user"}' prowl_idle_samples_dropped_total)
# column of a field in the readings files (1-based): t=1 ticks=2 rss=3 hwm=4 anon=5
# file=6 (KiB: VmRSS, VmHWM, RssAnon, RssFile+RssShmem), then METRICS
col() {
	local i
	case $1 in t) echo 1; return ;; ticks) echo 2; return ;; rss) echo 3; return ;; hwm) echo 4; return ;;
	anon) echo 5; return ;; file) echo 6; return ;; esac
	for i in "${!METRICS[@]}"; do [ "${METRICS[$i]}" = "$1" ] && { echo $((i + 7)); return; }; done
	die "internal: unknown field $1"
}

# Appends one reading of agent $1 (pid $2, port $3) to $TMP/$1.tsv; returns 1 if the
# agent is gone.
read_agent() {
	local name=$1 pid=$2 port=$3 t ticks mem
	alive "$pid" || return 1
	t=$(now)
	ticks=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | awk '{print $12+$13}')
	mem=$(awk '/^VmRSS:/{r=$2} /^VmHWM:/{h=$2} /^RssAnon:/{a=$2} /^Rss(File|Shmem):/{f+=$2}
		END{print r+0, h+0, a+0, f+0}' "/proc/$pid/status" 2>/dev/null)
	[ -n "$ticks" ] && [ -n "$mem" ] || return 1
	curl -s -m 3 "http://127.0.0.1:$port/metrics" >"$TMP/$name.metrics" 2>/dev/null || : >"$TMP/$name.metrics"
	echo "$t $ticks $mem $(awk -v names="${METRICS[*]}" '
		BEGIN { n = split(names, N, " "); for (i = 1; i <= n; i++) v[N[i]] = "NA" }
		($1 in v) { v[$1] = $2 }
		END { for (i = 1; i <= n; i++) printf "%s%s", v[N[i]], (i < n ? " " : "\n") }' "$TMP/$name.metrics")" \
		>>"$TMP/$name.tsv"
}
field() { # $1 = agent, $2 = field, $3 = row (1-based; "last" for the last) -> value
	local c
	c=$(col "$2")
	awk -v c="$c" -v r="$3" 'r == "last" || NR == r { v = $c } END { print v }' "$TMP/$1.tsv"
}
rows() { wc -l <"$TMP/$1.tsv"; }

declare -A APID APORT ALAUNCH AREADY ADEAD ARC AHEALTH ASTOP
# Starts agent $1 at frequency $2 (empty: the default); waits until /healthz says 200.
start_agent() {
	local name=$1 freq=$2 i args
	APORT[$name]=$(free_port "${APORT[@]}")
	mkdir -p "$TMP/$name"
	args=(agent --state-dir "$TMP/$name/state" --dir "$TMP/$name/profiles"
		--metrics-address "127.0.0.1:${APORT[$name]}" --interval 10s)
	[ -n "$freq" ] && args+=(-F "$freq")
	echo "${args[*]}" | sed "s|$TMP|/tmp/…|g; s|^|$PROWL_SHOWN |" >"$TMP/$name.cmd"
	ALAUNCH[$name]=$(now)
	"$PROWL" "${args[@]}" >"$TMP/$name.log" 2>&1 &
	APID[$name]=$!
	BG_PIDS+=("${APID[$name]}")
	ADEAD[$name]=
	: >"$TMP/$name.tsv"
	for i in $(seq 300); do
		alive "${APID[$name]}" || die "agent $name failed to start: $(tail -3 "$TMP/$name.log" | tr '\n' ' ')"
		[ "$(healthz "${APORT[$name]}")" = 200 ] && { AREADY[$name]=$(now); return 0; }
		sleep 0.1
	done
	die "agent $name did not answer /healthz with 200 within 30 s: $(tail -3 "$TMP/$name.log" | tr '\n' ' ')"
}
# Takes a reading of each running agent named in $@; notes the ones that died.
read_agents() {
	local a
	for a in "$@"; do
		[ -n "${ADEAD[$a]}" ] && continue
		if ! read_agent "$a" "${APID[$a]}" "${APORT[$a]}"; then
			ADEAD[$a]=$(calc "sprintf(\"%.0f\", $(now) - ${AREADY[$a]})")
			log "agent $a died about ${ADEAD[$a]} s after it was ready: $(tail -3 "$TMP/$a.log" | tr '\n' ' ')"
		fi
	done
}
# Checks /healthz, then stops agent $1 with SIGTERM and records its exit status.
stop_agent() {
	local name=$1 pid=${APID[$1]} t0
	AHEALTH[$name]=$(healthz "${APORT[$name]}")
	t0=$(now)
	stop_proc "$pid" 20
	wait "$pid"
	ARC[$name]=$?
	ASTOP[$name]=$(calc "sprintf(\"%.1f\", $(now) - $t0)")
	bg_forget "$pid"
	cp "$TMP/$name.log" "$BUILD/bench/agent-$name.log" 2>/dev/null
}
agent_ok() { # $1 = agent: alive to the end, healthy at the end, clean exit
	[ -z "${ADEAD[$1]}" ] && [ "${AHEALTH[$1]}" = 200 ] && [ "${ARC[$1]}" = 0 ]
}

# --- statistics over the readings of agent $1 ---------------------------------------
cpu_pct() { # $1 = agent, $2 = first row, $3 = last row -> % of one CPU between them
	local t0 t1 k0 k1
	t0=$(field "$1" t "$2"); t1=$(field "$1" t "$3"); k0=$(field "$1" ticks "$2"); k1=$(field "$1" ticks "$3")
	calc "(($t1 - $t0) > 0 ? sprintf(\"%.2f\", ($k1 - $k0) / $CLK_TCK / ($t1 - $t0) * 100) : \"n/a\")"
}
cpu_run_pct() { # since the launch, start-up included
	calc "sprintf(\"%.2f\", $(field "$1" ticks last) / $CLK_TCK / ($(field "$1" t last) - ${ALAUNCH[$1]}) * 100)"
}
cpu_peak_pct() { # highest CPU over one interval between two readings
	awk -v hz="$CLK_TCK" 'NR > 1 { p = ($2 - k) / hz / ($1 - t) * 100; if (p > m) m = p } { t = $1; k = $2 }
		END { printf "%.2f", m }' "$TMP/$1.tsv"
}
mib() { calc "sprintf(\"%.1f\", $1 / 1024)"; }   # KiB -> MiB
rss_median() {
	awk '{ print $3 }' "$TMP/$1.tsv" | sort -n | awk '{ v[NR] = $1 } END {
		printf "%.1f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) / 1024 }'
}
rss_max() { awk '$3 > m { m = $3 } END { printf "%.1f", m / 1024 }' "$TMP/$1.tsv"; }
verdict() { # $1 = value, $2 = target -> "met" / "**not met**"
	[[ $1 =~ ^[0-9.]+$ ]] || { echo "n/a"; return; }
	awk "BEGIN{exit !($1 < $2)}" && echo "met" || echo "**not met**"
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
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
START_OTHERS=$(other_profilers)
b0=$(host_busy); nap 3; b1=$(host_busy)
IDLE_BUSY=$(calc "sprintf(\"%.1f\", ($b1 - $b0) / $CLK_TCK / (3 * $NCPU) * 100)")
T_START=$(date +%s)
[ "$START_OTHERS" = 0 ] || log "warning: $START_OTHERS other perf/prowl process(es) running: figures will be noisy"
log "host busy before the bench: $IDLE_BUSY %"

# =====================================================================================
# 1. two agents (19 Hz, 100 Hz), all CPUs busy
# =====================================================================================
log "phase 1: spin -t $NCPU alone for ${BASE_S} s, then agents at ${FREQS[*]} Hz for ${SECS} s, then spin alone for ${BASE_S} s"
"$SPIN" -t "$NCPU" -s 1 >/dev/null 2>&1 || die "$SPIN does not run"
: >"$TMP/load.tsv"
# The load: spin in back-to-back pieces of $CHUNK s until $TMP/load.stop exists; one
# line per piece: start end ops/s cpu_s wall_s. SIGTERM stops it and its spin.
bash -c '
	c=
	trap '"'"'[ -n "$c" ] && kill "$c" 2>/dev/null; exit 143'"'"' TERM
	while [ ! -e "$1/load.stop" ]; do
		a=$(date +%s.%N)
		"$2" -t "$3" -s "$4" >"$1/load.out" 2>"$1/load.err" &
		c=$!
		wait $c || exit 1
		c=
		b=$(date +%s.%N)
		echo "$a $b $(sed -n "s/^ops_per_sec=//p" "$1/load.out")" \
			"$(sed -n "s/.*cpu_s=\([0-9.]*\).*/\1/p" "$1/load.err")" \
			"$(sed -n "s/.*wall_s=\([0-9.]*\).*/\1/p" "$1/load.err")" >>"$1/load.tsv"
	done' _ "$TMP" "$SPIN" "$NCPU" "$CHUNK" &
LOAD_PID=$!
BG_PIDS+=("$LOAD_PID")
nap "$BASE_S"
alive "$LOAD_PID" || die "the spin load loop died: $(cat "$TMP/load.err")"

P1_AGENTS=()
for f in "${FREQS[@]}"; do P1_AGENTS+=("a$f"); done
for f in "${FREQS[@]}"; do start_agent "a$f" "$f"; done
T1_READY=$(now)
H1_0=$(host_busy)
read_agents "${P1_AGENTS[@]}"
N1=$((SECS / STEP))
for ((k = 1; k <= N1; k++)); do
	nap_until "$(calc "$T1_READY + $k * $STEP")"
	read_agents "${P1_AGENTS[@]}"
	((k % 6 == 0)) && log "phase 1: $((k * STEP)) of ${SECS} s"
done
H1_1=$(host_busy)
T1_END=$(now)
for a in "${P1_AGENTS[@]}"; do stop_agent "$a"; done
T1_STOPPED=$(now)
nap "$BASE_S"
touch "$TMP/load.stop"
wait "$LOAD_PID" || die "the spin load loop failed: $(cat "$TMP/load.err")"
bg_forget "$LOAD_PID"
FIRST_LAUNCH=${ALAUNCH[${P1_AGENTS[0]}]}

# Throughput: pieces that ended before the first agent started or began after the
# last one stopped (baseline), and pieces entirely inside the readings (with agents).
tp_stats() { # $1 = base|agents -> "n ops_mean ops_sd eff_mean eff_sd share_mean"
	awk -v sel="$1" -v l="$FIRST_LAUNCH" -v r0="$T1_READY" -v r1="$T1_END" -v s="$T1_STOPPED" -v ncpu="$NCPU" '
		NF >= 5 && $5 > 0 && $4 > 0 {
			in_base = ($2 <= l || $1 >= s); in_ag = ($1 >= r0 && $2 <= r1)
			if ((sel == "base" && in_base) || (sel == "agents" && in_ag)) {
				n++; o[n] = $3; e[n] = $3 * $5 / $4; sh[n] = $4 / ($5 * ncpu) * 100
			}
		}
		END {
			if (!n) { print 0, 0, 0, 0, 0, 0; exit }
			for (i = 1; i <= n; i++) { so += o[i]; se += e[i]; ss += sh[i] }
			mo = so / n; me = se / n
			for (i = 1; i <= n; i++) { vo += (o[i] - mo)^2; ve += (e[i] - me)^2 }
			printf "%d %.0f %.0f %.0f %.0f %.1f\n", n, mo, (n > 1 ? sqrt(vo / (n - 1)) : 0),
				me, (n > 1 ? sqrt(ve / (n - 1)) : 0), ss / n
		}' "$TMP/load.tsv"
}
read -r TB_N TB_O TB_OSD TB_E TB_ESD TB_SH < <(tp_stats base)
read -r TA_N TA_O TA_OSD TA_E TA_ESD TA_SH < <(tp_stats agents)
HOST1_BUSY=$(calc "sprintf(\"%.1f\", ($H1_1 - $H1_0) / $CLK_TCK / (($T1_END - $T1_READY) * $NCPU) * 100)")

# =====================================================================================
# 2. process churn, one agent at default settings
# =====================================================================================
# Besides churn (one binary, exec'ed hundreds of times a second), a loop runs the
# distinct programs of a build host, each for a few to a few hundred ms of CPU, about
# once a second: the agent must open (and close) many object files, as on a real host.
VARIETY_PROGS=""
variety_loop() {
	local src=$TMP/variety.c data=$TMP/variety.dat lines=$TMP/variety.lines n=0
	trap 'exit 0' TERM
	printf 'int f(int x) { int s = 0; for (int i = 0; i < x; i++) s += i * i; return s; }\n' >"$src"
	head -c 4000000 /dev/urandom >"$data"
	seq 1 200000 | awk '{ print ($1 * 7919) % 100003 }' >"$lines"
	while :; do
		gcc -O2 -c "$src" -o "$TMP/variety.o"
		python3 -c 'sum(i * i for i in range(300000))'
		perl -e '$s = 0; $s += $_ * $_ for 1 .. 300000'
		sha256sum "$data" >/dev/null
		gzip -1 -c "$data" >/dev/null
		sort -n "$lines" >/dev/null
		awk 'BEGIN { for (i = 0; i < 300000; i++) s += i }'
		nm -D "$PROWL" >/dev/null
		eu-readelf -s "$PROWL" >/dev/null
		n=$((n + 1))
		echo "$n" >"$TMP/variety.rounds"
		sleep 0.5
	done
}
if [ "$VARIETY" = 1 ]; then
	for t in gcc python3 perl sha256sum gzip sort awk nm eu-readelf seq; do
		command -v "$t" >/dev/null || die "'$t' is missing (needed by the churn phase's program mix; AGENT_BENCH_VARIETY=0 skips it)"
	done
	VARIETY_PROGS="gcc -O2 -c, python3, perl, sha256sum, gzip, sort, awk, nm, eu-readelf"
fi
log "phase 2: churn at $CHURN_RATE processes/s for ${SECS} s with one agent (default frequency)"
start_agent churn ""
read_agents churn
"$CHURN" -r "$CHURN_RATE" -s "$SECS" >"$TMP/churn.out" 2>"$TMP/churn.err" &
CHURN_PID=$!
BG_PIDS+=("$CHURN_PID")
VARIETY_PID=
if [ "$VARIETY" = 1 ]; then
	variety_loop &
	VARIETY_PID=$!
	BG_PIDS+=("$VARIETY_PID")
fi
T2_START=$(now)
H2_0=$(host_busy)
ACPU2_0=$(field churn ticks 1)
for ((k = 1; k <= N1; k++)); do
	nap_until "$(calc "$T2_START + $k * $STEP")"
	read_agents churn
	((k % 6 == 0)) && log "phase 2: $((k * STEP)) of ${SECS} s"
done
wait "$CHURN_PID"
CHURN_RC=$?
bg_forget "$CHURN_PID"
if [ -n "$VARIETY_PID" ]; then
	kill "$VARIETY_PID" 2>/dev/null
	wait "$VARIETY_PID" 2>/dev/null
	bg_forget "$VARIETY_PID"
fi
VARIETY_ROUNDS=$(cat "$TMP/variety.rounds" 2>/dev/null || echo 0)
T2_END=$(now)
H2_1=$(host_busy)
nap_until "$(calc "$T2_START + ($N1 + 1) * $STEP")"
read_agents churn    # one more, ${STEP} s after the end of the churn
stop_agent churn
CHURN_PPS=$(sed -n 's/^procs_per_sec=//p' "$TMP/churn.out")
CHURN_DETAIL=$(sed -n 's/^churn: //p' "$TMP/churn.err")
CHURN_CPU=$(awk '{for (i = 1; i <= NF; i++) if ($i ~ /_cpu_s=/) { split($i, a, "="); s += a[2] }} END {print s + 0}' \
	<<<"$CHURN_DETAIL")
HOST2_BUSY=$(calc "sprintf(\"%.1f\", ($H2_1 - $H2_0) / $CLK_TCK / (($T2_END - $T2_START) * $NCPU) * 100)")
N2=$(rows churn)                                  # the last reading (after the churn)
R2=$((N1 + 1)); [ "$R2" -le "$N2" ] || R2=$N2     # the reading at the end of the churn
ACPU2=$(calc "($(field churn ticks "$R2") - $ACPU2_0) / $CLK_TCK")
OTHERS2=$(calc "sprintf(\"%.1f\", (($H2_1 - $H2_0) / $CLK_TCK - $CHURN_CPU - $ACPU2) / (($T2_END - $T2_START) * $NCPU) * 100)")
END_OTHERS=$(other_profilers)
LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
T_END=$(date +%s)

# =====================================================================================
# report
# =====================================================================================
NUM() { [[ $1 =~ ^[0-9.e+-]+$ ]] && printf '%.0f' "$1" || printf '%s' "$1"; }
agent_row() { # $1 = agent, $2 = frequency
	local a=$1 f=$2 n mid samples lost rate
	n=$(rows "$a")
	mid=$(((n + 1) / 2))
	samples=$(field "$a" prowl_samples_total "$n")
	lost=$(field "$a" prowl_lost_samples_total "$n")
	rate=$(calc "($samples - $(field "$a" prowl_samples_total 1)) / ($(field "$a" t "$n") - $(field "$a" t 1))")
	printf '| %s Hz | %s s (%s CPU-s) | %s %% | %s %% | %s %% | %s %% | %s | %s / %s / %s / %s MiB | %s / %s MiB | %s MiB | %s | %s | %s (%s/s; %s × %s CPUs = %s) | %s |\n' \
		"$f" "$(calc "sprintf(\"%.1f\", ${AREADY[$a]} - ${ALAUNCH[$a]})")" \
		"$(calc "sprintf(\"%.2f\", $(field "$a" ticks 1) / $CLK_TCK)")" \
		"$(cpu_run_pct "$a")" "$(cpu_pct "$a" 1 "$n")" "$(cpu_pct "$a" "$mid" "$n")" "$(cpu_peak_pct "$a")" \
		"$(verdict "$(cpu_pct "$a" "$mid" "$n")" "${TARGET_CPU[$f]}") (< ${TARGET_CPU[$f]} %)" \
		"$(mib "$(field "$a" rss 1)")" "$(rss_median "$a")" "$(rss_max "$a")" "$(mib "$(field "$a" rss "$n")")" \
		"$(mib "$(field "$a" anon "$n")")" "$(mib "$(field "$a" file "$n")")" \
		"$(mib "$(field "$a" hwm "$n")")" "$(verdict "$(mib "$(field "$a" hwm "$n")")" $TARGET_RSS_MIB)" \
		"$(NUM "$lost")" "$(NUM "$samples")" "$(calc "sprintf(\"%.0f\", $rate)")" \
		"$f" "$NCPU" "$((f * NCPU))" "$(status_of "$a")"
}
status_of() { # $1 = agent
	local a=$1
	local w
	w=$(grep -cE 'level=(warn|error)' "$TMP/$a.log")
	if [ -n "${ADEAD[$a]}" ]; then echo "**died after ${ADEAD[$a]} s** (exit ${ARC[$a]}); $w warning/error lines in its log"
	elif agent_ok "$a"; then echo "up; /healthz 200; exit 0 on SIGTERM (${ASTOP[$a]} s); $w warning/error lines in its log"
	else echo "**/healthz ${AHEALTH[$a]}, exit ${ARC[$a]}** (${ASTOP[$a]} s); $w warning/error lines in its log"; fi
}
series_rows() { # $1 = agent, $2 = first data row, rest = fields; a row every ~60 s + the last
	local a=$1 r0=$2 n stride r t0
	shift 2
	n=$(rows "$a")
	stride=$(( (n - r0) / 10 )); [ "$stride" -ge 1 ] || stride=1
	t0=$(field "$a" t "$r0")
	for ((r = r0; r <= n; r += stride)); do
		series_row "$a" "$r" "$t0" "$@"
		[ $((r + stride)) -gt "$n" ] && [ "$r" != "$n" ] && series_row "$a" "$n" "$t0" "$@"
	done
}
series_row() {
	local a=$1 r=$2 t0=$3 f line
	shift 3
	line="| $(calc "sprintf(\"%.0f\", $(field "$a" t "$r") - $t0)") s"
	for f in "$@"; do
		case $f in
		rss | hwm) line+=" | $(mib "$(field "$a" "$f" "$r")")" ;;
		prowl_symbolizer_bytes | prowl_aggregation_bytes) line+=" | $(calc "sprintf(\"%.1f\", $(field "$a" "$f" "$r") / 1048576)")" ;;
		cpu) if [ "$r" = 1 ]; then line+=" | —"; else line+=" | $(cpu_pct "$a" $((r > 1 ? r - 1 : 1)) "$r")"; fi ;;
		*) line+=" | $(NUM "$(field "$a" "$f" "$r")")" ;;
		esac
	done
	echo "$line |"
}

P1_ROWS=$(rows a19)
AG_SH=0   # the agents' CPU between the first and last readings, in % of the host
for a in "${P1_AGENTS[@]}"; do
	AG_SH=$(calc "$AG_SH + $(cpu_pct "$a" 1 "$(rows "$a")") / $NCPU")
done
AG_SH=$(calc "sprintf(\"%.2f\", $AG_SH)")
{
	echo "## prowl agent results ($DATE)"
	echo
	echo "- host: kernel \`$KERNEL\`, $NCPU × $CPU_MODEL"
	echo "- prowl: $PROWL_VER"
	if [ "$QUICK" = 1 ]; then
		echo "- mode: **quick (AGENT_BENCH_QUICK=1): ${SECS} s phases, for checking the script, not for quoting**; took $((T_END - T_START)) s"
	else
		echo "- mode: full; ${SECS} s per phase, baselines of ${BASE_S} s; took $((T_END - T_START)) s"
	fi
	echo "- load average at start / end: $LOAD0 / $LOAD1; other perf/prowl processes at start / end: $START_OTHERS / $END_OTHERS"
	echo "- host busy before the bench (nothing of ours running): $IDLE_BUSY %"
	if awk "BEGIN{exit !($IDLE_BUSY > 5 || $START_OTHERS + $END_OTHERS > 0)}"; then
		echo "- **warning: other work ran on the host (busy $IDLE_BUSY % before the bench, $START_OTHERS / $END_OTHERS other profilers):" \
			"CPU figures include the cost of sampling and symbolizing that work, and throughput figures are noisy**"
	fi
	echo
	echo "### 1. Two agents side by side, all $NCPU CPUs busy (spin -t $NCPU), ${SECS} s"
	echo
	echo "CPU in % of one CPU, from utime+stime in /proc/PID/stat (10 ms ticks); \"whole run\" is from the launch" \
		"(start-up included) to the last reading, \"after ready\" from the first /healthz 200, \"second half\"" \
		"is the last $(calc "sprintf(\"%.0f\", $(field a19 t "$P1_ROWS") - $(field a19 t $(((P1_ROWS + 1) / 2))))") s" \
		"(steady state; the targets are checked on it), \"peak ${STEP} s\" the highest interval between two readings." \
		"RSS is VmRSS at the readings (every ${STEP} s; start = at ready), split at the end into RssAnon (heap) and" \
		"RssFile+RssShmem (mapped files, e.g. ELF/DWARF data); peak is VmHWM. Targets: CPU < 0.5 % at 19 Hz," \
		"< 1 % at 100 Hz, RSS < ${TARGET_RSS_MIB} MB (taken as MiB)."
	echo
	echo "| agent | start-up: time to ready (CPU) | CPU whole run | CPU after ready | CPU second half | CPU peak ${STEP} s | CPU target | RSS start / median / max / end | end: anon / file-backed | peak RSS (VmHWM) | RSS target | lost samples | samples (per s; expected) | state at the end |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	for f in "${FREQS[@]}"; do agent_row "a$f" "$f"; done
	echo
	echo "Over time (CPU in % of one CPU over the ${STEP} s before the reading, RSS in MiB):"
	echo
	echo "| time after ready | 19 Hz CPU | 19 Hz RSS | 100 Hz CPU | 100 Hz RSS | 100 Hz processes | 100 Hz symbol cache entries | 100 Hz open modules |"
	echo "|---|---|---|---|---|---|---|---|"
	paste -d '\0' <(series_rows a19 1 cpu rss | sed 's/ |$//') \
		<(series_rows a100 1 cpu rss prowl_processes prowl_symbol_cache_entries prowl_symbol_open_modules | sed 's/^| [0-9]* s//') 
	echo
	echo "Throughput of spin -t $NCPU (pieces of ${CHUNK} s; baseline = before the agents started and after they stopped," \
		"${BASE_S} s each; \"with agents\" = pieces entirely between the first and last readings, **both agents at once**," \
		"so the difference is the combined cost of the 19 Hz and 100 Hz agents). \"share of the host\" is spin's CPU time /" \
		"(wall × $NCPU): what other processes (the agents included) left it."
	echo
	echo "| | pieces | ops/s, mean ± stdev | ops per spin CPU-second, mean ± stdev | spin's share of the host | agents' share | others' share (rest) |"
	echo "|---|---|---|---|---|---|---|"
	echo "| baseline (no agent) | $TB_N | $TB_O ± $TB_OSD | $TB_E ± $TB_ESD | $TB_SH % | — | $(calc "sprintf(\"%.1f\", 100 - $TB_SH)") % |"
	echo "| both agents | $TA_N | $TA_O ± $TA_OSD | $TA_E ± $TA_ESD | $TA_SH % | $AG_SH % | $(calc "sprintf(\"%.1f\", 100 - $TA_SH - $AG_SH)") % |"
	if [ "$TB_N" -gt 0 ] && [ "$TA_N" -gt 0 ]; then
		echo "| difference | | $(calc "sprintf(\"%+.2f %%\", ($TA_O - $TB_O) / $TB_O * 100)") | $(calc "sprintf(\"%+.2f %%\", ($TA_E - $TB_E) / $TB_E * 100)") | | | |"
	fi
	echo
	echo "Host busy during the readings (/proc/stat): $HOST1_BUSY %."
	echo
	echo "### 2. Process churn (churn -r $CHURN_RATE, ${SECS} s), one agent at the default frequency"
	echo
	echo "- churn: **${CHURN_PPS:-?} processes/s** (exit $CHURN_RC); $CHURN_DETAIL"
	if [ "$VARIETY" = 1 ]; then
		echo "- program mix alongside: $VARIETY_ROUNDS rounds of $VARIETY_PROGS (one round, then 0.5 s of sleep)"
	else
		echo "- program mix alongside: off (AGENT_BENCH_VARIETY=0)"
	fi
	echo "- host busy during the churn: $HOST2_BUSY %; others (not churn, not the agent; the program mix included): $OTHERS2 % of the host"
	echo "- agent: $(status_of churn); CPU $(calc "sprintf(\"%.2f\", $ACPU2 / ($(field churn t "$R2") - $(field churn t 1)) * 100)") % of one CPU from the reading before the churn to its end" \
		"($(calc "sprintf(\"%.2f\", $ACPU2)") CPU-s), peak ${STEP} s $(cpu_peak_pct churn) %; RSS $(mib "$(field churn rss 1)") MiB" \
		"before the churn, max $(rss_max churn) MiB, $(mib "$(field churn rss "$R2")") MiB at the end of the churn," \
		"$(mib "$(field churn rss "$N2")") MiB ${STEP} s later, peak (VmHWM)" \
		"$(mib "$(field churn hwm "$N2")") MiB (target < ${TARGET_RSS_MIB} MiB: $(verdict "$(mib "$(field churn hwm "$N2")")" $TARGET_RSS_MIB));" \
		"at the end $(mib "$(field churn anon "$R2")") MiB anon, $(mib "$(field churn file "$R2")") MiB file-backed"
	echo "- samples $(NUM "$(field churn prowl_samples_total "$N2")"), lost $(NUM "$(field churn prowl_lost_samples_total "$N2")")," \
		"user stack errors $(NUM "$(field churn 'prowl_stack_errors_total{stack="user"}' "$N2")")"
	echo
	echo "Over time (row 0 s is before the churn starts; the last row after it ended; RSS and symbolizer/aggregation in MiB):"
	echo
	echo "| time | CPU % | RSS | processes | exited (total) | evicted (total) | series | stacks | symbol modules | open modules | symbol cache entries | evictions frames / modules / processes | symbolizer MiB | aggregation MiB |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
	series_rows churn 1 cpu rss prowl_processes prowl_processes_exited_total prowl_processes_evicted_total prowl_series \
		prowl_stacks prowl_symbol_modules prowl_symbol_open_modules prowl_symbol_cache_entries \
		'prowl_symbol_cache_evictions_total{cache="frames"}' 'prowl_symbol_cache_evictions_total{cache="modules"}' \
		'prowl_symbol_cache_evictions_total{cache="processes"}' prowl_symbolizer_bytes prowl_aggregation_bytes |
		sed -E 's/\| ([0-9NA]+) \| ([0-9NA]+) \| ([0-9NA]+) \| ([0-9.NA]+) \| ([0-9.NA]+) \|$/| \1 \/ \2 \/ \3 | \4 | \5 |/'
	echo
	echo "### Commands"
	echo
	echo '```'
	echo "# 1. load for the whole phase (${BASE_S} s alone, the agents' run, ${BASE_S} s alone), in pieces:"
	echo "while :; do $SPIN_SHOWN -t $NCPU -s $CHUNK; done"
	for a in "${P1_AGENTS[@]}"; do cat "$TMP/$a.cmd"; done
	echo "# every ${STEP} s: /proc/PID/stat (utime+stime), /proc/PID/status (VmRSS, VmHWM), curl http://127.0.0.1:PORT/metrics"
	echo "# 2."
	cat "$TMP/churn.cmd"
	echo "$CHURN_SHOWN -r $CHURN_RATE -s $SECS"
	echo '```'
} | tee "$BUILD/bench/agent.md"
log "written to $BUILD/bench/agent.md (agent logs: $BUILD/bench/agent-*.log)"

FAILED=0
for a in "${P1_AGENTS[@]}" churn; do agent_ok "$a" || { log "agent $a: $(status_of "$a")"; FAILED=1; }; done
[ "$CHURN_RC" = 0 ] || log "warning: churn exited with status $CHURN_RC (fork/exec failures): see the churn line"
exit $FAILED
