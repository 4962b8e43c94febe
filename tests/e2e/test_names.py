"""test_names.py: C++ and Rust frames come out readable (issue 8, demangling): a C++
program built by this machine's g++ and a Rust program by its rustc (legacy and v0
mangling), profiled by `prowl record` and `prowl agent`, read back with Google's pprof,
and the full form checked against binutils' c++filt."""
import os
import shutil
import subprocess
import time

import pytest

from agentlib import Agent
from conftest import pprof_raw, run_prowl, start, stop, workload, WORKLOADS


def record(tmp_path, exe, args=(), secs=3, extra=()):
    p = start([exe] + list(args))
    try:
        time.sleep(0.3)
        out = tmp_path / f"{os.path.basename(exe)}-{len(extra)}.pb.gz"
        res = run_prowl(["record", "-p", str(p.pid), "-d", str(secs), "-q", "-o", str(out)] + list(extra))
        assert res.returncode == 0, res.stderr
    finally:
        stop(p)
    return pprof_raw(str(out))


def self_share(raw, pred):
    total = sum(s["values"][0] for s in raw.samples)
    hit = sum(s["values"][0] for s in raw.samples if raw.frames(s) and pred(raw.frames(s)[0]))
    assert total > 50, f"only {total} samples"
    return hit / total


def names(raw):
    return {f for s in raw.samples for f in raw.frames(s)}


@pytest.mark.trusted
def test_cpp_templates_full_and_none(tmp_path):
    """Default (templates): qualified names with template arguments, no parameters;
    full: what c++filt prints; none: the linkage names. cpp_hot spends half its time in
    shop::Cart<long>::total, the other half sorting."""
    exe = workload("cpp_hot")
    raw = record(tmp_path, exe, ["8"])
    got = names(raw)
    assert "shop::Cart<long>::total" in got, sorted(got)[:20]
    share = self_share(raw, lambda f: f == "shop::Cart<long>::total")
    assert 0.25 <= share <= 0.65, share
    assert any(f.startswith("std::__unguarded_partition<__gnu_cxx::__normal_iterator<long*") for f in got), \
        sorted(got)[:20]
    assert not [f for f in got if f.startswith(("_Z", "__Z"))], [f for f in got if f.startswith("_Z")]

    full = names(record(tmp_path, exe, ["8"], extra=["--demangle", "full"]))
    want = subprocess.run(["c++filt", "_ZNK4shop4CartIlE5totalEv"], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert want == "shop::Cart<long>::total() const"
    assert want in full, sorted(full)[:20]

    none = names(record(tmp_path, exe, ["8"], extra=["--demangle", "none"]))
    assert "_ZNK4shop4CartIlE5totalEv" in none, sorted(none)[:20]
    assert "shop::Cart<long>::total" not in none


def rust(name):
    path = os.path.join(WORKLOADS, name)
    if not os.access(path, os.X_OK):
        pytest.skip(f"{path} not built: no rustc on this machine (the Makefile looks in PATH and ~/.cargo/bin)")
    return path


@pytest.mark.parametrize("name,want", [
    ("rs_hot", "rs_hot::engine::Planner::optimize"),         # legacy: hash suffix dropped
    ("rs_hot_v0", "<rs_hot::engine::Planner>::optimize"),    # v0: the inherent impl's form
])
@pytest.mark.sanitizer_pass
def test_rust_legacy_and_v0(tmp_path, name, want):
    raw = record(tmp_path, rust(name), ["8"])
    got = names(raw)
    assert want in got, sorted(got)[:20]
    total = sum(s["values"][0] for s in raw.samples)
    under = sum(s["values"][0] for s in raw.samples if want in raw.frames(s))
    assert total > 50 and under / total >= 0.9, (under, total)
    mangled = [f for f in got if f.startswith(("_ZN", "_R"))]
    assert not mangled, mangled


@pytest.mark.trusted
def test_agent_demangles_by_default(tmp_path):
    """The agent's dir files carry the readable names too."""
    exe = tmp_path / "cppagent"
    shutil.copy2(workload("cpp_hot"), exe)
    p = start([str(exe), "8"])
    agent = Agent(tmp_path, ["--interval", "1s", "-F", "99"])
    try:
        agent.start()
        time.sleep(3.5)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(p)
    files = sorted((agent.state / "profiles" / "cppagent").glob("*.pb.gz"))
    assert files, list((agent.state / "profiles").iterdir())
    got = set()
    for f in files:
        got |= names(pprof_raw(str(f)))
    assert "shop::Cart<long>::total" in got, sorted(got)[:20]


def test_long_elf_name_cut_at_the_documented_length(tmp_path):
    """A function whose ELF name is 6,000 bytes (a user picks names freely) comes out
    cut to PROWL_NAME_MAX, 4096 bytes (docs/configuration.md, Names), its prefix, and
    its CPU stays its own."""
    name = "spin_" + "x" * 5995
    src = tmp_path / "longname.c"
    src.write_text("static volatile unsigned long sink;\n"
                   f"__attribute__((noinline)) void {name}(void) {{ for (;;) sink++; }}\n"
                   f"int main(void) {{ {name}(); return 0; }}\n")
    exe = tmp_path / "longname"
    subprocess.run(["cc", "-O1", "-g", "-o", str(exe), str(src)], check=True)
    raw = record(tmp_path, str(exe), secs=2, extra=["-F", "199"])
    got = names(raw)
    cut = [f for f in got if f.startswith("spin_xxx")]
    assert cut, sorted(got)[:10]
    assert cut == [name[:4096]], [len(f) for f in cut]
    assert self_share(raw, lambda f: f == name[:4096]) > 0.9
