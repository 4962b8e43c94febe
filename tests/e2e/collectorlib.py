"""collectorlib.py: the real OpenTelemetry Collector (build/tools/otelcol, `make otelcol`)
as a loopback OTLP backend for the e2e tests: start, stop, its metrics, and the profiles
its file exporter wrote (length-prefixed OTLP protobuf, decoded by otlp_check/protoc)."""
import os
import re
import subprocess
import time
import urllib.request

import pytest

from agentlib import free_port
from conftest import BUILD
from serverlib import terminate

OTELCOL = os.environ.get("OTELCOL", os.path.join(BUILD, "tools", "otelcol"))


def require_otelcol():
    """Skips (saying why) only when `make otelcol` could not reach the Go module proxy;
    a missing binary without that reason is a failure."""
    if os.access(OTELCOL, os.X_OK):
        return
    skip = OTELCOL + ".skip"
    if os.path.exists(skip):
        with open(skip) as f:
            pytest.skip(f"no OpenTelemetry Collector: {f.read().strip()}")
    pytest.fail(f"{OTELCOL} is missing: run `make otelcol` (tests/tools/otelcol)")


class Collector:
    """otelcol with profiles switched on: OTLP/HTTP in on a free loopback port, the file
    exporter out (format proto), its own metrics on another port, logs in a file."""

    def __init__(self, d, name="otelcol"):
        self.dir = d
        self.port = free_port()
        self.metrics_port = free_port()
        self.out = d / f"{name}-out.pb"
        self.log_path = d / f"{name}.log"
        self.cfg = d / f"{name}.yaml"
        self.url = f"http://127.0.0.1:{self.port}"
        self.p = None
        self.cfg.write_text(f"""\
receivers:
  otlp:
    protocols:
      http:
        endpoint: 127.0.0.1:{self.port}
exporters:
  file:
    path: {self.out}
    format: proto
    flush_interval: 100ms
service:
  telemetry:
    logs:
      level: info
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {self.metrics_port}
  pipelines:
    profiles:
      receivers: [otlp]
      exporters: [file]
""")

    def start(self, timeout=30):
        self._log = open(self.log_path, "a")
        self.p = subprocess.Popen([OTELCOL, "--config", str(self.cfg), "--feature-gates=service.profilesSupport"],
                                  stdout=self._log, stderr=self._log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.log().count("Everything is ready") > self.starts():
                self._starts = self.starts() + 1
                return self
            assert self.p.poll() is None, f"otelcol exited with {self.p.returncode}:\n{self.log()}"
            time.sleep(0.05)
        raise AssertionError(f"otelcol not ready within {timeout}s:\n{self.log()}")

    def starts(self):
        return getattr(self, "_starts", 0)

    def stop(self, timeout=20):
        if self.p and terminate(self.p, timeout):
            raise AssertionError(f"otelcol still running {timeout}s after SIGTERM:\n{self.log()}")
        if self.p:
            self._log.close()
        return self.p.returncode if self.p else None

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def problems(self):
        """Its log lines at warn level or above (tab-separated zap console format)."""
        return [l for l in self.log().splitlines() if re.search(r"\t(warn|error|dpanic|panic|fatal)\t", l)]

    def metrics(self):
        """Its own Prometheus metrics: {name{labels}: value} (counters summed per name)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
            if m:
                out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
        return out

    def bodies(self):
        """Each ProfilesData the file exporter wrote (4-byte big-endian length, then the
        message; ProfilesData has ExportProfilesServiceRequest's wire layout)."""
        data = self.out.read_bytes() if self.out.exists() else b""
        out, i = [], 0
        while i < len(data):
            assert i + 4 <= len(data), f"{self.out}: truncated length prefix at {i}"
            n = int.from_bytes(data[i:i + 4], "big")
            assert i + 4 + n <= len(data), f"{self.out}: record at {i} of {n} bytes is truncated"
            out.append(data[i + 4:i + 4 + n])
            i += 4 + n
        return out
