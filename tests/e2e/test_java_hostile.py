"""test_java_hostile.py: a forged JVM (tests/workloads/java/fakejvm.c), run by an
unprivileged user: it exports gHotSpotVMStructs and friends with tables that parse and a
code cache whose metadata is garbled (a segment map that leads nowhere, a code blob with a
frame size of 2^31 words, an interpreter frame whose Method names hold ';' and a newline).
prowl registers it like a JVM and must give markers in at least 95 % of its samples, no
name the forgery planted, no crash (the sanitizer pass runs this file)."""
import time

import pytest

from conftest import one_error_line, pprof_raw, run_prowl, stop, workload

MARKERS = ("[truncated: Java frame prowl cannot follow]", "[java: ")


@pytest.mark.sanitizer_pass
@pytest.mark.parametrize("mode", ["segmap", "blob", "interp"])
def test_forged_jvm_gets_markers(tmp_path, unprivileged, mode):
    p = unprivileged.popen([workload("fakejvm"), mode, "60"])
    try:
        time.sleep(0.5)
        out = tmp_path / f"{mode}.pb.gz"
        res = run_prowl(["record", "-p", str(p.pid), "-d", "2", "-F", "499", "-q", "-o", str(out)])
        assert res.returncode == 0, res.stderr
        assert p.poll() is None, "the forged JVM died"
    finally:
        stop(p)
    raw = pprof_raw(str(out), "-symbolize=none")
    total = raw.total()
    marked = raw.total(lambda s: any(f.startswith(MARKERS) for f in raw.frames(s)))
    assert total > 50 and marked / total >= 0.95, (mode, marked, total)
    names = {f for s in raw.samples for f in raw.frames(s)}
    assert not any("evil" in n or "\n" in n for n in names), names
    assert not any(m["file"] == "[java]" for m in raw.mappings.values()), "a forged frame was named"


@pytest.mark.sanitizer_pass
def test_unusable_metadata_warns_once(tmp_path, unprivileged):
    """Tables that lack a field the walk needs: one warning naming it, native frames."""
    p = unprivileged.popen([workload("fakejvm"), "nometa", "60"])
    try:
        time.sleep(0.5)
        out = tmp_path / "nometa.pb.gz"
        res = run_prowl(["record", "-p", str(p.pid), "-d", "2", "-F", "499", "-o", str(out)])
        assert res.returncode == 0, res.stderr
    finally:
        stop(p)
    warn = [l for l in res.stderr.splitlines() if "java:" in l]
    assert len(warn) == 1 and "lacks CodeCache::_heaps" in warn[0] and "native frames only" in warn[0], warn
    raw = pprof_raw(str(out), "-symbolize=none")
    names = {f for s in raw.samples for f in raw.frames(s)}
    assert "[jit]" in names and not any(n.startswith(MARKERS) for n in names), names


def test_java_on_with_fp_is_refused():
    res = run_prowl(["record", "--java", "on", "--unwind", "fp", "-a", "-d", "1"])
    assert res.returncode == 2
    assert "--java=on needs --unwind=dwarf" in one_error_line(res)
