"""test_offcpu.py: off-CPU time (issue 30) with the real BPF program: `prowl record --off-cpu`
and `--wall` on tests/workloads/offsplit.c, whose threads wait in known functions and print
their true wall, CPU (schedstat) and waiting times; report and diff on the off_cpu type."""
import os
import re
import subprocess
import time
from collections import defaultdict

import pytest

from conftest import one_error_line, pprof_raw, run_prowl, workload

WAITS = ("wait_pipe", "wait_sleep", "wait_lock")
# Where the kernel preempts a task that runs on (a wait on the run queue, not in a wait function).
PREEMPTED = ("exit_to_user_mode_loop", "irqentry_exit", "preempt_schedule")


def truth(stdout):
    """The workload's own account: {name: {tid, wall, cpu, off}} and the worker's split."""
    threads, split = {}, {}
    for line in stdout.splitlines():
        m = re.match(r"thread (\S+) (\d+) wall_ns=(\d+) cpu_ns=(\d+) off_ns=(\d+)$", line)
        if m:
            threads[m.group(1)] = {"tid": m.group(2), "wall": int(m.group(3)), "cpu": int(m.group(4)),
                                   "off": int(m.group(5))}
        if line.startswith("split "):
            split = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}
    assert threads, f"the workload printed no account: {stdout!r}"
    return threads, split


def record(tmp, name, mode, args, extra=()):
    out = os.path.join(tmp, f"{name}.pb.gz")
    res = run_prowl(["record", mode, "--per-thread", "-o", out, *extra, "--", workload("offsplit"), *args],
                    timeout=120)
    assert res.returncode == 0, res.stderr
    threads, split = truth(res.stdout)
    return {"path": out, "res": res, "threads": threads, "split": split, "raw": pprof_raw(out, "-symbolize=none")}


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    tmp = str(tmp_path_factory.mktemp("offcpu"))
    c = record(tmp, "split", "--off-cpu", ["split", "2"],
               ["-o", os.path.join(tmp, "split.folded"), "-o", os.path.join(tmp, "split.html")])
    c["tmp"] = tmp
    return c


def by_thread(raw, tid, idx):
    """Value idx of the samples of thread tid, and the samples themselves."""
    samples = [s for s in raw.samples if s["labels"].get("tid") == tid]
    return sum(s["values"][idx] for s in samples), samples


def test_split_matches_the_waits(split):
    """The worker's off-CPU time splits over wait_pipe/wait_sleep/wait_lock as the time it
    spent in them (about 50/30/20 on an idle machine) within 5 pp."""
    raw, worker = split["raw"], split["threads"]["worker"]
    _, samples = by_thread(raw, worker["tid"], 1)
    got = defaultdict(int)
    for s in samples:
        fr = raw.frames(s)
        for w in WAITS:
            if w in fr:
                got[w] += s["values"][1]
    total, true_total = sum(got.values()), sum(split["split"].values())
    assert total > 0.8 * true_total, (got, split["split"])
    for w in WAITS:
        share, want = got[w] / total, split["split"][w] / true_total
        print(f"{w}: profile {share:.3f}, true {want:.3f}")
        assert abs(share - want) < 0.05, (w, share, want)


def test_stacks_are_complete(split):
    """Each wait's stack runs from the kernel function the thread slept in through the
    syscall entry and the wait function up to the thread's start: at least 95 % of the
    worker's waiting time has such stacks (the rest: before the unwinder loaded it)."""
    raw, worker = split["raw"], split["threads"]["worker"]
    total, samples = by_thread(raw, worker["tid"], 1)
    kernel_wait = {"wait_pipe": "anon_pipe_read", "wait_sleep": "hrtimer_nanosleep", "wait_lock": "futex_wait"}
    complete = 0
    for s in samples:
        fr = raw.frames(s)
        w = next((w for w in WAITS if w in fr), None)
        if not w:
            continue
        # Or a run-queue wait: preempted on its way back to user space (a loaded host),
        # its user stack that of its next syscall.
        assert any(f.startswith(kernel_wait[w]) for f in fr) or fr[0].startswith(PREEMPTED), (w, fr)
        if "do_syscall_64" in fr and "worker" in fr and "start_thread" in fr and fr.index(w) < fr.index("worker"):
            complete += s["values"][1]
    assert complete >= 0.95 * sum(split["split"].values()) * 0.95, (complete, total)


def test_process_that_sleeps_first_is_walked_by_its_tables(tmp_path):
    """A program whose threads sleep right away (offsplit's waits start 1.5 s in) is loaded by
    the unwinder at its threads' first switch out, not when those sleeps end: the 1.5 s waits
    and what follows are walked with its unwind tables. Loaded at their end, as before, those
    waits were walked by frame pointers only, marked "process not loaded by the unwinder yet"
    (in arm64's kernel matrix, under emulation, the first cycles of waits too)."""
    c = record(str(tmp_path), "first", "--off-cpu", ["split", "1", "5", "3", "2", "0", "1500", "300"])
    raw = c["raw"]
    marked = sum(s["values"][1] for s in raw.samples if any("not loaded by the unwinder" in f for f in raw.frames(s)))
    total = sum(s["values"][1] for s in raw.samples)
    first = [s for s in raw.samples if "sleep_until" in raw.frames(s)]
    assert first, "no sample of the threads' first sleep (sleep_until)"
    assert sum(s["values"][1] for s in first) >= 3 * 1.4e9, [s["values"] for s in first]
    assert all("start_thread" in raw.frames(s) and not any("not loaded" in f for f in raw.frames(s))
               for s in first), [raw.frames(s) for s in first]
    assert marked <= 0.01 * total, (marked, total)


def test_pprof_folded_html(split):
    """pprof names the types (samples/count, off_cpu/nanoseconds, off_cpu the default);
    folded lines carry nanoseconds adding up to the pprof's total; the HTML says what it shows."""
    raw = split["raw"]
    assert re.search(r"samples/count\s+off_cpu/nanoseconds\[dflt\]", raw.text), raw.text[:400]
    total = sum(s["values"][1] for s in raw.samples)
    folded = open(os.path.join(split["tmp"], "split.folded")).read().splitlines()
    assert sum(int(l.rsplit(" ", 1)[1]) for l in folded) == total
    assert "off-CPU time in ns" in open(os.path.join(split["tmp"], "split.html")).read()
    # -- COMMAND filters in BPF: only the workload's waits are there.
    assert {s["labels"].get("pid") for s in raw.samples} == {split["threads"]["main"]["tid"]}
    # Every thread of the workload waited about its whole life: no thread lost its time.
    for name in ("worker", "feeder", "holder"):
        t = split["threads"][name]
        got, _ = by_thread(raw, t["tid"], 1)
        assert abs(got - t["off"]) < 0.05 * t["wall"], (name, got, t)


def test_report_sample_type(split):
    res = run_prowl(["report", split["path"]])
    assert res.returncode == 0 and re.search(r"\d+\.\d+ s of off_cpu time", res.stdout), res.stdout
    res = run_prowl(["report", "--sample-type", "cpu", split["path"]])
    assert res.returncode == 1
    assert "no sample type of that name" in one_error_line(res)


@pytest.fixture(scope="module")
def wall(tmp_path_factory):
    """A --wall capture whose worker burns 4 ms of CPU a cycle and then waits 2/6/2 ms:
    the split moved from the pipe to the sleep (for the diff below)."""
    return record(str(tmp_path_factory.mktemp("wall")), "wall", "--wall", ["split", "2", "2", "6", "2", "4"],
                  ["-F", "499"])


def test_wall_adds_up_per_thread(wall):
    """--wall: each thread's on-CPU plus off-CPU time is within 5 % of its wall time (the
    worker burns 4 ms of CPU per 14 ms cycle, the others mostly wait)."""
    c = wall
    raw = c["raw"]
    assert re.search(r"samples/count\s+cpu/nanoseconds\[dflt\]\s+off_cpu/nanoseconds", raw.text)
    for name, t in c["threads"].items():
        on, _ = by_thread(raw, t["tid"], 1)
        off, _ = by_thread(raw, t["tid"], 2)
        print(f"{name}: on {on / 1e9:.3f} s + off {off / 1e9:.3f} s vs wall {t['wall'] / 1e9:.3f} s")
        assert abs(on + off - t["wall"]) < 0.05 * t["wall"], (name, on, off, t)
    w = c["threads"]["worker"]
    on, _ = by_thread(raw, w["tid"], 1)
    assert abs(on - w["cpu"]) < 0.05 * w["wall"], (on, w)


def test_pingpong_total_and_drops(tmp_path):
    """Many short waits (most shorter than the 1 ms threshold, so sampled): the estimated
    off-CPU time of the two ping-pong threads is within 5 % of the truth from schedstat, and
    the summary says how many waits were kept, sampled away and lost."""
    c = record(str(tmp_path), "pp", "--off-cpu", ["pingpong", "4"])
    m = re.search(r"off-CPU: (\d+) waits kept, (\d+) shorter ones sampled away .*?, (\d+) lost to a full ring "
                  r"buffer \(([\d.]+) s\), (\d+) switches not seen", c["res"].stderr)
    assert m, c["res"].stderr
    kept, skipped, lost = int(m.group(1)), int(m.group(2)), int(m.group(3))
    assert skipped > 10 * kept, "the waits were not short: nothing was sampled"
    # The estimate's standard deviation is sqrt(T * D): about 1.3 % of the total D here.
    got = sum(by_thread(c["raw"], c["threads"][n]["tid"], 1)[0] for n in ("ping", "pong"))
    want = sum(c["threads"][n]["off"] for n in ("ping", "pong"))
    print(f"ping+pong: estimated {got / 1e9:.3f} s, true {want / 1e9:.3f} s, kept {kept} skipped {skipped} lost {lost}")
    assert abs(got - want) < 0.05 * want, (got, want)


def test_diff_gate_on_a_moved_split(split, wall):
    """prowl diff --sample-type off_cpu on the worker: the wait moved from the pipe to the
    sleep (5/3/2 -> 2/6/2 ms, the --wall capture's off_cpu type) fails the gate with exit 3,
    naming wait_sleep, not wait_pipe."""
    moved = wall
    res = run_prowl(["diff", "--sample-type", "off_cpu", "--label", "thread_name=worker", "--fail-on-increase", "5",
                     split["path"], moved["path"]])
    assert res.returncode == 3, res.stdout + res.stderr
    offenders = re.findall(r"^regression: (\S+):", res.stdout + res.stderr, re.M)
    assert "wait_sleep" in offenders and "wait_pipe" not in offenders, offenders


@pytest.mark.parametrize("args, msg", [
    (["--off-cpu", "--wall"], "give one of --off-cpu and --wall"),
    (["--off-cpu", "--off-cpu-threshold", "5s"], "invalid --off-cpu-threshold '5s'"),
    (["--off-cpu-threshold", "1ms"], "--off-cpu-threshold needs --off-cpu or --wall"),
])
def test_bad_flags(args, msg):
    res = run_prowl(["record", *args, "-p", "1"])
    assert res.returncode == 2
    assert msg in one_error_line(res)


@pytest.fixture(scope="module")
def agent_run(tmp_path_factory):
    """One agent run with off_cpu: true and all four exporters (OTLP, the Pyroscope and
    Parca stand-ins, the directory), offsplit's split workload running throughout."""
    from agentlib import Agent
    from conftest import start, stop
    from receiver import Receiver

    tmp = tmp_path_factory.mktemp("offcpu-agent")
    pyro, otlp, parca = Receiver().start(), Receiver().start(), Receiver().start()
    cfg = tmp / "agent.yaml"
    # Only offsplit is exported (the relabeling stops the others' switches in BPF too).
    cfg.write_text(f"off_cpu: true\nexporters:\n  pyroscope:\n    url: {pyro.url}\n  otlp:\n    url: {otlp.url}/\n"
                   f"  parca:\n    url: {parca.url}\n  dir:\n    enabled: true\n"
                   "relabel_configs:\n  - source_labels: [__meta_process_comm]\n    regex: offsplit\n"
                   "    action: keep\n")
    wl = start([workload("offsplit"), "split", "12"])
    agent = Agent(tmp, ["--config", str(cfg), "--interval", "2s", "-F", "49"])
    t_start = time.time()
    try:
        agent.start()
        time.sleep(5.5)
        metrics = agent.metrics()
        t_stop = time.time()
        assert agent.stop() == 0, agent.log()
        print(f"agent started in {agent.started_at - t_start:.1f} s, stopped in {time.time() - t_stop:.1f} s")
    finally:
        agent.kill()
        stop(wl)
        for rx in (pyro, otlp, parca):
            rx.stop()
    return {"tmp": tmp, "agent": agent, "metrics": metrics, "pyro": pyro.requests, "otlp": otlp.requests,
            "parca": parca.requests}


def otlp_off_cpu(run):
    """{window start: (off_cpu total, window length)} of offsplit's OTLP off_cpu profiles."""
    import otlp_check
    out = {}
    for r in run["otlp"]:
        for p in otlp_check.check(r.body):
            if p["resource"].get("service.name") != "offsplit" or p["sample_type"] != ("off_cpu", "nanoseconds"):
                continue
            out[p["time_unix_nano"]] = (sum(s["value"] for s in p["samples"]), p["duration_nano"])
            stacks = [s["stack"] for s in p["samples"]]
            for w in WAITS:
                assert any(w in st and "worker" in st for st in stacks), (w, p["time_unix_nano"])
    return out


# The pprof the agent sends to Pyroscope, Parca and the directory: three sample types.
PPROF_TYPES = r"samples/count\s+cpu/nanoseconds\[dflt\]\s+off_cpu/nanoseconds"


def test_agent_exports_off_cpu(agent_run):
    """The agent with off_cpu: true: OTLP gets an off_cpu/nanoseconds profile beside the
    samples/count one, the Pyroscope stand-in a pprof with the off_cpu type, with the same
    time; each full window holds the waiting of offsplit's three busy-waiting threads
    (3 x its length, within 5 %), in stacks through wait_pipe/wait_sleep/wait_lock;
    /metrics counts the waits kept, sampled away and dropped."""
    from agentlib import IngestProfile, raw_of

    metrics, tmp = agent_run["metrics"], agent_run["tmp"]
    assert metrics.get("prowl_off_cpu_samples_total") > 0, metrics.text
    assert metrics.get("prowl_off_cpu_skipped_total") is not None, metrics.text
    assert 'prowl_off_cpu_dropped_total{reason="ring_buffer_full"}' in metrics.text
    assert 'prowl_off_cpu_dropped_total{reason="task_map_full"}' in metrics.text

    otlp_off = otlp_off_cpu(agent_run)
    assert len(otlp_off) >= 2, otlp_off
    full = [v for v in otlp_off.values() if v[1] == 2 * 10**9]
    assert full, otlp_off
    for got, dur in full:
        assert abs(got - 3 * dur) < 0.05 * 3 * dur, (got, dur)

    pyro_off = {}
    for i, r in enumerate(rq for rq in agent_run["pyro"] if rq.path == "/ingest"):
        ip = IngestProfile(r)
        if ip.service != "offsplit":
            continue
        raw = raw_of(tmp, f"pyro{i}.pb.gz", ip.body)
        assert re.search(PPROF_TYPES, raw.text)
        pyro_off[ip.meta.time_ns] = sum(s["values"][2] for s in raw.samples)
    for t, (got, _) in otlp_off.items():
        assert pyro_off.get(t) == got, (t, got, pyro_off)


def test_agent_parca_and_dir_off_cpu(agent_run):
    """The same run's Parca WriteRaw calls and directory files: offsplit's pprofs carry
    the off_cpu/nanoseconds sample type, in stacks through the three wait functions,
    and each one's off-CPU total is the same window's total in OTLP (so a full 2 s window
    holds 3 x 2 s within 5 %, checked above): the same time, exported four ways."""
    from agentlib import raw_of

    tmp = agent_run["tmp"]
    want = sorted(got for got, _ in otlp_off_cpu(agent_run).values())
    assert len(want) >= 2, want

    def check(raw, where):
        assert re.search(PPROF_TYPES, raw.text), (where, raw.text[:400])
        total = sum(s["values"][2] for s in raw.samples)
        assert total in want, (where, total, want)
        for w in WAITS:
            assert any(w in raw.frames(s) and s["values"][2] > 0 for s in raw.samples), (where, w)
        return total

    parca = []
    for i, r in enumerate(agent_run["parca"]):
        for ser in r.parca()["series"]:  # strict: gRPC-web framing, WriteRawRequest, gzip'ed pprof
            if ser["labels"].get("service_name") != "offsplit":
                continue
            for j, p in enumerate(ser["profiles"]):
                parca.append(check(raw_of(tmp, f"parca{i}-{j}.pb", p), f"parca {i}/{j}"))
    files = sorted((agent_run["agent"].state / "profiles" / "offsplit").glob("*.pb.gz"))
    dirs = [check(pprof_raw(str(f), "-symbolize=none"), str(f)) for f in files]
    # Every window OTLP got, Parca and the directory got too.
    assert sorted(parca) == want and sorted(dirs) == want, (parca, dirs, want)


@pytest.mark.parametrize("values, why", [
    ([1, -5], "a sample has a negative value"),
    ([1, 1 << 62], "its values of that sample type add up to more than 2^50"),
])
def test_report_refuses_bad_off_cpu_values(tmp_path, values, why):
    """A made-up profile whose off_cpu values are negative or absurd: one error line,
    exit 1, for report and diff alike (the samples/count column alone is sane)."""
    from pprofgen import Profile
    p = Profile(sample_types=(("samples", "count"), ("off_cpu", "nanoseconds")))
    p.add(["main", "wait_here"], values=values)
    path = tmp_path / "bad.pb.gz"
    path.write_bytes(p.encode())
    for cmd in (["report", "--sample-type", "off_cpu", str(path)],
                ["diff", "--sample-type", "off_cpu", str(path), str(path)]):
        res = run_prowl(cmd)
        assert res.returncode == 1, (cmd, res.stderr)
        assert why in one_error_line(res)
