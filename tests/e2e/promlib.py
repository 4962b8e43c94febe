"""promlib.py: a real Prometheus server (Debian's package) for the end-to-end tests: its
own config, rules and storage in the test's directory, on a free loopback port."""
import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

from agentlib import free_port

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


class Prometheus:
    """Scrapes targets ("host:port") every second as job "prowl", and evaluates the rules
    of rules_yaml (text) and rule_files (paths) every second."""

    def __init__(self, tmp_path, targets, rules_yaml=None, rule_files=()):
        self.dir = tmp_path / "prometheus"
        self.dir.mkdir()
        self.port = free_port()
        self.targets = list(targets)
        rules = [str(f) for f in rule_files]
        if rules_yaml is not None:
            (self.dir / "rules.yml").write_text(rules_yaml)
            rules.append(str(self.dir / "rules.yml"))
        (self.dir / "prometheus.yml").write_text(json.dumps({
            "global": {"scrape_interval": "1s", "scrape_timeout": "900ms", "evaluation_interval": "1s"},
            "rule_files": rules,
            "scrape_configs": [{"job_name": "prowl", "static_configs": [{"targets": self.targets}]}]}))
        self.log_path = self.dir / "prometheus.log"
        self.p = None

    def start(self, timeout=30):
        self._log = open(self.log_path, "w")
        self.p = subprocess.Popen(
            [PROMETHEUS, f"--config.file={self.dir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.dir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--log.level=warn"], stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            assert self.p.poll() is None, f"prometheus exited:\n{self.log_path.read_text()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError(f"prometheus not ready in {timeout}s:\n{self.log_path.read_text()}")

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        if self.p:
            self._log.close()

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr, at=None):
        """{frozenset(labels): value} of an instant query (at: unix seconds)."""
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self.api("query", **params)
        assert data["resultType"] == "vector", data
        return {frozenset(r["metric"].items()): float(r["value"][1]) for r in data["result"]}

    def true_at(self, expr, start, end):
        """{instance: [label dicts]} of the series for which expr was true at some
        instant from start to end (unix seconds, one evaluation a second)."""
        out = {}
        for r in self.api("query_range", query=expr, start=start, end=end, step=1)["result"]:
            out.setdefault(r["metric"].get("instance"), []).append(r["metric"])
        return out

    def alerts(self, name):
        return [a for a in self.api("alerts")["alerts"] if a["labels"].get("alertname") == name]

    def first_scrape(self, timeout=30):
        """The time by which every target has been scraped once."""
        end = time.time() + timeout
        while time.time() < end:
            assert self.p.poll() is None, f"prometheus exited:\n{self.log_path.read_text()}"
            if len(self.query("up")) == len(self.targets):
                return time.time()
            time.sleep(0.2)
        raise AssertionError(f"prometheus did not scrape every target within {timeout}s")
