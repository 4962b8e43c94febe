#!/bin/bash
# build.sh: builds the test suite's Parca server (github.com/parca-dev/parca at the release
# pinned below, without its web UI) once per machine into the tool cache, to $1.
# Usage: build.sh OUT   -- as ../otelcol/build.sh (OUT, or OUT.skip when the proxy is down).
set -u
src=$(cd "$(dirname "$0")" && pwd)
. "$src/../golib.sh"
# The release and its checksum-database hash.
MOD=github.com/parca-dev/parca VER=v0.21.0 H1=h1:rEaamHz+qCHhihDr04LenIFBBvlLPi0LYVe2Gf4OXoE=
gotool_begin parca "$1" "$src" build.sh
gotool_go 1.21
tree=$GOTOOL_ROOT/src/parca-$VER
gotool_module "$MOD" "$VER" "$H1" "$tree"
trap 'rm -f "$GOTOOL_LOG"; rm -rf "$tree"' EXIT
# The release's parquet-go reaches runtime.aeskeysched by go:linkname, which Go >= 1.23
# refuses to link ("invalid reference to runtime.aeskeysched") unless told not to check.
GOTOOL_LDFLAGS=-checklinkname=0
gotool_build "$tree" ./cmd/parca "$MOD"
