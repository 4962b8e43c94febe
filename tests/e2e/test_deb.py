"""test_deb.py: the fast check of the Debian package: `make deb` builds it with debhelper;
dpkg-deb reads back its fields, conffiles, modes and files (the same as `make install`),
and the binary and unit it ships run and verify. tests/package/ installs it for real."""
import os
import re
import shutil
import stat
import subprocess

import pytest

from conftest import BUILD, ROOT, run_prowl

pytestmark = [
    pytest.mark.skipif("san" in os.path.basename(BUILD), reason="one package build per suite, not per build"),
    pytest.mark.skipif(not shutil.which("dh") or not shutil.which("dpkg-buildpackage"),
                       reason="debhelper and dpkg-dev not installed (packaging/install-deps.sh)"),
]

VERSION = open(os.path.join(ROOT, "VERSION")).read().strip()
O = os.path.relpath(BUILD, ROOT)


@pytest.fixture(scope="module")
def deb(tmp_path_factory):
    """(path of the .deb, what `make deb` printed); the files are extracted to .root."""
    res = subprocess.run(["make", "-s", "deb", f"O={O}"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    path = os.path.join(BUILD, "deb", f"prowl_{VERSION}_{arch}.deb")
    assert os.path.isfile(path), os.listdir(os.path.join(BUILD, "deb"))
    assert not os.path.exists(os.path.join(BUILD, "deb", "src")), "make deb left its source copy"
    root = tmp_path_factory.mktemp("debroot")
    subprocess.run(["dpkg-deb", "-x", path, str(root)], check=True)
    return path, root


def deb_field(path, name):
    return subprocess.run(["dpkg-deb", "-f", path, name], capture_output=True, text=True, check=True).stdout.strip()


def deb_listing(path):
    """{path: (mode string, owner)} as dpkg-deb --contents prints them."""
    out = subprocess.run(["dpkg-deb", "--contents", path], capture_output=True, text=True, check=True).stdout
    files = {}
    for line in out.splitlines():
        mode, owner, _size, _date, _time, name = line.split(None, 5)
        files[name.split(" -> ")[0].lstrip(".")] = (mode, owner)
    return files


def test_fields_and_dependencies(deb):
    """Version is VERSION; the libraries prowl links are dependencies that dh_shlibdeps
    found (not a hand-kept list); the changelog and VERSION agree."""
    path, _ = deb
    assert deb_field(path, "Package") == "prowl"
    assert deb_field(path, "Version") == VERSION
    depends = deb_field(path, "Depends")
    for lib in ("libbpf1", "libdw1", "libelf1", "libcurl4", "libprotobuf-c1", "libyaml-0-2", "libmicrohttpd12",
                "libsystemd0", "zlib1g", "libc6"):
        assert re.search(rf"(^|, ){re.escape(lib)}( |,|$)", depends), (lib, depends)


def documented_dependencies():
    """The packages docs/packaging.md names as the package's dependencies."""
    text = open(os.path.join(ROOT, "docs", "packaging.md")).read()
    m = re.search(r"The dependencies are what `dh_shlibdeps` finds in the binary \(.*?\): (.+?)\.\s", text, re.S)
    assert m, "docs/packaging.md no longer lists the dependencies where this test looks"
    return [n.strip() for n in m.group(1).split(",")]


def test_documented_dependencies_are_the_packages(deb):
    """docs/packaging.md lists exactly the packages of the built .deb's Depends (without
    versions), so that a library linked or dropped makes this fail until the docs follow."""
    path, _ = deb
    depends = {re.sub(r"\s*\(.*?\)", "", alt).strip() for dep in deb_field(path, "Depends").split(",")
               for alt in dep.split("|")}
    documented = documented_dependencies()
    assert len(documented) >= 10 and len(set(documented)) == len(documented), documented
    assert set(documented) == depends, {"in the docs only": set(documented) - depends,
                                        "in the package only": depends - set(documented)}


def test_conffile_modes_and_owners(deb):
    """/etc/prowl/agent.yaml is the one conffile and stays 0600 (it may hold secrets);
    everything belongs to root; the binary is 0755; nothing is under /usr/local."""
    path, root = deb
    ctl = subprocess.run(["dpkg-deb", "--info", path, "conffiles"], capture_output=True, text=True, check=True)
    assert ctl.stdout.split() == ["/etc/prowl/agent.yaml"]
    files = deb_listing(path)
    assert files["/etc/prowl/agent.yaml"][0] == "-rw-------", files["/etc/prowl/agent.yaml"]
    assert files["/usr/bin/prowl"][0] == "-rwxr-xr-x"
    assert all(owner == "root/root" for _, owner in files.values())
    assert not [f for f in files if f.startswith("/usr/local")]
    for f in ("/lib/systemd/system/prowl.service", "/usr/share/doc/prowl/copyright",
              "/usr/share/doc/prowl/agent.md", "/usr/share/doc/prowl/changelog.gz"):
        assert f in files, f
    for script in ("postinst", "postrm"):
        text = subprocess.run(["dpkg-deb", "--info", path, script], capture_output=True, text=True).stdout
        assert "/var/lib/prowl" in text, script
    # Removing the package gives back the kernel memory of the agent's pinned BPF maps.
    assert "rm -rf /sys/fs/bpf/prowl" in subprocess.run(["dpkg-deb", "--info", path, "postrm"], capture_output=True,
                                                        text=True).stdout
    assert "install -d -m 0700" in subprocess.run(["dpkg-deb", "--info", path, "postinst"], capture_output=True,
                                                  text=True).stdout


def test_linked_documents_are_packaged(deb):
    """Every document the README and the guides link to (decisions.md, BENCHMARKS.md,
    LICENSE...) is in /usr/share/doc/prowl, uncompressed, so that the links resolve."""
    from test_install import missing_docs
    path, _ = deb
    docdir = "/usr/share/doc/prowl/"
    names = {f[len(docdir):] for f in deb_listing(path) if f.startswith(docdir) and "/" not in f[len(docdir):]}
    assert not missing_docs(names), (missing_docs(names), sorted(names))


def test_same_files_as_make_install(deb, tmp_path):
    """debian/rules installs with `make install`: the package holds exactly its files (with
    the Debian paths) plus what debhelper adds (copyright, changelog, lintian overrides)."""
    path, _ = deb
    dest = tmp_path / "dest"
    res = subprocess.run(["make", "-s", "install", f"O={O}", f"DESTDIR={dest}", "PREFIX=/usr",
                          "UNITDIR=/lib/systemd/system"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    installed = {"/" + str(p.relative_to(dest)) for p in dest.rglob("*") if not p.is_dir()}
    packaged = {f for f, (mode, _) in deb_listing(path).items() if not mode.startswith("d")}
    assert packaged - installed == {"/usr/share/doc/prowl/copyright", "/usr/share/doc/prowl/changelog.gz",
                                    "/usr/share/lintian/overrides/prowl"}, \
        packaged ^ installed
    assert installed <= packaged


def test_packaged_binary_and_unit_work(deb, tmp_path):
    """The shipped binary prints VERSION and accepts the shipped configuration (with the
    host's libraries), whose effective configuration is the defaults'; the shipped unit
    passes systemd-analyze verify in a scratch root and names what the package installs:
    /usr/bin/prowl, /etc/prowl/agent.yaml, agent.md."""
    from test_install import assert_neutral_example
    _, root = deb
    prowl = str(root / "usr/bin/prowl")
    res = subprocess.run([prowl, "--version"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0 and res.stdout.startswith(f"prowl {VERSION}"), res.stdout + res.stderr
    assert_neutral_example(prowl, root / "etc/prowl/agent.yaml", tmp_path)
    unit = (root / "lib/systemd/system/prowl.service").read_text()
    assert "ExecStart=/usr/bin/prowl agent --config /etc/prowl/agent.yaml" in unit
    assert "Documentation=file:/usr/share/doc/prowl/agent.md" in unit
    if not shutil.which("systemd-analyze"):
        return
    from test_install import systemd_root, verify
    problems, dump = verify(systemd_root(root))
    assert not problems, problems
    assert dump["Fragment Path"] == [str(root / "lib/systemd/system/prowl.service")]


def test_help_of_the_packaged_binary_names_include_self(deb):
    """What the package ships is this tree's prowl (a stale binary would lack the newest flags)."""
    _, root = deb
    res = subprocess.run([str(root / "usr/bin/prowl"), "record", "--help"], capture_output=True, text=True)
    assert "--include-self" in res.stdout
    assert run_prowl(["record", "--help"]).stdout == res.stdout


def image_layer(oci):
    """The path of the one layer blob of the OCI layout at oci (index -> manifest -> layer)."""
    import json
    blob = lambda d: os.path.join(oci, "blobs", "sha256", d.split(":", 1)[1])  # noqa: E731
    index = json.load(open(os.path.join(oci, "index.json")))
    manifest = json.load(open(blob(index["manifests"][0]["digest"])))
    assert len(manifest["layers"]) == 1, manifest
    return blob(manifest["layers"][0]["digest"])


@pytest.mark.long  # about 30 s: make check-long, and make package-test builds the image too
@pytest.mark.skipif(not shutil.which("mmdebstrap"), reason="mmdebstrap not installed (packaging/install-deps.sh)")
def test_image_from_a_package_under_tmp(deb, tmp_path):
    """`make image`'s script, given the package at a path under /tmp (where its old customize
    hook's `rmdir -p` reached the image's non-empty /tmp and mmdebstrap failed; elsewhere it
    took /home or /root out of the image), builds the image; its layer keeps /home, /root and
    /tmp (mode 1777, empty), holds nothing of the package's or the staging paths, and the
    image's prowl runs in a chroot of it and accepts its own agent.yaml. The staging
    directory on the host is gone afterwards. tests/package (make package-test) runs more."""
    import glob
    path, _ = deb
    pkgdir = tmp_path / "checkout" / "build" / "deb"
    pkgdir.mkdir(parents=True)
    shutil.copy(path, pkgdir)
    deb_in_tmp = str(pkgdir / os.path.basename(path))
    stages = set(glob.glob("/tmp/prowl-image-deb.*"))
    res = subprocess.run([os.path.join(ROOT, "packaging/oci/build-image.sh"), deb_in_tmp, str(tmp_path / "image")],
                         capture_output=True, text=True, timeout=1200)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-4000:]
    assert set(glob.glob("/tmp/prowl-image-deb.*")) <= stages, "build-image.sh left its staging directory"
    layer = image_layer(str(tmp_path / "image" / "oci"))
    listing = subprocess.run(["tar", "-tvzf", layer], capture_output=True, text=True, check=True).stdout
    entries = {}
    for line in listing.splitlines():
        mode, _owner, _size, _date, _time, name = line.split(None, 5)
        entries[name.split(" -> ")[0].rstrip("/").removeprefix("./")] = mode
    for d in ("home", "root", "tmp", "etc", "usr", "var"):
        assert entries.get(d, "").startswith("d"), (d, entries.get(d))
    assert entries["tmp"] == "drwxrwxrwt", entries["tmp"]
    assert [n for n in entries if n.startswith("tmp/")] == [], "the image's /tmp is not empty"
    left = [n for n in entries if "prowl-image-deb" in n or "checkout" in n or n.endswith(".deb")]
    assert left == [], left
    assert entries.get("usr/bin/prowl", "").startswith("-rwx"), entries.get("usr/bin/prowl")
    root = tmp_path / "root"
    root.mkdir()
    subprocess.run(["tar", "-C", str(root), "-xzf", layer], check=True)
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    res = subprocess.run(["chroot", str(root), "/usr/bin/prowl", "--version"], capture_output=True, text=True,
                         env=env, timeout=60)
    assert res.returncode == 0 and res.stdout.startswith(f"prowl {VERSION}"), res.stdout + res.stderr
    res = subprocess.run(["chroot", str(root), "/usr/bin/prowl", "agent", "--config", "/etc/prowl/agent.yaml",
                          "--check"], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)])
