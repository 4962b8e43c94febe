"""reportlib.py: what the report/diff tests share: real captures of cpusplit with the
split moved (50/30/20, the same again, 20/30/50, and a 10-sample one), made once per
session, and Google pprof's own shares of a file to check prowl's numbers against."""
import concurrent.futures
import re
import types

import pytest

from conftest import pprof, run_prowl, workload

FREQ = 1000     # per CPU
SECONDS = "0.7c"  # of CPU time: about 700 samples however busy the machine is
FUNCS = ("hot_a", "hot_b", "hot_c", "mix", "worker", "main")


@pytest.fixture(scope="session")
def caps(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    c = types.SimpleNamespace(dir=d)

    def rec(name, split, secs=SECONDS, freq=FREQ, extra=()):
        out = d / f"{name}.pb.gz"
        res = run_prowl(["record", "-F", str(freq), "-q", "-o", str(out), *extra, "--",
                         workload("cpusplit"), secs, "1", split])
        assert res.returncode == 0, res.stderr
        return out

    # Two captures at a time, one a CPU: each of its own command, its split of CPU time.
    # record -o x.html writes the flame graph of the very same capture.
    runs = {"base": ("50/30/20", SECONDS, FREQ, ("-o", str(d / "base.html"))), "base2": ("50/30/20",),
            "new": ("20/30/50",), "tiny": ("50/30/20", "0.5c", 20)}
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        for name, out in zip(runs, pool.map(lambda kv: rec(kv[0], *kv[1]), runs.items())):
            setattr(c, name, out)
    c.base_html = d / "base.html"
    return c


def pprof_top(*paths):
    """{function: (flat %, cum %)} and the total, as Google's pprof computes them (of
    several files, merged by pprof)."""
    # -symbolize=none: the names in the files, not pprof's own symbolization of binaries
    # it finds on this host (it does that for mappings where not every location has one).
    out = pprof(["-top", "-symbolize=none", "-sample_index=samples", "-nodecount=1000000", "-nodefraction=0",
                 "-edgefraction=0"] + [str(p) for p in paths[:-1]], str(paths[-1]))
    total = None
    rows = {}
    for line in out.splitlines():
        m = re.search(r"of (\d+) total", line)
        if m:
            total = int(m.group(1))
        m = re.match(r"^\s*(\d+)\s+([\d.]+)%\s+[\d.]+%\s+(\d+)\s+([\d.]+)%\s+(.+?)(?: \(inline\))?\s*$", line)
        if m:
            rows[m.group(5)] = (float(m.group(2)), float(m.group(4)))
    assert total, out
    return rows, total
