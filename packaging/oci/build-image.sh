#!/bin/sh
# build-image.sh: makes the DaemonSet's OCI image from the prowl .deb: mmdebstrap installs it
# with apt into a Debian 12 root (one tar layer), and this script writes the OCI layout around it.
# Usage: packaging/oci/build-image.sh PROWL.deb OUTDIR
#   OUTDIR/oci            OCI image layout, tag = the package's version (umoci, skopeo, podman read it)
#   OUTDIR/prowl-oci.tar  the same layout as one file (an "oci-archive")
# Environment: PROWL_MIRROR (default http://deb.debian.org), SOURCE_DATE_EPOCH (default: the
# package's build date), which makes the layer's bytes and so its digests reproducible.
set -eu

die() { echo "build-image: $*" >&2; exit 1; }
[ $# -eq 2 ] || die "usage: $0 PROWL.deb OUTDIR"
deb=$(realpath "$1") || die "no package at $1: run make deb first"
out=$2
command -v mmdebstrap >/dev/null || die "mmdebstrap is not installed (apt-get install mmdebstrap, or make deps)"
mirror=${PROWL_MIRROR:-http://deb.debian.org}
version=$(dpkg-deb -f "$deb" Version)
arch=$(dpkg-deb -f "$deb" Architecture)
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	stamp=$(dpkg-deb --fsys-tarfile "$deb" | TZ=UTC tar -tvf - ./usr/bin/prowl | awk '{ print $4 " " $5 }')
	SOURCE_DATE_EPOCH=$(date -u -d "$stamp" +%s)
fi
export SOURCE_DATE_EPOCH
created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

rm -rf "$out/oci" "$out/prowl-oci.tar" "$out/rootfs.tar"
mkdir -p "$out/oci/blobs/sha256"

# The root: Debian's Essential packages (a shell and coreutils for `kubectl exec`),
# ca-certificates for HTTPS backends, and prowl with its libraries. No apt, no docs
# but the copyright files and prowl's, no man pages or translations. The merged-usr
# hook makes /bin etc. links into /usr itself, so usrmerge (and Perl with it) stays out.
# apt inside the root reads the .deb at the path it has outside, so the .deb is copied to a
# directory of its own under /tmp (which the root has from the start, mode 1777): the
# automount hook makes that one directory inside the root and bind-mounts the .deb on it,
# and the customize hook removes exactly that file and directory, whatever the checkout's path.
stage=$(mktemp -d /tmp/prowl-image-deb.XXXXXX) || die "cannot make a directory under /tmp"
# Another architecture's root (the arm64 image on an x86_64 host): dpkg runs outside it
# (chrootless, DPKG_ROOT), as nothing here can run its binaries.
foreign=""
if [ "$arch" != "$(dpkg --print-architecture)" ]; then
	foreign="--architectures=$arch --mode=chrootless"
fi
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
install -m 0644 "$deb" "$stage/prowl.deb"
# shellcheck disable=SC2086
mmdebstrap $foreign --variant=essential --include=ca-certificates --include="$stage/prowl.deb" \
	--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
	--hook-dir=/usr/share/mmdebstrap/hooks/file-mirror-automount \
	--customize-hook="rm -f \"\$1$stage/prowl.deb\" && rmdir \"\$1$stage\"" \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-include=/usr/share/doc/prowl/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--customize-hook='rm -rf "$1"/var/cache/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
	bookworm "$out/rootfs.tar" \
	"deb $mirror/debian bookworm main" \
	"deb $mirror/debian bookworm-updates main" \
	"deb $mirror/debian-security bookworm-security main" ||
	die "mmdebstrap failed (its messages are above; is $mirror reachable?)"

# blob FILE MEDIATYPE: stores FILE under its digest; sets desc to its descriptor's fields.
blob() {
	digest=$(sha256sum "$1" | cut -d' ' -f1)
	size=$(stat -c %s "$1")
	mv "$1" "$out/oci/blobs/sha256/$digest"
	desc="\"mediaType\":\"$2\",\"digest\":\"sha256:$digest\",\"size\":$size"
}

diff_id=$(sha256sum "$out/rootfs.tar" | cut -d' ' -f1)
gzip -n -9 "$out/rootfs.tar"
blob "$out/rootfs.tar.gz" application/vnd.oci.image.layer.v1.tar+gzip
layer=$desc layer_size=$size

# The DaemonSet gives only the arguments (agent --config ...): the entrypoint is prowl.
printf '%s' "{\"created\":\"$created\",\"architecture\":\"$arch\",\"os\":\"linux\",\
\"config\":{\"Entrypoint\":[\"/usr/bin/prowl\"],\"Cmd\":[\"agent\",\"--config\",\"/etc/prowl/agent.yaml\"],\
\"Env\":[\"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\"],\"WorkingDir\":\"/\",\
\"Labels\":{\"org.opencontainers.image.title\":\"prowl\",\"org.opencontainers.image.version\":\"$version\",\
\"org.opencontainers.image.licenses\":\"BSD-2-Clause\"}},\
\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]},\
\"history\":[{\"created\":\"$created\",\"created_by\":\"mmdebstrap --variant=essential bookworm + prowl_${version}_$arch.deb\"}]}" \
	>"$out/config.json"
blob "$out/config.json" application/vnd.oci.image.config.v1+json
config=$desc

printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"config\":{$config},\"layers\":[{$layer}]}" >"$out/manifest.json"
blob "$out/manifest.json" application/vnd.oci.image.manifest.v1+json

printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
\"manifests\":[{$desc,\"platform\":{\"architecture\":\"$arch\",\"os\":\"linux\"},\
\"annotations\":{\"org.opencontainers.image.ref.name\":\"$version\"}}]}" >"$out/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$out/oci/oci-layout"

tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
	-C "$out/oci" -cf "$out/prowl-oci.tar" oci-layout index.json blobs
echo "build-image: $out/oci (tag $version), $out/prowl-oci.tar"
echo "build-image: layer $layer_size bytes compressed, $(stat -c %s "$out/prowl-oci.tar") bytes in all"
