#!/bin/bash
# cost.sh: what `prowl agent` costs, steady and cold, next to an older prowl (issue 32's
# targets). Prints a Markdown section and writes it to $BUILD/bench/cost.md.
#
#  steady: both CPUs busy (one CPython loop, one native `spin` thread), optionally with
#          `churn` starting COST_CHURN_RATE processes per second; the old and the new agent
#          run side by side on that load (same seconds, same samples), each with the dir
#          exporter and /metrics. Measured from COST_FROM to COST_TO seconds after the
#          start (minutes 2-5 by default): utime+stime of the agent, the run time of all
#          its BPF programs (kernel.bpf_stats_enabled), in % of one CPU; RSS mean over the
#          window and peak (VmHWM) over the whole run.
#  cold:   Node, Java, CPython (and Chromium when installed) running; one agent at a time
#          starts with an empty state directory and runs until its first window file: CPU
#          seconds and peak RSS. Then it starts again on the same state directory (what it
#          kept: a warm cache) and is measured the same way. COST_COLD_ROUNDS rounds, old
#          and new alternating. Each first start follows `rm -r /sys/fs/bpf/prowl`: the
#          programs an earlier agent pinned (bpf_pin) are the restart's, not its.
# Usage: sudo tests/bench/cost.sh [OLD_PROWL]   (without it: the new agent alone)
# Environment: COST_FROM (120), COST_TO (300), COST_FREQS ("19 99"), COST_CHURN_RATE (200),
# COST_LOADS ("quiet churn"), COST_COLD_ROUNDS (2), PROWL_BUILD (build).
# Exit status 0 when it ran; 1 on a setup error or when an agent died.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/lib.sh

BUILD=${PROWL_BUILD:-build}
FROM=${COST_FROM:-120} TO=${COST_TO:-300}
FREQS=${COST_FREQS:-"19 99"} RATE=${COST_CHURN_RATE:-200}
LOADS=${COST_LOADS:-"quiet churn"} ROUNDS=${COST_COLD_ROUNDS:-2}
HZ=$(getconf CLK_TCK)
PY=/usr/bin/python3

die() { echo "cost-bench: error: $*" >&2; exit 1; }
log() { echo "cost-bench: $*" >&2; }

[ "$(id -u)" = 0 ] || die "must run as root (the agent loads BPF programs): sudo $0"
for f in prowl workloads/spin workloads/churn; do
	[ -x "$BUILD/$f" ] || die "$BUILD/$f is missing: run 'make all workloads' first"
done
[ $# -le 1 ] || die "usage: $0 [OLD_PROWL]"
[ $# = 0 ] || [ -x "$1" ] || die "$1 is not an executable prowl"
[[ $FROM =~ ^[0-9]+$ && $TO =~ ^[0-9]+$ && $TO -gt $FROM ]] || die "COST_FROM and COST_TO must be seconds, FROM < TO"
command -v bpftool >/dev/null || die "bpftool is missing (Debian package bpftool)"

TMP=$(mktemp -d /tmp/prowl-cost-bench.XXXXXX) || die "cannot create a temporary directory"
mkdir "$TMP/bin" && cp "$BUILD/prowl" "$TMP/bin/new" && cp "$BUILD/workloads/spin" "$BUILD/workloads/churn" "$TMP/bin/" ||
	die "cannot copy the binaries to $TMP/bin"
AGENTS=(new)
if [ $# = 1 ]; then cp "$1" "$TMP/bin/old" || die "cannot copy $1"; AGENTS=(old new); fi
OLD_STATS=$(sysctl -n kernel.bpf_stats_enabled)
MOUNTED_BPF=0 # 1: this bench mounted bpffs (below)
cleanup() {
	local p
	trap - EXIT INT TERM
	[ -n "$NAP_PID" ] && kill "$NAP_PID" 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	sleep 1
	for p in "${BG_PIDS[@]}"; do kill -KILL "$p" 2>/dev/null; done
	wait 2>/dev/null
	sysctl -qw kernel.bpf_stats_enabled="$OLD_STATS"
	[ "$MOUNTED_BPF" = 1 ] && rm -rf /sys/fs/bpf/prowl && umount /sys/fs/bpf
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "cost-bench: interrupted" >&2; exit 130' INT TERM
sysctl -qw kernel.bpf_stats_enabled=1 || die "cannot set kernel.bpf_stats_enabled"
# A restart takes the programs the last run pinned in /sys/fs/bpf: where nothing mounted
# bpffs there (an init that is not systemd), the bench does, as systemd would, and
# unmounts it at the end. Without it a restart loads its programs anew.
if [ "$(stat -f -c %T /sys/fs/bpf 2>/dev/null)" != bpf_fs ]; then
	mkdir -p /sys/fs/bpf && mount -t bpf bpf /sys/fs/bpf || die "cannot mount bpffs on /sys/fs/bpf"
	MOUNTED_BPF=1
fi

port() { $PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null; }
bpf_ns() { # run time of every BPF program the process holds, in ns
	local id t=0 v
	for id in $(grep -h '^prog_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -un); do
		v=$(bpftool prog show id "$id" -j 2>/dev/null | grep -o '"run_time_ns":[0-9]*' | cut -d: -f2)
		t=$((t + ${v:-0}))
	done
	echo $t
}
start_agent() { # name freq dir state -> pid in $AGENT_PID
	"$TMP/bin/$1" agent -F "$2" --interval 10s --dir "$3" --state-dir "$4" \
		--metrics-address "127.0.0.1:$(port)" >"$TMP/log.$1.$2" 2>&1 &
	AGENT_PID=$!
	BG_PIDS+=("$AGENT_PID")
}
stop() { kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; bg_forget "$1"; }

OUT=$TMP/out.md
{
	echo "### Agent cost (tests/bench/cost.sh)"
	echo
	echo "Host: $(nproc) CPUs, kernel $(uname -r); before: \`$(uptime | sed 's/.*load/load/')\`."
	[ $# = 1 ] && echo "Old: \`$1\`; new: \`$BUILD/prowl\`. Steady window: ${FROM}-${TO} s after the start."
	echo
	echo "| load | Hz | agent | user+sys % | BPF % | total % | RSS mean MiB | RSS peak MiB |"
	echo "|---|---|---|---|---|---|---|---|"
} >"$OUT"

# ---- steady ----
cat >"$TMP/pyloop.py" <<'EOF'
def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s
def mid(n):
    return leaf(n) + leaf(n // 2)
while True:
    mid(20000)
EOF
for load in $LOADS; do
	for hz in $FREQS; do
		log "steady: $load, $hz Hz, $TO s"
		$PY "$TMP/pyloop.py" & BG_PIDS+=($!); PYL=$!
		"$TMP/bin/spin" -t 1 -s $((TO + 30)) >/dev/null 2>&1 & BG_PIDS+=($!); SPL=$!
		CHL=
		if [ "$load" = churn ]; then
			"$TMP/bin/churn" -r "$RATE" -s $((TO + 30)) >/dev/null 2>&1 & BG_PIDS+=($!); CHL=$!
		fi
		declare -A PID C0 B0 RS
		for a in "${AGENTS[@]}"; do
			start_agent "$a" "$hz" "$TMP/d.$a" "$TMP/s.$a.$load.$hz"
			PID[$a]=$AGENT_PID RS[$a]=0
		done
		nap "$FROM"
		for a in "${AGENTS[@]}"; do C0[$a]=$(cpu_ticks "${PID[$a]}"); B0[$a]=$(bpf_ns "${PID[$a]}"); done
		t0=$(date +%s.%N); k=0
		while [ "$(awk -v a="$(date +%s.%N)" -v b="$t0" -v w=$((TO - FROM)) 'BEGIN{print (a - b < w)}')" = 1 ]; do
			nap 5
			k=$((k + 1))
			for a in "${AGENTS[@]}"; do
				kill -0 "${PID[$a]}" 2>/dev/null || die "the $a agent died (log: $(tail -3 "$TMP/log.$a.$hz"))"
				RS[$a]=$((RS[$a] + $(kib "${PID[$a]}" VmRSS)))
			done
		done
		t1=$(date +%s.%N)
		for a in "${AGENTS[@]}"; do
			c=$(($(cpu_ticks "${PID[$a]}") - C0[$a])); b=$(($(bpf_ns "${PID[$a]}") - B0[$a]))
			awk -v l="$load" -v hz="$hz" -v a="$a" -v c="$c" -v b="$b" -v t0="$t0" -v t1="$t1" -v ck="$HZ" \
				-v r="${RS[$a]}" -v k="$k" -v h="$(kib "${PID[$a]}" VmHWM)" \
				'BEGIN{w=t1-t0; u=100*c/ck/w; p=100*b/1e9/w;
				printf "| %s | %s | %s | %.3f | %.3f | %.3f | %.1f | %.1f |\n", l, hz, a, u, p, u+p, r/k/1024, h/1024}' >>"$OUT"
			stop "${PID[$a]}"
		done
		for p in $PYL $SPL $CHL; do stop "$p"; done
		unset PID C0 B0 RS
		echo "(after $load $hz Hz: \`$(uptime | sed 's/.*load/load/')\`)" >>"$TMP/notes"
	done
done

# ---- cold ----
cat >"$TMP/Loop.java" <<'EOF'
public class Loop {
    static long work(int n) { long s = 0; for (int i = 0; i < n; i++) s += (long) i * i % 7; return s; }
    public static void main(String[] a) throws Exception { long s = 0; for (;;) { s += work(200000); Thread.sleep(5); } }
}
EOF
RT=()
command -v node >/dev/null && { node -e 'function f(n){let s=0;for(let i=0;i<n;i++)s+=i*i%7;return s}
setInterval(()=>f(200000),5)' & RT+=(node:$!); BG_PIDS+=($!); }
command -v java >/dev/null && { java "$TMP/Loop.java" & RT+=(java:$!); BG_PIDS+=($!); }
$PY "$TMP/pyloop.py" & RT+=(python:$!); BG_PIDS+=($!)
command -v chromium >/dev/null && { chromium --headless --no-sandbox --disable-gpu --user-data-dir="$TMP/chromium" \
	about:blank >/dev/null 2>&1 & RT+=(chromium:$!); BG_PIDS+=($!); }
nap 15 # the runtimes start (Java compiles its source)
cold_run() { # name state -> "cpu_s peak_mib seconds"
	local d="$TMP/cold.$1" t0 c h
	rm -rf "$d"; mkdir -p "$d"
	t0=$(date +%s.%N)
	start_agent "$1" 19 "$d" "$2"
	until compgen -G "$d/*" >/dev/null; do
		kill -0 "$AGENT_PID" 2>/dev/null || die "the $1 agent died (log: $(tail -3 "$TMP/log.$1.19"))"
		sleep 0.2
	done
	c=$(cpu_ticks "$AGENT_PID"); h=$(kib "$AGENT_PID" VmHWM)
	stop "$AGENT_PID"
	awk -v c="$c" -v ck="$HZ" -v h="$h" -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN{printf "%.2f %.1f %.0f", c/ck, h/1024, t1-t0}'
}
{
	echo
	echo "Cold start with ${RT[*]%%:*} running: CPU seconds and peak RSS from the start to the first window (19 Hz, 10 s windows); then a restart on the same state directory."
	echo
	echo "| round | agent | first: CPU s | first: peak MiB | restart: CPU s | restart: peak MiB | restart / first CPU |"
	echo "|---|---|---|---|---|---|---|"
} >>"$OUT"
for ((r = 1; r <= ROUNDS; r++)); do
	order=("${AGENTS[@]}")
	[ $((r % 2)) = 0 ] && order=($(printf '%s\n' "${AGENTS[@]}" | tac))
	for a in "${order[@]}"; do
		log "cold: round $r, $a"
		st="$TMP/cold-state.$a.$r"
		rm -rf /sys/fs/bpf/prowl
		read -r c1 h1 _ <<<"$(cold_run "$a" "$st")"
		read -r c2 h2 _ <<<"$(cold_run "$a" "$st")"
		awk -v r="$r" -v a="$a" -v c1="$c1" -v h1="$h1" -v c2="$c2" -v h2="$h2" \
			'BEGIN{printf "| %s | %s | %.2f | %.1f | %.2f | %.1f | %.2f |\n", r, a, c1, h1, c2, h2, (c1 > 0 ? c2/c1 : 0)}' >>"$OUT"
	done
done
rm -rf /sys/fs/bpf/prowl
{ echo; cat "$TMP/notes" 2>/dev/null; echo "(after the cold runs: \`$(uptime | sed 's/.*load/load/')\`)"; } >>"$OUT"
mkdir -p "$BUILD/bench" && cp "$OUT" "$BUILD/bench/cost.md"
cat "$OUT"
