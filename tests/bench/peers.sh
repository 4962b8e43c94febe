#!/bin/bash
# peers.sh: prowl's agent beside the OpenTelemetry eBPF profiler (its OTLP into the Collector)
# and perf --call-graph dwarf, one workload at a time (make bench-peers, BENCHMARKS.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
B=${PROWL_BUILD:-build}
S=${PEERS_BENCH_SECONDS:-30}   # one workload's window
R=${PEERS_BENCH_ROUNDS:-2}     # rounds; each runs the three workloads, in a rotated order
HZ=${PEERS_BENCH_HZ:-97}       # both agents' and perf's sampling frequency
PY=/usr/bin/python3.11
[ "$(id -u)" = 0 ] || { echo "peers.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
for f in "$B/prowl" "$B/tools/pprof" "$B/tools/otelcol" "$B/tools/ebpf-profiler" "$B/workloads/split532" "$PY"; do
	[ -x "$f" ] || { echo "peers.sh: error: $f is missing: run make bench-peers" >&2; exit 1; }
done
command -v perf >/dev/null || { echo "peers.sh: error: perf is missing (Debian's linux-perf)" >&2; exit 1; }
TMP=$(mktemp -d)
STATS=$(sysctl -n kernel.bpf_stats_enabled)
cleanup() {
	local p
	for p in "${BG_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	sysctl -qw kernel.bpf_stats_enabled="$STATS"
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The peer raises RLIMIT_MEMLOCK to infinity and stops when it cannot; without
# CAP_SYS_RESOURCE (a container) memlock_ok answers those calls (tests/tools/ebpf-profiler).
gcc -O2 -Wall -o "$TMP/memlock_ok" tests/tools/ebpf-profiler/memlock_ok.c
# The peer attaches tracepoints through tracefs.
if [ ! -e /sys/kernel/tracing/events ]; then
	mount -t tracefs nodev /sys/kernel/tracing
	echo "peers.sh: mounted tracefs on /sys/kernel/tracing (the peer needs it)" >&2
fi
sysctl -qw kernel.bpf_stats_enabled=1
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
GRPC=$(port)
cat >"$TMP/otelcol.yaml" <<EOF
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:$GRPC
exporters:
  file:
    path: $TMP/otel.pb
    format: proto
    flush_interval: 1s
service:
  telemetry:
    metrics:
      level: none
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
EOF
"$B/tools/otelcol" --config "$TMP/otelcol.yaml" --feature-gates=service.profilesSupport >"$TMP/otelcol.log" 2>&1 &
BG_PIDS+=($!)
MPORT=$(port)
"$B/prowl" agent --state-dir "$TMP/state" --dir "$TMP/prowl" --interval 5s -F "$HZ" \
	--metrics-address "127.0.0.1:$MPORT" >"$TMP/prowl.log" 2>&1 &
PROWL=$!
BG_PIDS+=($PROWL)
"$TMP/memlock_ok" "$B/tools/ebpf-profiler" -collection-agent "127.0.0.1:$GRPC" -disable-tls \
	-samples-per-second "$HZ" -reporter-interval 5s >"$TMP/peer.log" 2>&1 &
PEER=$!
BG_PIDS+=($PEER)
t0=$(date +%s)
# Ready: prowl says so; the peer once the Collector has written its first report.
until grep -qs "agent started" "$TMP/prowl.log" && [ -s "$TMP/otel.pb" ]; do
	for p in $PROWL $PEER; do
		kill -0 "$p" 2>/dev/null || { echo "peers.sh: error: an agent stopped:" >&2; tail -5 "$TMP/prowl.log" "$TMP/peer.log" >&2; exit 1; }
	done
	[ $(($(date +%s) - t0)) -lt 900 ] || { echo "peers.sh: error: the agents did not start in 900 s" >&2; tail -5 "$TMP/peer.log" >&2; exit 1; }
	nap 1
done
echo "peers.sh: both agents ready after $(($(date +%s) - t0)) s ($(uptime))" >&2

lost() { # samples prowl's ring buffer could not take, so far
	curl -s --max-time 10 "http://127.0.0.1:$MPORT/metrics" | awk '$1 == "prowl_lost_samples_total" {print $2}'
}
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }          # user + sys, all threads
bpf_ns() { # run_time_ns summed over the BPF programs whose fds $1 holds
	local f
	for f in /proc/"$1"/fd/*; do
		[ "$(readlink "$f" 2>/dev/null)" = "anon_inode:bpf-prog" ] || continue
		awk '$1 == "prog_id:" {id = $2} $1 == "run_time_ns:" {print id, $2}' "/proc/$1/fdinfo/${f##*/}"
	done | sort -u | awk '{s += $2} END {print s + 0}'
}
start_workload() { # $1 = c | py | stripped; sets W
	case $1 in
	c) "$B/workloads/split532" 600 1 >/dev/null & ;;
	py) nice -n 0 "$PY" tests/workloads/python/pyrandsplit.py 600 >/dev/null & ;;
	stripped) gzip -9 </dev/urandom >/dev/null & ;;
	esac
	W=$!
	BG_PIDS+=($W)
}
printf 'workload\tround\tpid\tprowl_ms\tpeer_ms\tprowl_bpf_ns\tpeer_bpf_ns\tprowl_rss\tpeer_rss\tload\tprowl_lost\n' >"$TMP/rows.tsv"
for r in $(seq 1 "$R"); do
	order=(c py stripped)
	order=("${order[@]:$((r - 1)) % 3}" "${order[@]:0:$((r - 1)) % 3}")
	for w in "${order[@]}"; do
		start_workload "$w"
		nap 3  # both agents learn the new process
		cp "/proc/$W/maps" "$TMP/maps.$W"  # the peer names mappings by file name only
		a0=$(ticks $PROWL) b0=$(ticks $PEER) c0=$(bpf_ns $PROWL) d0=$(bpf_ns $PEER) l0=$(lost)
		perf_pid=
		if [ "$w" != py ]; then
			perf record -q --no-buildid --call-graph dwarf -F "$HZ" -p "$W" -o "$TMP/perf.$w.$r.data" -- sleep "$S" >/dev/null 2>&1 &
			perf_pid=$!
		fi
		nap "$S"
		a1=$(ticks $PROWL) b1=$(ticks $PEER) c1=$(bpf_ns $PROWL) d1=$(bpf_ns $PEER) l1=$(lost)
		printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$r" "$W" $(((a1 - a0) * 10)) $(((b1 - b0) * 10)) \
			$((c1 - c0)) $((d1 - d0)) "$(kib $PROWL VmRSS)" "$(kib $PEER VmRSS)" \
			"$(cut -d' ' -f1-3 /proc/loadavg)" $((${l1:-0} - ${l0:-0})) >>"$TMP/rows.tsv"
		[ -z "$perf_pid" ] || wait "$perf_pid" || true
		kill "$W" 2>/dev/null || true
		wait "$W" 2>/dev/null || true
		bg_forget "$W"
		echo "peers.sh: round $r, $w done ($(uptime))" >&2
	done
done
nap 12  # the last windows reach both outputs (5 s windows, the peer's 20 % jitter)
PEAK_PROWL=$(kib $PROWL VmHWM) PEAK_PEER=$(kib $PEER VmHWM)
kill -INT $PROWL $PEER
wait $PROWL $PEER 2>/dev/null || true
bg_forget $PROWL
bg_forget $PEER
for f in "$TMP"/perf.*.data; do
	[ -e "$f" ] && perf script -i "$f" -F pid,ip,sym,dso >"${f%.data}.txt" 2>/dev/null || true
done
mkdir -p "$B/bench"
python3 tests/bench/peers_report.py "$TMP" "$PEAK_PROWL" "$PEAK_PEER" "$HZ" "$S" | tee "$B/bench/peers.md"
