"""test_self.py: whole-host captures leave prowl's own process out (dropped in BPF by
its tgid) unless --include-self or include_self: true asks for it; record and agent."""
import signal
import subprocess
import time

from agentlib import Agent
from conftest import PROWL, pprof_raw, san_report, start, stop, workload

FREQ = "997"  # many samples to read and symbolize keep prowl itself on a CPU


def pids_in(raw):
    """{pid: samples} over a profile, from the pid sample label as Google pprof reads it."""
    out = {}
    for s in raw.samples:
        pid = int(s["labels"]["pid"])
        out[pid] = out.get(pid, 0) + s["values"][0]
    return out


def record_all(tmp_path, name, extra):
    """A 3 s whole-host capture; (prowl's pid, {pid: samples})."""
    out = tmp_path / f"{name}.pb.gz"
    p = subprocess.Popen([PROWL, "record", "-a", "-F", FREQ, "-d", "3s", "-o", str(out)] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace")
    stdout, stderr = p.communicate(timeout=120)
    assert not san_report(stderr), stderr
    assert p.returncode == 0, stderr
    return p.pid, pids_in(pprof_raw(str(out)))


def test_record_all_drops_its_own_samples(tmp_path):
    """Two whole-host captures of the same busy host: without the flag no sample carries
    prowl's pid while the workload's are there; with --include-self prowl is in it."""
    wl = start([workload("spin"), "-t", "1", "-s", "120"])
    try:
        time.sleep(0.2)
        mine, pids = record_all(tmp_path, "default", [])
        mine_in, pids_in_ = record_all(tmp_path, "self", ["--include-self"])
    finally:
        stop(wl)
    assert pids.get(wl.pid, 0) > 100, pids
    assert mine not in pids, f"prowl (pid {mine}) has {pids[mine]} samples of {sum(pids.values())}"
    assert pids_in_.get(wl.pid, 0) > 100, pids_in_
    assert pids_in_.get(mine_in, 0) > 0, f"--include-self: no sample of prowl (pid {mine_in}): {pids_in_}"


def agent_pids(files):
    pids = {}
    for f in files:
        for pid, n in pids_in(pprof_raw(str(f))).items():
            pids[pid] = pids.get(pid, 0) + n
    return pids


def test_agent_drops_itself_until_a_reload_includes_it(tmp_path):
    """The agent's windows hold no sample of the agent; `include_self: true` in the file
    and a SIGHUP bring it in from the next windows on (the BPF side changes at run time)."""
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(f"frequency: {FREQ}\ninterval: 1s\n")
    wl = start([workload("spin"), "-t", "1", "-s", "120"])
    agent = Agent(tmp_path, ["--config", str(cfg), "--dir", str(tmp_path / "out")])
    try:
        agent.start()
        time.sleep(3.5)
        before = set((tmp_path / "out").rglob("*.pb.gz"))
        cfg.write_text(f"frequency: {FREQ}\ninterval: 1s\ninclude_self: true\n")
        agent.send(signal.SIGHUP)
        agent.wait_log(r"configuration reloaded")
        reloaded = set((tmp_path / "out").rglob("*.pb.gz"))
        time.sleep(3.5)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
    after = set((tmp_path / "out").rglob("*.pb.gz")) - reloaded
    assert len(before) >= 2 and len(after) >= 3, (before, after)
    pids = agent_pids(before)
    assert pids.get(wl.pid, 0) > 100, pids
    assert agent.pid not in pids, f"the agent (pid {agent.pid}) has {pids[agent.pid]} samples"
    pids = agent_pids(after)
    assert pids.get(wl.pid, 0) > 100, pids
    assert pids.get(agent.pid, 0) > 0, f"include_self: no sample of the agent (pid {agent.pid}): {pids}"


def test_other_pid_namespace_keeps_its_samples(tmp_path):
    """In a PID namespace of its own, getpid() is not the tgid BPF sees (prowl is pid 1
    there, the host's init here): prowl says so at debug level and drops nothing, so its
    samples are in the profile under its host pid."""
    out = tmp_path / "ns.pb.gz"
    wl = start([workload("spin"), "-t", "1", "-s", "60"])
    p = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", PROWL, "record", "-a", "-v", "-F", FREQ,
                          "-d", "3s", "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         errors="replace")
    try:
        inner = None
        for _ in range(100):
            try:
                kids = open(f"/proc/{p.pid}/task/{p.pid}/children").read().split()
            except OSError:
                kids = []
            if kids:
                inner = int(kids[0])
                break
            time.sleep(0.02)
        _, stderr = p.communicate(timeout=120)
    finally:
        stop(wl)
    assert not san_report(stderr), stderr
    assert p.returncode == 0, stderr
    assert "not in the initial PID namespace" in stderr, stderr
    pids = pids_in(pprof_raw(str(out)))
    assert inner and pids.get(inner, 0) > 0, f"prowl (host pid {inner}) has no samples: {pids}"
