"""test_kernel_support.py: the BPF side as each kernel gets it, on this machine's kernel:
both DWARF unwinder builds (bpf_loop, bounded loops chained by tail calls), one-line
errors that name a missing kernel feature, libbpf's output through prowl's logger in every
log format, and the marker at the end of a frame-pointer walk that found no thread entry.
Other kernels are booted by tests/kmatrix/kmatrix.py. Profiles are read with Google's pprof."""
import json
import os
import re
import subprocess

import pytest

from agentlib import Agent
from conftest import PROWL, pprof_raw, run_prowl, start, stop, workload

SPLIT = {"share50": 0.50, "share30": 0.30, "share20": 0.20}
FP_MARK = "[truncated: frame-pointer walk ended before the thread's entry]"
DEPTH_MARK = "[truncated: user stack deeper than 127 frames]"
# Where a complete user stack ends.
ENTRIES = {"_start", "__clone3", "clone3", "start_thread", "__libc_start_call_main"}


def prowl_env(args, env):
    e = dict(os.environ, ASAN_OPTIONS="detect_leaks=1", **env)
    return subprocess.run([PROWL] + args, capture_output=True, text=True, timeout=120, env=e)


def capture(tmp_path, name, args, env=None):
    out = tmp_path / f"{name}.pb.gz"
    res = prowl_env(["record", "-q", "-F", "999", "-o", str(out)] + args, env or {})
    assert res.returncode == 0, res.stderr
    return pprof_raw(str(out)), res


def capture_of(tmp_path, name, wl, args, env=None):
    """Captures workload wl (started with 8 s to run and 2 threads) by pid."""
    w = start([workload(wl), "8", "2"])
    try:
        return capture(tmp_path, name, ["-p", str(w.pid)] + args, env)
    finally:
        stop(w)


def of(raw, comm):
    return lambda s: s["labels"].get("process_name", "").strip("'\"") == comm


def check_split(raw, pred):
    # A busy machine gives the workload less CPU; 600 samples put 5 points at 2.5
    # standard errors of the 50% share (an idle one gives ten times as many).
    assert raw.total(pred) >= 600, f"{raw.total(pred)} samples: too few to judge a split"
    shares = {f: raw.share(f, pred) for f in SPLIT}
    covered = sum(shares.values())
    assert covered > 0.9, f"only {covered:.0%} of the samples are in the workload's functions: {shares}"
    for f, want in SPLIT.items():
        assert abs(shares[f] / covered - want) <= 0.05, f"{f}: {shares[f] / covered:.1%}, want {want:.0%}: {shares}"


def outermost(raw, s):
    fr = raw.frames(s)
    return fr[-1] if fr else None


@pytest.mark.slow
def test_bounded_unwinder_split_and_roots(tmp_path):
    """PROWL_BPF_UNWINDER=bounded (the build for 5.8-5.16) on a no-frame-pointer build:
    the 50/30/20 split, and stacks that end at the thread's entry."""
    raw, res = capture_of(tmp_path, "bounded", "split532", ["-d", "4s"],
                          env={"PROWL_BPF_UNWINDER": "bounded", "PROWL_BPF_TIMING": "1"})
    assert "prowl_sample_dwarf_bounded" in res.stderr, res.stderr
    pred = of(raw, "split532")
    check_split(raw, pred)
    total = raw.total(pred)
    rooted = raw.total(lambda s: pred(s) and outermost(raw, s) in ENTRIES)
    assert total >= 100 and rooted / total >= 0.95, (rooted, total)


def test_bounded_unwinder_reaches_full_depth(tmp_path):
    """The tail-call chain covers as many frames as bpf_loop does: a 200-deep
    recursion comes out as 127 user frames and the depth marker, in both builds."""
    w = start([workload("unw_recurse"), "200", "8"])
    try:
        for unw in ("bounded", "loop"):
            raw, _ = capture(tmp_path, unw, ["-p", str(w.pid), "-d", "1s"], env={"PROWL_BPF_UNWINDER": unw})

            def user_locs(s):
                return [l for l in s["locs"] if raw.mappings[raw.locations[l]["mapping"]]["file"] != "[kernel.kallsyms]"]

            deep = [s for s in raw.samples if outermost(raw, s) == DEPTH_MARK]
            assert len(deep) >= 0.9 * len(raw.samples) > 0, f"{unw}: {len(deep)} of {len(raw.samples)} samples"
            for s in deep:
                assert len(user_locs(s)) == 128, f"{unw}: {len(user_locs(s))} user locations, not 127 and the marker"
    finally:
        stop(w)


def test_whole_host_capture_starts_complete(tmp_path):
    """record -a loads every running process before the first sample: no stack of a
    process that ran before prowl says it was not loaded yet."""
    w = start([workload("split532"), "8", "2"])
    try:
        raw, _ = capture(tmp_path, "all", ["-a", "-d", "1s"])
    finally:
        stop(w)
    pred = of(raw, "split532")
    assert raw.total(pred) >= 50
    late = raw.total(lambda s: pred(s) and any("not loaded by the unwinder yet" in f for f in raw.frames(s)))
    assert late == 0, f"{late} samples of a process that was running before prowl started were not unwound"


def test_fp_walk_without_entry_is_marked(tmp_path):
    """--unwind=fp on code without frame pointers: the walk loses the callers, and
    the stack ends in a marker instead of passing for complete."""
    raw, _ = capture_of(tmp_path, "nofp", "unw_split", ["--unwind=fp", "-d", "1s"])
    pred = of(raw, "unw_split")
    total = raw.total(pred)
    marked = raw.total(lambda s: pred(s) and outermost(raw, s) == FP_MARK)
    assert total >= 50 and marked / total >= 0.95, (marked, total)


@pytest.mark.slow
def test_fp_walk_to_entry_is_not_marked(tmp_path):
    """The same walk through a frame-pointer build reaches start_thread: no marker, and
    the split is found."""
    raw, _ = capture_of(tmp_path, "fp", "split532_fp", ["--unwind=fp", "-d", "4s"])
    pred = of(raw, "split532_fp")
    check_split(raw, pred)
    total = raw.total(pred)
    marked = raw.total(lambda s: pred(s) and outermost(raw, s) == FP_MARK)
    assert marked / total <= 0.02, (marked, total)


def test_unknown_unwinder_is_one_line(tmp_path):
    res = prowl_env(["record", "-a", "-d", "1s", "-o", str(tmp_path / "x.pb.gz")], {"PROWL_BPF_UNWINDER": "fast"})
    assert res.returncode == 1
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("prowl: error: PROWL_BPF_UNWINDER=fast"), res.stderr
    assert "loop or bounded" in lines[0]


def test_kernel_without_btf_is_named(tmp_path):
    """An empty file over /sys/kernel/btf/vmlinux (in a private mount namespace) is
    what a kernel built without CONFIG_DEBUG_INFO_BTF looks like to prowl."""
    for mode in ("dwarf", "fp"):
        res = subprocess.run(["unshare", "-m", "sh", "-c",
                              'mount --bind /dev/null /sys/kernel/btf/vmlinux && exec "$@"', "sh",
                              PROWL, "record", "-a",
                              f"--unwind={mode}", "-d", "1s", "-o", str(tmp_path / "x.pb.gz")],
                             capture_output=True, text=True, timeout=60)
        lines = [l for l in res.stderr.splitlines() if l.strip()]
        assert res.returncode == 1 and len(lines) == 1, res.stderr
        assert "kernel BTF" in lines[0] and "Linux 5.4+" in lines[0] and "CONFIG_DEBUG_INFO_BTF" in lines[0], lines[0]
    assert not (tmp_path / "x.pb.gz").exists()


def test_libbpf_output_in_plain_log(tmp_path):
    """-v: libbpf's lines are prowl's debug lines, never raw 'libbpf:' lines."""
    res = run_prowl(["record", "-v", "-a", "-d", "0.2s", "-o", str(tmp_path / "x.pb.gz")])
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert all(l.startswith("prowl: ") for l in lines), [l for l in lines if not l.startswith("prowl: ")][:5]
    assert sum(l.startswith("prowl: debug: libbpf: ") for l in lines) >= 10
    assert any(re.match(r"prowl: debug: kernel \S+ BPF features: btf=yes ", l) for l in lines)


def test_libbpf_output_in_json_and_logfmt(tmp_path):
    """The agent with --log-level debug: every line of stderr is one record of the log
    format, libbpf's included."""
    for fmt in ("json", "logfmt"):
        a = Agent(tmp_path, name=f"a-{fmt}", args=["--dir", str(tmp_path / f"p-{fmt}"), "--interval", "1s",
                                                     "--log-level", "debug", "--log-format", fmt])
        with a:
            a.wait_log("libbpf: ")
            assert a.stop() == 0
        lines = [l for l in a.log().splitlines() if l.strip()]
        libbpf = 0
        for l in lines:
            if fmt == "json":
                rec = json.loads(l)
                libbpf += rec["msg"].startswith("libbpf: ")
            else:
                assert re.match(r'^ts=\S+ level=\w+ msg=".*"$', l), l
                libbpf += 'msg="libbpf: ' in l
        assert libbpf >= 10, f"{fmt}: {libbpf} libbpf lines"
