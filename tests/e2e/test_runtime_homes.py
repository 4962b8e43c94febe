"""test_runtime_homes.py: each runtime has one home per side. CPython: bpf/python.bpf.h
(self-contained: it compiles on its own) and symbolizer/python/, whose internals no file
outside it includes; the rest of the tree uses its interface headers only. node (V8):
symbolizer/node/ the same way (its BPF file is a step of the DWARF unwinder, as Java's)."""
import os
import re
import subprocess

import pytest

from conftest import BUILD, ROOT

# The interface of symbolizer/python/ to the rest of the tree, and who uses it: the
# unwinder (detection and registration), the symbolizer (naming frames, its cache's
# figures), the resolve stage (the merge) and the commands (the sampler's maps).
INTERFACE = {"pyproc.h", "pyresolve.h", "pymerge.h"}


def test_python_bpf_source_is_self_contained(tmp_path):
    """python.bpf.h builds with only what every BPF source has (vmlinux.h, libbpf's BPF
    headers, prowl.h): its maps and walk need nothing of prowl.bpf.c or unwind.bpf.h."""
    vmlinux = os.path.join(BUILD, "vmlinux.h")
    if not os.path.exists(vmlinux):
        pytest.fail(f"{vmlinux} missing: run make first")
    src = tmp_path / "only_python.bpf.c"
    src.write_text('#include "vmlinux.h"\n#include <bpf/bpf_helpers.h>\n#include <bpf/bpf_core_read.h>\n'
                   '#include <bpf/bpf_tracing.h>\n#include "prowl.h"\n#include "python.bpf.h"\n'
                   'char LICENSE[] SEC("license") = "GPL";\n')
    r = subprocess.run(["clang", "-g", "-O2", "-Wall", "-Werror", "-target", "bpf", "-D__TARGET_ARCH_x86",
                        "-I" + BUILD, "-I" + os.path.join(ROOT, "bpf"), "-c", str(src), "-o",
                        str(tmp_path / "only_python.o")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, "bpf/python.bpf.h does not build on its own:\n" + r.stderr[-3000:]
    # Its maps are in the object (the build did compile the walk).
    syms = subprocess.run(["llvm-objdump", "-t", str(tmp_path / "only_python.o")], capture_output=True,
                          text=True).stdout if os.path.exists("/usr/bin/llvm-objdump") else ""
    if syms:
        assert "py_procs" in syms


# node's interface: registration (the unwinder) and naming (the symbolizer, the resolve
# stage, the commands).
NODE_INTERFACE = {"v8proc.h", "v8name.h"}


@pytest.mark.parametrize("folder,interface,who", [("python", INTERFACE, "CPython"),
                                                  ("node", NODE_INTERFACE, "node")])
def test_internals_stay_in_their_folder(folder, interface, who):
    headers = {f for f in os.listdir(os.path.join(ROOT, "symbolizer", folder)) if f.endswith(".h")}
    assert interface <= headers, f"symbolizer/{folder}/ lacks {interface - headers}"
    inc = re.compile(r'#\s*include\s*"(?:[\w/]*/)?(\w+\.h)"')
    bad, users = [], set()
    for top, dirs, files in os.walk(ROOT):
        rel_top = os.path.relpath(top, ROOT)
        dirs[:] = [d for d in dirs if d not in {".git", "tests"} and not d.startswith("build")]
        if rel_top == os.path.join("symbolizer", folder):
            continue
        for f in files:
            if not f.endswith((".c", ".h")):
                continue
            rel = os.path.normpath(os.path.join(rel_top, f))
            for i, line in enumerate(open(os.path.join(ROOT, rel), errors="replace"), 1):
                m = inc.search(line)
                if m and m.group(1) in headers:
                    users.add(m.group(1))
                    if m.group(1) not in interface:
                        bad.append(f"{rel}:{i}: {line.strip()}")
    assert not bad, (f"{who}'s internals are symbolizer/{folder}/'s; outside it use "
                     f"{sorted(interface)}:\n" + "\n".join(bad))
    assert users == interface, f"interface headers used outside the folder: {sorted(users)}"
