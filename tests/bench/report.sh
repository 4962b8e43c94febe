#!/bin/bash
# report.sh: cost of `prowl report` and `prowl diff` over 1,000 files of the agent's
# directory, next to Google pprof merging the same files, and the HTML flame graph's size
# and first render in headless Chromium. Prints a Markdown section and writes it to
# $BUILD/bench/report.md. Needs root (the corpus comes from a real agent), $BUILD/prowl,
# $BUILD/tools/pprof, the workloads, GNU time, chromium and python3-websocket.
#
# Corpus: `prowl agent --interval 1s -F 499` over the whole host (a 1 s window at 499 Hz
# holds 2.6 times the samples of a default 10 s window at 19 Hz, which makes up for a
# shared machine giving the workloads less than a CPU each) while cpusplit, unw_qsort,
# spin and churn run as four services, until they have 1,000 window files; the oldest
# 1,000 of those four services are kept in $BUILD/bench/report-corpus and reused by later
# runs (REPORT_BENCH_REGEN=1 makes a new one).
# Each command runs REPORT_BENCH_ROUNDS (3) times under GNU time; the table gives the
# median wall time, the user+sys CPU of that run and the largest peak RSS.
# Exit status: 0 when every command succeeded, 1 otherwise.
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/bench/lib.sh

BUILD=${PROWL_BUILD:-build}
PROWL=$BUILD/prowl
PPROF=$BUILD/tools/pprof
CORPUS=$BUILD/bench/report-corpus
ROUNDS=${REPORT_BENCH_ROUNDS:-3}
NFILES=1000
OUT=$BUILD/bench/report.md

die() { echo "report-bench: error: $*" >&2; exit 1; }
log() { echo "report-bench: $*" >&2; }

[ "$(id -u)" = 0 ] || die "must run as root (the corpus comes from a real agent): sudo $0"
[ -x "$PROWL" ] || die "$PROWL is missing: run 'make' first"
[ -x "$PPROF" ] || die "$PPROF is missing: run 'make tools' first"
for w in cpusplit unw_qsort spin churn; do
	[ -x "$BUILD/workloads/$w" ] || die "$BUILD/workloads/$w is missing: run 'make workloads' first"
done
[ -x /usr/bin/time ] || die "GNU time is missing: apt-get install time"

TMP=$(mktemp -d /tmp/prowl-report-bench.XXXXXX)
cleanup() {
	local p
	[ -n "$NAP_PID" ] && kill "$NAP_PID" 2>/dev/null
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

corpus_files() { # every window file, oldest first (names start with the window's time)
	find "$CORPUS" -name '*.pb.gz' -printf '%f %p\n' 2>/dev/null | sort | cut -d' ' -f2
}

make_corpus() {
	local agent n
	rm -rf "$CORPUS"
	mkdir -p "$CORPUS"
	log "making the corpus: a whole-host agent at 1 s windows until $NFILES files (a few minutes)"
	# Private names: each workload is a service (its directory) of its own.
	for w in cpusplit unw_qsort spin churn; do cp "$BUILD/workloads/$w" "$TMP/rb_$w"; done
	"$TMP/rb_cpusplit" 3600 1 50/30/20 >/dev/null 2>&1 & BG_PIDS+=($!)
	"$TMP/rb_unw_qsort" 3600 >/dev/null 2>&1 & BG_PIDS+=($!)
	"$TMP/rb_spin" -t 1 -s 3600 >/dev/null 2>&1 & BG_PIDS+=($!)
	"$TMP/rb_churn" -r 50 -s 3600 >/dev/null 2>&1 & BG_PIDS+=($!)
	"$PROWL" agent --dir "$CORPUS" --state-dir "$TMP/state" --no-metrics --interval 1s -F 499 \
		--label bench=report 2>"$TMP/agent.log" & agent=$!
	BG_PIDS+=($agent)
	while :; do
		nap 5
		kill -0 "$agent" 2>/dev/null || die "the agent exited: $(tail -3 "$TMP/agent.log")"
		n=$(find "$CORPUS"/rb_* -name '*.pb.gz' 2>/dev/null | wc -l)
		[ "$n" -ge $((NFILES + 20)) ] && break
	done
	kill -TERM "$agent"
	wait "$agent"
	for p in "${BG_PIDS[@]}"; do kill "$p" 2>/dev/null; done
	BG_PIDS=()
	# Only the four services: the rest of a shared host would be noise of its own.
	find "$CORPUS" -mindepth 1 -maxdepth 1 ! -name 'rb_*' -exec rm -rf {} +
	corpus_files | tail -n +$((NFILES + 1)) | xargs -r rm -f
}

if [ "${REPORT_BENCH_REGEN:-0}" = 1 ] || [ "$(corpus_files | wc -l)" -ne $NFILES ]; then
	make_corpus
fi
mapfile -t FILES < <(corpus_files)
[ ${#FILES[@]} -eq $NFILES ] || die "the corpus has ${#FILES[@]} files, want $NFILES"
half=$((NFILES / 2))
# The 501st window's start splits the corpus in two halves for diff.
MID=$(basename "${FILES[$half]}" | sed -E 's/^(....)(..)(..)T(..)(..)(..)\.(...)Z.*/\1-\2-\3T\4:\5:\6.\7Z/')
FIRST=$(basename "${FILES[0]}" | cut -c1-15)
LAST=$(basename "${FILES[$((NFILES - 1))]}" | cut -c1-15)
BASE_ARGS=()
for f in "${FILES[@]:0:$half}"; do BASE_ARGS+=(-diff_base "$f"); done

# measure NAME CMD...: runs CMD ROUNDS times; stdout to $TMP/out; records "wall cpu rss".
declare -A WALL CPU RSS
measure() {
	local name=$1 i w u s r walls=() best
	shift
	for ((i = 0; i < ROUNDS; i++)); do
		/usr/bin/time -f '%e %U %S %M' -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err" ||
			die "$name failed: $(tail -2 "$TMP/err")"
		read -r w u s r <"$TMP/time"
		walls+=("$(awk -v w="$w" -v u="$u" -v s="$s" -v r="$r" 'BEGIN { printf "%s %.2f %s", w, u + s, r }')")
	done
	best=$(printf '%s\n' "${walls[@]}" | sort -n | sed -n "$(((ROUNDS + 1) / 2))p")
	WALL[$name]=$(cut -d' ' -f1 <<<"$best")
	CPU[$name]=$(cut -d' ' -f2 <<<"$best")
	RSS[$name]=$(printf '%s\n' "${walls[@]}" | cut -d' ' -f3 | sort -n | tail -1)
	log "$name: ${WALL[$name]} s, ${RSS[$name]} KiB"
}

measure report_top "$PROWL" report --dir "$CORPUS"
SAMPLES=$(head -1 "$TMP/out" | cut -d' ' -f1)
measure report_files "$PROWL" report -q "${FILES[@]}" -o "$TMP/merged.pb.gz"
measure report_html "$PROWL" report -q --dir "$CORPUS" -o "$TMP/merged.html"
HTML_BYTES=$(stat -c %s "$TMP/merged.html")
measure diff_text "$PROWL" diff --dir "$CORPUS" --base "..$MID" --new "$MID.."
measure diff_html "$PROWL" diff --dir "$CORPUS" --base "..$MID" --new "$MID.." -o "$TMP/diff.html"
DIFF_BYTES=$(stat -c %s "$TMP/diff.html")
measure pprof_proto "$PPROF" -proto -output "$TMP/pprof.pb.gz" "${FILES[@]}"
measure pprof_diff "$PPROF" -top "${BASE_ARGS[@]}" "${FILES[@]:$half}"

log "HTML: first render in headless Chromium (100k distinct stacks, and the corpus)"
/usr/bin/python3 tests/bench/html_render.py "$TMP" "$PROWL" "$TMP/merged.html" "$TMP/diff.html" >"$TMP/render.md" ||
	die "the render benchmark failed"

mib() { awk -v k="$1" 'BEGIN { printf "%.0f", k / 1024 }'; }     # KiB -> MiB
mib1() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; } # bytes -> MiB
row() { printf '| %s | %s | %s | %s |\n' "$1" "${WALL[$2]}" "${CPU[$2]}" "$(mib "${RSS[$2]}")"; }
{
	echo "### report and diff over $NFILES agent files"
	echo
	echo "Corpus: $NFILES window files of four services (cpusplit, unw_qsort, spin, churn) from"
	echo "\`prowl agent --interval 1s -F 499\`, $FIRST to $LAST UTC,"
	echo "$(du -sh "$CORPUS" | cut -f1) on disk, $SAMPLES samples. Median of $ROUNDS runs; $(nproc) CPUs;"
	echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| command | wall s | CPU s | peak RSS MiB |"
	echo "|---|---|---|---|"
	row "\`prowl report --dir\` (top functions)" report_top
	row "\`prowl report FILE×1000 -o merged.pb.gz\`" report_files
	row "\`prowl report --dir -o merged.html\` ($(mib1 "$HTML_BYTES") MiB page)" report_html
	row "\`prowl diff --dir --base ..MID --new MID..\` (text)" diff_text
	row "\`prowl diff ... -o diff.html\` ($(mib1 "$DIFF_BYTES") MiB page)" diff_html
	row "\`pprof -proto FILE×1000\` (Google pprof's merge)" pprof_proto
	row "\`pprof -top -diff_base FILE×500 FILE×500\`" pprof_diff
	echo
	cat "$TMP/render.md"
} | tee "$OUT"
