"""test_agent_faults.py: `prowl agent` under attack and under failing backends: idle
connections to the metrics port, hanging backends at SIGTERM, a restart while a backend
is down (the spool), a hostile config file on SIGHUP, and a huge error body."""
import json
import os
import re
import signal
import socket
import stat
import time

import pytest

from agentlib import NS, Agent, IngestProfile, PprofMeta, check_chain, free_port, private_cpusplit
from conftest import start, stop
from receiver import Receiver


def cpu_seconds(pid):
    """utime + stime of a process, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def json_lines(log):
    lines = [l for l in log.splitlines() if l.strip()]
    for l in lines:
        try:
            rec = json.loads(l)
        except ValueError:
            raise AssertionError(f"a line prowl wrote is not JSON: {l!r}")
        assert set(rec) >= {"ts", "level", "msg"}, rec
    return [json.loads(l) for l in lines]


def test_idle_connections_do_not_starve_metrics(tmp_path):
    """64 connections that send nothing: /healthz still answers at once, the server
    closes them after its timeout, and libmicrohttpd's own messages (here: a flood past
    the connection limit) are JSON lines like all the others, rate-limited."""
    agent = Agent(tmp_path, ["--interval", "2s", "-F", "19", "--log-format", "json"])
    idle, flood = [], []
    try:
        agent.start()
        t_open = time.monotonic()
        for _ in range(64):
            idle.append(socket.create_connection(("127.0.0.1", agent.metrics_port), timeout=5))
        time.sleep(0.3)
        t0 = time.monotonic()
        status, body, _ = agent.get("/healthz", timeout=1)
        assert status == 200 and time.monotonic() - t0 < 1.0, (status, body)
        assert agent.metrics().get("prowl_samples_total") is not None
        # Past the total limit (256): the surplus is refused, and says so in the log.
        for _ in range(260):
            try:
                flood.append(socket.create_connection(("127.0.0.1", agent.metrics_port), timeout=2))
            except OSError:
                break
        time.sleep(0.5)
        for s in flood:
            s.close()
        # Idle connections are closed by the server after its timeout (5 s).
        for s in idle:
            s.settimeout(max(0.1, t_open + 9 - time.monotonic()))
            assert s.recv(1) == b"", "an idle connection was kept open"
        assert time.monotonic() - t_open < 9
        t0 = time.monotonic()
        status, _, _ = agent.get("/healthz", timeout=1)
        assert status == 200 and time.monotonic() - t0 < 1.0
        assert agent.stop() == 0, agent.log()
    finally:
        for s in idle + flood:
            s.close()
        agent.kill()
    recs = json_lines(agent.log())
    mhd = [r for r in recs if r["msg"].startswith("metrics endpoint: ")]
    assert mhd, "no message from libmicrohttpd about the refused connections"
    assert len(mhd) <= 11, f"{len(mhd)} lines: not rate-limited"
    assert all(r["level"] == "warn" for r in mhd)


def healthz_from(source, port, timeout=2):
    """The status line of GET /healthz sent from address source, or the error that ended
    the attempt (a connection the server refuses is reset or closed unanswered)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(source, 0)) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            data = b""
            while not data.endswith(b"\n") and len(data) < 4096:
                chunk = c.recv(4096)
                if not chunk:
                    break
                data += chunk
            return data.split(b"\r\n", 1)[0].decode() or "closed unanswered"
    except OSError as e:
        return type(e).__name__


def test_same_address_client_can_keep_the_probe_out(tmp_path):
    """What docs/agent.md says of idle clients: 128 of them from one address (the cap)
    keep the next request from that address out, not one from another address; one that
    reopens each connection the agent closes (after 5 s) keeps that address out still."""
    agent = Agent(tmp_path, ["--interval", "2s", "-F", "19"])
    held = []
    try:
        agent.start()
        port = agent.metrics_port
        assert healthz_from("127.0.0.1", port) == "HTTP/1.1 200 OK"
        t_open = time.monotonic()
        held = [socket.create_connection(("127.0.0.1", port), timeout=5, source_address=("127.0.0.1", 0))
                for _ in range(128)]
        time.sleep(0.3)
        assert healthz_from("127.0.0.1", port) != "HTTP/1.1 200 OK"
        assert healthz_from("127.0.0.2", port) == "HTTP/1.1 200 OK"
        # The agent closes them after 5 s; the client opens a new one for each at once.
        # A reopened connection may itself be closed at once, while the agent still counts
        # the one it has just closed against the address: the slot is reopened again and
        # counted once.
        reopened = set()
        while time.monotonic() < t_open + 9 and len(reopened) < 128:
            for i, s in enumerate(held):
                s.setblocking(False)
                try:
                    closed = s.recv(1) == b""
                except BlockingIOError:
                    closed = False
                if closed:
                    s.close()
                    held[i] = socket.create_connection(("127.0.0.1", port), timeout=5,
                                                       source_address=("127.0.0.1", 0))
                    reopened.add(i)
            time.sleep(0.05)
        assert len(reopened) == 128, f"the agent closed {len(reopened)} of 128 idle connections in 9 s"
        time.sleep(0.3)
        assert healthz_from("127.0.0.1", port) != "HTTP/1.1 200 OK"
        assert healthz_from("127.0.0.2", port) == "HTTP/1.1 200 OK"
        for s in held:
            s.close()
        held = []
        t_closed, answers = time.monotonic(), []
        while time.monotonic() < t_closed + 5 and "HTTP/1.1 200 OK" not in answers:
            answers.append(healthz_from("127.0.0.1", port))
            time.sleep(0.1)
        assert answers[-1] == "HTTP/1.1 200 OK", f"{time.monotonic() - t_closed:.1f}s after the client stopped: {answers}"
        assert agent.stop() == 0, agent.log()
    finally:
        for s in held:
            s.close()
        agent.kill()


def test_sigterm_with_hanging_backends_meets_one_deadline(tmp_path):
    """Three backends accept and never answer. The stop takes shutdown_timeout (2 s
    here) however many exporters there are, not one flush per exporter after the
    other; what they held goes to the spool, 0600 in a 0700 directory."""
    rxs = [Receiver().start() for _ in range(3)]
    for rx in rxs:
        rx.set_delay(600)
    exe, _ = private_cpusplit(tmp_path)
    wl = start([exe, "30"])
    agent = Agent(tmp_path, ["--interval", "1s", "-F", "49", "--pyroscope-url", rxs[0].url,
                             "--otlp-url", rxs[1].url, "--parca-url", rxs[2].url],
                  env={"PROWL_SHUTDOWN_TIMEOUT": "2s"})
    try:
        agent.start()
        for rx in rxs:
            rx.wait_for(1, timeout=10)
        assert agent.stop(timeout=30) == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
        for rx in rxs:
            rx.stop()
    assert 1.8 <= agent.stop_seconds <= 2 + 2, f"stop took {agent.stop_seconds:.1f}s with shutdown_timeout 2s"
    log = agent.log()
    for kind in ("pyroscope", "otlp", "parca"):
        assert re.search(rf"{kind}: \d+ undelivered profiles \(\d+ bytes\) kept in the spool", log), log
    spool = agent.state / "spool"
    assert stat.S_IMODE(spool.lstat().st_mode) == 0o700
    files = list(spool.iterdir())
    assert {f.name.split("-")[1] for f in files} == {"pyroscope", "otlp", "parca"}, files
    assert all(stat.S_IMODE(f.lstat().st_mode) == 0o600 for f in files)


def test_restart_during_outage_delivers_every_window_once(tmp_path):
    """The backend is down; SIGTERM; the backend comes back; the agent starts again.
    Every window of the first run reaches the backend exactly once, before the second
    run's, and /metrics agrees with what the backend got. (Pyroscope's ingest API: one
    request per series and window, so each request says which window it carries.)"""
    port = free_port()
    exe, svc = private_cpusplit(tmp_path)
    wl = start([exe, "60"])
    env = {"PROWL_TEST_BACKOFF_MS": "50", "PROWL_SHUTDOWN_TIMEOUT": "1s"}
    args = ["--pyroscope-url", f"http://127.0.0.1:{port}", "--interval", "1s", "-F", "49"]
    first = Agent(tmp_path, args, env=env, name="agent")
    second = None
    rx = Receiver(port=port)
    try:
        first.start()
        t_start1 = time.time()
        time.sleep(3.0)
        t_stop1 = time.time()
        assert first.stop() == 0, first.log()
        t_stopped1 = time.time()
        m = re.search(r"pyroscope: (\d+) undelivered profiles \(\d+ bytes\) kept in the spool", first.log())
        assert m, first.log()
        spooled = int(m.group(1))

        rx.start()
        time.sleep(1.1)  # so that windows of the two runs start in different seconds
        t_start2 = time.time()
        second = Agent(tmp_path, args, env=env, name="agent")  # the same state directory
        second.start()
        rx.wait_for(spooled + 2, timeout=20)
        deadline = time.time() + 20
        while True:  # /metrics is refreshed once a second
            mt = second.metrics()
            if mt.get("prowl_export_queue_items", backend="pyroscope") == 0 and \
                    mt.export("pyroscope", "sent") == len(rx.requests):
                break
            assert time.time() < deadline, f"/metrics never agreed with the backend:\n{mt.text}"
            time.sleep(0.3)
        n_received = len(rx.requests)
        assert second.stop() == 0, second.log()
    finally:
        first.kill()
        if second:
            second.kill()
        stop(wl)
        rx.stop()
    assert mt.get("prowl_spool_loaded_total", backend="pyroscope") == spooled
    assert mt.export("pyroscope", "sent") == n_received
    assert mt.export("pyroscope", "dropped") == 0 and mt.export("pyroscope", "failed") == 0
    assert mt.get("prowl_spool_dropped_total", reason="damaged") == 0
    assert all(r.status == 200 for r in rx.requests)

    # Nothing twice: one request per series and window.
    keys = [(r.arg("name"), r.arg("from"), r.arg("until")) for r in rx.requests]
    assert len(keys) == len(set(keys)), "a window was delivered twice"
    # The first run's requests came first, all of them, oldest window first.
    first_run = [r for r in rx.requests if int(r.arg("from")) < int(t_start2)]
    assert len(first_run) == spooled and rx.requests[:spooled] == first_run, (len(first_run), spooled)
    froms = [int(r.arg("from")) for r in first_run]
    assert froms == sorted(froms), "spooled windows were not sent oldest first"
    # The workload's windows of the first run: every one, contiguous, start to stop.
    mine = sorted((IngestProfile(r) for r in first_run if r.arg("name").startswith(svc + "{")),
                  key=lambda p: p.meta.time_ns)
    run1 = [(p.meta.time_ns, p.meta.end_ns) for p in mine]
    assert len(run1) >= 3, run1
    check_chain(run1, 1, "windows of the first run")
    assert abs(run1[0][0] / NS - t_start1) < 1.0, "the first window of the first run is missing"
    assert t_stop1 - 0.05 <= run1[-1][1] / NS <= t_stopped1, "the last window of the first run is missing"
    assert not list((second.state / "spool").iterdir()), "delivered profiles left in the spool"


def steady(agent, timeout=60):
    """/metrics once the agent keeps up: samples come in and none were lost over the
    last second (a sanitizer build spends its first seconds symbolizing the host)."""
    deadline = time.time() + timeout
    prev = agent.metrics()
    while True:
        time.sleep(1.2)  # /metrics is refreshed once a second
        m = agent.metrics()
        if m.get("prowl_samples_total") > prev.get("prowl_samples_total") > 0 and \
                m.get("prowl_lost_samples_total") == prev.get("prowl_lost_samples_total"):
            return m
        assert time.time() < deadline, f"the agent never kept up:\n{m.text}"
        prev = m


@pytest.mark.sanitizer_pass
def test_sighup_with_deep_yaml_loses_nothing(tmp_path):
    """A reload with an 80 KB file nested 40,000 levels deep is refused without
    holding up sampling: no sample lost, the window chain unbroken, the old config kept."""
    cfg = tmp_path / "agent.yaml"
    cfg.write_text("frequency: 499\n")
    exe, svc = private_cpusplit(tmp_path)
    wl = start([exe, "30"])
    prof = tmp_path / "profiles"
    agent = Agent(tmp_path, ["--config", str(cfg), "--dir", str(prof), "--interval", "1s"])
    try:
        agent.start()
        m0 = steady(agent)
        cfg.write_text("[" * 40000 + "]" * 40000 + "\n")
        agent.send(signal.SIGHUP)
        agent.wait_log("reload failed")
        time.sleep(1.5)
        m = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
    assert m.get("prowl_config_reloads_total", result="error") == 1
    assert m.get("prowl_config_reloads_total", result="ok") == 0
    # None lost while the file was refused (the count before, when a sanitizer build
    # starts up slowly, is not this test's business).
    assert m.get("prowl_lost_samples_total") == m0.get("prowl_lost_samples_total"), \
        (m0.get("prowl_lost_samples_total"), m.get("prowl_lost_samples_total"))
    assert m.get("prowl_sampling_frequency_hertz") == 499, "the old configuration was not kept"
    assert re.search(r"agent\.yaml:1: nested more than 64 levels deep", agent.log())
    metas = sorted((PprofMeta(f.read_bytes()) for f in (prof / svc).glob("*.pb.gz")), key=lambda x: x.time_ns)
    assert len(metas) >= 3
    check_chain([(x.time_ns, x.end_ns) for x in metas], 1, "windows around the refused reload")
    assert all(x.period == NS // 499 for x in metas), "a window was sampled with other settings"


def test_huge_error_body_is_not_read(tmp_path):
    """A backend answers 400 with a 200 MB body: the agent reads at most 64 KiB of it,
    logs the first 256 bytes escaped, and each such answer costs it well under 1
    CPU-second."""
    body = b"bad request:\x01\"quoted\" \\ " + b"x" * (200 << 20)
    rx = Receiver().start()
    rx.set_status(400, body=body)
    exe, _ = private_cpusplit(tmp_path)
    wl = start([exe, "30"])
    agent = Agent(tmp_path, ["--pyroscope-url", rx.url, "--interval", "1s", "-F", "19"])
    try:
        agent.start()
        rx.wait_for(1, timeout=10)
        time.sleep(0.5)
        c0, n0 = cpu_seconds(agent.pid), len(rx.requests)
        time.sleep(2.0)
        c1, n1 = cpu_seconds(agent.pid), len(rx.requests)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
        rx.stop()
    assert n1 - n0 >= 2, "too few rejected requests to measure"
    assert (c1 - c0) / (n1 - n0) < 1.0 and c1 - c0 < 1.0, f"{c1 - c0:.2f} CPU-s for {n1 - n0} answers"
    sent = [r.answer_sent for r in rx.requests[:-1]]
    # 64 KiB read, plus what the loopback socket buffers took before the agent hung up.
    assert max(sent) < 32 << 20, f"the agent read {max(sent)} bytes of a 200 MB answer"
    lines = [l for l in agent.log().splitlines() if "rejected with HTTP 400" in l]
    assert lines
    m = re.search(r'rejected with HTTP 400: (.*)"$', lines[0])
    assert m, lines[0]
    text = m.group(1).replace('\\"', '"').replace("\\\\", "\\")
    assert text.startswith(r'bad request:\x01"quoted" \\ xxx') and text.endswith("x..."), text
    assert 256 <= len(text) < 300, len(text)
