#!/bin/bash
# build.sh: builds the test suite's Go tooling (by default the OpenTelemetry Collector, main.go
# here, pinned by go.mod and go.sum) into $1, its modules from the Go module proxy.
# Usage: build.sh OUT [DIR PACKAGE]   -- DIR holds the go.mod/go.sum pinning PACKAGE (default:
# this folder and its main package). Exit 0 and OUT built; or exit 0, no OUT and OUT.skip
# holding the reason when the module proxy cannot be reached; or exit 1 saying what to do.
set -u
out=$1
src=$(cd "${2:-$(dirname "$0")}" && pwd)
pkg=${3:-.}
probe=${3:-go.opentelemetry.io/collector/otelcol}
name=$(basename "$out")
rm -f "$out.skip"
mkdir -p "$(dirname "$out")"
# The pinned release needs Go >= 1.26 (go.mod's go line); Go >= 1.21 fetches that
# toolchain itself (GOTOOLCHAIN=auto, from the same proxy); Debian 12's 1.19 cannot.
go=""
for g in "${GO:-}" /usr/local/go/bin/go "$(command -v go 2>/dev/null)"; do
	[ -n "$g" ] && [ -x "$g" ] || continue
	v=$("$g" env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')
	if [ -n "$v" ] && [ "$v" -ge 21 ]; then go=$g; break; fi
done
# Without one (a fresh Debian 12), the toolchain go.mod names comes from the module proxy
# as the module golang.org/toolchain, checked against the checksum database, into
# build/tools/go (OTELCOL_FETCH_GO=1 forces this path).
[ "${OTELCOL_FETCH_GO:-0}" = 1 ] && go=""
if [ -z "$go" ]; then
	gov=$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")
	case $(uname -m) in x86_64) arch=amd64 ;; aarch64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
	mv=v0.0.1-go$gov.linux-$arch
	dir=$(dirname "$out")/go
	if [ ! -x "$dir/go$gov/bin/go" ]; then
		mkdir -p "$dir"
		proxy=${GOPROXY:-https://proxy.golang.org}
		proxy=${proxy%%,*}
		if ! why=$(curl -sSf --max-time 600 -o "$dir/tc.zip" "$proxy/golang.org/toolchain/@v/$mv.zip" 2>&1) ||
			! sum=$(curl -sSf --max-time 30 "$proxy/sumdb/sum.golang.org/lookup/golang.org/toolchain@$mv" 2>&1); then
			rm -f "$dir/tc.zip"
			echo "the Go module proxy cannot be reached for Go $gov (${why#curl: }${sum#curl: }), and no Go >= 1.21 is installed" >"$out.skip"
			echo "$name: not built, tests that need it skip: $(cat "$out.skip")" >&2
			exit 0
		fi
		want=$(awk -v m="golang.org/toolchain" -v v="$mv" '$1 == m && $2 == v {print $3}' <<<"$sum")
		if ! python3 "$src/unzip_checked.py" "$dir/tc.zip" "$want" "$dir/go$gov"; then
			rm -f "$dir/tc.zip"
			exit 1
		fi
		rm -f "$dir/tc.zip"
	fi
	go=$dir/go$gov/bin/go
fi
proxy=$("$go" env GOPROXY | cut -d, -f1)
cd "$src"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
t0=$(date +%s)
if GOTOOLCHAIN=auto GOFLAGS=-mod=readonly "$go" build -trimpath -o "$out.tmp" "$pkg" >"$log" 2>&1; then
	mv "$out.tmp" "$out"
	echo "$name: built $out in $(( $(date +%s) - t0 )) s with $("$go" env GOVERSION)"
	exit 0
fi
rm -f "$out.tmp"
# Failed: a skip only when the proxy is unreachable, a failure otherwise.
if [ "$proxy" != off ] && [ "$proxy" != direct ] &&
	! why=$(curl -sS -o /dev/null --max-time 15 "$proxy/$probe/@v/list" 2>&1); then
	echo "the Go module proxy $proxy cannot be reached (${why#curl: }) and the modules of $probe are not all in $("$go" env GOMODCACHE)" >"$out.skip"
	echo "$name: not built, tests that need it skip: $(cat "$out.skip")" >&2
	exit 0
fi
tail -20 "$log" >&2
echo "$name: go build failed in $src (see above)" >&2
exit 1
