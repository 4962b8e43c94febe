#!/bin/bash
# node.sh: benchmarks of the V8 walk (issue 29): BPF cost per sample with 30 JavaScript
# frames against the same node with --node=off, interleaved; the user-space naming of a
# node with 20,000 functions, and with 20,000 methods of 2,000 classes (cache, prowl's CPU
# and memory; record -v); and the throughput
# of a Node workload (one node per CPU) with no profiler and under `prowl record -a -F 99`,
# interleaved in rounds. The load average is printed beside each figure. Writes build/bench/node.md.
# Knobs: NODE_BENCH_SECONDS (8), NODE_BENCH_ROUNDS (3), NODE_BENCH_PARTS ("cost names throughput"), NODE.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/bench/lib.sh
B=${PROWL_BUILD:-build}
NODE=${NODE:-/usr/bin/node}
[ "$(id -u)" = 0 ] || { echo "node.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
[ -x "$B/prowl" ] || { echo "node.sh: error: $B/prowl is missing: run make all" >&2; exit 1; }
[ -x "$NODE" ] || { echo "node.sh: error: no node at $NODE: apt-get install nodejs" >&2; exit 1; }
OUT=$B/bench/node.md
load() { cut -d' ' -f1-3 /proc/loadavg; }
S=${NODE_BENCH_SECONDS:-8} ROUNDS=${NODE_BENCH_ROUNDS:-3} TMP=$(mktemp -d)
PARTS=${NODE_BENCH_PARTS:-"cost names throughput"}
part() { [[ " $PARTS " == *" $1 "* ]]; }
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT
mkdir -p "$B/bench"

# deep.js: a busy loop under 30 frames of a recursive function (Sparkplug only, so that
# none is inlined: 30 frames on the stack); chain.js: the same under 30 distinct functions
# (the walk's per-sample caches of functions do not help there). many.js: 20,000 small functions called in
# turn; classes.js: the same as 2,000 classes of 10 methods (the class lexer's share).
# count.js: rounds of a busy loop for argv[2] seconds, printed at the end.
cat >"$TMP/deep.js" <<'JS'
'use strict';
function spin(n) { let x = 1; for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003; return x; }
function deep(d) { return d === 0 ? spin(100000) : deep(d - 1) + 1; }
const end = Date.now() + Number(process.argv[2]) * 1000;
let sink = 0;
while (Date.now() < end) sink += deep(29);
if (sink === 42) console.log(sink);
JS
{
	echo "'use strict';"
	echo "function spin(n) { let x = 1; for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003; return x; }"
	echo "function f29() { return spin(100000); }"
	for i in $(seq 28 -1 0); do echo "function f$i() { return f$((i + 1))() + 1; }"; done
	echo "const end = Date.now() + Number(process.argv[2]) * 1000; let sink = 0;"
	echo "while (Date.now() < end) sink += f0();"
	echo "if (sink === 42) console.log(sink);"
} >"$TMP/chain.js"
{
	echo "'use strict';"
	for i in $(seq 0 19999); do echo "function f$i(x) { for (let k = 0; k < 40; k++) x = (x * 31 + $i) % 1000003; return x; }"; done
	echo "const all = [$(seq -s, -f 'f%g' 0 19999)];"
	echo "const end = Date.now() + Number(process.argv[2]) * 1000; let x = 1;"
	echo "while (Date.now() < end) for (const f of all) x = f(x);"
	echo "if (x === 42) console.log(x);"
} >"$TMP/many.js"
{
	echo "'use strict';"
	for c in $(seq 0 1999); do
		echo "class C$c {"
		for m in $(seq 0 9); do echo "  m$m(x) { for (let k = 0; k < 40; k++) x = (x * 31 + $((c * 10 + m))) % 1000003; return x; }"; done
		echo "}"
	done
	echo "const all = [];"
	echo "for (const C of [$(seq -s, -f 'C%g' 0 1999)]) { const o = new C(); for (let m = 0; m < 10; m++) all.push(o['m' + m].bind(o)); }"
	echo "const end = Date.now() + Number(process.argv[2]) * 1000; let x = 1;"
	echo "while (Date.now() < end) for (const f of all) x = f(x);"
	echo "if (x === 42) console.log(x);"
} >"$TMP/classes.js"
cat >"$TMP/count.js" <<'JS'
'use strict';
function spin(n) { let x = 1; for (let i = 0; i < n; i++) x = (x * 31 + i) % 1000003; return x; }
const end = Date.now() + Number(process.argv[2]) * 1000;
let rounds = 0, sink = 0;
while (Date.now() < end) { sink += spin(10000); rounds++; }
console.log(sink === 42 ? 0 : rounds);
JS

cost() { # $1 = on|off, $2 = deep|chain: BPF cost per sample at 999 Hz
	"$NODE" --max-opt=1 "$TMP/$2.js" $((S + 5)) >/dev/null 2>&1 &
	local w=$!
	sleep 2
	echo "| 30 JavaScript frames, $2.js | --node=$1 | $(bpf_cost $w --node="$1") | $(load) |"
}

names() { # $1 = many|classes: prowl's CPU time and the JavaScript name cache over 20,000 functions, 999 Hz
	"$NODE" "$TMP/$1.js" $((S + 10)) >/dev/null 2>&1 &
	local w=$! out t
	sleep 5
	out=$( { /usr/bin/time -f 'TIME %U %S %M' "$B/prowl" record -v -F 999 -p $w -d "${S}s" -o "$TMP/m.pb.gz"; } 2>&1)
	kill $w 2>/dev/null || true
	wait $w 2>/dev/null || true
	t=$(grep -oE '^TIME .*' <<<"$out")
	echo "| $([ "$1" = many ] && echo "20,000 functions" || echo "20,000 methods of 2,000 classes") | $(awk '{printf "%.2f s | %d MiB", $2 + $3, $4 / 1024}' <<<"$t") | $(grep -oE 'node: [0-9]+ names cached.*' <<<"$out" | tail -1) | $(load) |"
}

throughput() { # $1 = none|prowl: one per CPU for S seconds; the rounds summed
	per_cpu_rounds "$1" "$S" "$NODE" "$TMP/count.js" "$S"
}

{
	if part cost; then
	echo "BPF cost per sample (PROWL_BPF_TIMING=1), 30 JavaScript frames (Sparkplug) of one recursive function (deep.js) and of 30 functions (chain.js), ${S} s at 999 Hz:"
	echo
	echo "| stack | mode | cost | load (1, 5, 15 min) |"
	echo "|---|---|---|---|"
	for r in 1 2; do for js in deep chain; do cost on $js; cost off $js; done; done
	echo
	fi
	if part names; then
	echo "Naming 20,000 functions, ${S} s at 999 Hz (prowl's CPU and peak RSS, record -v):"
	echo
	echo "| program | prowl CPU | peak RSS | JavaScript name cache | load |"
	echo "|---|---|---|---|---|"
	names many
	names classes
	echo
	fi
	part throughput || exit 0
	echo "Throughput, one count.js per CPU, ${S} s, rounds in turn ($ROUNDS rounds), load before: $(load):"
	echo
	declare -A sum=([none]=0 [prowl]=0)
	ratios=()
	for r in $(seq "$ROUNDS"); do
		declare -A v=()
		for m in $([ $((r % 2)) = 1 ] && echo none prowl || echo prowl none); do
			v[$m]=$(throughput "$m")
			sum[$m]=$((sum[$m] + v[$m]))
			echo "round $r $m: ${v[$m]} (load $(load))"
		done
		ratios+=("$(awk -v a="${v[prowl]}" -v b="${v[none]}" 'BEGIN { printf "%.4f", a / b }')")
	done
	echo
	echo "| mode | rounds (sum of $ROUNDS runs) | against no profiler | per-round ratios |"
	echo "|---|---|---|---|"
	echo "| no profiler | ${sum[none]} | 1.0000 | |"
	echo "| prowl record -a -F 99 | ${sum[prowl]} | $(awk -v a="${sum[prowl]}" -v b="${sum[none]}" 'BEGIN { printf "%.4f", a / b }') | ${ratios[*]} |"
} | tee "$OUT"
