#!/bin/bash
# build.sh: builds the test suite's Pyroscope server (github.com/grafana/pyroscope at the
# release pinned below, without its web UI) once per machine into the tool cache, to $1.
# Usage: build.sh OUT   -- as ../otelcol/build.sh (OUT, or OUT.skip when the proxy is down).
set -u
src=$(cd "$(dirname "$0")" && pwd)
. "$src/../golib.sh"
# The release and its checksum-database hash; its go.mod builds the api module from ./api,
# which the module zip leaves out: the api release of the same tree comes from the proxy.
MOD=github.com/grafana/pyroscope VER=v1.12.0 H1=h1:NjXPGi0mzNf2xGbT+3Xsk10Gt2Yy2Xp3VlmIRd4vt8M=
API_VER=v1.1.0 API_H1=h1:E51qARM79enIOEZGm9VUAFYqK1k24UIwRe2Qwgp8hDE=
gotool_begin pyroscope "$1" "$src" build.sh
gotool_go 1.22
tree=$GOTOOL_ROOT/src/pyroscope-$VER
gotool_module "$MOD" "$VER" "$H1" "$tree"
gotool_module "$MOD/api" "$API_VER" "$API_H1" "$tree/api"
trap 'rm -f "$GOTOOL_LOG"; rm -rf "$tree"' EXIT
gotool_build "$tree" ./cmd/pyroscope "$MOD"
