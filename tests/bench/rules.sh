#!/bin/bash
# rules.sh: the cost of recording rules. Prints a Markdown section and writes it to
# $BUILD/bench/rules.md. Needs root, $BUILD/prowl, $BUILD/bench/rules_bench,
# $BUILD/workloads/spin and churn, and curl.
#
#  1. Synthetic window: $BUILD/bench/rules_bench counts a busy window (50 series x 400
#     stacks x 30 frames, 3000 distinct functions) with 20 rules that have function
#     regexes: CPU per window (cold and warm function cache) and memory.
#  2. Real host: two agents side by side at 100 Hz, 10 s windows, one without rules and
#     one with the same 20 rules (group_by [service_name, function]), for
#     RULES_BENCH_SECONDS (120) while spin, churn (100 processes/s) and a find loop run.
#     Reported from each agent's /metrics: prowl_recording_eval_seconds_total per window,
#     label sets, prowl_recording_bytes, and each agent's CPU and RSS.
# Exit status: 0 if both parts ran; 1 on a setup error or a dead agent.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/lib.sh

BUILD=${PROWL_BUILD:-build}
SECS=${RULES_BENCH_SECONDS:-120}
die() { echo "rules-bench: error: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "must run as root (the agent loads BPF programs): sudo $0"
for f in prowl bench/rules_bench workloads/spin workloads/churn; do
	[ -x "$BUILD/$f" ] || die "$BUILD/$f is missing: run 'make all workloads $BUILD/bench/rules_bench'"
done
[[ $SECS =~ ^[1-9][0-9]*$ ]] && [ "$SECS" -ge 30 ] || die "RULES_BENCH_SECONDS must be a number >= 30"
command -v curl >/dev/null || die "curl is missing"

TMP=$(mktemp -d /tmp/prowl-rules-bench.XXXXXX) || die "cannot create a temporary directory"
cleanup() {
	local p
	trap - EXIT INT TERM
	[ -n "$NAP_PID" ] && kill "$NAP_PID" 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'echo "rules-bench: interrupted" >&2; exit 130' INT TERM
mkdir -p "$BUILD/bench" || die "cannot create $BUILD/bench"

regexes=('^runtime\\.(gc|mallocgc)' '^std::vector<' 'alloc' 'free$' '^__x64_sys_' '^do_syscall_64$'
	'^(memcpy|memmove|memset)' 'Lock$' '^ns3::mod1[0-9]::' '^ns[0-9]::mod2[0-9]::f[0-9]+$'
	'::(encode|decode)' '^ssl_|^SSL_' '^deflate|^inflate' 'json' '^Py(Eval|Object)_' '^hot_[ab]$'
	'sort' '^ext4_' 'hash' '^(mix|burn|work)')
{
	echo "recording_rules:"
	for i in "${!regexes[@]}"; do
		printf '  - metric: bench_rule%d_cpu_seconds_total\n    function: "%s"\n    self: %s\n' \
			"$i" "${regexes[$i]}" "$([ $((i % 4)) = 3 ] && echo true || echo false)"
		echo "    group_by: [service_name, function]"
	done
} >"$TMP/rules.yaml"
echo "log:" >"$TMP/none.yaml"
echo "  level: info" >>"$TMP/none.yaml"

port() { echo $((20000 + RANDOM % 40000)); }
declare -A PID PORT
start_agent() { # $1 = name, $2 = config
	local i
	PORT[$1]=$(port)
	"$BUILD/prowl" agent --config "$2" --state-dir "$TMP/$1" --metrics-address "127.0.0.1:${PORT[$1]}" \
		-F 100 --interval 10s >"$TMP/$1.log" 2>&1 &
	PID[$1]=$!
	BG_PIDS+=("${PID[$1]}")
	for i in $(seq 300); do
		curl -s -m 2 -o /dev/null "http://127.0.0.1:${PORT[$1]}/healthz" && return 0
		kill -0 "${PID[$1]}" 2>/dev/null || die "agent $1 failed: $(tail -3 "$TMP/$1.log" | tr '\n' ' ')"
		sleep 0.1
	done
	die "agent $1 did not answer within 30 s"
}
metric() { # $1 = file, $2 = name (sums every series of it)
	awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $NF } END { printf "%.6f", s + 0 }' "$1"
}

echo "rules-bench: synthetic window" >&2
SYN=$("$BUILD/bench/rules_bench") || die "rules_bench failed"

echo "rules-bench: two agents for ${SECS}s (no rules, 20 rules)" >&2
start_agent none "$TMP/none.yaml"
start_agent rules "$TMP/rules.yaml"
"$BUILD/workloads/spin" -t 1 -s "$SECS" >/dev/null 2>&1 &
BG_PIDS+=($!)
"$BUILD/workloads/churn" -r 100 -s "$SECS" >/dev/null 2>&1 &
BG_PIDS+=($!)
(while :; do find /usr/include -name '*.h' >/dev/null 2>&1; done) &
BG_PIDS+=($!)
nap "$SECS"
for a in none rules; do
	kill -0 "${PID[$a]}" 2>/dev/null || die "agent $a died: $(tail -3 "$TMP/$a.log" | tr '\n' ' ')"
	curl -s -m 5 "http://127.0.0.1:${PORT[$a]}/metrics" >"$TMP/$a.metrics" || die "cannot read agent $a's /metrics"
done
W=$(metric "$TMP/rules.metrics" prowl_windows_total)
EV=$(metric "$TMP/rules.metrics" prowl_recording_eval_seconds_total)
EV0=$(metric "$TMP/none.metrics" prowl_recording_eval_seconds_total)
W0=$(metric "$TMP/none.metrics" prowl_windows_total)
row() { # $1 = agent
	local m=$TMP/$1.metrics
	printf '| %s | %s | %.3f | %.1f | %d | %.1f | %.1f |\n' "$1" "$(metric "$m" prowl_recording_rules | cut -d. -f1)" \
		"$(awk -v e="$(metric "$m" prowl_recording_eval_seconds_total)" -v w="$(metric "$m" prowl_windows_total)" \
		'BEGIN { print (w > 0 ? e / w * 1000 : 0) }')" "$(metric "$m" prowl_recording_bytes | awk '{print $1 / 1024}')" \
		"$(metric "$m" prowl_recording_series | cut -d. -f1)" \
		"$(metric "$m" process_cpu_seconds_total | awk -v s="$SECS" '{print $1 / s * 100}')" \
		"$(metric "$m" process_resident_memory_bytes | awk '{print $1 / 1048576}')"
}
OUT=$(cat <<EOF
### Recording rules ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r))

#### 1. Synthetic busy window (\`$BUILD/bench/rules_bench\`)

\`\`\`
$SYN
\`\`\`

#### 2. Whole host, ${SECS} s, 100 Hz, 10 s windows (spin -t 1, churn -r 100, a find loop)

| agent | rules | ms CPU per window in rules | KiB prowl_recording_bytes | label sets | agent CPU % of one CPU | agent RSS MiB |
| --- | --- | --- | --- | --- | --- | --- |
$(row none)
$(row rules)

Windows counted: ${W%.*} (20 rules), ${W0%.*} (no rules); CPU in rule evaluation: ${EV} s vs ${EV0} s (the built-in counter alone).
EOF
)
echo "$OUT" | tee "$BUILD/bench/rules.md"
