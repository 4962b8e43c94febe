"""agentlib.py: helpers for the `prowl agent` end-to-end tests: run the real agent
binary in the background, scrape its /metrics, follow a workload's CPU time, and read
the profiles the loopback receivers recorded (with protoc and Google's pprof)."""
import base64
import gzip
import json
import math
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import otlp_check
from conftest import PROWL, ROOT, pprof_raw, watch_stderr
from receiver import Receiver

PROTO_DIR = os.path.join(ROOT, "proto")
NS = 1_000_000_000


def free_port():
    """A loopback TCP port nobody listens on (for metrics and 'down' backends)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- the agent

class Agent:
    """`prowl agent` in the background, stderr in a file, metrics on a free loopback port."""

    def __init__(self, tmp_path, args=(), env=None, name="agent", wrapper=()):
        self.wrapper = list(wrapper)  # e.g. ["setpriv", ...]: runs wrapper + [prowl, args]
        self.dir = tmp_path
        self.state = tmp_path / f"{name}-state"
        self.log_path = tmp_path / f"{name}.log"
        self.metrics_port = free_port()
        self.args = ["agent", "--state-dir", str(self.state),
                     "--metrics-address", f"127.0.0.1:{self.metrics_port}", "--log-format", "logfmt"] + list(args)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_") or k.startswith("PROWL_TEST_")}
        self.env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
        self.env.update(env or {})
        self.p = None
        self.started_at = None
        self.rc = None
        self.stop_seconds = None

    def start(self, timeout=20):
        self._log = open(self.log_path, "w")
        watch_stderr(self.log_path)
        self.p = subprocess.Popen(self.wrapper + [PROWL] + self.args, stdout=subprocess.DEVNULL, stderr=self._log, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if "agent started" in self.log():
                self.started_at = time.time()
                return self
            if self.p.poll() is not None:
                raise AssertionError(f"agent exited with {self.p.returncode} before starting:\n{self.log()}")
            time.sleep(0.02)
        raise AssertionError(f"agent did not start within {timeout}s:\n{self.log()}")

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_lines(self, level=None):
        lines = [l for l in self.log().splitlines() if l.strip()]
        if level:
            lines = [l for l in lines if f"level={level} " in l]
        return lines

    def wait_log(self, pattern, timeout=15):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.log()):
                return
            assert self.alive(), f"agent died:\n{self.log()}"
            time.sleep(0.05)
        raise AssertionError(f"no log line matching {pattern!r} within {timeout}s:\n{self.log()}")

    def send(self, sig):
        self.p.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Signals the agent and waits; returns the exit code (kills it after timeout)."""
        if self.p is None:
            return None
        if self.p.poll() is None:
            t0 = time.time()
            self.p.send_signal(sig)
            try:
                self.rc = self.p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
                raise AssertionError(f"agent still running {timeout}s after {sig!r}:\n{self.log()}")
            self.stop_seconds = time.time() - t0
        else:
            self.rc = self.p.returncode
        self._log.close()
        return self.rc

    def kill(self):
        if self.p is not None and self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()

    # -- the HTTP endpoints --
    def get(self, path, timeout=5):
        """(status, body text) of GET path on the metrics address."""
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                return r.status, r.read().decode(), r.headers.get("Content-Type", "")
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(), e.headers.get("Content-Type", "")

    def metrics(self):
        status, text, _ = self.get("/metrics")
        assert status == 200, (status, text)
        return Metrics(text)

    def rss_kb(self):
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS")


_METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Metrics:
    """Prometheus text exposition, parsed strictly: every line is a comment (# HELP /
    # TYPE) or `name{labels} value`; anything else fails the test."""

    def __init__(self, text):
        self.text = text
        self.samples = {}   # (name, frozenset(labels)) -> float
        self.types = {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line:
                continue
            if line.startswith("#"):
                m = re.match(r"^# (HELP|TYPE) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.+)$", line)
                assert m, f"/metrics line {n}: bad comment {line!r}"
                if m.group(1) == "TYPE":
                    assert m.group(3) in ("counter", "gauge", "histogram", "summary", "untyped"), line
                    self.types[m.group(2)] = m.group(3)
                continue
            m = _METRIC_LINE.match(line)
            assert m, f"/metrics line {n} is not `name{{labels}} value`: {line!r}"
            labels = {}
            if m.group(3):
                rest = m.group(3)
                pairs = _LABEL.findall(rest)
                rebuilt = ",".join(f'{k}="{v}"' for k, v in pairs)
                assert rebuilt == rest.rstrip(","), f"/metrics line {n}: bad labels {rest!r}"
                labels = dict(pairs)
            value = float(m.group(4))  # raises on garbage
            key = (m.group(1), frozenset(labels.items()))
            assert key not in self.samples, f"/metrics line {n}: duplicate series {line!r}"
            self.samples[key] = value

    def names(self):
        return {k[0] for k in self.samples}

    def get(self, name, **labels):
        """The value of the one series of name with exactly these labels (None if absent)."""
        return self.samples.get((name, frozenset(labels.items())))

    def sum(self, name, **labels):
        return sum(v for (n, ls), v in self.samples.items()
                   if n == name and all((k, v2) in ls for k, v2 in labels.items()))

    def export(self, backend, outcome):
        v = self.get("prowl_exports_total", backend=backend, outcome=outcome)
        assert v is not None, f"no prowl_exports_total{{backend={backend},outcome={outcome}}}:\n{self.text}"
        return int(v)


# --------------------------------------------------------------------------- workloads

class CpuClock:
    """Follows the on-CPU time of one single-threaded process (/proc/PID/schedstat, ns)
    every 10 ms, so a test can ask how much CPU it used between two wall-clock times."""

    def __init__(self, pid):
        self.pid = pid
        self.points = []  # (wall seconds, cpu ns)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _read(self):
        with open(f"/proc/{self.pid}/schedstat") as f:
            return int(f.read().split()[0])

    def _run(self):
        while not self._stop.is_set():
            try:
                self.points.append((time.time(), self._read()))
            except (OSError, ValueError):
                return
            time.sleep(0.01)

    def stop(self):
        """Stops following; the last point is read now, so a window that ended before the
        call lies inside the followed span whatever the polling thread's phase was."""
        self._stop.set()
        self._t.join()
        try:
            self.points.append((time.time(), self._read()))
        except (OSError, ValueError):
            pass

    def at(self, wall):
        """CPU ns at wall time, interpolated."""
        pts = self.points
        assert pts and pts[0][0] <= wall <= pts[-1][0], \
            f"{wall} outside the followed span {pts[0][0] if pts else None}..{pts[-1][0] if pts else None}"
        lo, hi = 0, len(pts) - 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if pts[mid][0] <= wall:
                lo = mid
            else:
                hi = mid
        (t0, c0), (t1, c1) = pts[lo], pts[hi]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (wall - t0) / (t1 - t0)

    def seconds(self, start_ns, end_ns):
        return (self.at(end_ns / NS) - self.at(start_ns / NS)) / NS


# --------------------------------------------------------------------------- profiles

def agent_beside(tmp_path, cmd, seconds, freq=99, cwd=None, extra=()):
    """Runs cmd for `seconds` beside an agent writing 1 s windows to tmp_path/prof (extra:
    more agent arguments); stops both. Returns (the agent's last metrics, the output
    directory, cmd's pid)."""
    out = tmp_path / "prof"
    agent = Agent(tmp_path, ["--dir", str(out), "--interval", "1s", "-F", str(freq), *extra])
    p = None
    try:
        agent.start()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd)
        time.sleep(seconds)
        m = agent.metrics()
        assert agent.alive(), agent.log()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        if p:
            p.kill()
            p.wait()
    return m, out, p.pid


def protoc_decode(message, proto, data):
    res = subprocess.run(["protoc", f"--decode={message}", f"--proto_path={PROTO_DIR}",
                          os.path.join(PROTO_DIR, proto)], input=data, capture_output=True, timeout=60)
    assert res.returncode == 0, f"protoc --decode={message} failed: {res.stderr.decode()}"
    return res.stdout.decode("utf-8", errors="replace")


def ungzip(data):
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


class PprofMeta:
    """time_nanos, duration_nanos, sample count and period of a pprof, decoded by protoc."""

    def __init__(self, data):
        text = protoc_decode("perftools.profiles.Profile", "profile.proto", ungzip(data))
        top = {}
        for line in text.splitlines():
            m = re.match(r"^(\w+): (-?\d+)$", line)
            if m:
                top[m.group(1)] = int(m.group(2))
        self.time_ns = top.get("time_nanos", 0)
        self.duration_ns = top.get("duration_nanos", 0)
        self.period = top.get("period", 0)
        # the first value of every sample (samples/count)
        self.samples = 0
        in_sample, first = False, False
        for line in text.splitlines():
            if line == "sample {":
                in_sample, first = True, True
            elif line == "}":
                in_sample = False
            elif in_sample and first and line.startswith("  value: "):
                self.samples += int(line.split()[1])
                first = False
        self.end_ns = self.time_ns + self.duration_ns


def save(tmp_path, name, data):
    p = tmp_path / name
    p.write_bytes(data)
    return str(p)


def raw_of(tmp_path, name, data):
    """Google pprof's reading of pprof bytes."""
    return pprof_raw(save(tmp_path, name, data))


def parse_ingest_name(name):
    """'app{k=v,...}' -> (app, {k: v})."""
    m = re.fullmatch(r"([^{}]+)\{([^{}]*)\}", name)
    assert m, f"ingest name {name!r} is not APP{{k=v,...}}"
    # what Pyroscope accepts as an application name (else HTTP 400)
    assert re.fullmatch(r"[A-Za-z0-9_./-]+", m.group(1)), f"application name {m.group(1)!r} in {name!r}"
    labels = {}
    if m.group(2):
        for kv in m.group(2).split(","):
            k, _, v = kv.partition("=")
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k) and v, f"bad label {kv!r} in {name!r}"
            assert k not in labels, f"label {k} twice in {name!r}"
            labels[k] = v
    return m.group(1), labels


class IngestProfile:
    """One /ingest request: its key, the window it claims and the pprof it carries."""

    def __init__(self, req):
        self.req = req
        self.service, self.labels = parse_ingest_name(req.arg("name"))
        self.frm = int(req.arg("from"))
        self.until = int(req.arg("until"))
        self.body = req.body
        self.meta = PprofMeta(req.body)


def check_chain(windows, interval_s, what, allow_short_last=True):
    """windows: [(start_ns, end_ns)] sorted by start. Adjacent windows must be exactly
    contiguous (no gap: no sample lost; no overlap: none counted twice), each as long as
    the interval except a window cut by a signal."""
    assert windows, f"{what}: no windows"
    for i, (s, e) in enumerate(windows):
        assert e > s, f"{what}: window {i} is empty: {s}..{e}"
        if i + 1 < len(windows):
            assert windows[i + 1][0] == e, (f"{what}: window {i} ends at {e} but window {i + 1} starts at "
                                            f"{windows[i + 1][0]} ({(windows[i + 1][0] - e) / 1e6:+.3f} ms)")


def expected_from_until(start_ns, end_ns):
    return start_ns // NS, max(-(-end_ns // NS), start_ns // NS + 1)


def assert_close(got, want, rel, what):
    assert want > 0, f"{what}: nothing expected"
    assert abs(got - want) <= rel * want, f"{what}: {got} vs expected {want:.0f} (±{rel:.0%})"


def shares(raws, funcs=("hot_a", "hot_b")):
    """Share of samples whose stack holds each function, over several pprof.Raw."""
    tot = sum(r.total() for r in raws)
    out = {}
    for f in funcs:
        hit = 0
        for r in raws:
            for s in r.samples:
                if f in r.frames(s):
                    hit += s["values"][0]
        out[f] = hit / tot if tot else 0.0
    return out, tot


def function_shares(raws):
    """({function: share of the samples' first value whose stack holds it}, total) over
    several pprof.Raw."""
    total = sum(r.total() for r in raws)
    out = {}
    for r in raws:
        for s in r.samples:
            for f in set(r.frames(s)):
                out[f] = out.get(f, 0) + s["values"][0]
    return {f: v / total for f, v in out.items()}, total


def assert_same_shares(got_raws, want_raws, who, bound):
    """The same functions, each with the same share within bound, in what a backend gave
    back (got_raws) as in prowl's pprof of the same windows; hot_a ahead of hot_b."""
    got, n_got = function_shares(got_raws)
    want, n_want = function_shares(want_raws)
    assert n_want > 30 and n_got > 0, (n_got, n_want)
    assert set(got) == set(want), f"only {who}: {set(got) - set(want)}; only pprof: {set(want) - set(got)}"
    for f in want:
        assert abs(got[f] - want[f]) <= bound, f"{f}: {got[f]:.4f} from {who} vs {want[f]:.4f} from pprof"
    assert got["hot_a"] > got["hot_b"] > 0, got


def private_cpusplit(tmp_path):
    """A copy of cpusplit under a name no other test uses, so that its series
    (service_name = the executable's name) holds only this test's process even when
    other tests profile their own cpusplit on the same host at the same time."""
    import shutil
    import uuid
    from conftest import workload
    name = "cps" + uuid.uuid4().hex[:8]
    dst = tmp_path / name
    shutil.copy2(workload("cpusplit"), dst)
    return str(dst), name


def otlp_window_run(tmp_path, seconds=6, freq="997"):
    """The agent, whole host, exporting 2 s windows over OTLP to a loopback receiver for
    `seconds`: (the profiles, read by the strict checker; its last /metrics scrape)."""
    rx = Receiver().start()
    agent = Agent(tmp_path, ["--otlp-url", rx.url + "/", "--interval", "2s", "-F", freq])
    try:
        agent.start()
        time.sleep(seconds)
        m = agent.metrics()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        rx.stop()
    return [prof for r in rx.requests for prof in otlp_check.check(r.body)], m
