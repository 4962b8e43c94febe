#!/bin/bash
# mutation.sh: checks that the suite can fail. In a scratch copy of the tree it breaks
# chosen lines on purpose, one at a time, rebuilds and runs the tests that cover each;
# every mutant must make them FAIL (and the unbroken copy must pass them first).
# Usage: tests/mutation.sh [NAME...]   (default: all; `make mutation` runs it)
#        tests/mutation.sh --digest     (what tests/mutation.sum records; see .ci/run)
#        tests/mutation.sh --check      (only: every mutant's line is still there, once, and
#                                        docs/testing.md's table names its file; tests/run.sh
#                                        runs this in every suite, in about a second)
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PPROF=${PPROF:-$ROOT/build/tools/pprof}

# mutant NAME STAGE FROM TO UNIT E2E: FROM is a fixed string that must occur exactly once
# in the C and BPF sources outside tests/ (found by content, not by line number or folder,
# so a line may move between files), TO what it becomes, UNIT the unit tests
# (build/tests/NAME) and E2E the end-to-end tests (pytest node ids) to run. STAGE is the
# README's stage the line belongs to: docs/testing.md lists them.
# When a refactor rewrites a line, change FROM and TO here (tests/run.sh fails until then).
NAMES=() STAGES=() FROMS=() TOS=() UNITS=() E2ES=()
mutant() { NAMES+=("$1"); STAGES+=("$2"); FROMS+=("$3"); TOS+=("$4"); UNITS+=("$5"); E2ES+=("$6"); }

mutant pprof-address resolve 'ret->addr = addr - m->bias;' 'ret->addr = addr;' \
	test_symbolize tests/e2e/test_record.py::test_symbols_agree_with_eu_addr2line
mutant folded-count encode 'intern_str(lines, order[i]), counts[order[i]]);' \
	'intern_str(lines, order[i]), counts[order[i]] + 1);' \
	test_pprof tests/e2e/test_record.py::test_folded_agrees_with_pprof
mutant retry-condition export 'if (code == 429) /* Too Many Requests */' 'if (code == 0) /* Too Many Requests */' \
	test_sender ''
mutant cfa-offset unwind 'row->cfa_off = (uint16_t)(cfa_off / 8);' 'row->cfa_off = (uint16_t)(cfa_off / 8 + 1);' \
	test_unwind_table tests/e2e/test_unwind.py::test_recursion_depth_100_complete
mutant thread-id sample 'e->tid = (__u32)id;' 'e->tid = id >> 32;' \
	'' tests/e2e/test_record.py::test_per_thread_labels
mutant drop-action labels 'rc = !matches(r, v);' 'rc = matches(r, v);' test_relabel ''
mutant sample-count aggregate 'p->counts[sid] += count;' 'p->counts[sid] = count;' test_aggregate ''
mutant diff-delta analyse 'r->d_total = r->new_total - r->base_total;' 'r->d_total = r->base_total - r->new_total;' \
	test_report ''
mutant python-line python 'delta = (int32_t)code - 10;' 'delta = (int32_t)code - 11;' test_pycode ''
# The blind spots of issue 24: each survived the suite until a test was written for it.
mutant retry-500 export 'if (code < 500 || code > 599)' 'if (code <= 500 || code > 599)' test_sender ''
mutant size-bound commands 'if (r < 0 || (v < k->min && !(k->zero_ok && v == 0)) || v > k->max)' \
	'if (r < 0 || (v < k->min && !(k->zero_ok && v == 0)))' test_config_errors ''
mutant record-outputs commands 'if (o->noutputs == RECORD_MAX_OUTPUTS)' 'if (o->noutputs > RECORD_MAX_OUTPUTS)' \
	test_record_args ''
mutant spool-order export 'return x->queued_ns < y->queued_ns ? -1 : 1;' 'return x->queued_ns < y->queued_ns ? 1 : -1;' \
	test_spool ''
mutant copy-content objects 'obj_content_hash_fd(f->fd, f->ident.size, &hash) == 0 && hash == o->f.content_hash;' \
	'obj_content_hash_fd(f->fd, f->ident.size, &hash) == 0;' test_objcache ''
mutant content-hash objects '*ret = hash_bytes(buf, nhead + ntail + sizeof(size));' '*ret = size;' test_objcache ''

# where FROM NAME: prints the one file (relative to the current directory) that holds
# FROM exactly once; else says why on stderr and returns 1.
where() {
	local files
	mapfile -t files < <(grep -rlF --include='*.c' --include='*.h' --exclude-dir=tests --exclude-dir='build*' \
		--exclude-dir=.git -- "$1" . | sed 's|^\./||')
	if [ ${#files[@]} -ne 1 ] || [ "$(grep -cF -- "$1" "${files[0]}")" -ne 1 ]; then
		echo "MISSING  $2: '$1' must occur exactly once in the C and BPF sources (found in: ${files[*]:-nothing}); update the mutant lines in tests/mutation.sh" >&2
		return 1
	fi
	echo "${files[0]}"
}

if [ "${1:-}" = --check ]; then
	status=0
	doc=docs/testing.md
	for k in "${!NAMES[@]}"; do
		f=$(where "${FROMS[$k]}" "${NAMES[$k]}") || { status=1; continue; }
		row="| \`${NAMES[$k]}\` | ${STAGES[$k]} | \`$f\` |"
		if ! grep -qF -- "$row" "$doc"; then
			echo "UNLISTED ${NAMES[$k]}: $doc's mutation table has no row starting '$row'" >&2
			status=1
		fi
	done
	rows=$(grep -cE '^\| `[a-z0-9-]+` \| [a-z]+ \| `' "$doc")
	if [ "$rows" != ${#NAMES[@]} ]; then
		echo "STALE    $doc's mutation table has $rows rows, tests/mutation.sh ${#NAMES[@]} mutants" >&2
		status=1
	fi
	[ $status = 0 ] && echo "mutation.sh --check: the lines of all ${#NAMES[@]} mutants are there, once each, and $doc lists them"
	exit $status
fi
# The digest of the mutants (their lines, what they become, their tests) and of the file
# each line is in: tests/mutation.sum keeps the one of the last full run in which every
# mutant was caught, and .ci/run runs the full check when they differ, that is when a
# mutated line changed (--check then made someone update its mutant) or moved.
digest() {
	local k f
	for k in "${!NAMES[@]}"; do
		f=$(where "${FROMS[$k]}" "${NAMES[$k]}") || return 1
		printf '%s\0' "${NAMES[$k]}" "${FROMS[$k]}" "${TOS[$k]}" "${UNITS[$k]}" "${E2ES[$k]}" "$f"
	done | sha256sum | cut -d' ' -f1
}
if [ "${1:-}" = --digest ]; then
	digest
	exit
fi
[ "$(id -u)" = 0 ] || { echo "mutation.sh: run as root (the tests load BPF)" >&2; exit 1; }
[ -x "$PPROF" ] || { echo "mutation.sh: $PPROF is not built: run 'make tools' first" >&2; exit 1; }

sum=$(digest 2>/dev/null)
SCRATCH=$(mktemp -d /tmp/prowl-mutation.XXXXXX)
LOGS=$SCRATCH/logs
mkdir -p "$LOGS"
# The scratch copy goes when every mutant was caught; otherwise its logs are kept.
trap '[ "${status:-1}" = 0 ] && rm -rf "$SCRATCH"' EXIT
echo "== scratch copy in $SCRATCH"
git ls-files -z --cached --others --exclude-standard | grep -zv '^build' | xargs -0 cp --parents -t "$SCRATCH"
cd "$SCRATCH" || exit 1
B=build-mut
build() { make -j"$(nproc)" O=$B all unit workloads >"$SCRATCH/make.log" 2>&1 || { tail -20 "$SCRATCH/make.log"; return 1; }; }
mkdir -p $B/tools && cp "$PPROF" $B/tools/pprof

# Runs a mutant's tests; returns 0 when all pass. Prints the failing test names to fd 3
# and keeps the output in $LOGS/<name>.<baseline|mutant>.{<unit test>,e2e}.log.
run_tests() { # $1 = unit tests, $2 = e2e node ids, $3 = log name
	local t rc ok=0
	for t in $1; do
		"$B/tests/$t" >"$LOGS/$3.$t.log" 2>&1
		rc=$?
		if [ $rc -ne 0 ]; then
			grep -E '^\[  FAILED  \] [a-z_]' "$LOGS/$3.$t.log" | sed "s|^\[  FAILED  \] |$t: |" | sort -u >&3
			grep -q '^\[  FAILED  \] [a-z_]' "$LOGS/$3.$t.log" || echo "$t: exit status $rc" >&3
			ok=1
		fi
	done
	if [ -n "$2" ]; then
		# shellcheck disable=SC2086
		if ! PROWL_TEST_BUILD=$B /usr/bin/python3 -m pytest -q -p no:cacheprovider $2 >"$LOGS/$3.e2e.log" 2>&1; then
			grep -E '^(FAILED|ERROR) ' "$LOGS/$3.e2e.log" | sed 's/ - .*//' >&3
			ok=1
		fi
	fi
	return $ok
}

status=0
want=("$@")
for k in "${!NAMES[@]}"; do
	name=${NAMES[$k]} stage=${STAGES[$k]} from=${FROMS[$k]} to=${TOS[$k]} unit=${UNITS[$k]} e2e=${E2ES[$k]}
	if [ ${#want[@]} -gt 0 ] && [[ " ${want[*]} " != *" $name "* ]]; then continue; fi
	f=$(where "$from" "$name") || { status=1; continue; }
	cp "$f" "$f.orig"
	build || { echo "BUILD    $name: the unbroken tree does not build" >&2; exit 1; }
	# The unbroken tree must pass first (twice at most: a test that a loaded machine
	# made flaky once is not what this checks), or a failure would prove nothing.
	if ! run_tests "$unit" "$e2e" "$name.baseline" 3>"$SCRATCH/caught" &&
		! run_tests "$unit" "$e2e" "$name.baseline" 3>"$SCRATCH/caught"; then
		echo "BASELINE $name: its tests fail on the unbroken tree, so the check means nothing (logs: $LOGS):" >&2
		cat "$SCRATCH/caught" >&2
		rm -f "$f.orig"
		status=1
		continue
	fi
	FROM="$from" TO="$to" perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$f"
	if ! build; then
		echo "BUILD    $name: the mutant does not build" >&2
		status=1
	elif run_tests "$unit" "$e2e" "$name.mutant" 3>"$SCRATCH/caught"; then
		echo "SURVIVED $name: $f: '$from' -> '$to' and every test passed" >&2
		status=1
	else
		echo "CAUGHT   $name [$stage] ($f): $(paste -sd, "$SCRATCH/caught" | sed 's/,/, /g')"
	fi
	mv "$f.orig" "$f"
	touch "$f" # newer than the mutant's object, so the next build recompiles it
done
if [ $status -eq 0 ]; then
	echo "every mutant was caught"
	# A full run (every mutant) records what it checked, for .ci/run.
	if [ ${#want[@]} -eq 0 ] && [ -n "$sum" ]; then
		echo "$sum" >"$ROOT/tests/mutation.sum" && echo "wrote tests/mutation.sum: commit it"
	fi
fi
exit $status
