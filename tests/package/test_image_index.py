"""test_image_index.py (`make package-test`): the image index of `make image-index` names both
architectures' images under one tag; each is complete (blobs by digest), holds the package
installed by dpkg, and its prowl runs (arm64: under qemu-user, with the image's own libraries)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from conftest import BUILD, ROOT  # noqa: E402

VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
LAYOUT = os.environ.get("PROWL_IMAGE_INDEX") or os.path.join(BUILD, "image-index", "oci")
INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
QEMU = {"arm64": "qemu-aarch64-static"}


def blob(d):
    data = open(os.path.join(LAYOUT, "blobs", *d["digest"].split(":")), "rb").read()
    assert len(data) == d["size"] and "sha256:" + hashlib.sha256(data).hexdigest() == d["digest"], d
    return data


@pytest.fixture(scope="module")
def platforms():
    """architecture -> manifest descriptor, read through the tag's index."""
    if not os.path.exists(os.path.join(LAYOUT, "index.json")):
        pytest.fail(f"{LAYOUT} is missing: run make image-index")
    top = json.load(open(os.path.join(LAYOUT, "index.json")))
    (tag,) = top["manifests"]
    assert tag["mediaType"] == INDEX_TYPE
    assert tag["annotations"]["org.opencontainers.image.ref.name"] == VERSION
    index = json.loads(blob(tag))
    assert index["mediaType"] == INDEX_TYPE and index["schemaVersion"] == 2
    return {m["platform"]["architecture"]: m for m in index["manifests"]}


def test_index_names_amd64_and_arm64(platforms):
    assert sorted(platforms) == ["amd64", "arm64"]
    for arch, desc in platforms.items():
        assert desc["platform"]["os"] == "linux"
        manifest = json.loads(blob(desc))
        config = json.loads(blob(manifest["config"]))
        assert config["architecture"] == arch and config["config"]["Entrypoint"] == ["/usr/bin/prowl"]
        (layer,) = manifest["layers"]
        blob(layer)


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_skopeo_picks_each_platform(platforms, arch):
    """A reader of image indexes (skopeo, as a container runtime resolves the tag) gets
    the arch's manifest for the one tag. (umoci 0.4.7 calls such a tag ambiguous.)"""
    if not shutil.which("skopeo"):
        pytest.fail("skopeo is missing: run packaging/install-deps.sh")
    res = subprocess.run(["skopeo", "--override-arch", arch, "--override-os", "linux", "inspect",
                          f"oci:{LAYOUT}:{VERSION}"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    layers = [l["digest"] for l in json.loads(blob(platforms[arch]))["layers"]]
    assert got["Architecture"] == arch and got["Layers"] == layers, got


@pytest.mark.parametrize("arch", ["amd64", "arm64"])
def test_each_image_holds_the_package_and_runs(platforms, arch, tmp_path):
    """Unpacked layer by layer with tar: dpkg's database has prowl installed at VERSION,
    and /usr/bin/prowl --version answers (arm64 through qemu-user, the image's libraries)."""
    manifest = json.loads(blob(platforms[arch]))
    root = tmp_path / "rootfs"
    root.mkdir()
    for layer in manifest["layers"]:
        subprocess.run(["tar", "-xz", "-C", str(root), "--no-same-owner"], input=blob(layer), check=True)
    st = subprocess.run(["dpkg-query", f"--admindir={root}/var/lib/dpkg", "-W", "-f", "${Status} ${Version}",
                         "prowl"], capture_output=True, text=True)
    assert st.stdout == f"install ok installed {VERSION}", st.stdout + st.stderr
    argv = [str(root / "usr/bin/prowl"), "--version"]
    if arch in QEMU:
        if not shutil.which(QEMU[arch]):
            pytest.fail(f"{QEMU[arch]} is missing: run packaging/install-deps.sh")
        argv = [QEMU[arch], "-L", str(root)] + argv
    else:
        argv = ["chroot", str(root), "/usr/bin/prowl", "--version"]
    res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith(f"prowl {VERSION}"), res.stdout + res.stderr
