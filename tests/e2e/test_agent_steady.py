"""test_agent_steady.py: the agent's steady work stays steady: what it learned of a running
process (its labels, its maps) is kept between samples, so a busy host that starts nothing
new costs it samples only (issue 32). The figures are in BENCHMARKS.md ("The agent's steady
and cold cost")."""
import sys
import time

from agentlib import Agent
from conftest import start, stop, workload

LOOP = "import time\nt = time.time()\nwhile time.time() - t < 60:\n    sum(i * i for i in range(1000))\n"


def last_pid():
    """The newest pid on the host (/proc/loadavg's last field): pids made = its growth."""
    with open("/proc/loadavg") as f:
        return int(f.read().split()[-1])


def test_steady_processes_are_discovered_once(tmp_path):
    """Two busy processes whose names differ in length ("python3", "spin"), sampled at 99 Hz:
    each is discovered once. A sample's process name once carried the bytes of an earlier
    record after its NUL, so the agent took it for an exec and discovered (read its cgroup,
    status and maps) again on about a third of the samples: 8,226 discoveries of 14
    processes in three minutes."""
    py = start([sys.executable, "-c", LOOP])
    sp = start([workload("spin"), "-t", "1", "-s", "60"])
    agent = Agent(tmp_path, ["-F", "99", "--interval", "2s", "--dir", str(tmp_path / "out")])
    try:
        agent.start()
        time.sleep(3)  # both are discovered, and the host's other processes
        m0, p0 = agent.metrics(), last_pid()
        time.sleep(6)
        m1, p1 = agent.metrics(), last_pid()
    finally:
        agent.stop()
        stop(py)
        stop(sp)
    samples = m1.get("prowl_samples_total") - m0.get("prowl_samples_total")
    found = m1.get("prowl_discoveries_total") - m0.get("prowl_discoveries_total")
    made = (p1 - p0) % (1 << 22)
    # Both CPUs busy for 6 s at 99 Hz: about 1,200 samples; a new process (the test's own,
    # the host's) is discovered once, an exec twice.
    assert samples > 600, f"only {samples} samples in 6 s:\n{agent.log()}"
    assert found <= 2 * made + 4, \
        f"{found:.0f} discoveries over {samples:.0f} samples while {made} processes started"
