"""test_alerts.py: every alert of packaging/prometheus/prowl-alerts.yaml (the ones
docs/agent.md suggests), evaluated by a real Prometheus scraping real agents: silent on a
healthy agent, and true on an agent whose backend is down or that falls behind."""
import os
import re
import signal
import subprocess
import time

import pytest

from agentlib import Agent, free_port
from conftest import ROOT, start, stop, workload
from promlib import PROMETHEUS, PROMTOOL, Prometheus
from receiver import Receiver

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

RULES = os.path.join(ROOT, "packaging", "prometheus", "prowl-alerts.yaml")
SAN = "san" in os.environ.get("PROWL_TEST_BUILD", "")

pytestmark = pytest.mark.skipif(not PROMETHEUS or not PROMTOOL,
                                reason="Debian's prometheus package is not installed (packaging/install-deps.sh)")


def rules():
    return {r["alert"]: r for g in yaml.safe_load(open(RULES))["groups"] for r in g["rules"]}


def test_rules_file_is_valid_and_documented():
    res = subprocess.run([PROMTOOL, "check", "rules", RULES], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    doc = open(os.path.join(ROOT, "docs", "agent.md")).read().replace("\\|", "|")  # | escaped in tables
    for name, r in rules().items():
        assert f"`{name}`" in doc and f"`{r['expr']}`" in doc, f"docs/agent.md does not show {name}: {r['expr']}"


def scaled(expr):
    """expr with its ranges in seconds instead of minutes ([15m] -> [15s]): a test can't
    wait 15 minutes. Metrics, labels, joins and thresholds stay as they are."""
    return re.sub(r"\[(\d+)m\]", r"[\1s]", expr)


@pytest.mark.slow
@pytest.mark.long
def test_alerts_silent_when_healthy_and_fire_when_backend_down(tmp_path):
    """Three agents at once. 'healthy' delivers to a receiver and keeps files, one of which
    retention removes while Prometheus watches. 'down' sends to closed ports: Pyroscope
    retries forever, OTLP gives up after one retry. 'busy' samples busy CPUs at 999 Hz
    while 300 short-lived processes a second start (each sampled one is symbolized), and
    encodes one-second windows for four backends: about 10% of a CPU, twice the rule's
    5%, where the healthy agent at its default rate stays under 1%. It is stopped for 5 s,
    so its ring buffer (about 1 s of samples) overflows. Each rule is evaluated
    every second from 6 s after the first scrape to the end, 22 s after it."""
    rx = Receiver().start()
    dead = f"http://127.0.0.1:{free_port()}"
    kept = tmp_path / "kept"
    (kept / "old").mkdir(parents=True)
    # A file that max_age (1m) removes about 16 s from now, while Prometheus watches.
    old = kept / "old" / "20200101T000000.000Z-00000000.pb.gz"
    old.write_bytes(b"\x1f\x8b" + os.urandom(1000))
    t = time.time() - 44
    os.utime(old, (t, t))
    healthy = Agent(tmp_path, ["--interval", "1s", "--pyroscope-url", rx.url, "--dir", str(kept)],
                    env={"PROWL_DIR_MAX_AGE": "1m"}, name="healthy")
    down = Agent(tmp_path, ["--interval", "1s", "--pyroscope-url", dead, "--otlp-url", dead],
                 env={"PROWL_PYROSCOPE_API": "push", "PROWL_OTLP_MAX_RETRIES": "1"}, name="down")
    busy = Agent(tmp_path, ["--interval", "1s", "-F", "999", "--dir", str(tmp_path / "busy-dir"),
                            "--pyroscope-url", dead, "--otlp-url", dead, "--parca-url", dead], name="busy")
    agents = (healthy, down, busy)
    wl = start([workload("spin"), "-t", "2", "-s", "60"])
    churn = start([workload("churn"), "-r", "300", "-s", "60"])
    prom = None
    try:
        for a in agents:
            a.start()
        deadline = time.time() + 20
        while (down.metrics().get("prowl_export_queue_items", backend="pyroscope") or 0) < 1:
            assert time.time() < deadline, down.log()
            time.sleep(0.2)
        prom = Prometheus(tmp_path, [f"127.0.0.1:{a.metrics_port}" for a in agents], rule_files=[RULES]).start()
        s0 = prom.first_scrape()
        time.sleep(max(0, s0 + 1 - time.time()))
        busy.send(signal.SIGSTOP)
        time.sleep(5)
        busy.send(signal.SIGCONT)
        while old.exists():
            assert time.time() < deadline + 20, "retention did not remove the old file"
            time.sleep(0.2)
        time.sleep(max(0, s0 + 22.5 - time.time(), 3.5))
        span = (s0 + 6, time.time() - 0.5)
        got = {name: prom.true_at(scaled(r["expr"]), *span) for name, r in rules().items()}
        removed = prom.true_at("increase(prowl_export_dir_removed_total[15s]) > 0", *span)
        loaded = prom.api("rules")["groups"]
    finally:
        if prom:
            prom.stop()
        for a in agents:
            if a.alive():
                a.send(signal.SIGCONT)
            a.kill()
        stop(wl)
        stop(churn)
        rx.stop()
    inst = {a: f"127.0.0.1:{a.metrics_port}" for a in agents}
    assert all(x["health"] == "ok" for g in loaded for x in g["rules"]), loaded
    assert not old.exists() and inst[healthy] in removed, \
        "retention removed no file in the evaluated windows: ProwlProfilesLost's silence proves nothing"
    assert rx.requests, "the healthy agent delivered nothing"
    # The healthy agent: silent throughout, although its retention removed a file.
    for name, on in got.items():
        if name == "ProwlHighCPU" and SAN:
            continue  # sanitizers multiply the agent's CPU time
        assert inst[healthy] not in on, f"{name} fires on a healthy agent: {on[inst[healthy]]}"
    # The agent whose backends are down.
    assert {m["backend"] for m in got["ProwlExportStuck"].get(inst[down], [])} >= {"pyroscope"}, got
    assert {m["backend"] for m in got["ProwlProfilesLost"].get(inst[down], [])} == {"otlp"}, got
    assert inst[down] not in got["ProwlSamplesLost"], got
    # The agent that fell behind and costs more than it should.
    assert inst[busy] in got["ProwlSamplesLost"], got
    assert inst[busy] in got["ProwlHighCPU"], got
