"""test_node_hostile.py: a forged node (tests/workloads/node/fakenode.c), run by an
unprivileged user: it exports V8's v8dbg_ constants and spins in a "builtin" whose frame
holds a forged JSFunction: a name with a newline and ';', a script name that is a cons
string of itself, a source position table that never ends; or words that change under
prowl (a moving collector); or constants out of range. prowl must give no crash (the
sanitizer pass runs this file), no line break in a name, no name the forgery did not
hold where BPF saw it, and one warning for metadata it refuses."""
import time

import pytest

from conftest import one_error_line, pprof_raw, run_prowl, stop, workload

EVIL = "evil?name;injected"  # the forged name, its newline made '?'
STALE = "[v8: function moved or freed since the sample]"


def capture(tmp_path, unprivileged, binary, mode):
    p = unprivileged.popen([workload(binary), mode, "60"])
    try:
        time.sleep(0.3)
        out = tmp_path / f"{mode}.pb.gz"
        res = run_prowl(["record", "-p", str(p.pid), "-d", "1", "-F", "499", "-o", str(out)])
        assert res.returncode == 0, res.stderr
        assert p.poll() is None, "the forged node died"
    finally:
        stop(p)
    return pprof_raw(str(out), "-symbolize=none"), res.stderr


def test_forged_heap_names_without_injection(tmp_path, unprivileged):
    raw, _ = capture(tmp_path, unprivileged, "node/fakenode", "heap")
    spin = raw.total(lambda s: "main" in raw.frames(s))
    assert spin > 30, f"only {spin} samples of the spinning thread"
    named = raw.total(lambda s: EVIL in raw.frames(s))
    assert named / spin >= 0.95, (named, spin)
    for s in raw.samples:  # rooted through the forged frame: main, then _start
        fr = raw.frames(s)
        if EVIL in fr:
            assert fr[fr.index(EVIL) + 1] == "main" and fr[-1] == "_start", fr
    names = {f for s in raw.samples for f in raw.frames(s)}
    assert not any("\n" in n for n in names), names
    # The looping cons string named no file; the garbage table gave no line.
    js = [l for loc in raw.locations.values() for l in loc["lines"] if l[0] == EVIL]
    assert js and all(file == "" and line == 0 for _, file, line in js), js


@pytest.mark.slow  # the sanitizer pass has the forged heap above; this one checks the logic
def test_moving_words_give_markers_not_other_names(tmp_path, unprivileged):
    """The name and script words flip between two values all the time: a frame is named
    only when both are what BPF read, else marked. This forgery's builtin has no symbol
    (a stripped binary): the walk finds it as the binary's code without CFI."""
    raw, _ = capture(tmp_path, unprivileged, "node/fakenode_stripped", "flip")
    spin = [raw.frames(s) for s in raw.samples if "main" in raw.frames(s)]
    assert raw.total(lambda s: "main" in raw.frames(s)) >= 5, "too few samples of the spinning thread"
    assert any(set(fr) & {EVIL, "other", STALE} for fr in spin), spin
    for fr in spin:
        user = [f for f in fr if f in (EVIL, "other", STALE, "main")]  # kernel frames above are left out
        assert user[0] in (EVIL, "other", STALE) and user[1] == "main", fr


def test_refused_metadata_warns_once(tmp_path, unprivileged):
    raw, err = capture(tmp_path, unprivileged, "node/fakenode_badmeta", "heap")
    warn = [l for l in err.splitlines() if "node:" in l]
    assert len(warn) == 1 and "v8dbg_off_fp_function = 13 is not a value V8 uses" in warn[0], warn
    assert "JavaScript frames are not unwound" in warn[0]
    names = {f for s in raw.samples for f in raw.frames(s)}
    assert EVIL not in names and not [m for m in raw.mappings.values() if m["file"] == "[js]"], names


def test_node_on_with_fp_is_refused():
    res = run_prowl(["record", "--node", "on", "--unwind", "fp", "-a", "-d", "1"])
    assert res.returncode == 2
    assert "--node=on needs --unwind=dwarf" in one_error_line(res)
