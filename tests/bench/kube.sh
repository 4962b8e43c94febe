#!/bin/bash
# kube.sh: figures of series identity: relabel_configs' CPU per new process
# ($BUILD/bench/relabel_bench), then Kubernetes metadata against the loopback API server
# stand-in (tests/bench/kube_bench.py: first sample to labelled export, API requests per
# minute, memory with 500 pods). Prints a Markdown section and writes $BUILD/bench/kube.md.
# Needs root, $BUILD/prowl, $BUILD/bench/relabel_bench, $BUILD/workloads/spin, openssl.
# Knobs: KUBE_BENCH_SECONDS (600), PROWL_BUILD (build).
set -u -o pipefail
cd "$(dirname "$0")/../.." || exit 1
BUILD=${PROWL_BUILD:-build}
die() { echo "kube-bench: error: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "must run as root (the agent loads BPF programs): sudo $0"
for f in prowl bench/relabel_bench workloads/spin; do
	[ -x "$BUILD/$f" ] || die "$BUILD/$f is missing: run 'make all workloads $BUILD/bench/relabel_bench'"
done
command -v openssl >/dev/null || die "openssl is missing (the stand-in makes its CA with it)"
mkdir -p "$BUILD/bench" || die "cannot create $BUILD/bench"
RL=$("$BUILD/bench/relabel_bench") || die "relabel_bench failed"
K8S=$(PROWL_BUILD="$BUILD" /usr/bin/python3 tests/bench/kube_bench.py) || die "kube_bench.py failed"
OUT=$(cat <<END
### Series identity ($(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, kernel $(uname -r))

#### Relabeling (\`$BUILD/bench/relabel_bench\`)

\`\`\`
$RL
\`\`\`

$K8S
END
)
echo "$OUT" | tee "$BUILD/bench/kube.md"
