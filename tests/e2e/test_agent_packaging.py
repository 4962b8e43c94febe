"""test_agent_packaging.py: the systemd unit and the Kubernetes DaemonSet of `prowl agent`:
the unit passes systemd-analyze verify, the agent speaks sd_notify (readiness, watchdog,
reload, stop) to a NOTIFY_SOCKET the test holds, it works with exactly the unit's
capabilities, and the example configurations pass --check."""
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from agentlib import Agent, private_cpusplit
from conftest import PROWL, ROOT, pprof_raw, start, stop

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

UNIT = os.path.join(ROOT, "packaging", "prowl.service")
EXAMPLE = os.path.join(ROOT, "packaging", "prowl.yaml")
K8S = os.path.join(ROOT, "packaging", "kubernetes")


def unit_settings():
    """[Service] etc. as {key: [values]} (systemd's syntax: later lines add or reset)."""
    out, section = {}, None
    for line in open(UNIT):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        m = re.fullmatch(r"\[(\w+)\]", line)
        if m:
            section = m.group(1)
            continue
        k, _, v = line.partition("=")
        out.setdefault((section, k.strip()), []).append(v.strip())
    return out


def unit_caps():
    caps = unit_settings()[("Service", "CapabilityBoundingSet")][-1].split()
    return [c.lower().replace("cap_", "") for c in caps]


def test_unit_settings():
    s = unit_settings()
    svc = lambda k: s.get(("Service", k), [None])[-1]
    assert svc("Type") == "notify"
    assert re.fullmatch(r"\d+s", svc("WatchdogSec") or ""), svc("WatchdogSec")
    assert svc("ExecReload") == "/bin/kill -HUP $MAINPID"
    assert svc("ExecStart").startswith("/usr/local/bin/prowl agent --config /etc/prowl/agent.yaml")
    assert svc("StateDirectory") == "prowl"
    assert svc("Restart") == "on-failure"
    caps = set(unit_caps())
    assert caps == {"bpf", "perfmon", "sys_ptrace", "syslog", "dac_read_search"}, caps
    assert svc("LimitMEMLOCK") == "infinity"  # kernels before 5.11 charge BPF maps to it
    assert "sys_admin" not in caps, "CAP_SYS_ADMIN is not needed (see the unit's comments)"
    # Sandboxing that would break the profiler must stay off.
    for k in ("ProtectKernelTunables", "ProtectKernelLogs", "PrivateUsers", "PrivatePIDs", "SystemCallFilter"):
        assert svc(k) in (None, "no", "false"), f"{k}={svc(k)} breaks BPF or symbolization"
    assert svc("ProtectProc") in (None, "default")
    # The stop timeout leaves room for the flush (shutdown_timeout) and the spool.
    assert int(svc("TimeoutStopSec").rstrip("s")) >= default_shutdown_timeout() + 10
    assert ("Install", "WantedBy") in s


@pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")
def test_unit_passes_systemd_analyze_verify(tmp_path):
    # ExecStart must name an existing binary: point it at the one under test.
    text = open(UNIT).read().replace("/usr/local/bin/prowl", PROWL)
    unit = tmp_path / "prowl.service"
    unit.write_text(text)
    res = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert "prowl.service" not in res.stderr, res.stderr   # no warnings about the unit


def _systemd_is_pid1():
    try:
        return os.readlink("/proc/1/exe").endswith("/systemd") or open("/proc/1/comm").read().strip() == "systemd"
    except OSError:
        return False


@pytest.mark.skipif(not _systemd_is_pid1(), reason="systemd is not PID 1 here (no systemd-run); "
                    "test_sd_notify_protocol covers the agent's side of the protocol")
def test_runs_as_transient_systemd_unit(tmp_path):
    name = f"prowl-test-{os.getpid()}"
    props = [p for k, vs in unit_settings().items() if k[0] == "Service"
             and k[1] not in ("ExecStart", "ExecReload", "EnvironmentFile") for p in (f"{k[1]}={v}" for v in vs)]
    args = ["systemd-run", "--wait", "--unit", name, "--collect"]
    for p in props:
        args += ["-p", p]
    args += [PROWL, "agent", "--state-dir", str(tmp_path), "--interval", "1s", "--no-metrics"]
    p = subprocess.Popen(args)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            st = subprocess.run(["systemctl", "is-active", name], capture_output=True, text=True).stdout.strip()
            if st == "active":
                break
            time.sleep(0.2)
        assert st == "active", st
        time.sleep(3)
        assert list(tmp_path.glob("profiles/*/*.pb.gz"))
    finally:
        subprocess.run(["systemctl", "stop", name])
        p.wait(timeout=30)


def test_sd_notify_protocol(tmp_path):
    """What systemd would see: READY=1 once sampling runs, WATCHDOG=1 at least every
    WatchdogSec/2, RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 on SIGTERM."""
    path = str(tmp_path / "notify.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(0.2)
    msgs = []
    agent = Agent(tmp_path, ["--interval", "1s"], env={"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "1000000"})

    def drain(seconds):
        end = time.time() + seconds
        while time.time() < end:
            try:
                msgs.append((time.time(), sock.recv(4096).decode()))
            except socket.timeout:
                pass

    try:
        agent.start()
        drain(2.5)
        agent.send(signal.SIGHUP)
        drain(1.5)
        agent.send(signal.SIGTERM)
        drain(1.0)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        sock.close()
    kinds = [m for _, m in msgs]
    assert kinds and kinds[0].startswith("READY=1"), kinds
    dog = [t for t, m in msgs if "WATCHDOG=1" in m]
    assert len(dog) >= 4, f"watchdog pings: {len(dog)}"
    gaps = [b - a for a, b in zip(dog, dog[1:])]
    assert max(gaps) <= 0.75, f"watchdog gap {max(gaps):.2f}s > WatchdogSec/2 (+margin)"
    i = next(i for i, m in enumerate(kinds) if "RELOADING=1" in m)
    assert any("READY=1" in m for m in kinds[i + 1:]), kinds
    assert any("STOPPING=1" in m for m in kinds), kinds


def test_agent_works_with_only_the_units_capabilities(tmp_path):
    """setpriv limits the agent to the unit's CapabilityBoundingSet: it must still load
    BPF, sample and symbolize another process."""
    if not shutil.which("setpriv"):
        pytest.skip("setpriv (util-linux) not installed")
    bounding = "-all," + ",".join("+" + c for c in unit_caps())
    exe, svc = private_cpusplit(tmp_path)
    wl = start([exe, "30"])
    agent = Agent(tmp_path, ["--interval", "1s", "-F", "99"],
                  wrapper=["setpriv", "--bounding-set", bounding, "--inh-caps=-all"])
    try:
        agent.start()
        time.sleep(3.5)
        with open(f"/proc/{agent.pid}/status") as f:
            capeff = int(re.search(r"CapEff:\s*([0-9a-f]+)", f.read()).group(1), 16)
        assert not capeff & (1 << 21), "still has CAP_SYS_ADMIN"
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
    files = sorted((agent.state / "profiles" / svc).glob("*.pb.gz"))
    assert files, agent.log()
    raws = [pprof_raw(str(f)) for f in files]
    tot = sum(r.total() for r in raws)
    hot = sum(r.share("hot_a") * r.total() for r in raws)
    assert tot > 100 and hot / tot > 0.6, (hot, tot)


# --------------------------------------------------------------------------- configurations

def check_config(path, env=None):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
    e.update(env or {})
    return subprocess.run([PROWL, "agent", "--config", path, "--check"], capture_output=True, text=True, env=e,
                          timeout=20)


def test_example_config_passes_check(tmp_path):
    p = tmp_path / "agent.yaml"
    shutil.copy(EXAMPLE, p)
    p.chmod(0o600)
    res = check_config(str(p))
    assert res.returncode == 0, res.stderr
    assert res.stderr == "", res.stderr


def default_shutdown_timeout():
    res = subprocess.run([PROWL, "agent", "--check"], capture_output=True, text=True, timeout=30,
                         env={k: v for k, v in os.environ.items() if not k.startswith("PROWL_")})
    assert res.returncode == 0, res.stderr
    m = re.fullmatch(r"(\d+)s", str(yaml.safe_load(res.stdout)["shutdown_timeout"]))
    assert m, res.stdout
    return int(m.group(1))


def vols_bpf(spec, mounts):
    """The host path the container's /sys/fs/bpf comes from, or None."""
    m = mounts.get("/sys/fs/bpf")
    vol = next((v for v in spec["volumes"] if m and v["name"] == m["name"]), {})
    return vol.get("hostPath", {}).get("path")


def test_daemonset_and_configmap(tmp_path):
    docs = [d for d in yaml.safe_load_all(open(os.path.join(K8S, "daemonset.yaml"))) if d]
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    cms = [d for d in yaml.safe_load_all(open(os.path.join(K8S, "configmap.yaml"))) if d]
    cm = next(d for d in cms if d["kind"] == "ConfigMap")
    assert ds["apiVersion"] == "apps/v1"
    spec = ds["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    assert not spec.get("hostNetwork")
    assert ds["spec"]["selector"]["matchLabels"].items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    (c,) = spec["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["PROWL_HOSTNAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    sc = c["securityContext"]
    caps = set(sc.get("capabilities", {}).get("add", []))
    assert sc.get("privileged") or {"BPF", "PERFMON", "SYS_PTRACE"} <= caps, sc
    assert {c.upper() for c in unit_caps()} == caps, "the DaemonSet and the unit grant the same capabilities"
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    assert "/sys/kernel/debug" not in mounts
    # The node's bpffs: the pod that replaces this one takes the programs it pinned (bpf_pin).
    assert vols_bpf(spec, mounts) == "/sys/fs/bpf"
    vols = {v["name"]: v for v in spec["volumes"]}
    # The spool in the state directory outlives the pod; the stop has time to use it.
    assert vols[mounts[env["PROWL_STATE_DIR"]["value"]]["name"]].get("hostPath"), "state_dir dies with the pod"
    assert spec["terminationGracePeriodSeconds"] >= default_shutdown_timeout() + 10
    cfg_mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/etc/prowl")
    assert vols[cfg_mount["name"]]["configMap"]["name"] == cm["metadata"]["name"]
    assert cm["metadata"]["namespace"] == ds["metadata"]["namespace"]
    assert c["args"][:3] == ["agent", "--config", "/etc/prowl/agent.yaml"]
    req, lim = c["resources"]["requests"], c["resources"]["limits"]
    assert req["cpu"] == "100m" and re.fullmatch(r"\d+Mi", req["memory"]) and int(req["memory"][:-2]) >= 64
    assert int(lim["memory"][:-2]) >= int(req["memory"][:-2])
    port = c["ports"][0]["containerPort"]
    assert env["PROWL_METRICS_ADDRESS"]["value"] == f":{port}"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # The ConfigMap's agent.yaml is a valid configuration, with the pod's environment.
    p = tmp_path / "agent.yaml"
    p.write_text(cm["data"]["agent.yaml"])
    res = check_config(str(p), env={"PROWL_HOSTNAME": "node-1", "PROWL_METRICS_ADDRESS": f":{port}",
                                    "PROWL_STATE_DIR": env["PROWL_STATE_DIR"]["value"]})
    assert res.returncode == 0, res.stderr
    eff = yaml.safe_load(res.stdout)
    assert eff["hostname"] == "node-1" and eff["metrics"]["address"] == f":{port}"
    # Kubernetes metadata: read-only pods of this node, the token mounted, the node's name.
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    sa = next(d for d in docs if d["kind"] == "ServiceAccount")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                  "name": role["metadata"]["name"]}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                    "namespace": ds["metadata"]["namespace"]}]
    assert spec["serviceAccountName"] == sa["metadata"]["name"] and spec.get("automountServiceAccountToken", True)
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert not sc.get("privileged"), "least-privilege capabilities, not privileged"
    # In the cluster, the same file turns the Kubernetes client on and holds relabel rules.
    res = check_config(str(p), env={"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443",
                                    "NODE_NAME": "node-1", "PROWL_STATE_DIR": env["PROWL_STATE_DIR"]["value"]})
    assert res.returncode == 0, res.stderr
    eff = yaml.safe_load(res.stdout)
    assert eff["kubernetes"]["api_url"] == "https://10.96.0.1:443" and eff["kubernetes"]["node_name"] == "node-1"
    assert eff["relabel_configs"], "the ConfigMap shows a relabel example"
