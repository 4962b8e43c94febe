#!/bin/bash
# build.sh: builds the test suite's OpenTelemetry Collector (main.go, pinned by go.mod and
# go.sum) once per machine into the tool cache (../golib.sh), and copies it to $1.
# Usage: build.sh OUT   -- exit 0 and OUT built; or exit 0, no OUT and OUT.skip holding the
# reason when the module proxy cannot be reached; or exit 1 with one line saying what to do.
set -u
src=$(cd "$(dirname "$0")" && pwd)
. "$src/../golib.sh"
gotool_begin otelcol "$1" "$src" go.mod go.sum main.go build.sh
# The pinned release needs the Go of go.mod's go line.
gotool_go "$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")"
gotool_build "$src" . go.opentelemetry.io/collector/otelcol
