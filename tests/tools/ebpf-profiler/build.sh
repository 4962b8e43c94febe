#!/bin/bash
# build.sh: builds the OpenTelemetry eBPF profiler (go.mod and go.sum here pin its module;
# its BPF object comes inside it), the peer of make bench-peers, once per machine into the
# tool cache (../golib.sh), and copies it to $1.
# Usage: build.sh OUT   -- exit 0 and OUT built; or exit 0, no OUT and OUT.skip holding the
# reason when the module proxy cannot be reached; or exit 1 with one line saying what to do.
set -u
src=$(cd "$(dirname "$0")" && pwd)
. "$src/../golib.sh"
gotool_begin ebpf-profiler "$1" "$src" go.mod go.sum build.sh
gotool_go "$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")"
gotool_build "$src" go.opentelemetry.io/ebpf-profiler go.opentelemetry.io/ebpf-profiler
