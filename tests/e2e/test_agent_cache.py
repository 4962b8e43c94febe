"""The agent's on-disk cache (state_dir/cache): a restart loads the unwind tables and the
kernel's symbol index the first run built instead of building them again, and an entry
damaged on disk is refused, counted and rebuilt. (Units: tests/unit/test_diskcache.c and
tests/unit/test_kallsyms_cache.c, with the hostile cases.)"""
import os
import re
import stat
import subprocess
import time

from agentlib import Agent
from conftest import BUILD


def wait_metric(agent, cond, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = agent.metrics()
        if cond(m):
            return m
        time.sleep(0.3)
    raise AssertionError(f"metrics never met the condition:\n{agent.log()}")


KSYMS = r"kernel symbols: (\d+) (read from /proc/kallsyms|from state_dir/cache)"


def run(tmp_path, cond):
    """One agent run until cond(metrics) and its first kernel frame; the metrics, the
    cache directory and how the kernel's symbols were had: (count, source)."""
    a = Agent(tmp_path, args=["-F", "49", "--interval", "1s", "--dir", str(tmp_path / "out"), "-v"]).start()
    try:
        m = wait_metric(a, cond)
        a.wait_log(KSYMS)
        ks = re.findall(KSYMS, a.log())
    finally:
        assert a.stop() == 0
    assert len(ks) == 1, ks
    return m, a.state / "cache", (int(ks[0][0]), ks[0][1])


def test_restart_loads_tables_and_refuses_damaged_ones(tmp_path):
    spin = subprocess.Popen([f"{BUILD}/workloads/spin", "-t", "1", "-s", "60"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    # kernel frames for certain (spin's are all user code): a process in read(2) and write(2)
    # dd itself, not under timeout(1): a kill of timeout left dd spinning for good, which
    # took a CPU from every later test. count bounds it (about a minute) if all else fails.
    dd = subprocess.Popen(["dd", "if=/dev/zero", "of=/dev/null", "bs=256k", "count=400000"],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        first, cache, ks1 = run(tmp_path, lambda m: m.get("prowl_disk_cache_stores_total") >= 3)
        assert first.get("prowl_disk_cache_lookups_total", result="hit") == 0
        st = os.stat(cache)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == 0
        entries = [cache / n for n in os.listdir(cache)]
        assert len(entries) >= 3
        for e in entries:
            assert stat.S_IMODE(os.lstat(e).st_mode) == 0o600
        # (the metrics are a window old: entries may have been added since)
        assert 0 < first.get("prowl_disk_cache_bytes") <= sum(os.path.getsize(e) for e in entries)

        # The restart: the same objects' tables come from the cache.
        second, _, ks2 = run(tmp_path, lambda m: m.get("prowl_disk_cache_lookups_total", result="hit") >= 3)
        hits = second.get("prowl_disk_cache_lookups_total", result="hit")
        assert second.get("prowl_disk_cache_lookups_total", result="corrupt") == 0
        assert second.get("prowl_disk_cache_stores_total") < hits, "the restart built most tables again"
        # The kernel's index too, without BPF programs' and trampolines' symbols (a few).
        assert ks1[1] == "read from /proc/kallsyms" and ks1[0] > 1000
        assert ks2[1] == "from state_dir/cache" and ks1[0] - 1000 < ks2[0] <= ks1[0]

        # Every entry damaged in its rows: each one looked up is refused, removed and rebuilt.
        entries = [cache / n for n in os.listdir(cache)]
        for e in entries:
            with open(e, "r+b") as f:
                f.seek(os.path.getsize(e) - 1)
                b = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([b[0] ^ 0xff]))
        third, _, ks3 = run(tmp_path, lambda m: m.get("prowl_disk_cache_lookups_total", result="corrupt") >= 3)
        corrupt = third.get("prowl_disk_cache_lookups_total", result="corrupt")
        stores = third.get("prowl_disk_cache_stores_total")
        # A hit now can only be of an entry this run wrote again (a table built twice).
        assert third.get("prowl_disk_cache_lookups_total", result="hit") <= stores
        assert stores >= corrupt
        assert ks3[1] == "read from /proc/kallsyms", "the damaged kernel index was used"
    finally:
        for p in (spin, dd):
            p.kill()
            p.wait()
