"""serverlib.py: a real backend built by `make servers` (tests/tools/: Pyroscope, Parca,
the Kubernetes API server) run on loopback for the e2e tests: its binary or the reason it
is missing, start until ready, stop, its log, and JSON/protobuf calls to its API."""
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import BUILD


def tool(name):
    """build/tools/NAME; skips (saying why) only when its build could not reach the Go
    module proxy (NAME.skip), and fails when it is missing for any other reason."""
    path = os.path.join(BUILD, "tools", name)
    if os.access(path, os.X_OK):
        return path
    if os.path.exists(path + ".skip"):
        with open(path + ".skip") as f:
            pytest.skip(f"no {name}: {f.read().strip()}")
    pytest.fail(f"{path} is missing: run `make servers` (tests/tools/{name})")


def call(url, body=None, ctype="application/json", headers=None, timeout=10):
    """(status, body bytes) of a GET (body None) or POST; a dict body is sent as JSON."""
    if isinstance(body, dict):
        body = json.dumps(body).encode()
    req = urllib.request.Request(url, data=body, headers={**({"Content-Type": ctype} if body is not None else {}),
                                                           **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def terminate(p, timeout):
    """SIGTERM, then SIGKILL after timeout s; whether p had to be killed."""
    if p.poll() is not None:
        return False
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=timeout)
        return False
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return True


class Server:
    """One server process: argv, its output in DIR/NAME.log, ready when ready() says so."""

    def __init__(self, d, name, argv, ready, env=None):
        self.name, self.argv, self.ready, self.env = name, argv, ready, env
        self.log_path = d / f"{name}.log"
        self.p = None

    def start(self, timeout=60):
        self._log = open(self.log_path, "a")
        self.p = subprocess.Popen(self.argv, stdout=self._log, stderr=self._log, env=self.env)
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.p.poll() is None, f"{self.name} exited with {self.p.returncode}:\n{self.tail()}"
            try:
                if self.ready():
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"{self.name} not ready within {timeout}s:\n{self.tail()}")

    def stop(self, timeout=20):
        if self.p:
            terminate(self.p, timeout)
            self._log.close()

    def tail(self, n=40):
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except FileNotFoundError:
            return ""
