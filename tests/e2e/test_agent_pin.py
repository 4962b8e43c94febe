"""test_agent_pin.py: the agent keeps its verified BPF programs and maps pinned in
/sys/fs/bpf/prowl, so that a restart attaches them again without a verifier pass (issue
32: a restart at most a quarter of a first start's CPU; the figures are in BENCHMARKS.md).
The set a restart takes must sample as a fresh load does, start from empty maps, and be
one that root pinned for this very load; anything else is loaded anew."""
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from agentlib import Agent, private_cpusplit, shares
from conftest import pprof_raw, start, stop, workload
from test_caps import CAPS, as_user

PIN_ROOT = "/sys/fs/bpf/prowl"


@pytest.fixture(autouse=True)
def clean_pins():
    shutil.rmtree(PIN_ROOT, ignore_errors=True)
    yield
    shutil.rmtree(PIN_ROOT, ignore_errors=True)


def pin_sets():
    return sorted(os.listdir(PIN_ROOT)) if os.path.isdir(PIN_ROOT) else []


def link_prog_ids(pid):
    """The ids of the BPF programs process pid holds attached through BPF links."""
    ids = set()
    fd_dir = f"/proc/{pid}/fdinfo"
    for fd in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, fd)) as f:
                text = f.read()
        except OSError:
            continue
        if "link_type:" in text:
            ids.update(int(l.split()[1]) for l in text.splitlines() if l.startswith("prog_id:"))
    return ids


def pinned_prog_id(set_name, prog):
    out = subprocess.run(["bpftool", "-j", "prog", "show", "pinned", f"{PIN_ROOT}/{set_name}/p_{prog}"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["id"]


def pinned_samples(set_name):
    """BPF's count of samples (counters[PROWL_CNT_SAMPLES], every CPU's) in a pinned set."""
    out = subprocess.run(["bpftool", "-j", "map", "lookup", "pinned", f"{PIN_ROOT}/{set_name}/m_counters",
                          "key", "0", "0", "0", "0"], capture_output=True, text=True, check=True).stdout
    return sum(v["value"] for v in json.loads(out)["formatted"]["values"])


def split_of(out_dir, svc):
    raws = [pprof_raw(os.path.join(out_dir, svc, f)) for f in sorted(os.listdir(os.path.join(out_dir, svc)))]
    return shares(raws)


def test_restart_attaches_the_pinned_programs(tmp_path):
    """A first start pins its set; the restart attaches those very programs (the same BPF
    program ids: nothing verified again), samples as well as the first one (cpusplit's
    3:1 between hot_a and hot_b, with DWARF-unwound stacks), and starts from empty maps
    (BPF's sample counter from zero, not from the first run's count)."""
    exe, svc = private_cpusplit(tmp_path)
    w = start([exe, "60"])
    first = again = None
    try:
        first = Agent(tmp_path, ["-F", "99", "--interval", "1s", "--dir", str(tmp_path / "out1"), "-v"],
                      name="first").start()
        assert len(pin_sets()) == 1, (pin_sets(), first.log())
        key = pin_sets()[0]
        assert os.path.exists(f"{PIN_ROOT}/{key}/p_prowl_sample_dwarf"), os.listdir(f"{PIN_ROOT}/{key}")
        st = os.stat(f"{PIN_ROOT}")
        assert st.st_uid == 0 and st.st_mode & 0o777 == 0o700, oct(st.st_mode)
        sampler_id = pinned_prog_id(key, "prowl_sample_dwarf")
        assert sampler_id in link_prog_ids(first.pid)
        time.sleep(5)
        assert first.stop() == 0, first.log()
        first_count = pinned_samples(key)

        again = Agent(tmp_path, ["-F", "99", "--interval", "1s", "--dir", str(tmp_path / "out2"), "-v"],
                      name="again").start()
        assert "no verifier pass" in again.log(), again.log()
        assert pin_sets() == [key]
        assert sampler_id in link_prog_ids(again.pid), (sampler_id, link_prog_ids(again.pid))
        time.sleep(3)
        assert again.stop() == 0, again.log()
        again_count = pinned_samples(key)
    finally:
        for a in (first, again):
            if a:
                a.kill()  # one a failed assertion left running (a no-op once stopped)
        stop(w)
    # 99 Hz on a busy CPU: ~500 samples in the first run's 5 s, ~300 in the restart's 3 s.
    assert first_count > 300, first_count
    assert 50 < again_count < first_count, (again_count, first_count)
    for d in ("out1", "out2"):
        (split, total) = split_of(tmp_path / d, svc)
        assert total > 150, (d, total)
        assert 0.62 < split["hot_a"] < 0.88 and 0.12 < split["hot_b"] < 0.38, (d, split)


def test_another_load_replaces_the_set(tmp_path):
    """A start whose load differs (frame pointers instead of DWARF: other programs) does
    not take the set: it verifies its own and leaves one set, its own, behind."""
    a = Agent(tmp_path, ["--dir", str(tmp_path / "out")], name="a").start()
    assert a.stop() == 0
    (old,) = pin_sets()
    b = Agent(tmp_path, ["--dir", str(tmp_path / "out"), "--unwind", "fp", "-v"], name="b").start()
    try:
        (new,) = pin_sets()
        assert new != old
        assert "no verifier pass" not in b.log()
        assert pinned_prog_id(new, "prowl_sample_fp") in link_prog_ids(b.pid)
    finally:
        assert b.stop() == 0, b.log()


def test_a_second_agent_loads_its_own(tmp_path):
    """While one agent holds the set, a second one on the host loads its own programs,
    unpinned, and both sample (a spinning process)."""
    w = start([workload("spin"), "-t", "1", "-s", "30"])
    a = Agent(tmp_path, ["-F", "99", "--dir", str(tmp_path / "a")], name="a").start()
    try:
        (key,) = pin_sets()
        b = Agent(tmp_path, ["-F", "99", "--dir", str(tmp_path / "b")], name="b").start()
        try:
            assert "another prowl agent holds /sys/fs/bpf/prowl" in b.log(), b.log()
            assert not link_prog_ids(a.pid) & link_prog_ids(b.pid)
            time.sleep(2)
            assert b.metrics().get("prowl_samples_total") > 0 and a.metrics().get("prowl_samples_total") > 0
            assert pin_sets() == [key]
        finally:
            assert b.stop() == 0, b.log()
    finally:
        assert a.stop() == 0, a.log()
        stop(w)


def test_a_set_root_did_not_pin_is_not_taken(tmp_path, unprivileged):
    """Pins that are not root's are not taken, whoever made them: a pinned sampler
    handed to another user is refused and replaced; a root directory another user owns
    (or that others may enter) is left alone, and the agent loads its own programs. The
    user cannot reach bpffs at all here (/sys/fs/bpf is root's, mode 0700)."""
    a = Agent(tmp_path, ["--dir", str(tmp_path / "out")], name="a").start()
    assert a.stop() == 0
    (key,) = pin_sets()
    res = unprivileged.run(["ls", PIN_ROOT], text=True)
    assert res.returncode != 0 and "Permission denied" in res.stderr, res
    planted = f"{PIN_ROOT}/{key}/p_prowl_sample_dwarf"
    planted_id = pinned_prog_id(key, "prowl_sample_dwarf")
    os.chown(planted, unprivileged.uid, unprivileged.gid)
    b = Agent(tmp_path, ["--dir", str(tmp_path / "out")], name="b").start()
    try:
        assert "cannot be used; loading them anew" in b.log(), b.log()
        assert "no verifier pass" not in b.log()
        assert planted_id not in link_prog_ids(b.pid)
    finally:
        assert b.stop() == 0, b.log()
    (again,) = pin_sets()
    assert os.stat(f"{PIN_ROOT}/{again}/p_prowl_sample_dwarf").st_uid == 0

    for mode, owner in ((0o700, unprivileged.uid), (0o755, 0)):
        shutil.rmtree(PIN_ROOT)
        os.mkdir(PIN_ROOT, mode)
        os.chmod(PIN_ROOT, mode)
        os.chown(PIN_ROOT, owner, 0)
        c = Agent(tmp_path, ["--dir", str(tmp_path / "out")], name=f"c{mode:o}").start()
        try:
            assert "not by root with mode 0700; remove it" in c.log(), c.log()
        finally:
            assert c.stop() == 0, c.log()
        assert pin_sets() == [], pin_sets()


def test_an_agent_that_is_not_root_leaves_the_set_alone(tmp_path, unprivileged):
    """An agent run as a user with the five capabilities (docs/agent.md) can read root's
    set but not pin: it says so in one line, loads its own programs, and removes and
    replaces nothing."""
    a = Agent(tmp_path, ["--dir", str(tmp_path / "out")], name="a").start()
    assert a.stop() == 0
    (key,) = pin_sets()
    sampler_id = pinned_prog_id(key, "prowl_sample_dwarf")
    udir = Path(tempfile.mkdtemp(prefix="prowl-pin-"))
    os.chown(udir, unprivileged.uid, unprivileged.gid)
    try:
        b = Agent(udir, ["--dir", str(udir / "out")], name="b", wrapper=as_user(unprivileged, CAPS, [])).start()
        try:
            assert "/sys/fs/bpf/prowl is not writable by uid" in b.log(), b.log()
            assert sampler_id not in link_prog_ids(b.pid)
        finally:
            assert b.stop() == 0, b.log()
    finally:
        shutil.rmtree(udir, ignore_errors=True)
    assert pin_sets() == [key] and pinned_prog_id(key, "prowl_sample_dwarf") == sampler_id


@pytest.mark.parametrize("env", [{"PROWL_BPF_PIN": "false"}, {"PROWL_OFF_CPU": "true"}])
def test_nothing_is_pinned_when_off(tmp_path, env):
    """bpf_pin: false pins nothing; nor does off-CPU time, whose per-task state a
    restart could not clear."""
    a = Agent(tmp_path, ["--dir", str(tmp_path / "out")], env=env).start()
    assert a.stop() == 0, a.log()
    assert not os.path.exists(PIN_ROOT)
