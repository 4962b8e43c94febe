#!/bin/bash
# run.sh: runs prowl's whole test suite: the include graph (tests/layout), C unit
# tests and end-to-end tests (as root, real BPF) on build/, then on build-san/
# (ASan+UBSan: the unit tests and the e2e tests that feed prowl untrusted input, SAN_E2E
# below), with each libFuzzer harness for 6 s beside the latter when FUZZ_BUILD names their
# build, and the arm64 cross build when ARM64_BUILD names its directory; then the kernel
# matrices (tests/kmatrix: Debian's kernels under QEMU) of build/ and of the arm64 build;
# checks that every line the mutation check breaks is still in the sources
# (tests/mutation.sh --check); lists every skipped test with its reason and ends with
# "N passed, N failed, N skipped".
# With SIDE_BUILDS=1 (make test) the sanitizer build (the BUILD_DIR named *san*), FUZZ_BUILD
# and ARM64_BUILD are compiled here, beside the first e2e pass at idle priority.
# Usage: [SIDE_BUILDS=1] [FUZZ_BUILD=DIR] [ARM64_BUILD=DIR] tests/run.sh [--quick] [BUILD_DIR...]   (default: build build-san)
# --quick (make check-quick, the inner loop): the unit tests and one e2e test per stage
# (QUICK_E2E), on each build; no kernel matrix, no fuzzing.
set -u
cd "$(dirname "$0")/.."
# The sanitizer build stops at the first undefined behaviour, so the test fails.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1"
passed=0
failed=0
skipped=0
failures=()
skips=()

run_unit() { # $1 = build dir
	local t out rc n_ok n_bad n_skip name line reason dir p fin live=() keep
	echo "== unit tests ($1)"
	# Two test programs at a time (each is one process, and this machine has two CPUs);
	# their outputs are read in order afterwards. Only their own pids are counted and
	# waited for: the kernel downloads (kmatrix_fetch) run in the background meanwhile.
	dir=$(mktemp -d)
	for t in "$1"/tests/test_*; do
		[ -x "$t" ] || continue
		while [ ${#live[@]} -ge "$(nproc)" ]; do
			wait -n -p fin "${live[@]}"
			keep=()
			for p in "${live[@]}"; do [ "$p" = "$fin" ] || keep+=("$p"); done
			live=("${keep[@]}")
		done
		(PPROF="$PWD/$1/tools/pprof" "$t" >"$dir/${t##*/}.out" 2>&1; echo $? >"$dir/${t##*/}.rc") &
		live+=($!)
	done
	for p in "${live[@]}"; do wait "$p"; done
	for t in "$1"/tests/test_*; do
		[ -x "$t" ] || continue
		out=$(cat "$dir/${t##*/}.out")
		rc=$(cat "$dir/${t##*/}.rc")
		n_ok=$(grep -c '^\[       OK \]' <<<"$out")
		n_bad=$(grep -c '^\[  FAILED  \] [a-z_]' <<<"$out")
		# cmocka prints "[  SKIPPED ] name" when the test skips and again in its summary.
		n_skip=$(grep -E '^\[  SKIPPED \] [a-z_]' <<<"$out" | sort -u | grep -c .)
		if [ $rc -ne 0 ] && [ "$n_bad" -eq 0 ]; then n_bad=1; fi
		passed=$((passed + n_ok))
		failed=$((failed + n_bad))
		skipped=$((skipped + n_skip))
		# A skip's reason is the "skipped: ..." line (testutil.h's skip_because) before it.
		reason=""
		running=""
		while IFS= read -r line; do
			case "$line" in
			"[ RUN      ] "*) running=${line#\[ RUN      \] } ;;
			"skipped: "*) reason=${line#skipped: } ;;
			"[  SKIPPED ] $running")
				skips+=("$1/$(basename "$t"):$running: ${reason:-no reason given (use skip_because)}")
				reason=""
				running="" ;;
			esac
		done <<<"$out"
		if [ $rc -ne 0 ]; then
			failures+=("$1/$(basename "$t")")
			echo "$out" | tail -40
		fi
		printf '%-28s %3d passed, %d failed, %d skipped\n' "$(basename "$t")" "$n_ok" "$n_bad" "$n_skip"
	done
	rm -rf "$dir"
}

# The e2e files the sanitizer build runs: those in which prowl reads what another
# user or a remote peer controls (hostile ELF files, perf maps, names, profiles,
# HTTP answers, Go tables, cgroup names, interpreter memory). The rest, and the tests in
# these files marked trusted (no hostile input: conftest.py skips them here), runs on the
# normal build only; those marked sanitizer_pass run here only. FILE::TEST names one test
# of a file whose whole run costs too much under the sanitizers (test_offcpu: 36 s; its
# hostile profiles here, under a second).
SAN_E2E=(test_untrusted test_hostile test_rules_hostile test_agent_inputs test_agent_faults test_report
	test_debuginfod test_kubernetes test_jit test_names test_go test_containers test_python
	test_python_versions test_java_hostile test_node_hostile
	test_offcpu::test_report_refuses_bad_off_cpu_values)

# make check-quick's e2e tests: one per stage of the README's stage table, each a few
# seconds, so the inner loop stays under 5 minutes. A stage that moves keeps its line here.
QUICK_E2E=(
	test_record.py::test_usage_errors_exit_2              # commands
	test_record.py::test_cpu_split_matches_design         # sample
	test_unwind.py::test_recursion_depth_100_complete     # unwind
	test_python.py::test_c_extension_frames_under_the_python_caller # python
	test_node.py::test_jitless_busy_loop_line             # node
	test_record.py::test_compressed_debug_sections_inflate_into_unnamed_files # objects
	test_record.py::test_symbols_agree_with_eu_addr2line  # resolve
	test_names.py::test_cpp_templates_full_and_none       # resolve: names
	test_containers.py::test_every_shape_gets_its_container_id # label
	test_agent.py::test_all_exporters_agree               # aggregate, encode, export
	test_agent.py::test_metrics_endpoint                  # serve
	test_report.py::test_diff_json_agrees_with_pprof      # read back
	test_hostile.py::test_symlink_in_the_state_directory_is_not_followed # hostile input
)

run_e2e() { # $1 = build dir, $2 = "quick" for the sanitizer subset without the long captures,
	# "stages" for QUICK_E2E
	local line p f e s log="$1/e2e.log" quick=0 files=(tests/e2e) t
	if [ "$2" = quick ]; then
		quick=1
		files=()
		for t in "${SAN_E2E[@]}"; do
			f=tests/e2e/${t%%::*}.py
			[ -f "$f" ] && files+=("$f${t#"${t%%::*}"}")
		done
	elif [ "$2" = stages ]; then
		files=()
		for t in "${QUICK_E2E[@]}"; do
			if [ ! -f "tests/e2e/${t%%::*}" ]; then
				failed=$((failed + 1))
				failures+=("QUICK_E2E names tests/e2e/${t%%::*}, which is gone: update tests/run.sh")
				continue
			fi
			files+=("tests/e2e/$t")
		done
	fi
	echo "== end-to-end tests ($1)"
	if [ "$(id -u)" != 0 ]; then
		echo "end-to-end tests need root (BPF and perf events): run as root" >&2
		failed=$((failed + 1))
		failures+=("$1/e2e (not root)")
		return
	fi
	# -rfEs: pytest's short summary names each failure, error and skip (with its reason).
	PROWL_TEST_BUILD="$1" PROWL_TEST_QUICK=$quick PROWL_TEST_SAN_PASS=$san_pass /usr/bin/python3 -m pytest -q -rfEs --durations=25 -p no:cacheprovider \
		"${files[@]}" 2>&1 | tee "$log"
	line=$(grep -E '(passed|failed|error|skipped|no tests ran)' "$log" | tail -1)
	p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || true)
	f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || true)
	e=$(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || true)
	s=$(grep -oE '[0-9]+ skipped' <<<"$line" | grep -oE '[0-9]+' || true)
	[ -n "$p$f$e" ] || f=1
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0} + ${e:-0}))
	skipped=$((skipped + ${s:-0}))
	# "SKIPPED [2] tests/e2e/x.py:67: reason": one entry per line, with its count.
	while IFS= read -r line; do
		skips+=("$1/e2e ${line#SKIPPED }")
	done < <(grep -E '^SKIPPED \[[0-9]+\] ' "$log")
	if [ "${f:-0}" != 0 ] || [ "${e:-0}" != 0 ]; then failures+=("$1/e2e"); fi
}

# Work beside the tests, in two rounds. During the sanitizer e2e pass (tests without
# time figures, which leave about 40 % of the two CPUs idle), at nice 10: the fuzzers and,
# when ARM64_BUILD names it, the arm64 cross build (side_start, side_end). Then the
# kernel matrices, x86_64's and arm64's at once at full priority (a starved guest's
# captures hold too few samples to judge), two guests at a time between them:
# kmatrix_start, kmatrix_end.
fuzz_pid=""
arm64_make_pid=""
side_builds_pid=""
side_builds_san=""

# idle CMD...: CMD at the scheduler's idle priority (SCHED_IDLE: it runs only on a CPU
# nothing else wants, and any other task that wakes takes the CPU from it at once) and
# the idle I/O class. make's MAKEFLAGS is cleared: the caller's jobserver is not passed.
idle() {
	MAKEFLAGS= chrt -i 0 ionice -c 3 "$@"
}

# With SIDE_BUILDS=1 (make test): the sanitizer and fuzzer builds, then the arm64 cross
# build, at idle priority beside the first e2e pass, which leaves much of the two CPUs
# idle (its "% busy" below); they were 90 s of the suite's start, before the tests.
# $1 = the build that the sanitizer build takes its tools and workloads from (the
# workloads are built without sanitizers in every build), $2 = the sanitizer build.
side_builds_start() {
	[ "${SIDE_BUILDS:-0}" = 1 ] && [ -z "$side_builds_pid" ] || return 0
	local san=$2
	side_builds_san=$san
	echo "== sanitizer${FUZZ_BUILD:+ and fuzzer} builds (at idle priority, in the background: $san.log)"
	(
		set -e
		idle make --no-print-directory O="$san" SAN=1 all unit
		mkdir -p "$san/tools" "$san/workloads"
		cp "$1/tools/pprof" "$san/tools/pprof"
		cp -a "$1/workloads/." "$san/workloads/"
		if [ -n "${FUZZ_BUILD:-}" ]; then idle make --no-print-directory O="$FUZZ_BUILD" FUZZ=1 fuzzers; fi
	) >"$san.log" 2>&1 &
	side_builds_pid=$!
	arm64_build_start "at idle priority" idle
}

# arm64_build_start HOW CMD...: the arm64 cross build and package (ARM64_BUILD), once, in
# the background under CMD (a priority: idle, nice -n 10), HOW saying which.
arm64_build_start() {
	local how=$1
	shift
	[ -n "${ARM64_BUILD:-}" ] && [ -z "$arm64_make_pid" ] || return 0
	echo "== arm64 cross build ($ARM64_BUILD, $how, in the background: $ARM64_BUILD/make.log)"
	mkdir -p "$ARM64_BUILD"
	"$@" make --no-print-directory ARCH=arm64 O="$ARM64_BUILD" all workloads deb >"$ARM64_BUILD/make.log" 2>&1 &
	arm64_make_pid=$!
}

side_builds_wait() { # the sanitizer and fuzzer builds, ended (the arm64 build: side_end)
	[ -n "$side_builds_pid" ] || return 0
	if ! wait "$side_builds_pid"; then
		tail -20 "$side_builds_san.log"
		failed=$((failed + 1))
		failures+=("$side_builds_san (the sanitizer or fuzzer build failed: $side_builds_san.log)")
	fi
	side_builds_pid=""
}

side_start() {
	if [ -n "${FUZZ_BUILD:-}" ]; then
		if [ -x "$FUZZ_BUILD/fuzz/fuzz_procmaps" ]; then
			echo "== fuzzing ($FUZZ_BUILD, ${FUZZ_SUITE_SECONDS:-6} s per harness, in the background)"
			rm -f "$FUZZ_BUILD/fuzz/results.txt"
			nice -n 10 tests/fuzz/run.sh "$FUZZ_BUILD" "${FUZZ_SUITE_SECONDS:-6}" >"$FUZZ_BUILD/fuzz/run.log" 2>&1 &
			fuzz_pid=$!
		else
			failed=$((failed + 1))
			failures+=("$FUZZ_BUILD (fuzzers not built)")
		fi
	fi
	arm64_build_start "at nice 10" nice -n 10
}

side_end() {
	local h c n corpus why
	if [ -n "$fuzz_pid" ]; then
		wait "$fuzz_pid"
		echo "== fuzzing ($FUZZ_BUILD)"
		cat "$FUZZ_BUILD/fuzz/run.log"
		if [ ! -s "$FUZZ_BUILD/fuzz/results.txt" ]; then
			failed=$((failed + 1))
			failures+=("$FUZZ_BUILD/fuzz (tests/fuzz/run.sh wrote no results)")
		fi
		# One test per harness: its regression inputs replayed and no new crash. A
		# failure names the sanitizer's summary line, so the last lines of a CI log tell why.
		while read -r h n corpus c; do
			case "$h" in harness|total|"") continue ;; esac
			if [ "$c" = 0 ] && [ "$n" -gt 0 ]; then
				passed=$((passed + 1))
			else
				failed=$((failed + 1))
				why=$(grep -hE '^SUMMARY|ERROR' "$FUZZ_BUILD/fuzz/logs/$h.regress" "$FUZZ_BUILD/fuzz/logs/$h" 2>/dev/null |
					head -1 | cut -c1-160)
				failures+=("$FUZZ_BUILD/fuzz_$h (${why:-$n executions, $c crashes: see $FUZZ_BUILD/fuzz/logs/$h})")
			fi
		done < <(cat "$FUZZ_BUILD/fuzz/results.txt" 2>/dev/null)
	fi
	if [ -n "$arm64_make_pid" ] && ! wait "$arm64_make_pid"; then
		tail -20 "$ARM64_BUILD/make.log"
		failed=$((failed + 1))
		failures+=("$ARM64_BUILD (the arm64 cross build failed: $ARM64_BUILD/make.log)")
		arm64_make_pid=""
	fi
}

km_pids=()
km_logs=()
km_slots="" # kmatrix.py --share-slots: lock files in the first matrix's build directory
km_fetch_pids=()
kmatrix_fetch() { # $1 = build dir, $2 = x86 or arm64: its kernels (and packages), downloaded
	# first, in the background, while the tests run (a fresh clone spent 40 s on them after)
	mkdir -p "$1"
	/usr/bin/python3 tests/kmatrix/kmatrix.py --arch "$2" --build "$1" --fetch-only >"$1/kmatrix-fetch.log" 2>&1 &
	km_fetch_pids+=($!)
}

kmatrix_fetch_wait() { # the downloads kmatrix_fetch started, ended
	local p
	for p in "${km_fetch_pids[@]}"; do wait "$p"; done
	km_fetch_pids=()
}

kmatrix_start() { # $1 = build dir, $2 = x86 or arm64, then kmatrix.py's own arguments
	local d=$1 arch=$2 log=$1/kmatrix.log p
	shift 2
	km_slots=${km_slots:-$(realpath "$d")/kmatrix-slots}
	kmatrix_fetch_wait # (a failed download is tried again by the run itself)
	echo "== kernel matrix ($arch, $d, in the background: $log)"
	# Both matrices take their guests' slots from one directory: two guests at a time
	# between them (four at once starved prowl inside them: its off-CPU checks failed).
	/usr/bin/python3 tests/kmatrix/kmatrix.py --arch "$arch" --build "$d" --jobs 2 --seconds 2 --no-host \
		--share-slots "$km_slots" "$@" >"$log" 2>&1 &
	km_pids+=($!)
	km_logs+=("$log")
}

kmatrix_end() {
	local i line n m log
	for i in "${!km_pids[@]}"; do
		wait "${km_pids[$i]}"
		log=${km_logs[$i]}
		echo "== kernel matrix (${log%/kmatrix.log})"
		cat "$log"
		line=$(grep -E '^kernel matrix: [0-9]+ of [0-9]+ checks passed' "$log" | tail -1)
		if [ -z "$line" ]; then
			failed=$((failed + 1))
			failures+=("${log%/kmatrix.log}/kernel-matrix (did not run to the end)")
			continue
		fi
		n=$(awk '{print $3}' <<<"$line")
		m=$(awk '{print $5}' <<<"$line")
		passed=$((passed + n))
		failed=$((failed + m - n))
		[ "$n" = "$m" ] || failures+=("${log%/kmatrix.log}/kernel-matrix")
		# Each failed check with its reason, into the run's last lines (a CI log shows its tail).
		while IFS= read -r line; do
			failures+=("$line")
		done < <(grep -E '^kernel matrix failed: ' "$log" | cut -c1-400)
	done
}

# The include graph (tests/layout/include_graph.py): folders and modules depend one
# way, in the order of README.md's stage table. Once per run, before the builds: it reads the sources, not a build.
run_layout() {
	local out
	echo "== include graph"
	# First on a scratch tree with circles, which it must report (a check that cannot fail is no check).
	if ! out=$(/usr/bin/python3 tests/layout/include_graph.py --self-test 2>&1); then
		failed=$((failed + 1))
		failures+=("include_graph --self-test")
		echo "$out"
		return
	fi
	if out=$(/usr/bin/python3 tests/layout/include_graph.py 2>&1); then
		passed=$((passed + 1))
		echo "$out"
	else
		failed=$((failed + 1))
		failures+=("include_graph (circles or includes against the stage order: see above)")
		echo "$out"
	fi
}

# Wall time per phase and how busy the CPUs were meanwhile (all of them, whoever used
# them), printed before the closing line (the suite's budget is 30 minutes).
phase_times=()
phase_start=$SECONDS
cpu_ticks() { # "busy total" jiffies of all CPUs since boot
	awk '/^cpu / { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t; exit }' /proc/stat
}
read -r phase_busy phase_total < <(cpu_ticks)
phase() { # $1 = what just ended
	local b t
	read -r b t < <(cpu_ticks)
	phase_times+=("$1 $((SECONDS - phase_start)) s ($(( t > phase_total ? 100 * (b - phase_busy) / (t - phase_total) : 0 )) % busy)")
	phase_start=$SECONDS
	phase_busy=$b
	phase_total=$t
}

only_quick=0
side_started=""
if [ "${1:-}" = --quick ]; then
	only_quick=1
	shift
fi
dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(build build-san)
# With a sanitizer build in the run, the tests marked sanitizer_pass (hostile input, no time
# or resource figure) run there only, not on the normal build too (conftest.py).
san_pass=0
if [ $only_quick = 0 ]; then
	for d in "${dirs[@]}"; do
		case "$d" in *san*) { [ -x "$d/prowl" ] || [ "${SIDE_BUILDS:-0}" = 1 ]; } && san_pass=1 ;; esac
	done
fi
run_layout
if [ $only_quick = 0 ] && [ "$(id -u)" = 0 ]; then
	for d in "${dirs[@]}"; do
		case "$d" in *san*) continue ;; esac
		kmatrix_fetch "$d" x86
		[ -n "${ARM64_BUILD:-}" ] && kmatrix_fetch "$ARM64_BUILD" arm64
		break
	done
fi
# The mutation check's lines (tests/mutation.sh): each must still be in the sources, once,
# or `make mutation` would report it MISSING; this costs a second, the full check an hour.
echo "== mutation check's lines"
if tests/mutation.sh --check; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	failures+=("tests/mutation.sh --check (a mutant's line changed: update it there)")
fi
# A changed mutant (its line, what it becomes, its tests, its file) needs a full run that
# catches it: `make mutation` writes tests/mutation.sum, committed with the change.
if [ "$(tests/mutation.sh --digest)" = "$(cat tests/mutation.sum 2>/dev/null)" ]; then
	passed=$((passed + 1))
else
	failed=$((failed + 1))
	failures+=("tests/mutation.sum (the mutants changed since the last full run: run make mutation and commit tests/mutation.sum)")
fi
for d in "${dirs[@]}"; do
	case "$d" in *san*) side_builds_wait ;; esac
	if [ ! -x "$d/prowl" ]; then
		echo "$d/prowl is not built (make all unit workloads tools, or make SAN=1 O=build-san ...)" >&2
		failed=$((failed + 1))
		failures+=("$d (not built)")
		continue
	fi
	run_unit "$d"
	# The kernel downloads (disk and CPU) end before the timed end-to-end tests start.
	kmatrix_fetch_wait
	phase "unit ($d)"
	if [ $only_quick = 1 ]; then
		run_e2e "$d" stages
		phase "e2e ($d)"
		continue
	fi
	case "$d" in
	*san*) # sanitizers: every test but the long captures, with the side work beside them
		side_start
		side_started=1
		run_e2e "$d" quick ;;
	*)
		for s in "${dirs[@]}"; do
			case "$s" in *san*) side_builds_start "$d" "$s" ;; esac
		done
		run_e2e "$d" "" ;;
	esac
	phase "e2e ($d)"
done
if [ $only_quick = 1 ]; then
	dirs=()
	FUZZ_BUILD=""
	ARM64_BUILD=""
fi
[ -n "$side_started" ] || side_start # no sanitizer build in this run
side_end
[ -n "$fuzz_pid$arm64_make_pid" ] && phase "side work (what outlasted the sanitizer e2e)"
# Once, on the first build without sanitizers (the x86_64 guests run its binaries), and
# on the arm64 cross build (its guests run its package's prowl, pprof runs here).
for d in "${dirs[@]}"; do
	case "$d" in *san*) continue ;; esac
	[ -x "$d/prowl" ] || continue
	if [ "$(id -u)" != 0 ]; then
		failed=$((failed + 1))
		failures+=("$d/kernel-matrix (not root)")
		break
	fi
	kmatrix_start "$d" x86
	if [ -n "$arm64_make_pid" ]; then
		kmatrix_start "$ARM64_BUILD" arm64 --pprof "$d/tools/pprof" --deb "$(ls "$ARM64_BUILD"/deb/prowl_*_arm64.deb)"
	fi
	break
done
kmatrix_end
[ ${#km_pids[@]} -gt 0 ] && phase "kernel matrices"

echo
echo "wall time: $(IFS=,; echo "${phase_times[*]}" | sed 's/,/, /g') (tests/run.sh in all: $SECONDS s)"
if [ ${#skips[@]} -gt 0 ]; then
	echo "skipped (with the reason):"
	printf '  %s\n' "${skips[@]}"
fi
[ ${#failures[@]} -gt 0 ] && printf 'failing: %s\n' "${failures[@]}"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
