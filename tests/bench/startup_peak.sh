#!/bin/bash
# startup_peak.sh: the start-up peak RSS of prowl builds on this host as it is (issue 13 §5):
# per build and round, the agent's VmHWM and steady RSS, and the peak of `record -a`.
# Usage: sudo tests/bench/startup_peak.sh [-r ROUNDS] [-s AGENT_SECONDS] PROWL...
# The host's load is the caller's: start the programs to profile first (BENCHMARKS.md).
set -u
. "$(dirname "$0")/lib.sh"
R=2; S=40
while getopts r:s: o; do case $o in r) R=$OPTARG ;; s) S=$OPTARG ;; *) exit 2 ;; esac; done
shift $((OPTIND - 1))
if [ $# -lt 1 ] || [ "$S" -lt 20 ]; then
	echo "startup_peak: error: usage: $0 [-r ROUNDS] [-s SECONDS >= 20] PROWL... (prowl binaries to compare)" >&2
	exit 2
fi
for b in "$@"; do [ -x "$b" ] || { echo "startup_peak: error: $b is not an executable prowl" >&2; exit 2; }; done
D=$(mktemp -d /tmp/prowl-startup-peak.XXXXXX)
P=
trap '[ -n "$P" ] && kill $P 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
echo "| round | prowl | agent peak MiB (VmHWM, ${S} s) | agent steady MiB (median RSS, seconds $((S / 2))-${S}) | record -a -d 10s peak MiB |"
echo "|---|---|---|---|---|"
for r in $(seq "$R"); do
	for b in "$@"; do
		rm -rf "$D/run"; mkdir -p "$D/run"
		"$b" agent -F 100 --interval 10s --dir "$D/run/d" --state-dir "$D/run/s" \
			--metrics-address "127.0.0.1:$((20000 + RANDOM % 20000))" >"$D/run/log" 2>&1 &
		P=$!
		: >"$D/run/rss"
		for i in $(seq "$S"); do
			sleep 1
			v=$(kib $P VmRSS) || break
			[ -n "$v" ] || break
			[ "$i" -gt $((S / 2)) ] && echo "$v" >>"$D/run/rss"
		done
		h=$(kib $P VmHWM)
		kill $P 2>/dev/null; wait $P 2>/dev/null; P=
		if [ -z "$h" ]; then
			echo "startup_peak: error: the agent of $b died; its log:" >&2
			tail -3 "$D/run/log" >&2
			exit 1
		fi
		med=$(sort -n "$D/run/rss" | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}')
		rec=$(/usr/bin/time -f %M "$b" record -q -a -d 10s -o "$D/run/h.pb.gz" 2>&1 >/dev/null | tail -1)
		echo "| $r | $b | $(mib "$h") | $(mib "$med") | $(mib "$rec") |"
	done
done
