"""test_pod_labels.py: Kubernetes metadata end to end against a loopback API server
stand-in (kube_apiserver.py: HTTPS from a test CA, bearer tokens, list + chunked watch,
410 Gone), with workloads in real cgroups shaped as the kubelet makes them. Labels are
read back from the Pyroscope ingest name and from OTLP resource attributes (otlp_check).
Scenarios: labels and service_name, a container whose status comes late, steady-state
requests, relabel keep, the API server down at start, token rotation, a pod deleted
and recreated with a new container id, and a relist after 410 Gone."""
import json
import os
import re
import subprocess
import tempfile
import time

import pytest

import otlp_check
from agentlib import Agent, IngestProfile
from conftest import pprof_raw
from containers import Cgroups, new_id, private_workload, shape
from kube_apiserver import KubeApiServer, make_pod, set_container
from receiver import Receiver

FREQ = 49
NODE = "node-1"


# Only the tests' workloads (private copies named i9<8 hex>) are exported: the host's
# other processes would make tens of series per window to read back.
ONLY_WORKLOADS = ("relabel_configs:\n  - source_labels: [__meta_process_comm]\n    regex: 'i9[0-9a-f]{8}'\n"
                  "    action: keep\n")


def agent_yaml(api, rx, otlp=None, extra=ONLY_WORKLOADS, interval="1s"):
    text = f"""interval: {interval}
kubernetes:
  api_url: {api.url}
  token_file: {api.token_file}
  ca_file: {api.ca_file}
  node_name: {NODE}
exporters:
  pyroscope:
    url: {rx.url}
"""
    if otlp:
        text += f"  otlp:\n    url: {otlp.url}\n"
    return text + extra


def start_agent(d, api, rx, otlp=None, extra=ONLY_WORKLOADS, interval="1s", name="agent"):
    cfg = d / f"{name}.yaml"
    cfg.write_text(agent_yaml(api, rx, otlp, extra, interval))
    return Agent(d, ["--config", str(cfg), "-F", str(FREQ)], name=name).start()


def run_pod(cg, d, pod, kind="containerd-systemd", container="app"):
    """Starts a workload as container `container` of pod (its id from the pod's status)."""
    cid = next(s["containerID"].split("://")[1] for s in pod["status"]["containerStatuses"] if s["name"] == container)
    exe, name = private_workload(d)
    p = cg.start(cg.make(shape(kind, cid, pod["metadata"]["uid"])), [exe, "60"])
    return p, name


def ingests(rx):
    return [IngestProfile(r) for r in rx.requests if r.path == "/ingest"]


_names = {}


def has_process(prof, name):
    """Whether an ingested profile holds samples of process `name` (their process_name
    sample label, as Google's pprof reads it)."""
    key = id(prof.req)
    if key not in _names:
        with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
            f.write(prof.body)
            f.flush()
            raw = pprof_raw(f.name)
        _names[key] = {s["labels"].get("process_name") for s in raw.samples}
    return name in _names[key]


def wait_for(pred, timeout, what, agent=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if pred():
            return
        time.sleep(0.1)
    detail = ""
    if agent:
        try:
            detail = "\n".join(l for l in agent.metrics().text.splitlines() if "kubernetes" in l or "discover" in l)
        except (AssertionError, OSError):
            pass
    raise AssertionError(f"{what} within {timeout}s" + (f":\n{agent.log()}\n{detail}" if agent else ""))


@pytest.fixture
def env(tmp_path):
    cg = Cgroups()
    api = KubeApiServer(tmp_path, node=NODE)
    rx, otlp = Receiver().start(), Receiver().start()
    yield type("Env", (), {"d": tmp_path, "cg": cg, "api": api, "rx": rx, "otlp": otlp})()
    cg.cleanup()
    api.down()
    rx.stop()
    otlp.stop()
    assert not api.violations, api.violations


def test_labels_end_to_end(env):
    """Pods with app.kubernetes.io/name, with app only and with neither; cgroupfs and systemd
    shapes; one container whose status (id) reaches the API server after it started. Every
    window of every workload is labelled (first sample to labelled export within one
    window); one list and one watch in steady state."""
    shop = make_pod("checkout-7d9f", "shop", NODE, containers={"app": new_id(), "sidecar": new_id()},
                    labels={"app.kubernetes.io/name": "checkout", "app": "ignored"})
    legacy = make_pod("legacy-0", "old", NODE, containers={"main": new_id()}, labels={"app": "legacy"})
    bare = make_pod("batch-x1", "jobs", NODE, containers={"worker": new_id()})
    late = make_pod("late-0", "shop", NODE, containers={"web": None, "log": new_id()},
                    labels={"app.kubernetes.io/name": "late"})
    for p in (shop, legacy, bare, late):
        env.api.add_pod(p)
    agent = start_agent(env.d, env.api, env.rx, env.otlp, interval="2s")
    try:
        want = {}
        p, n = run_pod(env.cg, env.d, shop)
        want[n] = ("checkout", shop, "app", "containerd")
        p, n = run_pod(env.cg, env.d, legacy, kind="kubepods-cgroupfs", container="main")
        want[n] = ("legacy", legacy, "main", "cri")
        p, n = run_pod(env.cg, env.d, bare, kind="crio-systemd", container="worker")
        want[n] = ("jobs/worker", bare, "worker", "cri-o")
        # The late container starts just after a window begins and runs 0.8 s before its
        # id is in the pod's status: its samples wait for it, and its first window
        # (2 s) is labelled all the same.
        cid = new_id()
        exe, n = private_workload(env.d)
        cgpath = env.cg.make(shape("containerd-systemd", cid, late["metadata"]["uid"]))
        since = time.time() - agent.started_at
        time.sleep(2 - since % 2 + 0.1)
        env.cg.start(cgpath, [exe, "60"])
        time.sleep(0.8)
        late = set_container(late, "web", cid)
        env.api.add_pod(late)
        want[n] = ("late", late, "web", "containerd")
        time.sleep(4.5)
        metrics = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    profs = ingests(env.rx)
    otlp = [p for r in env.otlp.requests for p in otlp_check.check(r.body)]
    for name, (svc, pod, container, runtime) in want.items():
        md = pod["metadata"]
        mine = [p for p in profs if has_process(p, name)]
        assert len(mine) >= 2, f"{svc} ({name}): {len(mine)} windows of {sorted({p.req.arg('name') for p in profs})}"
        for p in mine:
            assert p.service == svc and p.labels == {"namespace": md["namespace"], "pod": md["name"],
                                                      "container": container, "node": NODE,
                                                      "host_name": p.labels.get("host_name")}, \
                f"{name}: window from {p.frm} is {p.req.arg('name')} (not labelled within its first window)"
        res = [p["resource"] for p in otlp if p["resource"]["service.name"] == svc]
        assert res, f"no OTLP resource for {svc}"
        cid = next(s["containerID"].split("://")[1] for s in pod["status"]["containerStatuses"]
                   if s["name"] == container)
        for attrs in res:
            assert attrs["k8s.namespace.name"] == md["namespace"] and attrs["k8s.pod.name"] == md["name"]
            assert attrs["k8s.pod.uid"] == md["uid"] and attrs["k8s.container.name"] == container
            assert attrs["k8s.node.name"] == NODE and attrs["container.id"] == cid
            assert not {"namespace", "pod", "container", "node", "container_id"} & set(attrs), attrs
    # Steady state: the first list and one watch, nothing polled; every request had the token.
    assert env.api.count("list") == 1 and env.api.count("watch") == 1, env.api.requests
    assert all(r["token"] == "token-a" for r in env.api.requests)
    assert metrics.get("prowl_kubernetes_up") == 1
    assert metrics.get("prowl_kubernetes_pods", state="live") == 4
    assert metrics.get("prowl_kubernetes_watch_events_total") >= 1  # the late container's status


def test_keep_rule_exports_one_namespace(env):
    """relabel_configs keep on the namespace: the other namespace's process is not exported,
    and its samples stop in BPF (not in the agent)."""
    keep = make_pod("api-0", "i9-keep", NODE, containers={"app": new_id()}, labels={"app": "api"})
    drop = make_pod("api-0", "i9-drop", NODE, containers={"app": new_id()}, labels={"app": "api"})
    env.api.add_pod(keep)
    env.api.add_pod(drop)
    _, nk = run_pod(env.cg, env.d, keep)
    pd, nd = run_pod(env.cg, env.d, drop)
    rules = ("relabel_configs:\n  - source_labels: [__meta_kubernetes_namespace]\n    regex: i9-keep\n"
             "    action: keep\n  - source_labels: [__meta_kubernetes_pod_label_app]\n"
             "    regex: '(.*)'\n    replacement: 'team-$1'\n    target_label: team\n")
    agent = start_agent(env.d, env.api, env.rx, extra=rules)
    try:
        time.sleep(1.5)  # the dropped process is known to BPF by now
        bpf0, cpu0 = agent.metrics().get("prowl_relabel_dropped_samples_total", where="bpf"), cpu_ns(pd.pid)
        time.sleep(4)
        m = agent.metrics()
        cpu1 = cpu_ns(pd.pid)
        dropped = bpf_pid_drop(agent.pid)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    profs = ingests(env.rx)
    assert {p.labels.get("namespace") for p in profs if p.labels.get("namespace")} == {"i9-keep"}
    mine = [p for p in profs if has_process(p, nk)]
    assert mine and all(p.labels.get("team") == "team-api" for p in mine)
    assert not [p for p in profs if has_process(p, nd)], "a process of a dropped namespace was exported"
    # The dropped workload's samples stop in BPF: over 4 s the BPF counter (all dropped
    # processes of the host) grows by at least half of what its CPU time gives at FREQ
    # Hz (/metrics is refreshed once a second, hence the margin; without the BPF map it
    # would not grow for this process at all).
    want = (cpu1 - cpu0) / 1e9 * FREQ
    bpf = m.get("prowl_relabel_dropped_samples_total", where="bpf") - bpf0
    assert want > 40 and bpf >= 0.5 * want, (bpf, want)
    # bpftool reads the agent's pid_drop map: the dropped process is in it, the kept one not.
    kept_pid = next(p.pid for p in env.cg.procs if p.pid != pd.pid)
    assert pd.pid in dropped and kept_pid not in dropped, (pd.pid, kept_pid, sorted(dropped)[:20])
    assert m.get("prowl_relabel_dropped_processes") >= 1


def bpf_pid_drop(agent_pid):
    """The pids in the pid_drop BPF map of the agent process agent_pid, read with bpftool
    (the map's id from the agent's file descriptors)."""
    ids = []
    for fd in os.listdir(f"/proc/{agent_pid}/fdinfo"):
        try:
            info = open(f"/proc/{agent_pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        m = re.search(r"^map_id:\s*(\d+)", info, re.M)
        if m:
            ids.append(int(m.group(1)))
    out = set()
    for i in ids:
        show = json.loads(subprocess.run(["bpftool", "-j", "map", "show", "id", str(i)], capture_output=True,
                                         text=True, check=True).stdout)
        if show.get("name") != "pid_drop":
            continue
        dump = json.loads(subprocess.run(["bpftool", "-j", "map", "dump", "id", str(i)], capture_output=True,
                                         text=True, check=True).stdout)
        for e in dump:
            key = e.get("formatted", {}).get("key", e.get("key"))
            out.add(key if isinstance(key, int) else int.from_bytes(bytes(int(b, 16) for b in key), "little"))
    assert ids, "no BPF maps among the agent's file descriptors"
    return out


def cpu_ns(pid):
    """CPU time of the process pid (its single thread), from /proc/PID/schedstat."""
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def test_api_server_down_at_start(env):
    """The agent starts without the API server: one warning, a counter, and the labels
    once the server answers."""
    pod = make_pod("web-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "web"})
    env.api.add_pod(pod)
    env.api.down()
    _, name = run_pod(env.cg, env.d, pod)
    agent = start_agent(env.d, env.api, env.rx)
    try:
        # The process is exported while the server is down, with what its cgroup tells.
        wait_for(lambda: any(p.service == name for p in ingests(env.rx) if has_process(p, name)), 15,
                 "a profile without pod labels", agent)
        wait_for(lambda: (agent.metrics().get("prowl_kubernetes_errors_total") or 0) >= 2, 15,
                 "two failed attempts", agent)
        assert agent.metrics().get("prowl_kubernetes_up") == 0
        down_until = time.time()
        env.api.up()
        wait_for(lambda: any(p.labels.get("pod") == "web-0" for p in ingests(env.rx) if has_process(p, name)), 20,
                 "pod labels after the server came up", agent)
        m = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    warns = [l for l in agent.log_lines("warn") if "Kubernetes API server" in l]
    assert len(warns) == 1, agent.log()
    assert "retrying" in warns[0] and env.api.url in warns[0]
    assert m.get("prowl_kubernetes_up") == 1 and m.get("prowl_kubernetes_outages_total") == 1
    assert m.get("prowl_pod_unlabelled_processes_total") >= 1
    # Before the server was up, the process was exported with what the cgroup tells:
    # its container id; once the pod is known, "container" names it instead.
    cid = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    early = [p for p in ingests(env.rx) if has_process(p, name) and p.req.time < down_until]
    assert early and all(p.service == name and "pod" not in p.labels for p in early)
    assert all(p.labels.get("container_id") == cid for p in early), [p.req.arg("name") for p in early]
    late = [p for p in ingests(env.rx) if has_process(p, name) and p.labels.get("pod") == "web-0"]
    assert late and all("container_id" not in p.labels and p.labels["container"] == "app" for p in late)


def test_outage_after_start_gives_container_id(env):
    """The API server goes down after the first list; a pod created meanwhile starts a
    process: its series carries the container id of its cgroup (and no pod labels) while
    the server cannot say, a process of a pod listed before keeps its pod labels, and
    the new one gets its pod's once the server answers."""
    known = make_pod("known-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "known"})
    env.api.add_pod(known)
    _, nk = run_pod(env.cg, env.d, known)
    agent = start_agent(env.d, env.api, env.rx)
    try:
        wait_for(lambda: any(p.service == "known" for p in ingests(env.rx) if has_process(p, nk)), 15,
                 "the listed pod's labels", agent)
        env.api.down()
        wait_for(lambda: agent.metrics().get("prowl_kubernetes_up") == 0, 40, "the outage seen", agent)
        down_at = time.time()
        new = make_pod("new-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "new"})
        env.api.add_pod(new)
        _, nn = run_pod(env.cg, env.d, new)
        wait_for(lambda: len([p for p in ingests(env.rx) if has_process(p, nn)]) >= 2, 15,
                 "two windows of the new pod's process", agent)
        up_at = time.time()
        env.api.up()
        wait_for(lambda: any(p.service == "new" for p in ingests(env.rx) if has_process(p, nn)), 40,
                 "the new pod's labels after the outage", agent)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    cid = new["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    during = [p for p in ingests(env.rx) if has_process(p, nn) and p.req.time < up_at]
    assert during and all(p.labels.get("container_id") == cid and "pod" not in p.labels and p.service == nn
                          for p in during), [p.req.arg("name") for p in during]
    after = [p for p in ingests(env.rx) if has_process(p, nn) and p.service == "new"]
    assert after and all("container_id" not in p.labels and p.labels.get("pod") == "new-0" for p in after)
    kept = [p for p in ingests(env.rx) if has_process(p, nk) and down_at <= p.req.time < up_at]
    assert kept and all(p.service == "known" and "container_id" not in p.labels for p in kept)


def test_container_without_status_gets_container_id(env):
    """A pod of two containers that the API server lists without one container's status
    past the process's first window (a pod of one container names it all the same): the
    series has the pod's labels and, for the container, the id from the cgroup; when the
    status comes, "container" replaces it."""
    pod = make_pod("slow-0", "shop", NODE, containers={"web": None, "log": new_id()}, labels={"app": "slow"})
    env.api.add_pod(pod)
    agent = start_agent(env.d, env.api, env.rx)
    try:
        cid = new_id()
        exe, name = private_workload(env.d)
        env.cg.start(env.cg.make(shape("containerd-systemd", cid, pod["metadata"]["uid"])), [exe, "60"])
        wait_for(lambda: len([p for p in ingests(env.rx) if has_process(p, name)]) >= 2, 15,
                 "two windows without the container's status", agent)
        status_at = time.time()
        env.api.add_pod(set_container(pod, "web", cid))
        wait_for(lambda: any(p.labels.get("container") == "web" for p in ingests(env.rx) if has_process(p, name)),
                 15, "the container's label once its status came", agent)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    mine = [p for p in ingests(env.rx) if has_process(p, name)]
    before = [p for p in mine if p.req.time < status_at]
    assert before and all(p.service == "slow" and p.labels.get("pod") == "slow-0" and
                          p.labels.get("container_id") == cid and "container" not in p.labels for p in before), \
        [p.req.arg("name") for p in before]
    after = [p for p in mine if p.labels.get("container") == "web"]
    assert after and all("container_id" not in p.labels for p in after)


def test_recording_rules_group_by_container_id(env):
    """A pod of two containers: a rule grouping by pod and container_id gets one counter
    per container, each equal to the built-in counter of that container's series (which
    carries no container_id, so a container restart starts no new series of it); a rule
    matching one container id counts that container only."""
    pod = make_pod("two-0", "shop", NODE, containers={"app": new_id(), "sidecar": new_id()}, labels={"app": "two"})
    env.api.add_pod(pod)
    cids = {s["name"]: s["containerID"].split("://")[1] for s in pod["status"]["containerStatuses"]}
    for c in cids:
        run_pod(env.cg, env.d, pod, container=c)
    rules = (ONLY_WORKLOADS + "recording_rules:\n"
             "  - metric: by_container_cpu_seconds_total\n    group_by: [pod, container, container_id]\n"
             "  - metric: one_container_cpu_seconds_total\n"
             f"    match:\n      container_id: {cids['sidecar']}\n    group_by: [container]\n")
    agent = start_agent(env.d, env.api, env.rx, extra=rules)
    try:
        wait_for(lambda: all(agent.metrics().sum("prowl_profile_cpu_seconds_total", pod="two-0", container=c) > 0.5
                             for c in cids), 30, "CPU of both containers", agent)
        m = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    builtin = {dict(ls)["container"]: v for (n, ls), v in m.samples.items()
               if n == "prowl_profile_cpu_seconds_total" and dict(ls).get("pod") == "two-0"}
    assert set(builtin) == set(cids), m.text
    assert not [ls for (n, ls), _ in m.samples.items() if n == "prowl_profile_cpu_seconds_total"
                and "container_id" in dict(ls)], "the built-in counter carries container_id"
    by = {(dict(ls)["container"], dict(ls)["container_id"]): v for (n, ls), v in m.samples.items()
          if n == "by_container_cpu_seconds_total"}
    assert set(by) == {(c, cid) for c, cid in cids.items()}, by
    for c, cid in cids.items():
        assert by[(c, cid)] == pytest.approx(builtin[c], rel=1e-9), (c, by, builtin)
    one = {dict(ls)["container"]: v for (n, ls), v in m.samples.items() if n == "one_container_cpu_seconds_total"}
    assert one == {"sidecar": pytest.approx(builtin["sidecar"], rel=1e-9)}, (one, builtin)
    # relabel_configs drop "container": the pod's one series spans both containers and
    # has no container id, so the rule's label is left out.
    rules = (ONLY_WORKLOADS + "  - regex: container\n    action: labeldrop\n" + "recording_rules:\n"
             "  - metric: by_container_cpu_seconds_total\n    group_by: [pod, container_id]\n")
    agent = start_agent(env.d, env.api, env.rx, extra=rules, name="spans")
    try:
        wait_for(lambda: agent.metrics().sum("prowl_profile_cpu_seconds_total", pod="two-0") > 1, 30,
                 "CPU of the pod", agent)
        m = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    builtin = [(dict(ls), v) for (n, ls), v in m.samples.items()
               if n == "prowl_profile_cpu_seconds_total" and dict(ls).get("pod") == "two-0"]
    assert len(builtin) == 1 and "container" not in builtin[0][0], builtin
    by = [(dict(ls), v) for (n, ls), v in m.samples.items() if n == "by_container_cpu_seconds_total"]
    assert by == [({"pod": "two-0"}, pytest.approx(builtin[0][1], rel=1e-9))], by


def test_token_rotation(env):
    """The token file changes and the server accepts only the new token: the agent reads it
    again and keeps watching."""
    pod = make_pod("a-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "a"})
    env.api.add_pod(pod)
    agent = start_agent(env.d, env.api, env.rx)
    try:
        wait_for(lambda: env.api.count("watch") == 1, 10, "a watch", agent)
        rotated = time.time()
        env.api.write_token("token-b")
        env.api.set_tokens(["token-b"])
        env.api.close_watches()
        wait_for(lambda: env.api.count("watch", since=rotated, status=200) >= 1, 20, "a watch with the new token", agent)
        pod2 = make_pod("b-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "b"})
        env.api.add_pod(pod2)
        _, name = run_pod(env.cg, env.d, pod2)
        wait_for(lambda: any(p.service == "b" for p in ingests(env.rx) if has_process(p, name)), 15,
                 "labels of a pod added after the rotation", agent)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    after = [r for r in env.api.requests if r["time"] >= rotated]
    assert all(r["token"] == "token-b" for r in after if r["status"] == 200), after
    assert env.api.unauthorized <= 1, "the new token was not read at once"


def test_pod_recreated_and_410_gone(env):
    """A pod deleted and recreated with the same name, a new UID and a new container id:
    the new process gets the new pod's identity; the deleted pod leaves the cache once its
    process is gone. Then the watch history is compacted: the next watch gets 410 Gone and
    the agent lists again."""
    old = make_pod("web-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "web"})
    env.api.add_pod(old)
    agent = start_agent(env.d, env.api, env.rx, env.otlp)
    try:
        p1, n1 = run_pod(env.cg, env.d, old)
        wait_for(lambda: any(has_process(p, n1) and p.labels.get("pod") == "web-0" for p in ingests(env.rx)), 10,
                 "the old pod's series", agent)
        env.api.delete_pod(old["metadata"]["uid"])
        wait_for(lambda: agent.metrics().get("prowl_kubernetes_pods", state="deleted") == 1, 10,
                 "the delete event", agent)
        env.cg.kill(p1)
        new = make_pod("web-0", "shop", NODE, containers={"app": new_id()}, labels={"app": "web"})
        env.api.add_pod(new)
        p2, n2 = run_pod(env.cg, env.d, new)
        wait_for(lambda: agent.metrics().get("prowl_kubernetes_pods", state="deleted") == 0, 20,
                 "the deleted pod freed once its process exited", agent)
        wait_for(lambda: any(has_process(p, n2) for p in ingests(env.rx)), 10, "the new pod's samples", agent)
        # 410 Gone: the history before now is compacted and the watch reconnects.
        lists = env.api.count("list")
        env.api.compact()
        env.api.close_watches()
        wait_for(lambda: env.api.count("list") == lists + 1, 15, "a relist after 410 Gone", agent)
        third = make_pod("web-1", "shop", NODE, containers={"app": new_id()}, labels={"app": "web"})
        env.api.add_pod(third)
        _, n3 = run_pod(env.cg, env.d, third)
        wait_for(lambda: any(has_process(p, n3) and p.labels.get("pod") == "web-1" for p in ingests(env.rx)), 10,
                 "a pod added after the relist", agent)
        time.sleep(1.2)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    res = [p["resource"] for r in env.otlp.requests for p in otlp_check.check(r.body)
           if p["resource"].get("k8s.pod.name") == "web-0"]
    uids = {a["k8s.pod.uid"]: a["container.id"] for a in res}
    cid_old = old["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    cid_new = new["status"]["containerStatuses"][0]["containerID"].split("://")[1]
    assert uids == {old["metadata"]["uid"]: cid_old, new["metadata"]["uid"]: cid_new}, (uids, agent.log())
    assert not [l for l in agent.log_lines("warn") if "Kubernetes" in l], agent.log()
