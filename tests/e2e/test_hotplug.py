"""test_hotplug.py: a CPU that goes offline and comes back during a capture is
sampled again (prowl re-checks online CPUs every second)."""
import os
import re
import subprocess
import time

import pytest

from conftest import PROWL, pprof_raw, start, stop, workload

CPU1 = "/sys/devices/system/cpu/cpu1/online"


def set_online(v):
    with open(CPU1, "w") as f:
        f.write(v)


@pytest.mark.skipif(not os.access(CPU1, os.W_OK) or os.cpu_count() < 2, reason="CPU 1 cannot be taken offline here")
def test_cpu_offline_then_online(tmp_path):
    out = tmp_path / "hp.pb.gz"
    load = start([workload("cpusplit"), "12", "2"])
    pr = subprocess.Popen([PROWL, "record", "-a", "-F", "99", "-d", "8s", "-o", str(out)],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.5)
        set_online("0")
        time.sleep(2)
        set_online("1")
        so, se = pr.communicate(timeout=60)
    finally:
        set_online("1")
        stop(load)
    assert pr.returncode == 0, se
    assert "CPU 1 came online; sampling it" in se, se
    # About 1.5 s on 2 CPUs, 2 s on 1 CPU, then ~4.5 s on 2 CPUs again: a capture
    # that lost CPU 1 for good would have at most ~99 * (1.5 * 2 + 6.5) samples.
    m = re.search(r"(\d+) samples in", so)
    assert m and int(m.group(1)) > 99 * (1.5 * 2 + 6.5) * 1.1, so
    raw = pprof_raw(str(out))
    cs = lambda s: s["labels"].get("process_name") == "cpusplit"
    assert abs(raw.share("hot_a", cs) - 0.75) <= 0.05
