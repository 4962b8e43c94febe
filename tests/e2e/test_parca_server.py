"""test_parca_server.py: the real Parca server (tests/tools/parca, v0.21.0 built from its
Go module) against what prowl sends it. The agent exports to Parca itself (WriteRaw over
gRPC-web); Parca takes every call (grpc-status 0), and what its query API gives back has
the functions, shares (within 0.5 pp) and labels of prowl's own pprof of the same
windows."""
import time
import urllib.request

import pytest

import pbwire
from agentlib import Agent, assert_same_shares, free_port, private_cpusplit
from conftest import pprof_raw, start, stop
from pprofgen import _bytes, _int
from receiver import GRPC_WEB, PARCA_WRITERAW, Receiver
from serverlib import Server, call, tool
from test_collector import FREQ, INTERVAL, SHARE_PP
from test_pyroscope_server import wait_windows

QUERY = "/parca.query.v1alpha1.QueryService/"


class Parca(Server):
    """Parca on a free loopback port, its data in d, no upstream debuginfod (loopback only)."""

    def __init__(self, d):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cfg = d / "parca.yaml"
        cfg.write_text(f'object_storage:\n  bucket:\n    type: "FILESYSTEM"\n    config:\n      directory: "{d}/data"\n')
        argv = [tool("parca"), f"--config-path={cfg}", f"--http-address=127.0.0.1:{self.port}",
                f"--storage-path={d}/store", f"--debuginfo-cache-dir={d}/debuginfo",
                "--debuginfod-upstream-servers=", "--log-level=info"]
        super().__init__(d, "parca", argv, lambda: call(self.url + "/metrics", timeout=2)[0] == 200)

    def grpc_web(self, method, msg):
        """The reply message of one unary gRPC-web call (grpc-status 0 required)."""
        st, body = call(self.url + method, b"\0" + len(msg).to_bytes(4, "big") + msg, "application/grpc-web+proto",
                        timeout=30)
        assert st == 200, (method, st, body[:300])
        reply, trailer, i = None, b"", 0
        while i < len(body):
            flag, n = body[i], int.from_bytes(body[i + 1:i + 5], "big")
            if flag & 0x80:
                trailer += body[i + 5:i + 5 + n]
            else:
                reply = body[i + 5:i + 5 + n]
            i += 5 + n
        assert b"grpc-status: 0" in trailer, (method, trailer)
        return reply or b""

    def profile_type(self):
        """prowl's sample-count profile type as Parca names it in queries (ProfileTypes):
        Parca makes one type per value of the pprof (samples/count, cpu/nanoseconds)."""
        types = []
        for f, _, t in pbwire.fields(self.grpc_web(QUERY + "ProfileTypes", b"")):
            v = {n: x for n, _, x in pbwire.fields(t)}
            types.append([v.get(i, b"").decode() for i in (1, 2, 3, 4, 5)] + [bool(v.get(6))])
        mine = [t for t in types if t[0] == "parca_agent_cpu" and t[1:3] == ["samples", "count"]]
        assert len(mine) == 1, types
        return ":".join(mine[0][:5]) + (":delta" if mine[0][5] else "")

    def merged(self, selector):
        """The merged profile of what selector selects, over the last hour (Query, pprof)."""
        now = int(time.time())
        merge = (_bytes(1, (self.profile_type() + selector).encode()) + _bytes(2, _int(1, now - 3600))
                 + _bytes(3, _int(1, now + 60)))
        reply = self.grpc_web(QUERY + "Query", _int(1, 2) + _bytes(3, merge) + _int(5, 1))
        return next(v for f, _, v in pbwire.fields(reply) if f == 6)

    def label_names(self):
        return {v.decode() for f, _, v in pbwire.fields(self.grpc_web(QUERY + "Labels", b"")) if f == 1}


class Run:
    """One agent run exporting to Parca and to its directory."""


def agent_run(d, url, windows=3):
    cfg = d / "agent.yaml"
    cfg.write_text(f"exporters:\n  dir:\n    enabled: true\n  parca:\n    url: {url}\n")
    exe, svc = private_cpusplit(d)
    wl = start([exe, "60"])
    agent = Agent(d, ["--config", str(cfg), "--interval", f"{INTERVAL}s", "-F", str(FREQ),
                      "--label", "namespace=shop", "--label", "pod=web-1"])
    try:
        agent.start()
        wait_windows(agent, svc, windows)
        rc = agent.stop()
    finally:
        agent.kill()
        stop(wl)
    return agent, svc, rc


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Parca(tmp_path_factory.mktemp("parca")).start(timeout=90)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def run(server, tmp_path_factory):
    """cpusplit under a name of its own; an agent at 199 Hz, 2 s windows, three windows to
    its directory and to Parca; then Parca's merged profile of the workload, by service_name
    and by every label prowl gives it."""
    d = tmp_path_factory.mktemp("parca-run")
    agent, svc, rc = agent_run(d, server.url)
    r = Run()
    r.rc, r.svc, r.log, r.log_lines = rc, svc, agent.log(), agent.log_lines()
    files = sorted((agent.state / "profiles" / svc).glob("*.pb.gz"))
    r.raws = [pprof_raw(str(f), "-symbolize=none") for f in files]
    r.pprof = files[0].read_bytes() if files else b""
    (d / "merged.pb").write_bytes(server.merged(f'{{service_name="{svc}"}}'))
    r.merged = pprof_raw(str(d / "merged.pb"), "-symbolize=none")
    r.labels = {"service_name": svc, "namespace": "shop", "pod": "web-1"}
    sel = ",".join(f'{k}="{v}"' for k, v in sorted(r.labels.items()))
    (d / "all-labels.pb").write_bytes(server.merged("{" + sel + "}"))
    r.all_labels = pprof_raw(str(d / "all-labels.pb"), "-symbolize=none")
    r.label_names = server.label_names()
    return r


def test_agent_export_reaches_parca(run):
    """Every WriteRaw call the agent made was taken (no rejection, retry or failure line)."""
    assert run.rc == 0, run.log
    bad = [l for l in run.log_lines if 'msg="parca:' in l]
    assert not bad, "\n".join(bad)
    assert run.raws, run.log


def test_same_functions_and_shares(run):
    """Every function's share of the workload's samples, from Parca's merged profile and
    from prowl's pprof of the same windows, within 0.5 pp; hot_a ahead of hot_b; and the
    same sample count, so every sample arrived once."""
    assert run.rc == 0, run.log
    assert_same_shares([run.merged], run.raws, "Parca", SHARE_PP)
    # Parca's pprof counts CPU time (samples x period), prowl's second value
    assert run.merged.total() == sum(s["values"][1] for r in run.raws for s in r.samples)


def test_labels(run):
    """The labels prowl gives the series (service_name, host_name, the static ones) are
    labels in Parca, with their values: selecting on all of them gives the whole profile back."""
    assert {"service_name", "namespace", "pod", "host_name"} <= run.label_names, run.label_names
    assert run.all_labels.total() == run.merged.total() > 0, (run.all_labels.total(), run.merged.total())


def grpc_status(url, msg):
    """The grpc-status of one WriteRaw call (headers of a trailers-only answer, else trailer frame)."""
    req = urllib.request.Request(url + PARCA_WRITERAW, data=b"\0" + len(msg).to_bytes(4, "big") + msg,
                                 headers={"Content-Type": GRPC_WEB})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.status == 200, r.status
        hdrs, body = {k.lower(): v for k, v in r.headers.items()}, r.read()
    if "grpc-status" in hdrs:
        return int(hdrs["grpc-status"])
    i = 0
    while i + 5 <= len(body):
        n = int.from_bytes(body[i + 1:i + 5], "big")
        if body[i] & 0x80:
            for line in body[i + 5:i + 5 + n].decode().splitlines():
                k, _, v = line.partition(":")
                if k.strip().lower() == "grpc-status":
                    return int(v)
        i += 5 + n
    raise AssertionError(f"no grpc-status: {hdrs} {body[:200]!r}")


def test_stand_in_answers_as_parca(server, run):
    """The stand-in and the real Parca agree on a good call (grpc-status 0) and on one
    without __name__ (refused; the stand-in says INVALID_ARGUMENT)."""
    def call_of(labels):
        ls = b"".join(_bytes(1, _bytes(1, k.encode()) + _bytes(2, v.encode())) for k, v in labels)
        return _bytes(2, _bytes(1, ls) + _bytes(2, _bytes(1, run.pprof)))
    good = call_of([("__name__", "parca_agent_cpu"), ("service_name", "standin-check")])
    bad = call_of([("service_name", "standin-check")])
    with Receiver() as rx:
        assert grpc_status(server.url, good) == grpc_status(rx.url, good) == 0
        assert grpc_status(server.url, bad) != 0
        assert grpc_status(rx.url, bad) == 3
