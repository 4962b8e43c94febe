"""test_agent.py: `prowl agent` end to end: the real binary samples the whole host and
exports to loopback receivers standing in for Pyroscope, OTLP and Parca, and to its
local directory, all at once; profiles are read back with Google's pprof and protoc."""
import base64
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

import otlp_check
import pbwire
from agentlib import (NS, Agent, CpuClock, IngestProfile, PprofMeta, assert_close, check_chain,
                      expected_from_until, private_cpusplit, raw_of, shares)
from conftest import pprof, pprof_raw, start, stop, workload
from receiver import Receiver

FREQ = 199          # Hz: enough samples for a ±5% share check in a few seconds
INTERVAL = 2        # s
STOP_AFTER = 7.0    # s after start: SIGTERM in the middle of the 4th window
SHARE_TOL = 0.05
COUNT_TOL = 0.08    # samples of all windows above the workload's wall time x frequency
COUNT_LOW = 0.15    # ... and below its CPU time x frequency (see within())


class Run:
    """What one agent run left behind."""


@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    """One agent exporting to Pyroscope (ingest), OTLP, Parca and the local directory at
    once, with labels from a flag and the file, and credentials from the file and the
    environment; cpusplit (3:1 between hot_a and hot_b) runs throughout. SIGTERM comes
    in the middle of a window."""
    d = tmp_path_factory.mktemp("multi")
    run = Run()
    run.dir = d
    pyro, otlp, parca = Receiver().start(), Receiver().start(), Receiver().start()
    cfg = d / "agent.yaml"
    cfg.write_text(f"""\
labels:
  region: eu
exporters:
  dir:
    enabled: true
  pyroscope:
    url: {pyro.url}
    basic_user: alice
    tenant: team-a
  otlp:
    url: {otlp.url}/
    bearer_token: file-token-123
  parca:
    url: {parca.url}
""")
    cfg.chmod(0o600)
    exe, run.svc = private_cpusplit(d)
    wl = start([exe, "60"])
    clock = CpuClock(wl.pid)
    agent = Agent(d, ["--config", str(cfg), "--interval", f"{INTERVAL}s", "-F", str(FREQ), "--label", "env=test"],
                  env={"PROWL_PYROSCOPE_BASIC_PASSWORD": "s3cret-pw"})
    try:
        time.sleep(0.2)
        agent.start()
        time.sleep(4.5)
        run.metrics_status, run.metrics_text, run.metrics_ctype = agent.get("/metrics")
        run.healthz = agent.get("/healthz")
        run.notfound = agent.get("/nope")
        time.sleep(max(0.0, agent.started_at + STOP_AFTER - time.time()))
        run.sigterm_at = time.time()
        run.rc = agent.stop(signal.SIGTERM)
        run.stop_seconds = agent.stop_seconds
    finally:
        agent.kill()
        clock.stop()
        stop(wl)
        for rx in (pyro, otlp, parca):
            rx.stop()
    run.agent, run.clock, run.pid = agent, clock, wl.pid
    run.log = agent.log()
    run.pyro, run.otlp, run.parca = pyro.requests, otlp.requests, parca.requests
    run.hostname = socket.gethostname()
    return run


def cpusplit_ingest(run):
    profs = [IngestProfile(r) for r in run.pyro if r.path == "/ingest"]
    mine = sorted((p for p in profs if p.service == run.svc), key=lambda p: p.meta.time_ns)
    assert mine, f"no {run.svc} series among {sorted({p.service for p in profs})}"
    return profs, mine


def test_agent_ran_and_stopped_cleanly(multi):
    assert multi.rc == 0, multi.log
    assert "Sanitizer" not in multi.log and "Segmentation" not in multi.log
    assert not [l for l in multi.agent.log_lines() if "level=error" in l], multi.log
    # Secrets never reach the log.
    assert "s3cret-pw" not in multi.log and "file-token-123" not in multi.log
    # Every log line is one logfmt record.
    for l in multi.agent.log_lines():
        assert l.startswith("ts=") and " level=" in l and " msg=" in l, l


def test_pyroscope_ingest_requests(multi):
    profs, _ = cpusplit_ingest(multi)
    assert all(r.method == "POST" and r.status == 200 for r in multi.pyro)
    for p in profs:
        r = p.req
        assert r.arg("format") == "pprof", r.raw_query
        assert r.query["from"][0].isdigit() and r.query["until"][0].isdigit(), r.raw_query
        assert p.until > p.frm
        # name=SERVICE{labels}: static labels from the flag and the file, and host_name;
        # pid and thread/process name are sample labels, not series labels.
        assert p.labels.get("env") == "test", r.raw_query
        assert p.labels.get("region") == "eu", r.raw_query
        assert p.labels.get("host_name") == multi.hostname, r.raw_query
        for k in ("pid", "process_name", "tid", "thread_name", "service_name", "__name__"):
            assert k not in p.labels, f"{k} must not be a series label: {r.raw_query}"
        # Credentials from the file (user, tenant) and the environment (password).
        assert r.header("authorization") == "Basic " + base64.b64encode(b"alice:s3cret-pw").decode()
        assert r.header("x-scope-orgid") == "team-a"
        assert r.raw_body[:2] == b"\x1f\x8b", "ingest body must be gzip'ed pprof"
        # The query's window is the profile's window, to the second.
        assert (p.frm, p.until) == expected_from_until(p.meta.time_ns, p.meta.end_ns), \
            (r.raw_query, p.meta.time_ns, p.meta.duration_ns)
        assert p.meta.samples > 0
    # One request per series per window: no (service, labels, window) twice.
    keys = [(p.service, tuple(sorted(p.labels.items())), p.meta.time_ns) for p in profs]
    assert len(keys) == len(set(keys)), "a series was sent twice for one window"


def test_pyroscope_cpusplit_share(multi, tmp_path):
    _, mine = cpusplit_ingest(multi)
    raws = [raw_of(tmp_path, f"w{i}.pb.gz", p.body) for i, p in enumerate(mine)]
    sh, total = shares(raws)
    assert total > 500, f"only {total} cpusplit samples"
    assert abs(sh["hot_a"] - 0.75) <= SHARE_TOL, f"hot_a share {sh['hot_a']:.3f}, want 0.75±{SHARE_TOL}"
    assert abs(sh["hot_b"] - 0.25) <= SHARE_TOL, f"hot_b share {sh['hot_b']:.3f}, want 0.25±{SHARE_TOL}"
    for raw in raws:
        assert raw.period == NS // FREQ
        for s in raw.samples:
            assert s["labels"].get("pid") == str(multi.pid), s
            assert s["labels"].get("process_name") == multi.svc, s


def test_windows_contiguous_and_no_sample_lost_or_doubled(multi):
    _, mine = cpusplit_ingest(multi)
    windows = [(p.meta.time_ns, p.meta.end_ns) for p in mine]
    check_chain(windows, INTERVAL, "cpusplit windows")
    # 3 full windows and the partial one SIGTERM cut.
    assert len(mine) == 4, [(p.frm, p.until) for p in mine]
    # Full windows last exactly the interval: they end at their planned time, and a
    # sample is placed by its own BPF time stamp, not by when the loop reads it.
    for p in mine[:-1]:
        assert p.meta.duration_ns == INTERVAL * NS, p.meta.duration_ns
    # Samples over all windows: at least the workload's CPU time in that span x
    # frequency (schedstat), at most its wall time x frequency (one busy thread cannot
    # be on a CPU longer). On a busy 2-CPU host, timer sampling leans towards the busy
    # loop (short timer-woken tasks hide between ticks), so the count lies between the
    # two; a lost or doubled window (a quarter of the span) falls outside either way.
    # Below the CPU time the margin is wider: with hundreds of short-lived processes a
    # second on the host, a busy loop was seen to get 12% fewer ticks than its CPU time.
    def within(got, start_ns, end_ns, low, high, what):
        cpu = multi.clock.seconds(start_ns, end_ns) * FREQ
        wall = (end_ns - start_ns) / NS * FREQ
        assert cpu * (1 - low) <= got <= wall * (1 + high), \
            f"{what}: {got} samples, expected {cpu:.0f} (CPU, -{low:.0%}) to {wall:.0f} (wall, +{high:.0%})"

    within(sum(p.meta.samples for p in mine), windows[0][0], windows[-1][1], COUNT_LOW, COUNT_TOL,
           "cpusplit samples over all windows")
    # And window by window (looser: a boundary moves a few samples).
    for p in mine:
        if multi.clock.seconds(p.meta.time_ns, p.meta.end_ns) * FREQ > 100:
            within(p.meta.samples, p.meta.time_ns, p.meta.end_ns, 0.22, 0.15, f"window {p.frm}..{p.until}")


def test_sigterm_flushes_last_partial_window(multi):
    _, mine = cpusplit_ingest(multi)
    last, prev = mine[-1], mine[-2]
    assert multi.rc == 0
    assert multi.stop_seconds < 5 + 1, f"took {multi.stop_seconds:.1f}s to stop (flush deadline 5s)"
    # The last window started where the last full one ended, ends at the signal, and was sent.
    assert last.meta.time_ns == prev.meta.end_ns
    assert last.meta.duration_ns < (INTERVAL - 0.3) * NS, last.meta.duration_ns
    assert abs(last.meta.end_ns / NS - multi.sigterm_at) < 0.5, (last.meta.end_ns / NS, multi.sigterm_at)
    assert last.meta.end_ns > prev.meta.end_ns and last.until >= prev.until
    assert "flushing the last window" in multi.log


def test_all_exporters_agree(multi):
    """Every backend got the same windows and the same cpusplit sample counts."""
    _, mine = cpusplit_ingest(multi)
    want = {p.meta.time_ns: p.meta.samples for p in mine}
    # OTLP
    otlp = {}
    for r in multi.otlp:
        for prof in otlp_check.check(r.body):
            if prof["resource"].get("service.name") == multi.svc:
                otlp[prof["time_unix_nano"]] = otlp.get(prof["time_unix_nano"], 0) + \
                    sum(s["value"] for s in prof["samples"])
    assert otlp == want, f"otlp {otlp} vs pyroscope {want}"
    # Parca
    parca = {}
    for r in multi.parca:
        for ser in r.parca()["series"]:
            if ser["labels"].get("service_name") == multi.svc:
                for raw in ser["profiles"]:
                    m = PprofMeta(raw)
                    parca[m.time_ns] = parca.get(m.time_ns, 0) + m.samples
    assert parca == want, f"parca {parca} vs pyroscope {want}"
    # Local directory
    files = sorted((multi.agent.state / "profiles" / multi.svc).glob("*.pb.gz"))
    local = {}
    for f in files:
        m = PprofMeta(f.read_bytes())
        local[m.time_ns] = local.get(m.time_ns, 0) + m.samples
    assert local == want, f"dir {local} vs pyroscope {want}"
    assert len(files) == len(mine), "one file per window per series"


def test_otlp_requests(multi):
    assert len(multi.otlp) == 4, "one request per window"
    seen_pid = False
    for r in multi.otlp:
        assert r.method == "POST" and r.path == "/v1development/profiles", (r.method, r.path)
        assert r.header("content-type") == "application/x-protobuf"
        assert r.header("content-encoding") == "gzip" and r.raw_body[:2] == b"\x1f\x8b"
        assert r.header("authorization") == "Bearer file-token-123"
        summary = otlp_check.check(r.body)
        for prof in summary:
            res = prof["resource"]
            assert res["host.name"] == multi.hostname, res
            assert isinstance(res.get("process.executable.name"), str) and res["process.executable.name"], res
            assert res.get("env") == "test" and res.get("region") == "eu", res
            assert prof["period"] == NS // FREQ
            if res["service.name"] == multi.svc:
                assert res["process.pid"] == multi.pid, res
                assert res["process.executable.name"] == multi.svc, res
                seen_pid = True
    assert seen_pid
    allp = [p for r in multi.otlp for p in otlp_check.check(r.body)]
    sh = otlp_check.function_shares(allp, where=lambda p: p["resource"]["service.name"] == multi.svc)
    assert abs(sh.get("hot_a", 0) - 0.75) <= SHARE_TOL, f"hot_a {sh.get('hot_a')}"
    assert abs(sh.get("hot_b", 0) - 0.25) <= SHARE_TOL, f"hot_b {sh.get('hot_b')}"


def test_parca_requests(multi, tmp_path):
    assert multi.parca, "no parca requests"
    raws = []
    for i, r in enumerate(multi.parca):
        assert r.method == "POST" and r.status == 200
        body = r.parca()  # strict: gRPC-web framing, content type, WriteRawRequest, gzip'ed pprof
        assert not body["normalized"]
        for ser in body["series"]:
            labels = ser["labels"]
            assert ser["names"][:2] == ["__name__", "service_name"], ser["names"]
            assert labels["__name__"] == "parca_agent_cpu", labels
            assert labels.get("host_name") == multi.hostname and labels.get("env") == "test", labels
            for j, p in enumerate(ser["profiles"]):
                raw = raw_of(tmp_path, f"p{i}-{j}.pb", p)
                assert raw.samples
                if labels.get("service_name") == multi.svc:
                    raws.append(raw)
    sh, total = shares(raws)
    assert total > 500 and abs(sh["hot_a"] - 0.75) <= SHARE_TOL, (sh, total)


def test_dir_files_read_by_pprof(multi):
    root = multi.agent.state / "profiles"
    files = sorted(root.glob("*/*.pb.gz"))
    assert files, f"nothing under {root}"
    assert not list(root.rglob("*prowl-tmp*")), "temporary files left behind"
    raws = [pprof_raw(str(f)) for f in sorted((root / multi.svc).glob("*.pb.gz"))]
    sh, total = shares(raws)
    assert abs(sh["hot_a"] - 0.75) <= SHARE_TOL, sh
    for f in files[:20]:
        pprof_raw(str(f))


def test_dir_files_carry_their_series_labels(multi):
    """A file copied away from its directory still says which series it is: every
    sample has the series' labels next to its own (pid, process_name), as Google pprof
    reads them; other exporters, which send the labels beside the profile, do not."""
    want = {"service_name": multi.svc, "host_name": multi.hostname, "env": "test", "region": "eu"}
    files = sorted((multi.agent.state / "profiles" / multi.svc).glob("*.pb.gz"))
    assert files
    for f in files:
        raw = pprof_raw(str(f))
        assert raw.samples
        for smp in raw.samples:
            assert want.items() <= smp["labels"].items(), (f, smp["labels"])
            assert smp["labels"]["pid"] == str(multi.pid)
    tags = pprof(["-tags"], str(files[0]))
    assert re.search(rf"service_name: Total .*\n\s+.*\(\s*100%\): {multi.svc}\n", tags), tags
    _, mine = cpusplit_ingest(multi)
    assert "service_name" not in raw_of(multi.dir, "ingest.pb.gz", mine[0].body).samples[0]["labels"]


METRICS = [
    "prowl_samples_total", "prowl_lost_samples_total", "prowl_stacks", "prowl_series",
    "prowl_symbol_cache_hits_total", "prowl_symbol_cache_misses_total", "prowl_exports_total",
    "prowl_export_bytes_total", "prowl_export_queue_items", "process_cpu_seconds_total",
    "process_resident_memory_bytes",
]


def test_metrics_endpoint(multi):
    from agentlib import Metrics
    assert multi.metrics_status == 200
    assert multi.metrics_ctype.startswith("text/plain"), multi.metrics_ctype
    m = Metrics(multi.metrics_text)
    missing = [n for n in METRICS if n not in m.names()]
    assert not missing, f"missing {missing}:\n{multi.metrics_text}"
    assert m.get("prowl_samples_total") > FREQ
    assert m.get("prowl_series") >= 1
    assert m.get("prowl_symbol_cache_misses_total") > 0
    assert m.types.get("prowl_samples_total") == "counter"
    assert m.types.get("process_resident_memory_bytes") == "gauge"
    # ASan's shadow memory and quarantine inflate RSS several times over.
    rss_cap = 600e6 if "san" in os.environ.get("PROWL_TEST_BUILD", "") else 200e6
    assert 1e6 < m.get("process_resident_memory_bytes") < rss_cap
    assert 0 < m.get("process_cpu_seconds_total") < 60
    for backend in ("dir", "pyroscope", "otlp", "parca"):
        assert m.export(backend, "sent") >= 1, backend
        for outcome in ("retried", "dropped", "failed"):
            assert m.export(backend, outcome) == 0, (backend, outcome)
        assert m.get("prowl_export_bytes_total", backend=backend) > 0, backend
        assert m.get("prowl_export_queue_items", backend=backend) is not None
    # The directory exporter writes at once: nothing waits; what it keeps is counted apart.
    assert m.get("prowl_export_queue_items", backend="dir") == 0
    assert m.get("prowl_export_queue_bytes", backend="dir") == 0
    assert m.get("prowl_export_dir_files") >= m.export("dir", "sent") >= 1
    assert m.get("prowl_export_dir_bytes") == m.get("prowl_export_bytes_total", backend="dir")
    assert m.get("prowl_export_dir_removed_total") == 0
    st, body, _ = multi.healthz
    assert st == 200, body
    assert multi.notfound[0] == 404


# --------------------------------------------------------------------------- push API

def test_pyroscope_push_api(tmp_path):
    """api: push from the file, bearer token from the environment: one PushRequest per
    window, __name__=process_cpu and service_name labels, raw_profile read by pprof."""
    rx = Receiver().start()
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(f"exporters:\n  pyroscope:\n    url: {rx.url}\n    api: push\n")
    exe, svc = private_cpusplit(tmp_path)
    wl = start([exe, "30"])
    agent = Agent(tmp_path, ["--config", str(cfg), "--interval", "2s", "-F", str(FREQ), "--label", "env=push"],
                  env={"PROWL_PYROSCOPE_BEARER_TOKEN": "env-token-9", "PROWL_PYROSCOPE_TENANT": "t1"})
    try:
        agent.start()
        rx.wait_for(2, timeout=10)
        time.sleep(1.0)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
        rx.stop()
    reqs = rx.requests
    assert len(reqs) >= 3
    raws = []
    windows = []
    for i, r in enumerate(reqs):
        assert r.path == "/push.v1.PusherService/Push", r.path
        assert r.header("content-type") == "application/proto"
        assert r.header("authorization") == "Bearer env-token-9"
        assert r.header("x-scope-orgid") == "t1"
        text = subprocess.run(["protoc", "--decode=prowl.pyroscope.push.v1.PushRequest", "--proto_path=proto",
                               "proto/pyroscope_push.proto"], input=r.body, capture_output=True,
                              cwd=os.path.join(os.path.dirname(__file__), "..", ".."), timeout=60)
        assert text.returncode == 0, text.stderr
        dec = decode_push(r.body)
        assert dec, "empty PushRequest"
        for j, (labels, profiles) in enumerate(dec):
            assert labels.get("__name__") == "process_cpu", labels
            assert labels.get("service_name"), labels
            assert labels.get("env") == "push" and labels.get("host_name"), labels
            assert "pid" not in labels
            assert len(profiles) == 1
            if labels["service_name"] == svc:
                raws.append(raw_of(tmp_path, f"push{i}-{j}.pb", profiles[0]))
                windows.append((PprofMeta(profiles[0]).time_ns, PprofMeta(profiles[0]).end_ns))
    check_chain(sorted(windows), 2, "push windows")
    sh, total = shares(raws)
    assert total > 300 and abs(sh["hot_a"] - 0.75) <= 0.07, (sh, total)


def decode_push(body):
    """[(labels dict, [raw_profile bytes])] of a PushRequest, by a minimal protobuf
    reader (protoc's text output mangles bytes fields); the structure is cross-checked
    against protoc --decode above."""
    def fields(b):
        out = []
        for f, wt, v in pbwire.fields(b):
            assert wt == 2, f"unexpected wire type {wt} for field {f}"
            out.append((f, v))
        return out

    res = []
    for f, ser in fields(body):
        assert f == 1
        labels, profs = {}, []
        for g, v in fields(ser):
            if g == 1:
                kv = dict(fields(v))
                labels[kv[1].decode()] = kv[2].decode()
            elif g == 2:
                profs.extend(x for h, x in fields(v) if h == 1)
        res.append((labels, profs))
    return res
