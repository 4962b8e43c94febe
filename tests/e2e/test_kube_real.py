"""test_kube_real.py: pod labels from a real Kubernetes API server (kubelib: etcd and
kube-apiserver built from k8s.io/kubernetes) instead of the stand-in: the agent uses its
ServiceAccount's token from a TokenRequest, under the RBAC of packaging/kubernetes/;
pods listed before it starts and watched after; a token without that RBAC is refused;
and after etcd's history is compacted, the watch gets 410 Gone and the agent relists.
The stand-in (test_pod_labels.py) keeps the faults a real server won't make on demand."""
import time

import pytest

from agentlib import Agent
from containers import Cgroups, new_id, private_workload, shape
from kube_apiserver import make_pod
from kubelib import Etcd, KubeApi, etcd_compact
from receiver import Receiver
from test_pod_labels import FREQ, NODE, ONLY_WORKLOADS, has_process, ingests, wait_for


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    d = tmp_path_factory.mktemp("kube")
    etcd = Etcd(d).start(timeout=60)
    try:
        api = KubeApi(d, etcd).start(timeout=120)  # fails (or skips) here without the binary
        try:
            api.apply_packaging()
            token = d / "token"
            token.write_text(api.token("prowl", "prowl"))
            yield type("Kube", (), {"d": d, "etcd": etcd, "api": api, "token_file": token})()
        finally:
            api.stop()
    finally:
        etcd.stop()


@pytest.fixture
def env(kube, tmp_path):
    cg = Cgroups()
    rx = Receiver().start()
    yield type("Env", (), {"d": tmp_path, "cg": cg, "rx": rx, "kube": kube})()
    cg.cleanup()
    rx.stop()


def start_agent(env, token_file=None, args=()):
    cfg = env.d / "agent.yaml"
    cfg.write_text(f"""interval: 1s
kubernetes:
  api_url: {env.kube.api.url}
  token_file: {token_file or env.kube.token_file}
  ca_file: {env.kube.api.ca_file}
  node_name: {NODE}
exporters:
  pyroscope:
    url: {env.rx.url}
""" + ONLY_WORKLOADS)
    return Agent(env.d, ["--config", str(cfg), "-F", str(FREQ), *args]).start()


def run_pod(env, pod, container="app"):
    """A workload in the cgroup the kubelet would make for the pod's container."""
    cid = next(s["containerID"].split("://")[1] for s in pod["status"]["containerStatuses"] if s["name"] == container)
    exe, name = private_workload(env.d)
    env.cg.start(env.cg.make(shape("containerd-systemd", cid, pod["metadata"]["uid"])), [exe, "60"])
    return name


def labelled(env, name, pod):
    return any(has_process(p, name) and p.labels.get("pod") == pod["metadata"]["name"]
               and p.labels.get("namespace") == pod["metadata"]["namespace"] for p in ingests(env.rx))


def test_list_and_watch_with_a_service_account_token(env):
    """A pod created before the agent starts (list) and one after (watch) label their
    processes' series: namespace, pod, container, node."""
    api = env.kube.api
    before = api.add_pod(make_pod("web-0", "shop", NODE, containers={"app": new_id()},
                                  labels={"app.kubernetes.io/name": "web"}))
    agent = start_agent(env)
    try:
        n1 = run_pod(env, before)
        wait_for(lambda: labelled(env, n1, before), 15, "the listed pod's labels", agent)
        after = api.add_pod(make_pod("api-0", "shop", NODE, containers={"app": new_id()},
                                     labels={"app.kubernetes.io/name": "api"}))
        # The new pod reaches the agent by its watch before any process of it runs: a
        # process of an unknown container would make the agent list again instead.
        wait_for(lambda: (agent.metrics().get("prowl_kubernetes_watch_events_total") or 0) >= 1, 15,
                 "a watch event for the new pod", agent)
        n2 = run_pod(env, after)
        wait_for(lambda: labelled(env, n2, after), 15, "the watched pod's labels", agent)
        m = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    for name, pod, svc in ((n1, before, "web"), (n2, after, "api")):
        for p in [p for p in ingests(env.rx) if has_process(p, name) and p.labels.get("pod")]:
            assert p.service == svc and p.labels == {"namespace": "shop", "pod": pod["metadata"]["name"],
                                                      "container": "app", "node": NODE,
                                                      "host_name": p.labels.get("host_name")}, p.req.arg("name")
    assert m.get("prowl_kubernetes_up") == 1
    assert m.get("prowl_kubernetes_watch_events_total") >= 1
    assert not m.get("prowl_kubernetes_errors_total"), m.text
    api.delete_pod("shop", "web-0")
    api.delete_pod("shop", "api-0")


def test_token_without_rbac_is_refused(env):
    """The token of a ServiceAccount that packaging/kubernetes/ grants nothing: the real
    server answers 403, and the agent says so in one line and keeps sampling."""
    api = env.kube.api
    api.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": f"other-{new_id()[:8]}",
                                                                          "namespace": "prowl"}})
    sa = [s["metadata"]["name"] for s in api.api("GET", "/api/v1/namespaces/prowl/serviceaccounts")[1]["items"]
          if s["metadata"]["name"].startswith("other-")][0]
    tok = env.d / "other-token"
    tok.write_text(api.token("prowl", sa))
    agent = start_agent(env, tok)
    try:
        wait_for(lambda: any("HTTP 403" in l for l in agent.log_lines()), 15, "a line about the 403", agent)
        m = agent.metrics()
        assert agent.alive()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    assert m.get("prowl_kubernetes_up") == 0, m.text
    lines = [l for l in agent.log_lines() if "HTTP 403" in l]  # not the port in "watching ... :60403"
    assert len(lines) == 1, "\n".join(lines)


def test_410_after_compaction_relists(env):
    """The history is compacted in etcd and the API server restarts (watches go to etcd:
    --watch-cache=false): the agent's watch from its old resourceVersion gets 410 Gone,
    it lists again, and a pod made afterwards labels its process."""
    api = env.kube.api
    first = api.add_pod(make_pod("db-0", "shop", NODE, containers={"app": new_id()}))
    agent = start_agent(env, args=["-v"])  # the debug line says why it lists again
    try:
        n1 = run_pod(env, first)
        wait_for(lambda: labelled(env, n1, first), 15, "the first pod's labels", agent)
        relists = agent.metrics().get("prowl_kubernetes_relists_total") or 0
        # history the agent does not see (another node), then compacted away
        for i in range(3):
            api.add_pod(make_pod(f"elsewhere-{i}", "shop", "node-2", containers={"app": new_id()}))
            api.delete_pod("shop", f"elsewhere-{i}")
        etcd_compact(env.kube.etcd)
        api.p.kill()  # the agent's watch breaks; it resumes from its resourceVersion
        api.stop()
        api.start(timeout=120)
        wait_for(lambda: (agent.metrics().get("prowl_kubernetes_relists_total") or 0) > relists, 30,
                 "a relist after 410 Gone", agent)
        later = api.add_pod(make_pod("db-1", "shop", NODE, containers={"app": new_id()}))
        n2 = run_pod(env, later)
        wait_for(lambda: labelled(env, n2, later), 15, "a pod made after the relist", agent)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
    api.delete_pod("shop", "db-0")
    api.delete_pod("shop", "db-1")
    again = [l for l in agent.log_lines() if "Kubernetes watch: watch error 410" in l and "listing again" in l]
    assert again, "\n".join(l for l in agent.log_lines() if "Kubernetes" in l)
