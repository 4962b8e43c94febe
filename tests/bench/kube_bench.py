#!/usr/bin/python3
"""kube_bench.py: figures of Kubernetes metadata in `prowl agent`, against the loopback API
server stand-in of the tests (tests/e2e/kube_apiserver.py). Prints a Markdown section.

1. Pods coming and going for KUBE_BENCH_SECONDS (600) at the default 10 s windows: a new
   pod every 20 s (its container's status reaches the API server 0.5 s after its process
   starts, in every other pod), each with a busy process in a cgroup shaped as containerd
   makes it, deleted 40 s later. For each: the time from the process's start (its first
   sample comes within milliseconds) to the arrival of the first Pyroscope profile of it
   labelled with its pod, and whether any window of it went out without the labels.
   Then the API requests of the whole run, per minute.
2. Memory with 500 pods on the node: two agents side by side for 60 s, one with the
   Kubernetes client (500 pods, ~6 KiB of JSON each as real pods with managedFields), one
   without; RSS, peak RSS, and the agent's own accounting of the pod cache.
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
BUILD = os.path.join(ROOT, os.environ.get("PROWL_BUILD", "build"))
os.environ["PROWL_TEST_BUILD"] = BUILD

from containers import Cgroups, new_id, shape  # noqa: E402
from kube_apiserver import KubeApiServer, make_pod, set_container  # noqa: E402
from receiver import Receiver  # noqa: E402

SECS = int(os.environ.get("KUBE_BENCH_SECONDS", "600"))
PROWL = os.path.join(BUILD, "prowl")
WORKLOAD = os.path.join(BUILD, "workloads", "spin")
NODE = "bench-node"


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0]) / 1024
    return out


def agent(tmp, name, yaml_text):
    cfg = os.path.join(tmp, f"{name}.yaml")
    with open(cfg, "w") as f:
        f.write(yaml_text)
    port = free_port()
    log = open(os.path.join(tmp, f"{name}.log"), "w")
    p = subprocess.Popen([PROWL, "agent", "--config", cfg, "--state-dir", os.path.join(tmp, name),
                          "--metrics-address", f"127.0.0.1:{port}"], stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            metrics(port)
            return p, port
        except OSError:
            if p.poll() is not None:
                sys.exit(f"kube-bench: agent {name} died: {open(log.name).read()[-500:]}")
            time.sleep(0.1)
    sys.exit(f"kube-bench: agent {name} did not start")


def kube_yaml(api, extra=""):
    return (f"kubernetes:\n  api_url: {api.url}\n  token_file: {api.token_file}\n  ca_file: {api.ca_file}\n"
            f"  node_name: {NODE}\n" + extra)


def churn(tmp):
    """Part 1: pods coming and going; returns the Markdown lines."""
    d = tempfile.mkdtemp(dir=tmp)
    import pathlib
    api = KubeApiServer(pathlib.Path(d), node=NODE)
    rx = Receiver().start()
    cg = Cgroups(prefix="i9bench")
    # Only the benchmark's processes are exported, so that reading back stays cheap.
    only = (f"relabel_configs:\n  - source_labels: [__meta_process_cgroup]\n    regex: '/{cg.top}/.*'\n"
            "    action: keep\n")
    ag, port = agent(tmp, "churn", kube_yaml(api, only) + f"exporters:\n  pyroscope:\n    url: {rx.url}\n")
    pods = []  # dict: name, start, proc, uid, late
    t_end = time.time() + SECS
    i = 0
    try:
        while time.time() < t_end - 25:
            name = f"bench-{i:03d}"
            late = i % 2 == 1
            cid = new_id()
            pod = make_pod(name, "bench", NODE, containers={"app": None if late else cid, "sidecar": new_id()},
                           labels={"app.kubernetes.io/name": name})
            api.add_pod(pod)
            time.sleep(random.uniform(0.5, 2.0))
            start = time.time()
            p = cg.start(cg.make(shape("containerd-systemd", cid, pod["metadata"]["uid"])),
                         [WORKLOAD, "-t", "1", "-s", "45"])
            if late:
                time.sleep(0.5)
                api.add_pod(set_container(pod, "app", cid))
            pods.append({"name": name, "start": start, "proc": p, "uid": pod["metadata"]["uid"], "late": late})
            for old in pods:
                if not old.get("gone") and time.time() - old["start"] > 40:
                    cg.kill(old["proc"])
                    api.delete_pod(old["uid"])
                    old["gone"] = True
            i += 1
            time.sleep(max(0.0, 20 - (time.time() - start)))
        time.sleep(max(0.0, t_end - time.time()))
        m = metrics(port)
    finally:
        ag.terminate()
        ag.wait()
        cg.cleanup()
        rx.stop()
        api.down()
    lat, unlabelled = [], 0
    for p in pods:
        first = None
        for r in rx.requests:
            if r.path != "/ingest":
                continue
            key = r.arg("name")
            if key.startswith(p["name"] + "{") and f"pod={p['name']}" in key:
                first = r.time if first is None else min(first, r.time)
        if first is not None:
            lat.append(first - p["start"])
    # A window of a bench process without its pod labels would carry the executable's name.
    unlabelled = sum(1 for r in rx.requests if r.path == "/ingest" and r.arg("name").startswith("spin{"))
    lat.sort()
    reqs = api.requests
    lists = sum(1 for r in reqs if "watch" not in r["query"])
    watches = len(reqs) - lists
    minutes = SECS / 60
    return [
        f"#### 1. Pods coming and going ({SECS} s, 10 s windows, a pod every 20 s, {len(pods)} pods; "
        f"half of them with the container's status 0.5 s after its process started)",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| process start to its first labelled profile at Pyroscope: min / median / max | "
        f"{lat[0]:.2f} / {lat[len(lat) // 2]:.2f} / {lat[-1]:.2f} s (window 10 s) |" if lat else "| latency | none |",
        f"| pods whose first labelled profile came later than one window + 1 s | "
        f"{sum(1 for x in lat if x > 11)} of {len(lat)} |",
        f"| profiles of a bench process without its pod labels | {unlabelled} |",
        f"| API requests in {SECS} s: list / watch | {lists} / {watches} |",
        f"| API requests per minute | {len(reqs) / minutes:.2f} (watch events applied: "
        f"{m.get('prowl_kubernetes_watch_events_total', 0):.0f}) |",
        f"| discovery + relabeling per process (agent metrics) | "
        f"{m['prowl_discovery_seconds_total'] / max(1, m['prowl_discoveries_total']) * 1e6:.0f} us over "
        f"{m['prowl_discoveries_total']:.0f} processes |",
        "",
    ]


def memory(tmp):
    """Part 2: 500 pods; returns the Markdown lines."""
    import pathlib
    d = tempfile.mkdtemp(dir=tmp)
    api = KubeApiServer(pathlib.Path(d), node=NODE)
    for i in range(500):
        api.add_pod(make_pod(f"app-{i:03d}-7d9f8b6c5d-x2kq9", f"ns-{i % 40}", NODE,
                             containers={"app": new_id(), "istio-proxy": new_id()},
                             labels={"app.kubernetes.io/name": f"app-{i}", "app.kubernetes.io/version": "1.2.3",
                                     "pod-template-hash": "7d9f8b6c5d", "team": f"team-{i % 12}"},
                             bulk=3000))
    base = "exporters:\n  dir:\n    enabled: true\n"
    on, pon = agent(tmp, "k8s500", kube_yaml(api) + base)
    off, poff = agent(tmp, "nok8s", "kubernetes:\n  enabled: false\n" + base)
    try:
        time.sleep(60)
        mon, moff = metrics(pon), metrics(poff)
        son, soff = status(on.pid), status(off.pid)
    finally:
        for p in (on, off):
            p.terminate()
            p.wait()
        api.down()
    list_bytes = mon.get("prowl_kubernetes_received_bytes_total", 0)
    pods = mon.get('prowl_kubernetes_pods{state="live"}', 0)
    return [
        "#### 2. Memory with 500 pods on the node (two agents side by side, 60 s)",
        "",
        "| agent | pods known | JSON read (MiB) | RSS (MiB) | peak RSS (MiB) | prowl_label_bytes (KiB) |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| Kubernetes on | {pods:.0f} | {list_bytes / 1048576:.1f} | "
        f"{son['VmRSS']:.1f} | {son['VmHWM']:.1f} | {mon['prowl_label_bytes'] / 1024:.0f} |",
        f"| Kubernetes off | 0 | 0 | {soff['VmRSS']:.1f} | {soff['VmHWM']:.1f} | {moff['prowl_label_bytes'] / 1024:.0f} |",
        "",
    ]


def main():
    if os.geteuid() != 0:
        sys.exit("kube-bench: must run as root (the agent loads BPF programs)")
    for f in (PROWL, WORKLOAD):
        if not os.access(f, os.X_OK):
            sys.exit(f"kube-bench: {f} is missing: run 'make all workloads'")
    tmp = tempfile.mkdtemp(prefix="prowl-kube-bench.")
    try:
        print("kube-bench: 500 pods, 60 s", file=sys.stderr)
        mem = memory(tmp)
        print(f"kube-bench: pods coming and going, {SECS} s", file=sys.stderr)
        ch = churn(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\n".join(ch + mem))


if __name__ == "__main__":
    main()
