"""test_containers.py: container identity from real cgroups shaped as containerd, CRI-O,
Docker and Podman make them (systemd and cgroupfs drivers, cgroup v2 and the v1 name=systemd
hierarchy), outside Kubernetes: every series carries container_id (OTLP container.id), and
a process in its own mount and PID namespaces is still symbolized."""
import signal
import subprocess
import time

import pytest

import otlp_check
from agentlib import Agent, IngestProfile, raw_of
from containers import Cgroups, cgroup1_root, new_id, new_uid, private_workload, shape
from receiver import Receiver

FREQ = 49
INTERVAL = 1


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("containers")
    cg = Cgroups()
    cases = {}  # workload name -> (kind, container id or "")
    pyro, otlp = Receiver().start(), Receiver().start()
    agent = None
    try:
        kinds = ["containerd-systemd", "crio-systemd", "kubepods-cgroupfs", "docker-systemd", "podman"]
        for kind in kinds:
            cid = new_id()
            exe, name = private_workload(d)
            cg.start(cg.make(shape(kind, cid, new_uid())), [exe, "30"])
            cases[name] = (kind, cid)
        # Docker's cgroupfs driver on a hybrid host: the container is on v1 only.
        if cgroup1_root():
            cid = new_id()
            exe, name = private_workload(d)
            cg.start(cg.make(shape("docker-cgroupfs", cid), v1=True), [exe, "30"])
            cases[name] = ("docker-cgroupfs-v1", cid)
        # A container with its own mount and PID namespaces: the binary exists only there.
        cid = new_id()
        exe, name = private_workload(d)
        cg.start(cg.make(shape("docker-systemd", cid)), [exe, "30"], mntns_copy=name)
        cases[name] = ("docker-mntns", cid)
        # A systemd service, no container.
        exe, name = private_workload(d)
        unit = name + "svc"
        cg.start(cg.make(f"system.slice/{unit}.service"), [exe, "30"])
        cases[name] = ("service", "")
        cfg = d / "agent.yaml"
        cfg.write_text(f"kubernetes:\n  enabled: false\nexporters:\n  pyroscope:\n    url: {pyro.url}\n"
                       f"  otlp:\n    url: {otlp.url}\n")
        agent = Agent(d, ["--config", str(cfg), "--interval", f"{INTERVAL}s", "-F", str(FREQ)])
        agent.start()
        time.sleep(4.5)
        assert agent.stop() == 0, agent.log()
    finally:
        if agent:
            agent.kill()
        cg.cleanup()
        pyro.stop()
        otlp.stop()
    r = type("Run", (), {})()
    r.cases, r.unit_of = cases, {n: n + "svc" for n, (k, _) in cases.items() if k == "service"}
    r.ingest = [IngestProfile(q) for q in pyro.requests if q.path == "/ingest"]
    r.otlp = [p for q in otlp.requests for p in otlp_check.check(q.body)]
    r.log, r.dir = agent.log(), d
    return r


def test_every_shape_gets_its_container_id(run):
    for name, (kind, cid) in run.cases.items():
        svc = run.unit_of.get(name, name)
        mine = [p for p in run.ingest if p.service == svc]
        assert mine, f"{kind}: no series {svc} among {sorted({p.service for p in run.ingest})}"
        for p in mine:
            if cid:
                assert p.labels.get("container_id") == cid, f"{kind}: {p.req.arg('name')}"
            else:
                assert "container_id" not in p.labels, f"{kind}: {p.req.arg('name')}"
            assert not {"namespace", "pod", "container", "node"} & set(p.labels), "Kubernetes is off"
        res = [p["resource"] for p in run.otlp if p["resource"]["service.name"] == svc]
        assert res, f"{kind}: no OTLP resource for {svc}"
        for attrs in res:
            assert attrs.get("container.id") == (cid or None), f"{kind}: {attrs}"
            assert "container_id" not in attrs and "k8s.pod.uid" not in attrs


def test_process_in_its_own_mount_and_pid_namespace_is_symbolized(run):
    name = next(n for n, (k, _) in run.cases.items() if k == "docker-mntns")
    mine = [p for p in run.ingest if p.service == name]
    raws = [raw_of(run.dir, f"mntns{i}.pb.gz", p.body) for i, p in enumerate(mine)]
    tot = sum(r.total() for r in raws)
    hot = sum(r.share("hot_a") * r.total() for r in raws)
    assert tot > 20, f"{tot} samples of the namespaced workload"
    assert hot / tot > 0.5, f"hot_a in {hot / tot:.0%} of its samples: symbols not read from its mount namespace"


# A reload, not untrusted input: the normal build's run covers it.
@pytest.mark.slow
def test_reload_lets_a_dropped_process_back(tmp_path):
    """A process relabel_configs drops is stopped in BPF; after a reload without the rule,
    it is sampled and exported again."""
    exe, name = private_workload(tmp_path)
    wl = subprocess.Popen([exe, "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rx = Receiver().start()
    cfg = tmp_path / "agent.yaml"
    base = f"exporters:\n  pyroscope:\n    url: {rx.url}\n"
    cfg.write_text(base + f"relabel_configs:\n  - source_labels: [__meta_process_comm]\n    regex: {name}\n"
                          "    action: drop\n")
    agent = Agent(tmp_path, ["--config", str(cfg), "--interval", f"{INTERVAL}s", "-F", str(FREQ)])
    try:
        agent.start()
        deadline = time.time() + 15
        while time.time() < deadline and agent.metrics().get("prowl_relabel_dropped_samples_total", where="bpf") < 20:
            time.sleep(0.2)
        assert agent.metrics().get("prowl_relabel_dropped_samples_total", where="bpf") >= 20
        assert not [p for p in map(IngestProfile, rx.requests) if p.service == name]
        cfg.write_text(base)
        reloaded = time.time()
        agent.send(signal.SIGHUP)
        agent.wait_log("configuration reloaded")
        deadline = time.time() + 10
        while time.time() < deadline and not [p for p in map(IngestProfile, rx.requests) if p.service == name]:
            time.sleep(0.1)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        wl.kill()
        wl.wait()
        rx.stop()
    mine = [p for p in map(IngestProfile, rx.requests) if p.service == name]
    assert mine and all(p.req.time > reloaded for p in mine), "not exported after the reload"
