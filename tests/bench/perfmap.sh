#!/bin/bash
# perfmap.sh: the perf map made to be slow to read (issue 24 item 3): about 32 MB, 900,000
# entries in address order but one per 64 KiB chunk going back before all others. Runs
# `prowl record -p PID -d 4` on jitspin (JIT-like code that entry 500,000 names) ROUNDS
# times and prints wall and CPU time (GNU time) and samples lost, for each binary given.
# Usage: tests/bench/perfmap.sh [PROWL...]   (default: build/prowl); PERFMAP_ROUNDS (3)
set -euo pipefail
cd "$(dirname "$0")/../.."
[ "$(id -u)" = 0 ] || { echo "perfmap.sh: error: run as root (BPF and perf events)" >&2; exit 1; }
[ -x build/workloads/jitspin ] || { echo "perfmap.sh: error: build/workloads/jitspin is missing: run make workloads" >&2; exit 1; }
[ -x /usr/bin/time ] || { echo "perfmap.sh: error: /usr/bin/time is missing: apt-get install time" >&2; exit 1; }
ROUNDS=${PERFMAP_ROUNDS:-3}
[ $# -gt 0 ] || set -- build/prowl
TMP=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT

write_map() { # $1 = path
	python3 - "$1" <<'PY'
import sys
per_chunk = 65536 // 36
with open(sys.argv[1], "w") as f:
    for i in range(900_000):
        if i == 500_000:
            f.write("200000000000 1000 jit_spin_loop\n")
        elif i % per_chunk == per_chunk // 2:
            f.write(f"{0x100000000000 + 0x40 * i:x} 40 back_{i:07d}_\n")
        else:
            f.write(f"{0x300000000000 + 0x40 * i:x} 40 js_function_{i:07d}_\n")
PY
}

echo "| binary | round | map | wall s | user s | sys s | samples | lost |"
echo "|---|---|---|---|---|---|---|---|"
for bin in "$@"; do
	for r in $(seq "$ROUNDS"); do
		for kind in hostile none; do
			build/workloads/jitspin 60 >"$TMP/addr" &
			w=$!
			sleep 0.3
			[ "$kind" = hostile ] && write_map "/tmp/perf-$w.map"
			/usr/bin/time -f '%e %U %S' -o "$TMP/time" "$bin" record -p "$w" -d 4 -F 99 -o "$TMP/x.pb.gz" >"$TMP/out" 2>&1
			kill "$w"; wait "$w" 2>/dev/null || true
			rm -f "/tmp/perf-$w.map"
			read -r wall user sys <"$TMP/time"
			s=$(sed -n 's/^Wrote .*: \([0-9]*\) samples in .*, \([0-9]*\) lost.*/\1 | \2/p' "$TMP/out")
			echo "| $bin | $r | $kind | $wall | $user | $sys | $s |"
		done
	done
done
