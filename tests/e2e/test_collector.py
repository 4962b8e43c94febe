"""test_collector.py: the real OpenTelemetry Collector (v0.165.0, tests/tools/otelcol) as
prowl's OTLP backend: the agent's gzip'ed OTLP/HTTP export is accepted whole, and what the
Collector's file exporter writes, decoded with proto/, matches prowl's own pprof."""
import math
import re
import subprocess
import time

import pytest

import otlp_check
from agentlib import Agent, PprofMeta, function_shares
from collectorlib import OTELCOL, Collector, require_otelcol
from conftest import pprof_raw
from containers import Cgroups, new_id, private_workload, shape

FREQ = 199
INTERVAL = 2
SHARE_PP = 0.005          # the bound: 0.5 percentage points
FRAME_TYPES = {"native", "kernel", "python"}


class Run:
    """What one agent run exporting to the Collector and to its directory left behind."""


def agent_config(d, url, name="agent.yaml"):
    cfg = d / name
    cfg.write_text(f"exporters:\n  dir:\n    enabled: true\n  otlp:\n    url: {url}/\n")
    return cfg


def otlp_profiles(col):
    """Every profile the Collector wrote, checked strictly by otlp_check (protoc + proto/)."""
    return [p for body in col.bodies() for p in otlp_check.check(body)]


def pprof_windows(agent, svc, read=True):
    """{window start ns: [(PprofMeta, pprof.Raw or None)]} of the workload's series
    (service_name = its executable's name) in the agent's directory exporter."""
    out = {}
    for f in sorted((agent.state / "profiles" / svc).glob("*.pb.gz")):
        meta = PprofMeta(f.read_bytes())
        out.setdefault(meta.time_ns, []).append((meta, pprof_raw(str(f)) if read else None))
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """cpusplit (3:1 between hot_a and hot_b) in a Docker-shaped cgroup, an agent at
    199 Hz with 2 s windows writing pprof to its directory and OTLP to the Collector,
    with k8s labels from flags; SIGTERM once three windows are delivered."""
    require_otelcol()
    d = tmp_path_factory.mktemp("collector")
    r = Run()
    col = Collector(d).start()
    cg = Cgroups()
    r.cid = new_id()
    exe, r.svc = private_workload(d)
    wl = cg.start(cg.make(shape("docker-cgroupfs", r.cid)), [exe, "60"])
    agent = Agent(d, ["--config", str(agent_config(d, col.url)), "--interval", f"{INTERVAL}s", "-F", str(FREQ),
                      "--label", "namespace=shop", "--label", "pod=web-1"])
    try:
        time.sleep(0.3)
        agent.start()
        time.sleep(7.5)
        # three windows delivered (under load the third may still be on its way)
        deadline = time.time() + 10
        while agent.metrics().export("otlp", "sent") < 3 and time.time() < deadline:
            time.sleep(0.2)
        r.agent_metrics = agent.metrics()
        r.rc = agent.stop()
        time.sleep(1.0)  # the file exporter flushes every 100 ms
        r.col_metrics = col.metrics()
    finally:
        agent.kill()
        cg.cleanup()
        col.stop()
    r.pid, r.agent, r.col = wl.pid, agent, col
    r.log = agent.log()
    r.profiles = otlp_profiles(col)
    r.mine = [p for p in r.profiles if p["resource"].get("process.executable.name") == r.svc]
    r.pprof = pprof_windows(agent, r.svc)
    return r


def test_export_accepted(run):
    """Every window reached the Collector: no retry, drop or failure on prowl's side, no
    refused item or warning on the Collector's."""
    assert run.rc == 0, run.log
    m = run.agent_metrics
    outcomes = {o: m.export("otlp", o) for o in ("sent", "retried", "dropped", "failed")}
    otlp_lines = "\n".join(l for l in run.agent.log_lines() if "otlp" in l)
    assert outcomes["sent"] >= 3 and outcomes["retried"] == outcomes["dropped"] == outcomes["failed"] == 0, \
        f"prowl_exports_total{{backend=otlp}} {outcomes}\n{otlp_lines}"
    assert not [l for l in run.agent.log_lines() if "otlp" in l and ("level=warn" in l or "level=error" in l)], run.log
    assert not run.col.problems(), "\n".join(run.col.problems())
    cm = run.col_metrics
    refused = {k: v for k, v in cm.items() if "profile" in k and ("refused" in k or "failed" in k)}
    assert not any(refused.values()), refused
    # every sample the receiver accepted, the file exporter sent and wrote
    written = sum(len(p["samples"]) for p in run.profiles)
    accepted, sent = (cm.get(n, cm.get(n + "_total")) for n in
                      ("otelcol_receiver_accepted_profile_samples", "otelcol_exporter_sent_profile_samples"))
    assert written > 0 and accepted == sent == written, (accepted, sent, written, sorted(k for k in cm if "otelcol" in k))


def test_gzip_on_the_wire(run):
    """prowl always sends gzip'ed bodies: the Collector read fewer bytes than the
    profiles it decoded (the uncompressed protobuf)."""
    wire = run.col_metrics.get("http_server_request_body_size_sum")
    assert wire, sorted(run.col_metrics)
    plain = sum(len(b) for b in run.col.bodies())
    assert wire < 0.7 * plain, (wire, plain)


def test_same_windows_and_counts_as_pprof(run):
    otlp = {}
    for p in run.mine:
        otlp[p["time_unix_nano"]] = otlp.get(p["time_unix_nano"], 0) + sum(s["value"] for s in p["samples"])
    pp = {t: sum(m.samples for m, _ in v) for t, v in run.pprof.items()}
    assert len(pp) >= 3, pp
    assert otlp == pp, f"Collector {otlp} vs prowl's pprof {pp}"


def test_same_shares_as_pprof(run):
    """Every function's share of the workload's samples, from the Collector's output and
    from prowl's pprof read by Google's pprof, within 0.5 pp."""
    got = otlp_check.function_shares(run.mine)
    want, total = function_shares([raw for v in run.pprof.values() for _, raw in v])
    assert total > 100, f"only {total} samples of the workload"
    for f in set(got) | set(want):
        assert abs(got.get(f, 0) - want.get(f, 0)) <= SHARE_PP, \
            f"{f}: {got.get(f, 0):.4f} from the Collector vs {want.get(f, 0):.4f} from pprof"
    # and the known split: hot_a takes 3/4 of hot_a + hot_b (4 standard deviations)
    a, b = got.get("hot_a", 0), got.get("hot_b", 0)
    n = (a + b) * total
    assert a + b > 0.5 and abs(a / (a + b) - 0.75) < 4 * math.sqrt(0.75 * 0.25 / n), (a, b, total)


def test_resource_attributes(run):
    assert run.mine, sorted({p["resource"].get("process.executable.name") for p in run.profiles})
    for p in run.mine:
        res = p["resource"]
        assert res.get("process.pid") == run.pid, res
        assert res.get("container.id") == run.cid, res
        assert res.get("k8s.namespace.name") == "shop" and res.get("k8s.pod.name") == "web-1", res
        assert res.get("service.name") and res.get("host.name"), res


def test_frame_types(run):
    """Frame types survive the Collector: the workload's functions are native, the
    host's kernel frames kernel, and nothing else appears."""
    seen = {}
    for p in run.profiles:
        for s in p["samples"]:
            for fr in s["frames"]:
                seen.setdefault(fr["frame_type"], set()).add(fr["function"])
    assert set(seen) <= FRAME_TYPES, set(seen)
    assert "kernel" in seen, set(seen)
    mine = {fr["frame_type"] for p in run.mine for s in p["samples"] for fr in s["frames"]
            if fr["function"] in ("hot_a", "hot_b", "main")}
    assert mine == {"native"}, mine


def test_collector_restart_spool_exactly_once(tmp_path):
    """The Collector stops while the agent runs; the agent stops during the outage (what
    it holds goes to the spool); the Collector comes back and the agent restarts: every
    window of both runs reaches the Collector exactly once."""
    require_otelcol()
    col = Collector(tmp_path).start()
    exe, svc = private_workload(tmp_path)
    wl = Cgroups()
    cg = wl.make(shape("docker-cgroupfs", new_id()))
    wl.start(cg, [exe, "60"])
    cfg = agent_config(tmp_path, col.url)
    cfg.write_text(cfg.read_text() + "shutdown_timeout: 1s\n")
    args = ["--config", str(cfg), "--interval", "1s", "-F", "99"]
    first = Agent(tmp_path, args, name="spool")
    second = Agent(tmp_path, args, name="spool")
    try:
        first.start()
        time.sleep(2.5)
        col.stop()
        col.out.rename(tmp_path / "before-restart.pb")
        time.sleep(3.0)
        assert first.stop() == 0, first.log()
        log1 = first.log()
        col.start()
        second.start()
        time.sleep(3.5)
        m = second.metrics()
        assert second.stop() == 0, second.log()
        time.sleep(1.0)
    finally:
        first.kill()
        second.kill()
        wl.cleanup()
        col.stop()
    assert re.search(r"otlp: \d+ undelivered profiles \(\d+ bytes\) kept in the spool", log1), log1
    assert m.export("otlp", "failed") == 0 and m.export("otlp", "dropped") == 0, m.text
    col.out.rename(tmp_path / "after-restart.pb")
    got = {}
    for name in ("before-restart.pb", "after-restart.pb"):
        col.out = tmp_path / name
        for p in otlp_profiles(col):
            if p["resource"].get("process.executable.name") == svc:
                got.setdefault(p["time_unix_nano"], []).append(p["profile_id"])
    want = {t: len(v) for t, v in pprof_windows(first, svc, read=False).items()}
    assert len(want) >= 6, want
    assert {t: len(v) for t, v in got.items()} == want, \
        f"windows at the Collector {sorted((t, len(v)) for t, v in got.items())} vs written {sorted(want.items())}"
    ids = [i for v in got.values() for i in v]
    assert len(ids) == len(set(ids)), "a profile delivered twice"


def test_profiles_need_the_feature_gate(tmp_path):
    """docs/testing.md: without --feature-gates=service.profilesSupport the Collector
    refuses a profiles pipeline (so the tests above ran with profiles switched on)."""
    require_otelcol()
    col = Collector(tmp_path)
    res = subprocess.run([OTELCOL, "--config", str(col.cfg)], capture_output=True, text=True, timeout=30)
    assert res.returncode != 0 and "service.profilesSupport" in res.stderr, (res.returncode, res.stderr)
