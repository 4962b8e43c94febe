#!/bin/bash
# build.sh: builds the test suite's Kubernetes API server (main.go: kube-apiserver's command
# from k8s.io/kubernetes, pinned with its staging modules by go.mod and go.sum) once per
# machine into the tool cache, to $1.
# Usage: build.sh OUT   -- as ../otelcol/build.sh (OUT, or OUT.skip when the proxy is down).
set -u
src=$(cd "$(dirname "$0")" && pwd)
. "$src/../golib.sh"
gotool_begin kube-apiserver "$1" "$src" go.mod go.sum main.go build.sh
gotool_go "$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src/go.mod")"
gotool_build "$src" . k8s.io/kubernetes
