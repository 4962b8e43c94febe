#!/usr/bin/env python3
"""pprof_ab.py: two prowl binaries record the same processes at the same time, and Google's
pprof reads both captures (-raw -symbolize=none: the names in the files). Every address both
sampled must be named the same (function, file, line, inlined frames, leaf first), and each
leaf function holding 5 % or more must get the same share within four standard errors, for a refactor that is to
change no output. Usage: sudo tests/bench/pprof_ab.py OLD_PROWL NEW_PROWL [SECONDS=4]
(workloads and pprof from $PROWL_TEST_BUILD, default build/)."""
import math
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
from conftest import WORKLOADS, pprof_raw  # noqa: E402

# C with DWARF and no frame pointers, C++ templates, PLT stubs, deep recursion, Rust, Python.
PY = "def hot(n):\n s = 0\n for i in range(n): s += i * i\n return s\n" \
     "def outer():\n return hot(20000)\nimport time\nt = time.time()\nwhile time.time() - t < 30: outer()\n"
CASES = [("unw_split", ["@unw_split", "30", "2"]), ("cpp_hot", ["@cpp_hot", "30"]), ("pltcall", ["@pltcall", "30"]),
         ("unw_recurse", ["@unw_recurse", "100", "30"]), ("rs_hot", ["@rs_hot", "30"]),
         ("python", ["/usr/bin/python3", "-c", PY])]


def tolerance(p, n1, n2):
    """Four standard errors of the difference of two sampled shares near p (at least 2 points)."""
    return max(0.02, 4 * math.sqrt(max(p * (1 - p), 0.01) * (1 / n1 + 1 / n2)))


def names(raw):
    """{(mapping file, address): the location's lines} of a capture."""
    return {(raw.mappings.get(l["mapping"], {}).get("file", "?"), l["addr"]): tuple(l["lines"])
            for l in raw.locations.values()}


def compare(case, old, new):
    a, b = names(old), names(new)
    common = set(a) & set(b)
    differ = sorted(k for k in common if a[k] != b[k])
    so, sn = old.self_shares(50), new.self_shares(50)
    n1, n2 = old.total(), new.total()
    shares = sorted(f for f in set(so) | set(sn) if max(so.get(f, 0), sn.get(f, 0)) >= 0.05 and
                    abs(so.get(f, 0) - sn.get(f, 0)) > tolerance((so.get(f, 0) + sn.get(f, 0)) / 2, n1, n2))
    print("%-12s samples %5d / %5d  addresses %4d / %4d, %4d in both, %d named differently; "
          "leaf shares apart by more than sampling noise: %d" % (case, n1, n2, len(a), len(b), len(common),
                                                                  len(differ), len(shares)))
    for k in differ[:5]:
        print("   %s 0x%x: old %s\n   %s new %s" % (k[0], k[1], a[k], " " * len(k[0]), b[k]))
    for f in shares[:5]:
        print("   %s: old %.3f new %.3f" % (f, so.get(f, 0), sn.get(f, 0)))
    return not differ and not shares and common


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    old, new = sys.argv[1], sys.argv[2]
    secs = sys.argv[3] if len(sys.argv) > 3 else "4"
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for case, argv in CASES:
            argv = [os.path.join(WORKLOADS, a[1:]) if a.startswith("@") else a for a in argv]
            if not os.access(argv[0], os.X_OK):
                print("%-12s %s not built: skipped" % (case, argv[0]))
                continue
            w = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                outs = [os.path.join(d, "%s.%s.pb.gz" % (case, k)) for k in ("old", "new")]
                recs = [subprocess.Popen([p, "record", "-q", "-F", "499", "-p", str(w.pid), "-d", secs,
                                          "-o", o])
                        for p, o in zip((old, new), outs)]
                if any(r.wait(timeout=120) for r in recs):
                    print("%-12s a recorder failed" % case)
                    ok = False
                    continue
            finally:
                w.kill()
                w.wait()
            ok = bool(compare(case, pprof_raw(outs[0], "-symbolize=none"),
                              pprof_raw(outs[1], "-symbolize=none"))) and ok
    print("pprof_ab: %s" % ("the same" if ok else "DIFFERENT"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
