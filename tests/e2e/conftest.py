"""conftest.py: shared fixtures for prowl's end-to-end tests: paths to the built
binaries, a runner for prowl, a parser for Google pprof's independent -raw dump, and
an unprivileged user to run things as."""
import os
import pwd
import re
import shutil
import signal
import subprocess
import time
from collections import defaultdict

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, os.environ.get("PROWL_TEST_BUILD", "build"))
PROWL = os.path.join(BUILD, "prowl")
PPROF = os.environ.get("PPROF", os.path.join(BUILD, "tools", "pprof"))
WORKLOADS = os.path.join(BUILD, "workloads")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long captures, skipped when PROWL_TEST_QUICK=1 (sanitizer runs)")
    config.addinivalue_line("markers", "trusted: feeds prowl only what root and the test control (no hostile "
                            "input): skipped when PROWL_TEST_QUICK=1 (sanitizer runs)")
    config.addinivalue_line("markers", "sanitizer_pass: hostile input, behaviour only (no time, CPU or memory "
                            "figure): with PROWL_TEST_SAN_PASS=1 (tests/run.sh with a sanitizer build) it runs "
                            "under the sanitizers only")
    config.addinivalue_line("markers", "long: runs of 30 s or more, only under PROWL_TEST_LONG=1 (make check-long)")
    config.addinivalue_line("markers", "more: the same check on more versions than the suite's, only under "
                            "PROWL_TEST_LONG=1 (make check-long)")


def pytest_collection_modifyitems(config, items):
    """PROWL_TEST_QUICK=1 (tests/run.sh on the sanitizer build) skips the long captures
    and the tests marked trusted (in the sanitizer run's files, those whose input no other
    user controls), with a reason that the suite's closing summary lists. In the same run,
    PROWL_TEST_SAN_PASS=1 skips on the normal build the tests marked sanitizer_pass, which
    the sanitizer pass runs. Tests marked long (30 s
    and more each: the soak, the 60 s capture, the outage and alert runs) and those
    marked more (a check the suite runs on a few versions, on the others) run only
    under PROWL_TEST_LONG=1, which `make check-long` sets."""
    quick = pytest.mark.skip(reason="long capture: runs on the normal build only (PROWL_TEST_QUICK=1)")
    long_ = pytest.mark.skip(reason="30 s or more: runs under make check-long (PROWL_TEST_LONG=1)")
    san_pass = pytest.mark.skip(reason="hostile input, no time or resource figure: runs under ASan+UBSan only, in "
                                       "the sanitizer pass (PROWL_TEST_SAN_PASS=1)")
    trusted = pytest.mark.skip(reason="no hostile input: runs on the normal build only (PROWL_TEST_QUICK=1)")
    more = pytest.mark.skip(reason="the same check on one more version: runs under make check-long (PROWL_TEST_LONG=1)")
    long_run = os.environ.get("PROWL_TEST_LONG") == "1"
    san_run = os.environ.get("PROWL_TEST_QUICK") == "1"
    san_pass_apart = os.environ.get("PROWL_TEST_SAN_PASS") == "1"
    for item in items:
        if "long" in item.keywords and not long_run:
            item.add_marker(long_)
        elif "more" in item.keywords and not long_run:
            item.add_marker(more)
        elif "slow" in item.keywords and san_run:
            item.add_marker(quick)
        elif "trusted" in item.keywords and san_run:
            item.add_marker(trusted)
        elif "sanitizer_pass" in item.keywords and san_pass_apart and not san_run:
            item.add_marker(san_pass)


class Unprivileged:
    """A user without privileges (no root, no groups, no capabilities) that tests run
    commands as: an attacker on the host, or a reader that root's rights would hide."""

    def __init__(self, name):
        pw = pwd.getpwnam(name)
        self.name, self.uid, self.gid = name, pw.pw_uid, pw.pw_gid

    def wrap(self, cmd):
        """cmd prefixed with setpriv: real and effective ids, groups and capabilities dropped."""
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                "--inh-caps=-all"] + list(cmd)

    def run(self, cmd, **kw):
        kw.setdefault("capture_output", True)
        kw.setdefault("timeout", 60)
        return subprocess.run(self.wrap(cmd), **kw)

    def popen(self, cmd, **kw):
        return subprocess.Popen(self.wrap(cmd), **kw)


TEST_USER = os.environ.get("PROWL_TEST_USER", "prowltest")


@pytest.fixture(scope="session")
def unprivileged():
    """The unprivileged user $PROWL_TEST_USER (default prowltest), the same one the C unit
    tests use: created (system account, no home, no login shell) when missing and left in
    place, since another suite on this host may be using it."""
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        # Two suites may race to create it: the loser finds it afterwards.
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", TEST_USER], capture_output=True)
    return Unprivileged(TEST_USER)

# Undefined behaviour fails the test it happens in, whatever else the test checks:
# the sanitizer build halts on the first report (-fno-sanitize-recover=undefined, and
# halt_on_error here), and the report on a prowl process's stderr fails the test:
# run_prowl checks it at once, and the files that Agent and watch_stderr() name are
# checked after each test (ASan+UBSan reports go to stderr whatever log_path says).
os.environ["UBSAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("UBSAN_OPTIONS", ""), "halt_on_error=1",
                                                     "print_stacktrace=1"]))
SAN_REPORT = re.compile(r"runtime error:|ERROR: (Address|Leak)Sanitizer")
_watched = {}  # path of a file that holds a prowl process's stderr -> bytes already checked


def watch_stderr(path):
    """Has the file at path (a prowl process's stderr, about to be written from its
    start) checked for sanitizer reports after each test."""
    _watched[str(path)] = 0


def san_report(text):
    """The sanitizer report in text, or None."""
    m = SAN_REPORT.search(text or "")
    return text[max(0, m.start() - 200):m.start() + 3000] if m else None


@pytest.fixture(autouse=True)
def _no_sanitizer_report():
    yield
    found = []
    for path, done in list(_watched.items()):
        try:
            with open(path, errors="replace") as f:
                f.seek(done)
                text = f.read()
        except OSError:
            del _watched[path]
            continue
        _watched[path] = done + len(text.encode(errors="replace"))
        rep = san_report(text)
        if rep:
            found.append(f"{path}:\n{rep}")
    assert not found, "a sanitizer report (undefined behaviour or a memory error):\n" + "\n".join(found)


def _bpffs_mounted():
    with open("/proc/self/mounts") as f:
        return any(l.split()[1:3] == ["/sys/fs/bpf", "bpf"] for l in f)


@pytest.fixture(scope="session", autouse=True)
def _no_pins_left():
    """The agents the tests start pin their BPF programs (bpf_pin) in /sys/fs/bpf, which
    systemd mounts at boot; on a machine where nothing did (a VM without systemd as its
    init) the suite mounts it, as the tests of pinning need, and unmounts it at the end.
    The suite leaves no set behind to hold the maps' kernel memory."""
    mounted = False
    if not _bpffs_mounted():
        os.makedirs("/sys/fs/bpf", exist_ok=True)
        mounted = subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"]).returncode == 0
    yield
    shutil.rmtree("/sys/fs/bpf/prowl", ignore_errors=True)
    if mounted:
        subprocess.run(["umount", "/sys/fs/bpf"])


def workload(name):
    path = os.path.join(WORKLOADS, name)
    assert os.access(path, os.X_OK), f"workload {path} not built (make workloads)"
    return path


def run_prowl(args, timeout=120, env=None, **kw):
    """Runs prowl to completion (env: variables to add); returns CompletedProcess with
    text output."""
    env = dict(os.environ, **(env or {}))
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1")
    res = subprocess.run([PROWL] + args, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    rep = san_report(res.stderr)
    assert not rep, f"a sanitizer report from prowl {' '.join(args)}:\n{rep}"
    return res


def start(cmd, **kw):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw)


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGKILL)
    p.wait()


def one_error_line(res):
    """prowl's contract: one clear 'prowl: error: ...' line, no crash output."""
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    errs = [l for l in lines if l.startswith("prowl: error:")]
    assert len(errs) == 1, f"expected exactly one error line, got: {res.stderr!r}"
    assert "Sanitizer" not in res.stderr and "Segmentation" not in res.stderr
    return errs[0]


class Raw:
    """A profile as Google's pprof prints it with -raw (nobody here wrote pprof)."""

    def __init__(self, text):
        self.text = text
        self.samples = []      # dicts: values, locs, labels
        self.locations = {}    # id -> dict(addr, mapping, lines=[(func, file, line)])
        self.mappings = {}     # id -> dict(start, limit, offset, file, build_id, flags)
        self.period = None
        self._parse(text)

    def _parse(self, text):
        section = None
        cur = None
        for line in text.splitlines():
            if line.startswith("Period:"):
                self.period = int(line.split()[1])
            if line.startswith("Samples:"):
                section = "samples"
                continue
            if line.startswith("Locations"):
                section = "locations"
                continue
            if line.startswith("Mappings"):
                section = "mappings"
                continue
            if section == "samples":
                m = re.match(r"^\s+(\d+(?:\s+\d+)*):((?:\s+\d+)*)\s*$", line)
                if m:
                    cur = {"values": [int(v) for v in m.group(1).split()],
                           "locs": [int(x) for x in m.group(2).split()], "labels": {}}
                    self.samples.append(cur)
                    continue
                pairs = re.findall(r"(\S+?):\[(.*?)\]", line)
                if pairs and cur is not None:
                    cur["labels"].update(pairs)
            elif section == "locations":
                m = re.match(r"^\s+(\d+): 0x([0-9a-f]+) M=(\d+)\s*(.*)$", line)
                if m:
                    cur = {"addr": int(m.group(2), 16), "mapping": int(m.group(3)), "lines": []}
                    self.locations[int(m.group(1))] = cur
                    rest = m.group(4).strip()
                    if rest:
                        cur["lines"].append(self._line(rest))
                    continue
                if line.strip() and cur is not None:
                    cur["lines"].append(self._line(line.strip()))
            elif section == "mappings":
                m = re.match(r"^(\d+): 0x([0-9a-f]+)/0x([0-9a-f]+)/0x([0-9a-f]+) (\S+)\s*(\S*)\s*(.*)$", line)
                if m:
                    self.mappings[int(m.group(1))] = {
                        "start": int(m.group(2), 16), "limit": int(m.group(3), 16),
                        "offset": int(m.group(4), 16), "file": m.group(5),
                        "build_id": m.group(6) if not m.group(6).startswith("[") else "",
                        "flags": m.group(7) + (m.group(6) if m.group(6).startswith("[") else "")}

    @staticmethod
    def _line(s):
        # "func file:line s=start" or "func :0 s=0" or just "func"
        m = re.match(r"^(.*?) (\S*):(-?\d+)(?: s=(\d+))?(?:\(.*\))?$", s)
        if m:
            return (m.group(1), m.group(2), int(m.group(3)))
        return (s, "", 0)

    def frames(self, sample):
        """Function names of a sample, leaf first, inlined frames expanded."""
        out = []
        for lid in sample["locs"]:
            out.extend(l[0] for l in self.locations[lid]["lines"])
        return out

    def self_shares(self, min_samples=100):
        """{leaf function: share of all samples}; fails under min_samples samples."""
        total = self.total()
        assert total > min_samples, f"only {total} samples"
        out = {}
        for s in self.samples:
            fr = self.frames(s)
            if fr:
                out[fr[0]] = out.get(fr[0], 0) + s["values"][0] / total
        return out

    def total(self, pred=lambda s: True):
        return sum(s["values"][0] for s in self.samples if pred(s))

    def share(self, func, pred=lambda s: True, self_only=False):
        """Share of (filtered) samples whose stack contains func (or whose leaf is func)."""
        tot = self.total(pred)
        hit = 0
        for s in self.samples:
            if not pred(s):
                continue
            fr = self.frames(s)
            if (fr[:1] == [func]) if self_only else (func in fr):
                hit += s["values"][0]
        return hit / tot if tot else 0.0


def objdump_stubs(path):
    """{name@plt: ELF address} as objdump -d lists the stubs."""
    res = subprocess.run(["objdump", "-d", path], capture_output=True, text=True, check=True)
    return {m.group(2): int(m.group(1), 16) for m in re.finditer(r"^([0-9a-f]+) <(\S+@plt)>:", res.stdout, re.M)}


def pprof_raw(path, *opts):
    """pprof's -raw dump of path. Without opts, pprof symbolizes from this host's
    binaries every mapping whose flags say not all its locations are named, and so
    replaces prowl's names there; "-symbolize=none" reads the names in the file."""
    res = subprocess.run([PPROF, "-raw", *opts, path], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"pprof -raw failed: {res.stderr}"
    return Raw(res.stdout)


def pprof(args, path):
    res = subprocess.run([PPROF] + args + [path], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"pprof {args} failed: {res.stderr}"
    return res.stdout


@pytest.fixture(scope="session", autouse=True)
def _check_build():
    assert os.access(PROWL, os.X_OK), f"{PROWL} not built"
    assert os.access(PPROF, os.X_OK), f"{PPROF} not built (make tools)"
    assert os.geteuid() == 0, "end-to-end tests need root"
