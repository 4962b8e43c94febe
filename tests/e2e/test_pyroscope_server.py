"""test_pyroscope_server.py: the real Pyroscope server (tests/tools/pyroscope, a pinned
release built from its Go module) as prowl's backend, through both APIs prowl speaks to
it (/ingest and Push): what its own query API gives back has the functions, shares
(within 0.5 pp) and labels of prowl's own pprof of the same windows."""
import json
import time

import pytest

from agentlib import Agent, PprofMeta, assert_same_shares, free_port, private_cpusplit
from conftest import pprof_raw, start, stop
from pprofgen import _bytes, _int
from serverlib import Server, call, tool
from test_collector import FREQ, INTERVAL, SHARE_PP


PROFILE_TYPE = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
RINGS = ("distributor.ring", "overrides-exporter.ring", "query-scheduler.ring", "compactor.ring",
         "store-gateway.sharding-ring")


class Pyroscope(Server):
    """Single-binary Pyroscope on free loopback ports, its data in d, no memberlist peers
    (in-memory rings), no self-profiling and no usage reports."""

    def __init__(self, d):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        data = d / "pyroscope-data"
        argv = [tool("pyroscope"), "-target=all", "-config.show_banner=false", "-self-profiling.disable-push=true",
                "-usage-stats.enabled=false", "-ingester.min-ready-duration=0s",
                "-server.http-listen-address=127.0.0.1", f"-server.http-listen-port={self.port}",
                "-server.grpc-listen-address=127.0.0.1", f"-server.grpc-listen-port={free_port()}",
                "-memberlist.bind-addr=127.0.0.1", f"-memberlist.bind-port={free_port()}",
                "-memberlist.advertise-addr=127.0.0.1", "-ingester.lifecycler.addr=127.0.0.1",
                "-query-frontend.instance-addr=127.0.0.1",
                f"-pyroscopedb.data-path={data}/db", "-storage.backend=filesystem",
                f"-storage.filesystem.dir={data}/blocks"]
        for ring in RINGS:  # in memory, one instance on loopback, heartbeats every second
            argv += [f"-{ring}.store=inmemory", f"-{ring}.instance-addr=127.0.0.1", f"-{ring}.heartbeat-period=1s"]
        argv += ["-ring.store=inmemory", "-ingester.heartbeat-period=1s"]
        super().__init__(d, "pyroscope", argv, lambda: self._ready())

    def _ready(self):
        st, body = call(self.url + "/ready", timeout=2)
        return st == 200 and b"ready" in body and b"ACTIVE" in call(self.url + "/ring", timeout=2)[1]

    def merged(self, svc):
        """The merged profile of svc's series (SelectMergeProfile), as pprof bytes."""
        now = int(time.time() * 1000)
        req = (_bytes(1, PROFILE_TYPE.encode()) + _bytes(2, f'{{service_name="{svc}"}}'.encode())
               + _int(3, now - 3600_000) + _int(4, now + 60_000))
        st, body = call(self.url + "/querier.v1.QuerierService/SelectMergeProfile", req, "application/proto",
                        {"Connect-Protocol-Version": "1"})
        assert st == 200, (st, body[:300])
        return body

    def series(self, svc):
        """[{label: value}] of svc's series (Series, JSON)."""
        now = int(time.time() * 1000)
        st, body = call(self.url + "/querier.v1.QuerierService/Series",
                        {"matchers": [f'{{service_name="{svc}"}}'], "start": now - 3600_000, "end": now + 60_000},
                        headers={"Connect-Protocol-Version": "1"})
        assert st == 200, (st, body[:300])

        return [{l["name"]: l["value"] for l in s.get("labels", [])} for s in json.loads(body).get("labelsSet", [])]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Pyroscope(tmp_path_factory.mktemp("pyroscope")).start(timeout=90)
    yield srv
    srv.stop()


def wait_windows(agent, svc, n, timeout=30):
    """Until the agent's directory holds n windows of svc (a loaded host starts slowly)."""
    deadline = time.time() + timeout
    while len(list((agent.state / "profiles" / svc).glob("*.pb.gz"))) < n and time.time() < deadline:
        time.sleep(0.2)


class Run:
    """One agent run exporting to the server through one API, and to its directory."""


@pytest.fixture(scope="module", params=["ingest", "push"])
def run(request, server, tmp_path_factory):
    """cpusplit under a name of its own; an agent at 199 Hz, 2 s windows, pprof to its
    directory and the same windows to Pyroscope; SIGTERM after three windows."""
    api = request.param
    d = tmp_path_factory.mktemp(f"pyroscope-{api}")
    cfg = d / "agent.yaml"
    cfg.write_text(f"exporters:\n  dir:\n    enabled: true\n  pyroscope:\n    url: {server.url}\n    api: {api}\n")
    exe, svc = private_cpusplit(d)
    wl = start([exe, "60"])
    agent = Agent(d, ["--config", str(cfg), "--interval", f"{INTERVAL}s", "-F", str(FREQ),
                      "--label", "namespace=shop", "--label", "pod=web-1", "--label", f"api={api}"])
    r = Run()
    try:
        agent.start()
        wait_windows(agent, svc, 3)
        r.rc = agent.stop()
        r.metrics = agent.metrics() if agent.alive() else None
    finally:
        agent.kill()
        stop(wl)
    r.api, r.svc, r.agent, r.log = api, svc, agent, agent.log()
    files = sorted((agent.state / "profiles" / svc).glob("*.pb.gz"))
    r.windows = [PprofMeta(f.read_bytes()) for f in files]
    r.raws = [pprof_raw(str(f), "-symbolize=none") for f in files]
    # what the server has of svc, once two reads agree
    merged, last, deadline = d / "merged.pb", None, time.time() + 15
    while True:
        merged.write_bytes(server.merged(svc))
        r.merged = pprof_raw(str(merged), "-symbolize=none")
        if r.merged.total() > 0 and r.merged.total() == last or time.time() > deadline:
            break
        last = r.merged.total()
        time.sleep(0.5)
    r.series = server.series(svc)
    return r


def test_export_accepted(run):
    assert run.rc == 0, run.log
    bad = [l for l in run.agent.log_lines() if 'msg="pyroscope:' in l]
    assert not bad, "\n".join(bad)
    assert len(run.windows) >= 3, run.log


def test_same_functions_and_shares(run):
    """Every function's share of the workload's samples, from the server's merged profile
    and from prowl's pprof of the same windows, within 0.5 pp; hot_a:hot_b is 3:1."""
    assert_same_shares([run.merged], run.raws, "Pyroscope", SHARE_PP)
    # and every sample once: the server's CPU time is that of prowl's windows
    assert run.merged.total() == sum(s["values"][1] for r in run.raws for s in r.samples)


def test_labels(run):
    """The series' labels are the string labels prowl's pprof carries on each sample
    (service_name, host_name, process_name, the static ones; pid is a number label, which
    stays in the profile), plus Pyroscope's own (__name__ and the like) and, for
    /ingest, the spyName prowl gives."""
    want = {}
    for r in run.raws:
        for s in r.samples:
            want.update({k: str(v) for k, v in s["labels"].items() if k != "pid"})
    if run.api == "ingest":
        want["pyroscope_spy"] = "prowl"
    assert run.series, f"no series for service_name={run.svc}"
    for labels in run.series:
        assert {k: v for k, v in labels.items() if not k.startswith("__")} == want, (labels, want)
        assert labels.get("__name__") == "process_cpu", labels
