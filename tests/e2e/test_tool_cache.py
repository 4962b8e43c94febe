"""test_tool_cache.py: the machine-wide cache of the Go test tools (tests/tools/golib.sh):
a build whose sources match a cached binary copies it without building; a cache folder
that others could write, or that belongs to another user, is refused in one line, since
the suite runs what it holds as root."""
import hashlib
import os
import subprocess

from conftest import ROOT

TOOLS = os.path.join(ROOT, "tests", "tools")


def build(tmp_path, cache, name="parca"):
    out = tmp_path / "out" / name
    env = {**os.environ, "PROWL_TOOLS_CACHE": str(cache)}
    res = subprocess.run([os.path.join(TOOLS, name, "build.sh"), str(out)], env=env, capture_output=True,
                         text=True, timeout=60)
    return res, out


def key(name, files):
    """The cache key golib.sh computes: sha256 of the tool's sources and golib.sh."""
    h = hashlib.sha256()
    for f in [os.path.join(TOOLS, name, f) for f in files] + [os.path.join(TOOLS, "golib.sh")]:
        with open(f, "rb") as fh:
            h.update(fh.read())
    return h.hexdigest()[:16]


def test_cached_binary_is_copied_without_building(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    cached = cache / f"parca-{key('parca', ['build.sh'])}" / "parca"
    cached.parent.mkdir()
    cached.write_text("#!/bin/sh\necho cached-parca\n")
    cached.chmod(0o755)
    res, out = build(tmp_path, cache)
    assert res.returncode == 0 and "from the tool cache" in res.stdout, (res.stdout, res.stderr)
    assert out.read_text() == cached.read_text() and os.access(out, os.X_OK)
    assert not (cache / "gomod").exists(), "it built (or fetched) instead of copying"


def test_other_key_is_not_taken(tmp_path):
    """A binary cached for other sources is not used: the build goes on (here it stops at
    once: the module proxy is off)."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    stale = cache / "parca-0000000000000000" / "parca"
    stale.parent.mkdir()
    stale.write_text("#!/bin/sh\necho stale\n")
    stale.chmod(0o755)
    env_path = {**os.environ, "PROWL_TOOLS_CACHE": str(cache), "GOPROXY": "off"}
    out = tmp_path / "out" / "parca"
    res = subprocess.run([os.path.join(TOOLS, "parca", "build.sh"), str(out)], env=env_path, capture_output=True,
                         text=True, timeout=120)
    assert "from the tool cache" not in res.stdout, res.stdout
    assert not out.exists() or out.read_text() != stale.read_text()


def test_cache_writable_by_others_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    res, out = build(tmp_path, cache)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert f"{cache} is writable by others (mode 777)" in lines[0] and "PROWL_TOOLS_CACHE" in lines[0], lines
    assert not out.exists()


def test_cache_of_another_user_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o755)
    os.chown(cache, 65534, 65534)  # nobody
    res, out = build(tmp_path, cache)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and len(lines) == 1, res.stderr
    assert f"{cache} is owned by uid 65534" in lines[0], lines
    assert not out.exists()
