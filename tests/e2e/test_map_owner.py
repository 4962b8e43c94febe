"""test_map_owner.py: agent/sample/ is the one owner of the BPF maps. No C file outside
it (the BPF program's own sources and the tests aside) includes libbpf or touches a map."""
import os
import re

from conftest import ROOT

OWNER = "agent/sample/"
# What only the map owner may write: libbpf's headers, the skeleton, and libbpf's
# map calls (bpf_map_update_elem, bpf_map__fd, ...).
FORBIDDEN = re.compile(r'#\s*include\s*[<"](bpf/[^>"]+|[^>"]*\.skel\.h)[>"]|\bbpf_map_\w+\s*\(|\bbpf_map__\w+\s*\(|'
                       r'\bbpf_obj_get\w*\s*\(')
SKIP_DIRS = {".git", "tests"}


def exempt(rel):
    """The map owner, and the BPF program's sources (kernel side: their bpf_map_* are BPF helpers)."""
    return rel.startswith(OWNER) or re.match(r"bpf/[^/]+\.bpf\.[ch]$", rel) is not None


def sources():
    """Every C source and header of the tree, relative to ROOT (build trees and tests aside)."""
    for top, dirs, files in os.walk(ROOT):
        rel_top = os.path.relpath(top, ROOT)
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build")]
        for f in files:
            if f.endswith((".c", ".h")):
                yield os.path.normpath(os.path.join(rel_top, f))


def offences(rel, text):
    """Lines of text (file rel) that use libbpf or a map: "rel:line: text"."""
    if exempt(rel):
        return []
    out = []
    for i, line in enumerate(text.split("\n"), 1):
        code = line.split("//", 1)[0]
        if FORBIDDEN.search(code) and not code.lstrip().startswith(("*", "/*")):
            out.append(f"{rel}:{i}: {line.strip()}")
    return out


def test_only_the_sampler_touches_bpf_maps():
    seen, bad, owner_uses = 0, [], 0
    for rel in sources():
        text = open(os.path.join(ROOT, rel), errors="replace").read()
        seen += 1
        if rel.startswith(OWNER) and FORBIDDEN.search(text):
            owner_uses += 1
        bad += offences(rel, text)
    # The walk saw the tree, and the owner itself does use libbpf (else the pattern is wrong).
    assert seen > 100, f"only {seen} C files found under {ROOT}"
    assert owner_uses >= 2, "agent/sample/ no longer uses libbpf: is the owner elsewhere? update OWNER"
    assert not bad, ("BPF maps are the sampler's (agent/sample/): these lines outside it use libbpf or a map; "
                     "go through maps_io.h instead:\n" + "\n".join(bad))


def test_the_check_catches_each_kind_of_use():
    """The scanner flags what it is for, in any folder but the owner's."""
    for line in ['#include <bpf/bpf.h>', '#include <bpf/libbpf.h>', '#include "prowl.skel.h"',
                 '\tbpf_map_update_elem(fd, &pid, &v, BPF_ANY);', '\tint fd = bpf_map__fd(m);',
                 '\tr = bpf_map_lookup_elem(fd, &k, &v);']:
        assert offences("symbolizer/python/x.c", line), line
        assert not offences("agent/sample/x.c", line), line
    assert not offences("symbolizer/python/x.c", '#include "maps_io.h"\n\tio->py_proc_set(io->ctx, pid, &pp);')
    assert not offences("bpf/python.bpf.h", "\tbpf_map_lookup_elem(&py_procs, &pid);")
