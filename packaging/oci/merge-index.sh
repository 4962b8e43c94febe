#!/bin/sh
# merge-index.sh: one OCI image layout holding the images of several architectures under
# one tag: an image index (one manifest per platform) that the tag names.
# Usage: packaging/oci/merge-index.sh OUTDIR LAYOUT...   (each LAYOUT as build-image.sh writes it)
#   OUTDIR/oci            the layout (tag = the images' version); OUTDIR/prowl-oci.tar, the same as one file
set -eu

die() { echo "merge-index: $*" >&2; exit 1; }
[ $# -ge 2 ] || die "usage: $0 OUTDIR LAYOUT..."
out=$1
shift
rm -rf "$out/oci" "$out/prowl-oci.tar"
mkdir -p "$out/oci/blobs/sha256"
entries="" version="" arches=""
for layout in "$@"; do
	[ -f "$layout/index.json" ] || die "$layout is not an OCI layout (no index.json): run make image"
	# build-image.sh writes one manifest descriptor per index, on one line.
	desc=$(sed -n 's/.*"manifests":\[{\(.*\)}\]}$/\1/p' "$layout/index.json")
	[ -n "$desc" ] || die "$layout/index.json does not hold exactly one manifest"
	v=$(printf '%s' "$desc" | sed -n 's/.*"org.opencontainers.image.ref.name":"\([^"]*\)".*/\1/p')
	a=$(printf '%s' "$desc" | sed -n 's/.*"architecture":"\([^"]*\)".*/\1/p')
	[ -z "$version" ] || [ "$v" = "$version" ] || die "$layout is version $v, not $version like the first"
	case " $arches " in *" $a "*) die "two images for $a" ;; esac
	version=$v arches="$arches $a"
	cp -n "$layout"/blobs/sha256/* "$out/oci/blobs/sha256/"
	# The index lists the manifest with its platform, without the tag (the index has it).
	entries="$entries${entries:+,}{$(printf '%s' "$desc" | sed 's/,"annotations":{[^}]*}//')}"
done
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":[$entries]}" \
	>"$out/index.blob"
digest=$(sha256sum "$out/index.blob" | cut -d' ' -f1)
size=$(stat -c %s "$out/index.blob")
mv "$out/index.blob" "$out/oci/blobs/sha256/$digest"
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"digest\":\"sha256:$digest\",\
\"size\":$size,\"annotations\":{\"org.opencontainers.image.ref.name\":\"$version\"}}]}" >"$out/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$out/oci/oci-layout"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$out/oci" -cf "$out/prowl-oci.tar" \
	oci-layout index.json blobs
echo "merge-index: $out/oci (tag $version:$arches), $out/prowl-oci.tar"
