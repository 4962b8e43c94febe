"""test_package.py (`make package-test`): installs the .deb with dpkg -i into a fresh Debian 12
root made by mmdebstrap and runs prowl from it; unpacks the OCI image with umoci and runs it."""
import gzip
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
from conftest import BUILD, ROOT, pprof_raw, start, stop, workload  # noqa: E402

yaml = pytest.importorskip("yaml")

VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
DEB = os.environ.get("PROWL_DEB") or os.path.join(BUILD, "deb", f"prowl_{VERSION}_amd64.deb")
IMAGE = os.path.join(BUILD, "image", "oci")
CACHE = os.path.join(BUILD, "package-cache")
MIRROR = os.environ.get("PROWL_MIRROR", "http://deb.debian.org")
CLEAN_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}


def need(*tools):
    missing = [t for t in tools if not shutil.which(t)]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed (packaging/install-deps.sh installs them)")


def deb_depends():
    """The package names the .deb depends on (first of each alternative, versions dropped)."""
    out = subprocess.run(["dpkg-deb", "-f", DEB, "Depends"], capture_output=True, text=True, check=True).stdout
    return sorted({d.split("|")[0].split("(")[0].strip() for d in out.split(",") if d.strip()})


def base_root():
    """A tarball of Debian 12 minbase with the package's dependencies, made once by mmdebstrap
    and kept in build/package-cache under a name that changes with the dependencies."""
    need("mmdebstrap")
    deps = deb_depends()
    key = hashlib.sha256((MIRROR + " bookworm " + " ".join(deps)).encode()).hexdigest()[:16]
    tarball = os.path.join(CACHE, f"bookworm-minbase-{key}.tar")
    if os.path.exists(tarball):
        return tarball
    os.makedirs(CACHE, exist_ok=True)
    for old in os.listdir(CACHE):
        os.unlink(os.path.join(CACHE, old))
    t0 = time.time()
    res = subprocess.run(["mmdebstrap", "--variant=minbase", "--format=tar", "--quiet", "--include=" + ",".join(deps),
                          "bookworm", tarball + ".tmp", f"deb {MIRROR}/debian bookworm main",
                          f"deb {MIRROR}/debian bookworm-updates main",
                          f"deb {MIRROR}/debian-security bookworm-security main"],
                         capture_output=True, text=True, timeout=1800)
    assert res.returncode == 0, f"mmdebstrap failed:\n{res.stderr[-3000:]}"
    os.rename(tarball + ".tmp", tarball)
    print(f"mmdebstrap: {time.time() - t0:.0f}s, {os.path.getsize(tarball)} bytes")
    return tarball


@pytest.fixture
def fresh_root(tmp_path):
    """A new directory root unpacked from the cached tarball; removed after the test."""
    tarball = base_root()
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xf", tarball], check=True)
    yield root
    # Nothing is mounted in it (mounts live in private namespaces), but never cross one.
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)])


def in_root(root, cmd, mounts=False, timeout=120, **kw):
    """Runs cmd chrooted into root with a clean environment. mounts: /proc and /sys of
    their own, in a private mount namespace, so they vanish with the command."""
    if mounts:
        script = 'mount -t proc proc "$0/proc" && mount -t sysfs sysfs "$0/sys" && exec chroot "$0" "$@"'
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(root)] + cmd
    else:
        argv = ["chroot", str(root)] + cmd
    return subprocess.run(argv, capture_output=True, text=True, env=CLEAN_ENV, timeout=timeout, **kw)


def mode(path):
    st = os.lstat(path)
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid


def record_in_root(root, tmp_path):
    """prowl record -p of a workload of the host, run from root; the profile read outside."""
    wl = start([workload("cpusplit"), "20"])
    try:
        time.sleep(0.3)
        res = in_root(root, ["prowl", "record", "-p", str(wl.pid), "-F", "199", "-d", "2s", "-o", "/tmp/x.pb.gz"],
                      mounts=True)
    finally:
        stop(wl)
    assert res.returncode == 0, res.stderr
    raw = pprof_raw(str(root / "tmp/x.pb.gz"))
    assert raw.total() > 100, res.stdout
    assert raw.share("hot_a") > 0.5, res.stdout


def test_dpkg_installs_into_a_fresh_root(fresh_root, tmp_path):
    """dpkg -i in a minbase root that has only the dependencies: the postinst makes the
    state directory (0700), the configuration is a 0600 conffile, and the installed prowl
    runs: --version, agent --check as the unit starts it, and a real capture."""
    root = fresh_root
    assert not (root / "var/lib/prowl").exists()
    shutil.copy(DEB, root / "tmp" / "prowl.deb")
    res = in_root(root, ["dpkg", "-i", "/tmp/prowl.deb"])
    assert res.returncode == 0, res.stdout + res.stderr
    st = in_root(root, ["dpkg-query", "-W", "-f", "${Status} ${Version}\n${Conffiles}\n", "prowl"])
    assert st.stdout.startswith(f"install ok installed {VERSION}\n"), st.stdout
    assert "/etc/prowl/agent.yaml " in st.stdout, st.stdout
    assert mode(root / "var/lib/prowl") == (0o700, 0, 0)
    assert mode(root / "etc/prowl/agent.yaml") == (0o600, 0, 0)
    res = in_root(root, ["prowl", "--version"])
    assert res.returncode == 0 and res.stdout.startswith(f"prowl {VERSION}"), res.stdout + res.stderr
    res = in_root(root, ["prowl", "agent", "--config", "/etc/prowl/agent.yaml", "--check"])
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert 'state_dir: "/var/lib/prowl"' in res.stdout, res.stdout
    record_in_root(root, tmp_path)


def test_dpkg_keeps_an_edited_conffile_and_purge_cleans_up(fresh_root):
    """The operator's agent.yaml survives a reinstall; remove keeps it, purge removes it
    and the state directory."""
    root = fresh_root
    shutil.copy(DEB, root / "tmp" / "prowl.deb")
    assert in_root(root, ["dpkg", "-i", "/tmp/prowl.deb"]).returncode == 0
    (root / "etc/prowl/agent.yaml").write_text("frequency: 49\n")
    (root / "var/lib/prowl/profiles").mkdir()
    res = in_root(root, ["dpkg", "--force-confold", "-i", "/tmp/prowl.deb"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert (root / "etc/prowl/agent.yaml").read_text() == "frequency: 49\n"
    assert in_root(root, ["dpkg", "-r", "prowl"]).returncode == 0
    assert not (root / "usr/bin/prowl").exists()
    assert (root / "etc/prowl/agent.yaml").read_text() == "frequency: 49\n"
    assert (root / "var/lib/prowl/profiles").is_dir()
    assert in_root(root, ["dpkg", "-P", "prowl"]).returncode == 0
    assert not (root / "etc/prowl/agent.yaml").exists()
    assert not (root / "var/lib/prowl").exists()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    """The image unpacked by umoci (which checks every blob against its digest)."""
    need("umoci")
    assert os.path.exists(os.path.join(IMAGE, "index.json")), f"{IMAGE}: run make image"
    d = tmp_path_factory.mktemp("image") / "bundle"
    res = subprocess.run(["umoci", "unpack", "--image", f"{IMAGE}:{VERSION}", str(d)], capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    yield d
    subprocess.run(["rm", "-rf", "--one-file-system", str(d)])


def daemonset_container():
    docs = list(yaml.safe_load_all(open(os.path.join(ROOT, "packaging", "kubernetes", "daemonset.yaml"))))
    ds = next(d for d in docs if d and d["kind"] == "DaemonSet")
    return ds["spec"]["template"]["spec"]["containers"][0]


def test_image_runs_the_daemonsets_command(bundle, tmp_path):
    """The image's entrypoint with the DaemonSet's args, its environment and the ConfigMap's
    agent.yaml at /etc/prowl (as the pod mounts it) passes --check; the image holds the
    package (dpkg says so) and records a real profile from its root file system."""
    rootfs = bundle / "rootfs"
    spec = json.load(open(bundle / "config.json"))
    assert spec["process"]["args"] == ["/usr/bin/prowl", "agent", "--config", "/etc/prowl/agent.yaml"]
    c = daemonset_container()
    argv = spec["process"]["args"][:1] + c["args"]
    env = dict(CLEAN_ENV, **{e["name"]: e.get("value", "node-1") for e in c["env"]})
    cm = next(d for d in yaml.safe_load_all(open(os.path.join(ROOT, "packaging", "kubernetes", "configmap.yaml")))
              if d and d["kind"] == "ConfigMap")
    (rootfs / "etc/prowl/agent.yaml").write_text(cm["data"]["agent.yaml"])
    res = subprocess.run(["chroot", str(rootfs)] + argv + ["--check"], capture_output=True, text=True, env=env,
                         timeout=60)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert "hostname: \"node-1\"" in res.stdout, res.stdout
    res = in_root(rootfs, ["prowl", "--version"])
    assert res.returncode == 0 and res.stdout.startswith(f"prowl {VERSION}"), res.stdout + res.stderr
    st = in_root(rootfs, ["dpkg-query", "-W", "-f", "${Status} ${Version}", "prowl"])
    assert st.stdout == f"install ok installed {VERSION}", st.stdout
    assert (rootfs / "etc/ssl/certs/ca-certificates.crt").is_file(), "no CA bundle for HTTPS backends"
    record_in_root(rootfs, tmp_path)


def test_image_layout_is_what_its_index_says():
    """Read by hand, next to umoci: the one manifest is tagged VERSION, its config names
    prowl as the entrypoint, and every blob's name is its sha256 and size."""
    index = json.load(open(os.path.join(IMAGE, "index.json")))
    (desc,) = index["manifests"]
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == VERSION

    def blob(d):
        data = open(os.path.join(IMAGE, "blobs", *d["digest"].split(":")), "rb").read()
        assert len(data) == d["size"] and "sha256:" + hashlib.sha256(data).hexdigest() == d["digest"]
        return data

    manifest = json.loads(blob(desc))
    config = json.loads(blob(manifest["config"]))
    assert config["config"]["Entrypoint"] == ["/usr/bin/prowl"]
    assert config["os"] == "linux" and config["architecture"] == desc["platform"]["architecture"]
    (layer,) = manifest["layers"]
    assert layer["mediaType"] == "application/vnd.oci.image.layer.v1.tar+gzip"
    assert "sha256:" + hashlib.sha256(gzip.decompress(blob(layer))).hexdigest() == config["rootfs"]["diff_ids"][0]
