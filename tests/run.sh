#!/bin/bash
# run.sh: runs prowl's whole test suite (C unit tests, then end-to-end tests as root
# against the real BPF sampler) and ends with one "N passed, N failed" line.
set -u
cd "$(dirname "$0")/.."
BUILD=${PROWL_TEST_BUILD:-build}
QUICK=0
[ "${1:-}" = "--quick" ] && QUICK=1
passed=0
failed=0
failures=()

echo "== unit tests ($BUILD)"
for t in "$BUILD"/tests/test_*; do
	[ -x "$t" ] || continue
	out=$("$t" 2>&1)
	rc=$?
	n_ok=$(grep -c '^\[       OK \]' <<<"$out")
	n_bad=$(grep -c '^\[  FAILED  \] [a-z_]' <<<"$out")
	if [ $rc -ne 0 ] && [ "$n_bad" -eq 0 ]; then n_bad=1; fi
	passed=$((passed + n_ok))
	failed=$((failed + n_bad))
	if [ $rc -ne 0 ]; then
		failures+=("$(basename "$t")")
		echo "$out" | tail -40
	fi
	printf '%-28s %3d passed, %d failed\n' "$(basename "$t")" "$n_ok" "$n_bad"
done

echo "== end-to-end tests ($BUILD)"
if [ "$(id -u)" != 0 ]; then
	echo "end-to-end tests need root (BPF and perf events): run as root" >&2
	failed=$((failed + 1))
else
	args=(-q -p no:cacheprovider tests/e2e)
	[ $QUICK = 1 ] && args+=(-m "not slow")
	PROWL_TEST_BUILD="$BUILD" /usr/bin/python3 -m pytest "${args[@]}" 2>&1 | tee "$BUILD/e2e.log"
	line=$(grep -E '^(=+ )?[0-9]+ (passed|failed)|^(=+ )?(no tests ran|[0-9]+ failed)' "$BUILD/e2e.log" | tail -1)
	p=$(grep -oE '[0-9]+ passed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
	f=$(grep -oE '[0-9]+ failed' <<<"$line" | grep -oE '[0-9]+' || echo 0)
	e=$(grep -oE '[0-9]+ error' <<<"$line" | grep -oE '[0-9]+' || echo 0)
	[ -z "$line" ] && f=1
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0} + ${e:-0}))
	[ "${f:-0}" != 0 ] || [ "${e:-0}" != 0 ] && failures+=("e2e")
fi

echo
[ ${#failures[@]} -gt 0 ] && echo "failing: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
