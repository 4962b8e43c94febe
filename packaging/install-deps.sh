#!/bin/sh
# install-deps.sh: installs every Debian 12 package prowl needs to build, test and benchmark.
# Idempotent; run as root (or it uses sudo).
set -eu
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
PKGS="make gcc clang llvm pkg-config bpftool libbpf-dev libelf-dev libdw-dev libdebuginfod-dev \
 zlib1g-dev protobuf-c-compiler libprotobuf-c-dev libcurl4-openssl-dev libyaml-dev libmicrohttpd-dev \
 libsystemd-dev libssl-dev libjson-c-dev libiberty-dev"
# prometheus: tests run the real server on loopback (alerts, recording rules).
# openssl: the Kubernetes API server stand-in makes its CA and certificate with it.
# qemu-system-x86, busybox-static, cpio, debian-archive-keyring: the kernel matrix
# (tests/kmatrix) boots Debian's kernels, fetched by apt-get, with an initramfs.
TEST_PKGS="elfutils g++ protobuf-compiler libcmocka-dev python3 python3-pytest python3-yaml golang-go \
 golang-github-google-pprof-dev linux-perf binutils procps time libc6-dbg prometheus \
 chromium python3-websocket passwd util-linux \
 qemu-system-x86 busybox-static cpio debian-archive-keyring openssl \
 debhelper mmdebstrap umoci skopeo libclang-rt-14-dev openjdk-17-jdk-headless debuginfod libpython3.11-dev python3-pip \
 etcd-server"
# skopeo: tests/package reads the image index (both architectures under one tag) with it.
# debhelper: `make deb` (a suite test builds the package); mmdebstrap, umoci: `make image`
# and `make package-test` (a Debian 12 root for the image and for dpkg -i; unpacking it).
# libclang-rt-14-dev: libFuzzer and the sanitizer runtimes for clang (make fuzz).
# openjdk-17-jdk-headless: javac and jcmd, for the Java perf map test (test_jit.py).
# debuginfod: the real server test_debuginfod.py fetches debug files from.
# etcd-server: the store of the real Kubernetes API server of test_kube_real.py.
# libpython3.11-dev: CPython through the shared libpython (workload pyembed, test_frames.py).
# python3-pip: `make pyspy` installs the pinned py-spy wheel under build/ (pip --target).
# node and npm: the Kubernetes manifest test validates with the npm package
# kubernetes-models (tests/e2e/k8s/). A node from elsewhere that brings npm will do.
# `install-deps.sh arm64`: what `make ARCH=arm64` needs on an x86_64 host, and the
# kernel matrix's arm64 half: the cross compiler, the arm64 libraries (multiarch),
# qemu-system-aarch64, qemu-user-static (the arm64 image's prowl runs under it in
# tests/package), and an arm64 Debian kernel's BTF for vmlinux.h.
ARM64_PKGS="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-system-arm qemu-user-static"
for p in $PKGS; do
	case "$p" in
	*-dev) ARM64_PKGS="$ARM64_PKGS $p:arm64" ;;
	esac
done
# The whole set (no argument) has the arm64 part too: the suite checks the unwind
# tables of Debian's arm64 objects.
case "${1:-all}" in
build) WANT="$PKGS" ;;
arm64) WANT="$PKGS $ARM64_PKGS" ;;
*) WANT="$PKGS $TEST_PKGS $ARM64_PKGS"
   command -v npm >/dev/null 2>&1 || WANT="$WANT nodejs npm" ;;
esac
if [ "${1:-all}" != build ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
	$SUDO dpkg --add-architecture arm64
	$SUDO apt-get update -qq
fi
missing=""
for p in $WANT; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "install-deps: installing:$missing" >&2
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
	# Only the tests use Prometheus: the service Debian enables on :9090 is not wanted.
	case " $missing " in
	*" prometheus "*) [ -d /run/systemd/system ] && $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true ;;
	esac
	# Nor etcd's (the tests start their own, on free ports).
	case " $missing " in
	*" etcd-server "*) [ -d /run/systemd/system ] && $SUDO systemctl disable --now etcd >/dev/null 2>&1 || true ;;
	esac
fi

# The arm64 kernel types: the BTF of bookworm's arm64 kernel, copied out of its image.
if [ "${1:-all}" != build ] && [ ! -s /var/cache/prowl/btf/vmlinux-arm64.btf ]; then
	tmp=$(mktemp -d)
	kpkg=$(apt-cache depends linux-image-arm64:arm64 | sed -n 's/.*Depends: \(linux-image-[^ ]*\)/\1/p' | head -1)
	(cd "$tmp" && apt-get download -q "$kpkg" >/dev/null 2>&1)
	dpkg-deb --fsys-tarfile "$tmp"/linux-image-*.deb | tar -x -C "$tmp" --wildcards './boot/vmlinuz-*'
	$SUDO mkdir -p /var/cache/prowl/btf
	$SUDO "$(dirname "$0")/vmlinux_btf.py" "$tmp"/boot/vmlinuz-* /var/cache/prowl/btf/vmlinux-arm64.btf
	rm -rf "$tmp"
	echo "install-deps: /var/cache/prowl/btf/vmlinux-arm64.btf from $kpkg" >&2
fi
