#!/usr/bin/env python3
# include_graph.py: builds prowl's include graph from the sources (#include "x.h" resolved
# as the compiler does: the file's own folder, then the Makefile's -I order) and fails on
# any circle between folders or between modules (x.c + x.h), naming the files that close it,
# on an include of another folder's x_priv.h,
# and on any include of a folder in a LATER row of README.md's stage table ("How it works":
# each stage builds only on the rows above it, lib/ and bpf/ under all), naming the include.
import os
import re
import sys

# Usage: include_graph.py [TREE]   (default: the tree this file is in)
#        include_graph.py --self-test (a scratch tree with one circle of each kind must fail)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def src_dirs(makefile):
    """The SRC_DIRS list of the Makefile, continuation lines joined."""
    text = open(makefile).read().replace("\\\n", " ")
    m = re.search(r"^SRC_DIRS\s*:=(.*)$", text, re.M)
    if not m:
        sys.exit("include_graph: no SRC_DIRS := line in %s" % makefile)
    return m.group(1).split()


def resolve(name, here, include_path):
    """The repository path #include "name" in folder `here` reaches, or None (generated)."""
    for d in [here] + include_path:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(ROOT, p)):
            return p
    return None


def edges(dirs):
    """(file, included file) for every quoted include of every .c/.h under the folders."""
    include_path = ["bpf"] + dirs  # -I$(O) and -I$(O)/proto hold generated headers only
    out = []
    for d in dirs + ["bpf"]:
        for f in sorted(os.listdir(os.path.join(ROOT, d))):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            for name in INCLUDE_RE.findall(open(os.path.join(ROOT, path), errors="replace").read()):
                target = resolve(name, d, include_path)
                if target and target != path:
                    out.append((path, target))
    return out


def stage_rows(readme, dirs):
    """{folder: row index} from README.md's stage table: each backquoted path of a row's
    "where" cell names a folder (`agent/sample/`) or a file in one (`agent/resolve/ingest.c`).
    lib/ and bpf/ are under all stages (row -1). Exits when a folder has no row or two."""
    rows, out, bad = [], {}, []
    text = open(readme).read()
    m = re.search(r"^## How it works\n(.*?)(?=^## )", text, re.M | re.S)
    for line in (m.group(1) if m else "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0] not in ("stage", "") and not set(cells[0]) <= set("-"):
            rows.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    for i, (stage, paths) in enumerate(rows):
        for p in paths:
            d = p.rstrip("/") if p.endswith("/") else os.path.dirname(p)
            if d.split("/")[0] in ("lib", "bpf"):
                continue
            if d in dirs and out.get(d, i) != i:
                bad.append("%s is in two rows of the stage table (%s and %s)" % (d, rows[out[d]][0], stage))
            if d in dirs:
                out[d] = i
    for d in dirs:
        if d.split("/")[0] in ("lib", "bpf"):
            out[d] = -1
        elif d not in out and any(f.endswith((".c", ".h")) for f in os.listdir(os.path.join(ROOT, d))):
            bad.append("%s is in no row of README.md's stage table (\"How it works\", the \"where\" column)" % d)
    if bad:
        sys.exit("include_graph: " + "; ".join(bad))
    return out, [r[0] for r in rows]


def against_order(file_edges, rows, names):
    """Prints each include of a folder in a later row of the stage table; returns how many."""
    n = 0
    for a, b in file_edges:
        ra, rb = rows.get(os.path.dirname(a), -1), rows.get(os.path.dirname(b), -1)
        if rb > ra:
            n += 1
            print("include against the stage order: %s includes %s (stage \"%s\" may include only from "
                  "its row and the rows above it in README.md's table, and \"%s\" is below it)"
                  % (a, b, names[ra] if ra >= 0 else "lib/bpf", names[rb]))
    return n


def private_outside(file_edges):
    """Prints each include of a private header (x_priv.h) from another folder; returns how many."""
    n = 0
    for a, b in file_edges:
        if b.endswith("_priv.h") and os.path.dirname(a) != os.path.dirname(b):
            n += 1
            print("private header included from another folder: %s includes %s (a header other folders "
                  "read is an interface: name it for what it holds)" % (a, b))
    return n


def circles(graph):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, comps, n = {}, {}, set(), [], [], [0]
    nodes = sorted(set(graph) | {v for vs in graph.values() for v in vs})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        comps.append(sorted(comp))
    return comps


def report(kind, key, file_edges):
    """Lists each circle of the graph `key` makes of file_edges, with the includes in it."""
    graph = {}
    for a, b in file_edges:
        ka, kb = key(a), key(b)
        if ka != kb:
            graph.setdefault(ka, set()).add(kb)
    bad = circles(graph)
    for comp in bad:
        members = set(comp)
        print("include circle between %s: %s" % (kind, " <-> ".join(comp)))
        for a, b in file_edges:
            if key(a) in members and key(b) in members and key(a) != key(b):
                print("  %s includes %s" % (a, b))
    return len(bad)


def module(path):
    """A module: x.c, x.h and x_priv.h (the private half of x's interface)."""
    stem = os.path.splitext(path)[0]
    return stem[:-len("_priv")] if stem.endswith("_priv") else stem


def self_test():
    """The check on a scratch tree: a folder circle (a/x.c -> b/y.h, b/y.c -> a/x.h, both
    through the -I path), a module circle (a/p.h -> a/q.h, a/q.c -> a/p.h)
    and a private half (a/x_priv.h -> a/x.h, no circle) must give three circles: the
    folder circle is a module circle (a/x <-> b/y) too. Against the stage table (a above
    b above c): b/y.c -> a/x.h is fine, a/x.c -> b/y.h and b/z.c -> c/w.h are not; nor is
    b/v.c -> a/x_priv.h (a private header of another folder)."""
    import contextlib
    import io
    import tempfile
    global ROOT
    files = {
        "Makefile": "SRC_DIRS := a \\\n            b c\n",
        "README.md": "## How it works\n\n| stage | where | what |\n|---|---|---|\n| first | `a/` | x |\n"
                     "| second | `b/y.c`, `b/z.c` | y |\n| third | `c/` | w |\n\n## Next\n",
        "bpf/shared.h": "",
        "a/x.h": "", "a/x_priv.h": '#include "x.h"\n', "a/x.c": '#include "x_priv.h"\n#include "y.h"\n',
        "b/y.h": "", "b/y.c": '#include "x.h"\n', "b/z.c": '#include "w.h"\n', "c/w.h": "",
        "b/v.c": '#include "x_priv.h"\n',
        "a/p.h": '#include "q.h"\n', "a/q.h": "", "a/q.c": '#include "p.h"\n',
    }
    with tempfile.TemporaryDirectory() as tree:
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tree, name)), exist_ok=True)
            with open(os.path.join(tree, name), "w") as f:
                f.write(text)
        saved, ROOT = ROOT, tree
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                rc = check()
        finally:
            ROOT = saved
    text = out.getvalue()
    want = ["include circle between folders: a <-> b", "a/x.c includes b/y.h", "b/y.c includes a/x.h",
            "include circle between modules: a/p <-> a/q", "a/q.c includes a/p.h", "3 circle(s)",
            "include against the stage order: a/x.c includes b/y.h (stage \"first\"",
            "include against the stage order: b/z.c includes c/w.h (stage \"second\"",
            "private header included from another folder: b/v.c includes a/x_priv.h",
            "3 include(s) against the stage order"]
    missing = [w for w in want if w not in text]
    if rc != 1 or missing or "a/x_priv.h includes" in text or "b/y.c includes a/x.h (stage" in text:
        print("include_graph: the self-test's circles were not reported as expected:\n" + text)
        return 1
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    global ROOT
    if sys.argv[1:]:
        ROOT = sys.argv[1]
    return check()


def check():
    dirs = src_dirs(os.path.join(ROOT, "Makefile"))
    file_edges = edges(dirs)
    rows, names = stage_rows(os.path.join(ROOT, "README.md"), dirs + ["bpf"])
    n = report("folders", os.path.dirname, file_edges)
    n += report("modules", module, file_edges)
    against = against_order(file_edges, rows, names) + private_outside(file_edges)
    if n:
        print("include_graph: %d circle(s); folders and modules must depend one way "
              "(README.md, \"How it works\")" % n)
    if against:
        print("include_graph: %d include(s) against the stage order or of another folder's private header; "
              "a folder includes only from its own row and the rows above it in README.md's stage table "
              "(lib/ and bpf/ from neither)" % against)
    if n or against:
        return 1
    print("include_graph: %d includes, no circle between folders or modules, none against the stage "
          "order of README.md's table" % len(file_edges))
    return 0


if __name__ == "__main__":
    sys.exit(main())
