"""test_go.py: Go binaries stripped of .symtab and DWARF (-ldflags="-s -w") are symbolized
from the Go runtime's own table, .gopclntab (issue 8, item 4): the same functions and
the same shares as the same program with its symbols, and the file:line that
eu-addr2line reads from the unstripped build's DWARF at the same addresses."""
import concurrent.futures
import os
import subprocess
import time

import pytest

from agentlib import agent_beside
from conftest import WORKLOADS, pprof_raw, run_prowl, start, stop

FULL = os.path.join(WORKLOADS, "gosplit")
STRIPPED = os.path.join(WORKLOADS, "gosplit_stripped")
pytestmark = pytest.mark.skipif(not os.path.exists(STRIPPED), reason="no go on this machine: gosplit not built")


def record(tmp_path, exe, secs=5):
    p = start([exe, str(secs + 4)])
    try:
        time.sleep(0.5)
        out = tmp_path / f"{os.path.basename(exe)}.pb.gz"
        res = run_prowl(["record", "-p", str(p.pid), "-d", str(secs), "-F", "499", "-q", "-o", str(out)])
        assert res.returncode == 0, res.stderr
    finally:
        stop(p)
    return pprof_raw(str(out))


@pytest.mark.trusted
def test_stripped_go_matches_unstripped(tmp_path):
    # At once, one a CPU: the same conditions for both.
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        full, stripped = pool.map(lambda exe: record(tmp_path, exe), (FULL, STRIPPED))
    a, b = full.self_shares(300), stripped.self_shares(300)
    print("with symbols:", {k: round(v, 3) for k, v in a.items() if v > 0.01})
    print("stripped:", {k: round(v, 3) for k, v in b.items() if v > 0.01})
    for func, want in (("main.leafGoAlpha", 0.7), ("main.leafGoBeta", 0.3)):
        assert abs(a.get(func, 0) - want) <= 0.06, (func, a)
        assert abs(b.get(func, 0) - a.get(func, 0)) <= 0.03, (func, a.get(func), b.get(func))
    # The same functions in both, callers included: each in at least 2% of the stacks
    # (rarer ones, the runtime's other threads, differ from run to run).
    def common(raw):
        total = sum(s["values"][0] for s in raw.samples)
        seen = {}
        for s in raw.samples:
            for f in set(raw.frames(s)):
                seen[f] = seen.get(f, 0) + s["values"][0]
        return {f for f, n in seen.items() if n / total >= 0.02}
    assert common(full) == common(stripped), (sorted(common(full)), sorted(common(stripped)))
    assert {"main.main", "runtime.main", "main.leafGoAlpha", "main.leafGoBeta"} <= common(stripped)
    raws = [f for s in stripped.samples for f in stripped.frames(s) if "gosplit_stripped+0x" in f]
    assert not raws, f"addresses left unnamed: {raws[:5]}"


@pytest.mark.sanitizer_pass
def test_stripped_go_lines_match_dwarf(tmp_path):
    """-s -w changes no code: the stripped build's addresses are the unstripped one's,
    so binutils' addr2line on the unstripped build's DWARF names the same function and
    line (elfutils' eu-addr2line 0.188 finds no lines in Go's DWARF). Binutils 2.40 cannot
    read the DWARF 5 of newer Go releases (it answers "??:?"): then the Go toolchain's own
    `go tool addr2line` on the unstripped build is the reader."""
    raw = record(tmp_path, STRIPPED, secs=3)
    checked = 0
    for loc in raw.locations.values():
        m = raw.mappings.get(loc["mapping"])
        if not m or not m["file"].endswith("/gosplit_stripped") or not loc["lines"]:
            continue
        func, _, line = loc["lines"][-1]  # the function the code is in (inlined ones come first)
        if not func.startswith("main.") or len(loc["lines"]) > 1:
            continue
        # A Go executable is not position independent: runtime address == ELF address.
        res = subprocess.run(["addr2line", "-f", "-e", FULL, hex(loc["addr"])], capture_output=True, text=True)
        want_func, want_pos = res.stdout.split("\n")[:2]
        if want_pos.endswith(":?") or want_pos.endswith(":0"):
            res = subprocess.run(["go", "tool", "addr2line", FULL], input=hex(loc["addr"]) + "\n",
                                 capture_output=True, text=True)
            want_func, want_pos = res.stdout.split("\n")[:2]
        want_line = int(want_pos.rsplit(":", 1)[1])
        assert (func, line) == (want_func, want_line), (hex(loc["addr"]), func, line, want_func, want_pos)
        checked += 1
    assert checked >= 3, f"only {checked} locations of main.* checked"


@pytest.mark.trusted
def test_stripped_go_in_agent_output(tmp_path):
    _, out, _ = agent_beside(tmp_path, [STRIPPED, "8"], 6)
    files = sorted((out / "gosplit_stripped").glob("*.pb.gz"))
    assert files, sorted(os.listdir(out)) if out.exists() else "no output"
    seen = {f for path in files for raw in [pprof_raw(str(path))] for s in raw.samples for f in raw.frames(s)}
    assert {"main.leafGoAlpha", "main.leafGoBeta", "main.main"} <= seen, sorted(seen)[:20]
