#!/bin/bash
# symbolize.sh: cold symbolization of 100,000 distinct addresses in libc and in the
# largest binaries on the machine, without and with demangling (time, peak RSS), and
# the heap of a perf map of 100,000 JIT symbols (issue 8). Prints a Markdown section
# and writes it to $BUILD/bench/symbolize.md. Needs $BUILD/bench/symbolize_bench.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${PROWL_BUILD:-build}
N=${SYMBOLIZE_BENCH_ADDRESSES:-100000}
B=$BUILD/bench/symbolize_bench
[ -x "$B" ] || { echo "symbolize.sh: $B is not built (make $B)" >&2; exit 1; }
files=(/usr/lib/x86_64-linux-gnu/libc.so.6)
# The largest ELF executables and libraries here (chromium, node, libLLVM, ...).
while read -r f; do files+=("$f"); done < <(find /usr/bin /usr/lib -type f -size +60M -perm -u+x 2>/dev/null |
	while read -r f; do head -c 4 "$f" | grep -q ELF && echo "$f"; done | xargs -r ls -S | head -3)
out=$BUILD/bench/symbolize.md
mkdir -p "$(dirname "$out")"
{
	echo "## Cold symbolization (issue 8): $N distinct addresses per file, $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "| file | size | demangle | seconds | µs/address | named | demangled | peak RSS |"
	echo "|---|---:|---|---:|---:|---:|---:|---:|"
	for f in "${files[@]}"; do
		# "Cold" is prowl's state, not the page cache's: one pass first reads the file.
		"$B" "$f" "$N" none > /dev/null
		for mode in none templates full; do
			line=$("$B" "$f" "$N" "$mode") || { echo "| $f | | $mode | failed | | | | |"; continue; }
			v() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<<"$line"; }
			printf '| %s | %s MiB | %s | %s | %s | %s | %s | %s MiB |\n' "$f" "$(($(stat -c %s "$f") >> 20))" \
				"$mode" "$(v seconds)" "$(v us_per_address)" "$(v named)" "$(v demangled)" \
				"$(awk -v k="$(v peak_rss_kib)" 'BEGIN { printf "%.1f", k / 1024 }')"
		done
	done
	echo
	line=$("$B" --perfmap 100000)
	echo "Perf map of 100,000 JIT symbols (Node-style names): $(sed -n 's/.*heap_bytes=\([0-9]*\).*/\1/p' <<<"$line") bytes of heap," \
		"$(sed -n 's/.*bytes_per_symbol=\([0-9.]*\).*/\1/p' <<<"$line") bytes per symbol."
} | tee "$out"
