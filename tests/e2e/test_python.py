"""test_python.py: CPython stacks (issue 12). Real CPython 3.11 processes (Debian's
/usr/bin/python3.11 with libpython linked in, and pyshared through libpython3.11.so),
sampled by the real BPF program, read back with Google's pprof: the Python functions
replace the interpreter's frames, with file and line; C extensions stay under the
Python function that called them; threads, deep recursion, --python=off, an exec, and a
forged interpreter (garbled code object, an endless frame chain, no thread state)."""
import os
import re
import subprocess
import time

import pytest

from conftest import ROOT, pprof_raw, run_prowl, start, stop, workload

PY = "/usr/bin/python3.11"
SCRIPT = os.path.join(ROOT, "tests", "workloads", "python", "pywork.py")
EVAL = "_PyEval_EvalFrameDefault"

pytestmark = pytest.mark.skipif(not os.access(PY, os.X_OK), reason=f"{PY} is not installed")


def interpreters():
    """Both builds: libpython inside the executable, and in libpython3.11.so."""
    return [pytest.param([PY], id="static"), pytest.param(["@pyshared"], id="shared")]


def command(interp, *args):
    exe = [workload("pyshared")] if interp == ["@pyshared"] else list(interp)
    return exe + [SCRIPT] + [str(a) for a in args]


def record(tmp_path, cmd, name, secs=4, extra=()):
    p = start(cmd)
    try:
        time.sleep(0.5)
        out = tmp_path / f"{name}.pb.gz"
        res = run_prowl(["record", "-p", str(p.pid), "-d", str(secs), "-q", "-o", str(out)] + list(extra))
        assert res.returncode == 0, res.stderr
    finally:
        stop(p)
    return pprof_raw(str(out))


def python_frames(raw, s):
    """(function, file, line) of the [python] frames of sample s, leaf first."""
    py = {mid for mid, m in raw.mappings.items() if m["file"] == "[python]"}
    out = []
    for lid in s["locs"]:
        loc = raw.locations[lid]
        if loc["mapping"] in py:
            out.extend(loc["lines"])
    return out


def def_lines():
    """{function: (first line, last line)} of pywork.py, from its text."""
    lines = open(SCRIPT).read().splitlines()
    starts = [(i + 1, m.group(1)) for i, l in enumerate(lines) if (m := re.match(r"^def (\w+)\(", l))]
    out = {}
    for k, (ln, name) in enumerate(starts):
        end = starts[k + 1][0] - 1 if k + 1 < len(starts) else len(lines)
        out[name] = (ln, end)
    return out


@pytest.mark.parametrize("interp", interpreters())
def test_three_function_split_with_file_and_line(tmp_path, interp):
    """alpha, beta and gamma run 10, 30 and 60 % of each 30 ms cycle (deadlines): the
    profile gives each its share within 5 points, every sample of them names pywork.py
    and a line inside the function, and the interpreter's own frame is gone."""
    raw = record(tmp_path, command(interp, "split", 8), "split", secs=5)
    total = raw.total()
    assert total > 300, f"only {total} samples"
    shares = {f: raw.share(f) for f in ("alpha", "beta", "gamma")}
    print({k: round(v, 3) for k, v in shares.items()})
    for f, want in (("alpha", 0.10), ("beta", 0.30), ("gamma", 0.60)):
        assert abs(shares[f] - want) <= 0.05, (f, shares)
    spans = def_lines()
    checked = 0
    for s in raw.samples:
        for fn, file, line in python_frames(raw, s):
            if fn in ("alpha", "beta", "gamma", "split", "main"):
                assert file == SCRIPT, (fn, file)
                lo, hi = spans[fn]
                assert lo <= line <= hi, (fn, line, spans[fn])
                checked += s["values"][0]
    assert checked > total, checked  # every sample has several frames checked
    # The caller chain is there: gamma under split, main and <module>.
    with_gamma = [s for s in raw.samples if "gamma" in raw.frames(s)]
    chain = python_frames(raw, with_gamma[0])
    assert [f for f, _, _ in chain][-4:] == ["gamma", "split", "main", "<module>"][-4:], chain
    # ...in place of the interpreter's frame: the stack still ends in the native entry.
    for s in with_gamma:
        fr = raw.frames(s)
        assert fr[-1] == "_start", fr
        assert fr.index("<module>") < fr.index("Py_RunMain"), fr
    left = raw.share(EVAL)
    assert left < 0.02, f"{EVAL} still in {left:.1%} of the samples"


def test_c_extension_frames_under_the_python_caller(tmp_path):
    """compress_it calls zlib.compress: the samples in libz's code have compress_it as
    the Python frame above them in >= 90 % of cases, with the native frames leafward."""
    raw = record(tmp_path, command([PY], "zlib", 8), "zlib", secs=5)
    libz = {mid for mid, m in raw.mappings.items() if "libz.so" in m["file"]}
    in_z = [s for s in raw.samples if any(raw.locations[l]["mapping"] in libz for l in s["locs"])]
    n = sum(s["values"][0] for s in in_z)
    assert n > 50, f"only {n} samples in libz"
    good = 0
    for s in in_z:
        fr = raw.frames(s)
        if "compress_it" in fr:
            zi = max(i for i, l in enumerate(s["locs"]) if raw.locations[l]["mapping"] in libz)
            ci = fr.index("compress_it")
            good += s["values"][0] if ci > zi else 0
    print(f"{good}/{n} libz samples under compress_it")
    assert good / n >= 0.90, (good, n)


def test_each_thread_shows_its_own_functions(tmp_path):
    """Two threads, each in its own Python function: with --per-thread, the samples of
    the thread named one hold t_one and never t_two, and the other way round."""
    raw = record(tmp_path, command([PY], "threads", 8), "threads", secs=4, extra=["--per-thread"])
    by_thread = {}
    for s in raw.samples:
        name = s["labels"].get("tid")
        fr = raw.frames(s)
        c = by_thread.setdefault(name, {"t_one": 0, "t_two": 0, "n": 0})
        c["n"] += s["values"][0]
        for f in ("t_one", "t_two"):
            if f in fr:
                c[f] += s["values"][0]
    print(by_thread)
    # Python's thread names stay inside Python (comm is python3.11): the threads are
    # told apart by tid, and each must hold one of the two functions.
    busy = sorted((c for c in by_thread.values() if c["n"] > 50), key=lambda c: c["t_one"])
    assert len(busy) == 2, by_thread
    two, one = busy
    assert one["t_one"] / one["n"] >= 0.95 and one["t_two"] == 0, one
    assert two["t_two"] / two["n"] >= 0.95 and two["t_one"] == 0, two


@pytest.mark.parametrize("interp", interpreters())
def test_recursion_100_complete_deeper_ends_in_marker(tmp_path, interp):
    """rec() at depth 100 is complete (100 rec frames, then recurse_mode, main, <module>,
    no marker); at depth 300 the Python stack ends in the depth marker."""
    raw = record(tmp_path, command(interp, "recurse", 8, 100), "rec100", secs=3)
    full = total = 0
    for s in raw.samples:
        names = [f for f, _, _ in python_frames(raw, s)]
        if "rec" not in names:
            continue
        total += s["values"][0]
        if names.count("rec") == 100 and names[-3:] == ["recurse_mode", "main", "<module>"]:
            full += s["values"][0]
        assert not any("truncated" in f for f in raw.frames(s)), raw.frames(s)
    assert total > 100 and full / total >= 0.95, (full, total)

    raw = record(tmp_path, command(interp, "recurse", 8, 300), "rec300", secs=3)
    marked = total = 0
    for s in raw.samples:
        fr = raw.frames(s)
        if "rec" not in fr:
            continue
        total += s["values"][0]
        assert len(python_frames(raw, s)) <= 128
        if fr[-1] == "[truncated: Python stack deeper than 128 frames]":
            marked += s["values"][0]
    assert total > 100 and marked / total >= 0.95, (marked, total)


def test_python_off_keeps_native_frames(tmp_path):
    """--python=off: no [python] mapping, the interpreter's frames stay."""
    raw = record(tmp_path, command([PY], "split", 6), "off", secs=3, extra=["--python=off"])
    assert not any(m["file"] == "[python]" for m in raw.mappings.values())
    assert raw.share(EVAL) > 0.9
    assert raw.share("gamma") == 0


def test_bad_python_mode_is_one_line():
    res = run_prowl(["record", "--python=maybe", "-d", "1", "-o", "/dev/null"])
    assert res.returncode != 0
    assert "unknown --python mode 'maybe': use on or off" in res.stderr


def test_exec_replaces_the_interpreter(tmp_path):
    """A Python process that exec's itself midway: before_exec before, the split after,
    and never a sample that mixes the two programs' functions."""
    raw = record(tmp_path, command([PY], "exec", 6), "exec", secs=5)
    before = raw.share("before_exec")
    after = raw.share("gamma")
    print(before, after)
    assert before > 0.2 and after > 0.2, (before, after)
    for s in raw.samples:
        fr = raw.frames(s)
        assert not ("before_exec" in fr and ("gamma" in fr or "split" in fr)), fr


@pytest.mark.parametrize("mode,marker", [
    ("garbled", "[python: not a code object (garbled or freed frame)]"),
    ("teardown", "[truncated: no Python thread state for this thread (starting or tearing down)]"),
    ("cycle", "[truncated: Python stack deeper than 128 frames]"),
])
def test_forged_interpreter_gives_markers(tmp_path, mode, marker):
    """A process that exports CPython's symbols but holds garbage (as any user could
    make one): a marker frame in place of the interpreter frame, never a crash, never
    a name the process did not have."""
    raw = record(tmp_path, [workload("fakepy"), mode, "6"], mode, secs=3)
    total = raw.total()
    marked = raw.share(marker)
    assert total > 50 and marked >= 0.95, (mode, marked, total)
    names = {f for s in raw.samples for f, _, _ in python_frames(raw, s)}
    assert names <= {"loop_fn"}, names
    if mode == "cycle":
        assert "loop_fn" in names
