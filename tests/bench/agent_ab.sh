#!/bin/bash
# agent_ab.sh: two prowl binaries' agents side by side on the same host and load (spin on
# every CPU), for a before/after comparison of CPU time and RSS as ratios from one run.
# Usage: sudo tests/bench/agent_ab.sh OLD_PROWL NEW_PROWL [SECONDS=300] [FREQ=100]
set -u
. "$(dirname "$0")/lib.sh"
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
	echo "agent-ab: error: usage: $0 OLD_PROWL NEW_PROWL [SECONDS] [FREQ] (two executable prowl binaries)" >&2
	exit 2
fi
S=${3:-300}
F=${4:-100}
B=${PROWL_BUILD:-build}
D=$(mktemp -d /tmp/prowl-agent-ab.XXXXXX)
trap 'kill $PO $PN $SP 2>/dev/null; wait 2>/dev/null; rm -rf "$D"' EXIT
cp "$1" "$D/old"
cp "$2" "$D/new"
"$B/workloads/spin" -t "$(nproc)" -s $((S + 60)) >/dev/null 2>&1 &
SP=$!
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
"$D/old" agent -F "$F" --interval 10s --dir "$D/do" --state-dir "$D/so" --metrics-address "127.0.0.1:$(port)" >"$D/lo" 2>&1 &
PO=$!
"$D/new" agent -F "$F" --interval 10s --dir "$D/dn" --state-dir "$D/sn" --metrics-address "127.0.0.1:$(port)" >"$D/ln" 2>&1 &
PN=$!
sleep 20
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
o0=$(cpu $PO); n0=$(cpu $PN); ro=0; rn=0; k=0
end=$((SECONDS + S))
while [ $SECONDS -lt $end ]; do
	sleep 10
	kill -0 $PO $PN 2>/dev/null || { echo "agent-ab: error: an agent died; logs in $D" >&2; trap - EXIT; exit 1; }
	ro=$((ro + $(kib $PO VmRSS))); rn=$((rn + $(kib $PN VmRSS))); k=$((k + 1))
done
o1=$(cpu $PO); n1=$(cpu $PN); ho=$(kib $PO VmHWM); hn=$(kib $PN VmHWM)
hz=$(getconf CLK_TCK)
printf '%s Hz, %s s, both CPUs busy\n' "$F" "$S"
printf '| agent | CPU %% of one CPU | mean RSS MiB | peak RSS MiB |\n|---|---|---|---|\n'
awk -v t=$((o1 - o0)) -v s="$S" -v hz="$hz" -v r=$ro -v k=$k -v h="$ho" 'BEGIN{printf "| old | %.3f | %.1f | %.1f |\n", 100*t/hz/s, r/k/1024, h/1024}'
awk -v t=$((n1 - n0)) -v s="$S" -v hz="$hz" -v r=$rn -v k=$k -v h="$hn" 'BEGIN{printf "| new | %.3f | %.1f | %.1f |\n", 100*t/hz/s, r/k/1024, h/1024}'
awk -v a=$((n1 - n0)) -v b=$((o1 - o0)) -v x=$rn -v y=$ro 'BEGIN{printf "| new / old | %.3f | %.3f | |\n", a/b, x/y}'
