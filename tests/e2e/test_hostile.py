"""test_hostile.py: what other users choose cannot steer prowl (issue 13, section 3): a
process names itself, its executable's path and its cgroup with '../', '/', newlines,
quotes, the separators of each output format, control characters, invalid UTF-8 and 4 KiB
of path; the agent's files stay 0600 in 0700 directories and a symlink put in the way is
not followed; secrets show in no log, --check output, /metrics or ps."""
import gzip
import json
import os
import re
import shutil
import subprocess
import time

import pytest

import otlp_check
import pbwire
from agentlib import Agent
from conftest import PROWL, run_prowl, start, stop, workload
from containers import cgroup2_root, remove_cgroup
from receiver import Receiver
from urllib.parse import unquote_to_bytes

# The process name (prctl PR_SET_NAME: 15 bytes at most, anything but NUL).
COMM = b'../..\n\xff"{a}=,;'
# A directory and a file name for the executable (anything but '/' and NUL).
DIRNAME = b'd\n"q;{a}=b,c\\\xfe\x1b[2J'
EXENAME = b'x;{y}=z,"\n\xff..'
# A cgroup that looks like a systemd unit: its name becomes service_name (the kernel
# refuses a newline in a cgroup's name, not the rest).
UNIT = b'..\xff"{k}=v,;\x1b[2J ~.service'

# What prowl makes of a name: invalid bytes are U+FFFD, control characters '?'.
def text_of(b):
    s = b.decode("utf-8", errors="replace")
    return "".join("?" if ord(c) < 0x20 or 0x7f <= ord(c) <= 0x9f else c for c in s)


CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def clean_text(b, where):
    """b is valid UTF-8 without control characters; returns it decoded."""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise AssertionError(f"{where}: not UTF-8 ({e}): {b[:200]!r}")
    assert not CONTROL.search(s), f"{where}: a control character in {s[:200]!r}"
    return s


def pprof_strings(data):
    """The string_table (field 6) of a pprof Profile, gzip'ed or not, as bytes."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return [v for f, wt, v in pbwire.fields(data) if f == 6]


LOGFMT_PAIR = re.compile(r'([A-Za-z_][A-Za-z0-9_.]*)=("(?:[^"\\]|\\.)*"|[^\s"=]*)(?: |$)')


def logfmt_line(line):
    """One logfmt record, parsed strictly: key=value pairs, nothing else."""
    s = clean_text(line, "log line")
    pos, rec = 0, {}
    while pos < len(s):
        m = LOGFMT_PAIR.match(s, pos)
        assert m and m.end() > pos, f"not logfmt at {pos}: {s!r}"
        v = m.group(2)
        rec[m.group(1)] = json.loads(v) if v.startswith('"') else v
        pos = m.end()
    return rec


@pytest.fixture
def hostile_procs(tmp_path, unprivileged):
    """As the unprivileged user: `rename` at a hostile path, named COMM, in a cgroup
    named UNIT; and a copy at a path of about 4 KiB."""
    user = unprivileged
    home = os.path.join(b"/tmp", b"prowl-hostile-" + os.urandom(4).hex().encode())
    os.mkdir(home, 0o755)
    os.chown(home, user.uid, user.gid)
    d = os.path.join(home, DIRNAME)
    os.mkdir(d, 0o755)
    exe = os.path.join(d, EXENAME)
    shutil.copy2(workload("rename"), exe)
    deep = home
    while len(deep) < 3900:
        deep = os.path.join(deep, b"\xe2\x80\xa8" + b"L" * 200)  # U+2028 starts every name
        os.mkdir(deep, 0o755)
    long_exe = os.path.join(deep, b"long")
    shutil.copy2(workload("rename"), long_exe)
    for p in (d, exe, long_exe):
        os.chown(p, user.uid, user.gid)
    cg = os.path.join(cgroup2_root().encode(), UNIT)
    os.mkdir(cg)
    procs = [user.popen([exe, COMM, b"40"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
             user.popen([long_exe, b"long\x1b]0;t\x07", b"40"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)]
    time.sleep(0.3)
    with open(os.path.join(cg, b"cgroup.procs"), "w") as f:
        f.write(str(procs[0].pid))
    before = set(os.listdir("/tmp"))
    yield procs, home, len(long_exe)
    for p in procs:
        stop(p)
    after = set(os.listdir("/tmp"))
    remove_cgroup(cg)
    shutil.rmtree(home, ignore_errors=True)
    # Other jobs on the host may compile or run JITs meanwhile: gcc's temporary files
    # (ccXXXXXX.s) and perf maps (perf-PID.map) are theirs, never prowl's.
    theirs = {n for n in after if n.startswith(("pytest-", "prowl-"))
              or re.fullmatch(r"cc[A-Za-z0-9]{6}\..*|perf-[0-9]+\.map", n)}
    assert after <= before | theirs, after - before


@pytest.mark.sanitizer_pass
def test_hostile_names_reach_no_output_unescaped(tmp_path, hostile_procs):
    """The agent (dir, Pyroscope and OTLP exporters, logfmt debug log, /metrics) and
    `prowl record` (pprof and folded) profile the hostile processes: every output is in
    its format, every string in it valid UTF-8 without control characters, the names
    arrive as text_of() says, and no file is written outside the state directory."""
    procs, home, long_len = hostile_procs
    assert long_len > 3900
    pyro, otlp = Receiver().start(), Receiver().start()
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(f"""\
exporters:
  dir:
    enabled: true
  pyroscope:
    url: {pyro.url}
  otlp:
    url: {otlp.url}
""")
    agent = Agent(tmp_path, ["--config", str(cfg), "--interval", "1s", "-F", "99", "-v"])
    state = agent.state
    folded, pb = tmp_path / "rec.folded", tmp_path / "rec.pb.gz"
    try:
        agent.start()
        pids = ",".join(str(p.pid) for p in procs)
        rec = run_prowl(["record", "-p", pids, "-d", "3", "-o", str(folded), "-o", str(pb)], timeout=60)
        assert rec.returncode == 0, rec.stderr
        time.sleep(1.5)
        metrics = agent.metrics()  # parsed strictly
        assert metrics.sum("prowl_samples_total") > 0
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        pyro.stop()
        otlp.stop()
    service = text_of(UNIT[:-len(".service")])
    comm = text_of(COMM)

    # The log: one logfmt record per line; the process line names it as text_of() says.
    recs = [logfmt_line(l) for l in agent.log_path.read_bytes().split(b"\n") if l]
    mine = [r["msg"] for r in recs if r.get("msg", "").startswith(f"process {procs[0].pid} (")]
    # (the log escapes the name, so the parsed value holds it with U+FFFD for bad bytes)
    raw_comm = COMM.decode("utf-8", errors="replace")
    assert mine and mine[0].startswith(f"process {procs[0].pid} ({raw_comm})"), mine[:2]
    assert service in mine[0], (service, mine[0])
    # record's own stderr (status and summary) is text for a terminal.
    clean_text(rec.stderr.replace("\n", "").encode(), "record's stderr")

    # Files only under the state directory, 0600 in 0700 directories, none at a
    # path made of a name ('..' or '/' in a service name).
    files = []
    for root, dirs, names in os.walk(state):
        for n in dirs:
            assert os.stat(os.path.join(root, n)).st_mode & 0o777 == 0o700, os.path.join(root, n)
        for n in names:
            p = os.path.join(root, n)
            assert os.path.realpath(p).startswith(str(state) + "/"), p
            assert os.stat(p).st_mode & 0o777 == 0o600, (p, oct(os.stat(p).st_mode))
            files.append(p)
    profiles = [p for p in files if p.endswith(".pb.gz")]
    assert profiles, files
    assert all(os.path.dirname(p).startswith(str(state / "profiles")) for p in profiles), profiles
    assert set(os.listdir(home)) == {DIRNAME, b"\xe2\x80\xa8" + b"L" * 200}, os.listdir(home)
    assert os.listdir(os.path.join(home, DIRNAME)) == [EXENAME]

    # pprof: the dir exporter's files, record's file and Pyroscope's bodies.
    seen = set()
    bodies = [(p, open(p, "rb").read()) for p in profiles] + [(str(pb), pb.read_bytes())]
    bodies += [(f"pyroscope {r.raw_query}", r.body) for r in pyro.requests if r.path == "/ingest"]
    assert len(bodies) > 3
    for where, body in bodies:
        for i, s in enumerate(pprof_strings(body)):
            seen.add(clean_text(s, f"{where}: string_table[{i}]"))
    assert comm in seen and service in seen, sorted(x for x in seen if "{" in x)[:10]
    assert "spin_named" in seen
    # The mapping's path as /proc/PID/maps gives it: the kernel writes a newline as "\012".
    path = text_of(os.path.join(DIRNAME, EXENAME).replace(b"\n", b"\\012"))
    assert any(x.endswith("/" + path) for x in seen), [x for x in seen if "hostile" in x]
    assert any(x.endswith("/long") and x.count("?" + "L" * 200) >= 18 for x in seen), "the 4 KiB path"

    # Pyroscope's key: APP{k=v,...} with no separator inside a name or value.
    names = []
    for r in pyro.requests:
        assert r.status == 200, r.raw_query
        raw = re.search(r"(?:^|&)name=([^&]*)", r.raw_query).group(1)
        name = clean_text(unquote_to_bytes(raw), "ingest name")
        # Pyroscope's key parser reads the name up to '{', a label name up to '=' and a
        # value up to ',' or '}': those three may not occur inside a label value; and it
        # refuses an application name with anything outside [A-Za-z0-9_./-].
        assert re.fullmatch(r"[A-Za-z0-9_./-]+\{([A-Za-z_][A-Za-z0-9_]*=[^{},]*)(,[A-Za-z_][A-Za-z0-9_]*=[^{},]*)*\}",
                            name), name
        names.append(name)
    app = re.sub(rb"[^A-Za-z0-9_./-]", b"_", service.encode()).decode()  # each other byte is '_'
    assert any(n.startswith(app + "{") for n in names), (app, names)

    # OTLP: strict (otlp_check refuses strings that are not UTF-8); no control characters.
    otlp_bodies = [r.body for r in otlp.requests if r.method == "POST"]
    assert otlp_bodies
    got = set()
    for body in otlp_bodies:
        for prof in otlp_check.check(body):
            for k, v in prof["resource"].items():
                clean_text(str(v).encode(), f"OTLP resource attribute {k}")
            for s in prof["samples"]:
                for f in s["stack"]:
                    got.add(clean_text(f.encode(), "OTLP function name"))
    assert "spin_named" in got

    # Folded: "frame;frame;... count" per line, frames without ';'.
    lines = folded.read_bytes().split(b"\n")
    assert lines[-1] == b""
    roots = set()
    for n, line in enumerate(lines[:-1]):
        s = clean_text(line, f"folded line {n}")
        m = re.fullmatch(r"(.+) ([0-9]+)", s)
        assert m, s
        frames = m.group(1).split(";")
        assert all(frames), s
        roots.add(frames[0])
    assert any(r.startswith(comm.replace(";", ":")) for r in roots), roots


def test_symlink_in_the_state_directory_is_not_followed(tmp_path):
    """A symlink where the dir exporter would make a service's directory (pointing at a
    directory the attacker reads) gets no profile: the agent says so and goes on."""
    state = tmp_path / "state"
    victim = tmp_path / "victim"
    victim.mkdir()
    (state / "profiles").mkdir(parents=True)
    exe = tmp_path / "symlinked"
    shutil.copy2(workload("spin"), exe)
    os.symlink(victim, state / "profiles" / "symlinked")
    neighbour = tmp_path / "neighbour"
    shutil.copy2(workload("spin"), neighbour)
    wl = start([str(exe), "-s", "6"])
    wl2 = start([str(neighbour), "-s", "6"])
    agent = Agent(tmp_path, ["--state-dir", str(state), "--interval", "1s", "-F", "99"])
    try:
        agent.start()
        agent.wait_log(r"dir: cannot write .*symlinked", timeout=15)
        time.sleep(1.5)
        assert agent.alive(), agent.log()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
        stop(wl2)
    assert os.listdir(victim) == []
    assert list((state / "profiles" / "neighbour").glob("*.pb.gz")), "the other service got no profile"


SECRETS = {"basic_password": "pw-9f3e1c7b-S3CRET", "bearer_token": "tok-4a8d2e6f-S3CRET"}


@pytest.mark.sanitizer_pass
def test_secrets_show_nowhere(tmp_path):
    """Secrets from the file and the environment, with a backend that refuses them
    (401, so the agent logs the refusal): none shows in the debug log, in --check
    output, on /metrics, or in ps."""
    pyro, otlp = Receiver().start(), Receiver().start()
    pyro.set_status(401, body="bad credentials")
    otlp.set_status(401, body="bad token")
    cfg = tmp_path / "agent.yaml"
    cfg.write_text(f"""\
exporters:
  pyroscope:
    url: {pyro.url}
    basic_user: alice
  otlp:
    url: {otlp.url}
    bearer_token: {SECRETS["bearer_token"]}
""")
    cfg.chmod(0o600)
    env = {"PROWL_PYROSCOPE_BASIC_PASSWORD": SECRETS["basic_password"]}
    check = subprocess.run([PROWL, "agent", "--config", str(cfg), "--check"], capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=30)
    assert check.returncode == 0, check.stderr
    assert "***" in check.stdout
    agent = Agent(tmp_path, ["--config", str(cfg), "--interval", "1s", "-v"], env=env)
    # Something to profile: on a quiet host a window may have no sample, and an empty
    # window is not sent.
    busy = start([workload("spin"), "-t", "1", "-s", "20"])
    try:
        agent.start()
        pyro.wait_for(1, path="/ingest", timeout=15)
        time.sleep(1.5)
        _, metrics, _ = agent.get("/metrics")
        ps = subprocess.run(["ps", "-eww", "-o", "args"], capture_output=True, text=True).stdout
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        stop(busy)
        pyro.stop()
        otlp.stop()
    assert any(r.header("authorization") for r in pyro.requests), "the secrets were not used"
    log = agent.log()
    assert "HTTP 401" in log, log[-2000:]
    for name, secret in SECRETS.items():
        for where, text in (("--check output", check.stdout + check.stderr), ("the log", log),
                            ("/metrics", metrics), ("ps", ps)):
            assert secret not in text, f"{name} in {where}"
