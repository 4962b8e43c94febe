#!/bin/bash
# run.sh: runs prowl's whole test suite: C unit tests and end-to-end tests (as root,
# real BPF) on build/, then again on build-san/ (ASan+UBSan); ends with "N passed, N failed".
# Usage: tests/run.sh [BUILD_DIR...]   (default: build build-san)
set -u
cd "$(dirname "$0")/.."
# The sanitizer build stops at the first undefined behaviour, so the test fails.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}halt_on_error=1:print_stacktrace=1"
passed=0
failed=0
failures=()

run_unit() { # $1 = build dir
	local t out rc n_ok n_bad
	echo "== unit tests ($1)"
	for t in "$1"/tests/test_*; do
		[ -x "$t" ] || continue
		out=$("$t" 2>&1)
		rc=$?
		n_ok=$(grep -c '^\[       OK \]' <<<"$out")
		n_bad=$(grep -c '^\[  FAILED  \] [a-z_]' <<<"$out")
		if [ $rc -ne 0 ] && [ "$n_bad" -eq 0 ]; then n_bad=1; fi
		passed=$((passed + n_ok))
		failed=$((failed + n_bad))
		if [ $rc -ne 0 ]; then
			failures+=("$1/$(basename "$t")")
			echo "$out" | tail -40
		fi
		printf '%-28s %3d passed, %d failed\n' "$(basename "$t")" "$n_ok" "$n_bad"
	done
}

run_e2e() { # $1 = build dir, $2 = "quick" to skip the long captures
	local line p f e log="$1/e2e.log" args=()
	[ "$2" = quick ] && args=(-m "not slow")
	echo "== end-to-end tests ($1)"
	if [ "$(id -u)" != 0 ]; then
		echo "end-to-end tests need root (BPF and perf events): run as root" >&2
		failed=$((failed + 1))
		failures+=("$1/e2e (not root)")
		return
	fi
	PROWL_TEST_BUILD="$1" /usr/bin/python3 -m pytest -q -p no:cacheprovider "${args[@]}" tests/e2e 2>&1 | tee "$log"
	line=$(grep -E '(passed|failed|error|no tests ran)' "$log" | tail -1)
	p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || true)
	f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || true)
	e=$(grep -oE '[0-9]+ errors?' <<<"$line" | grep -oE '[0-9]+' || true)
	[ -n "$p$f$e" ] || f=1
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0} + ${e:-0}))
	if [ "${f:-0}" != 0 ] || [ "${e:-0}" != 0 ]; then failures+=("$1/e2e"); fi
}

dirs=("$@")
[ ${#dirs[@]} -gt 0 ] || dirs=(build build-san)
for d in "${dirs[@]}"; do
	if [ ! -x "$d/prowl" ]; then
		echo "$d/prowl is not built (make all unit workloads tools, or make SAN=1 O=build-san ...)" >&2
		failed=$((failed + 1))
		failures+=("$d (not built)")
		continue
	fi
	run_unit "$d"
	case "$d" in
	*san*) run_e2e "$d" quick ;; # sanitizers: every test but the long captures
	*) run_e2e "$d" "" ;;
	esac
done

echo
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
