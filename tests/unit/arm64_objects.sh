#!/bin/sh
# arm64_objects.sh: unpacks Debian 12's arm64 packages (programs, libraries, an interpreter)
# into DIR with dpkg-deb -x, for the differential CFI check of make check-cfi-arm64.
# Needs arm64 in dpkg's architectures (packaging/install-deps.sh arm64). Usage: arm64_objects.sh DIR
set -eu
[ $# = 1 ] || { echo "usage: arm64_objects.sh DIR" >&2; exit 2; }
DIR=$1
PKGS="libc6 libc-bin coreutils bash dash util-linux perl-base python3.11-minimal libpython3.11-minimal \
 libpython3.11-stdlib libstdc++6 libgcc-s1 libssl3 libsqlite3-0 libxml2 libglib2.0-0 libcurl4 libgnutls30 \
 libsystemd0 libzstd1 liblzma5 libbz2-1.0 libelf1 libdw1 openssh-client git grep sed tar gzip findutils \
 libncursesw6 libreadline8 libpcre2-8-0 libkrb5-3 libgmp10 libnettle8 libp11-kit0 libffi8"
if [ -f "$DIR/.done" ]; then
	exit 0
fi
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
	echo "arm64_objects: error: arm64 is not one of dpkg's architectures: run packaging/install-deps.sh arm64" >&2
	exit 1
fi
rm -rf "$DIR"
mkdir -p "$DIR/debs" "$DIR/root"
want=""
for p in $PKGS; do
	want="$want $p:arm64"
done
# shellcheck disable=SC2086
(cd "$DIR/debs" && apt-get download -q $want 2>&1 | grep -v 'unsandboxed' >&2) ||
	{ echo "arm64_objects: error: apt-get download failed (is the archive reachable?)" >&2; exit 1; }
for f in "$DIR"/debs/*.deb; do
	dpkg-deb -x "$f" "$DIR/root"
done
rm -rf "$DIR/debs"
touch "$DIR/.done"
echo "arm64_objects: $(find "$DIR/root" -type f | wc -l) files of $(echo $PKGS | wc -w) packages in $DIR/root" >&2
