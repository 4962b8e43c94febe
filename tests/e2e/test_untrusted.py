"""test_untrusted.py: object files that an unprivileged user controls (issue 15, items 1, 2
and 9). The truncation attack against `prowl agent` and `prowl record -a`, a forged build
id (whichever program runs first), 40 copies of one binary, and binaries deleted while
prowl lacks CAP_CHECKPOINT_RESTORE. The attacks run as a real unprivileged user."""
import os
import pwd
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import time

import pytest

from agentlib import Agent
from conftest import BUILD, PROWL, pprof_raw, start, stop, watch_stderr, workload

TEST_USER = os.environ.get("PROWL_TEST_USER", "prowltest")
# prowl.service's CapabilityBoundingSet without CAP_CHECKPOINT_RESTORE
NO_MAP_FILES = "-all,+bpf,+perfmon,+sys_ptrace,+dac_read_search,+sys_resource,+syslog"


class User:
    """An unprivileged user; commands run as it through setpriv (ids, groups and
    capabilities dropped)."""

    def __init__(self, name):
        pw = pwd.getpwnam(name)
        self.uid, self.gid = pw.pw_uid, pw.pw_gid

    def popen(self, cmd, **kw):
        return subprocess.Popen(["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups",
                                 "--inh-caps=-all"] + list(cmd), **kw)


@pytest.fixture(scope="module")
def user():
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:  # a system account without home or shell, left for other suites
        subprocess.run(["useradd", "--system", "--user-group", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", TEST_USER], capture_output=True)
    return User(TEST_USER)


@pytest.fixture
def udir(user):
    """A directory in /tmp that belongs to the user (pytest's tmp_path is root's, 0700)."""
    d = tempfile.mkdtemp(prefix="prowl-untrusted-")
    os.chmod(d, 0o755)
    os.chown(d, user.uid, user.gid)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def give(user, src, d, name=None):
    """A copy of src in d, owned by user."""
    dst = os.path.join(d, name or os.path.basename(src))
    shutil.copy2(src, dst)
    os.chown(dst, user.uid, user.gid)
    return dst


def window_files(agent_dir, comm):
    return sorted((agent_dir / comm).glob("*.pb.gz")) if (agent_dir / comm).is_dir() else []


def names_in(files):
    """Function names in the profiles' stacks, and the raw profiles."""
    raws = [pprof_raw(str(f)) for f in files]
    return {fn for r in raws for s in r.samples for fn in r.frames(s)}, raws


def wait_for_name(agent_dir, comm, name, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if name in names_in(window_files(agent_dir, comm))[0]:
            return
        time.sleep(0.3)
    raise AssertionError(f"no window of {comm} names {name} within {timeout}s")


# --------------------------------------------------------------------------- truncation

def start_attack(user, udir):
    """trunc_attack as the user, on its own copy of libtrunc.so, running the first
    file's code until it is told to truncate."""
    exe = give(user, workload("trunc_attack"), udir)
    lib = give(user, workload("libtrunc.so"), udir)
    p = user.popen([exe, lib, "6"], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    return p, lib


def truncate_now(p):
    """Has the attacker truncate the library; returns (old size, new size)."""
    p.send_signal(signal.SIGUSR1)
    m = re.match(r"truncated (\d+) (\d+)", p.stdout.readline())
    assert m, "the attacker did not truncate its library"
    old, new = int(m.group(1)), int(m.group(2))
    assert new < old - 8192, (old, new)  # whole pages of debug info gone
    return old, new


def warnings_about(log, lib):
    return [l for l in log.splitlines() if os.path.basename(lib) in l and "changed on disk" in l]


@pytest.mark.sanitizer_pass
def test_truncation_attack_agent(tmp_path, user, udir):
    """The library is truncated after prowl opened it and before the second file's code
    ran: the agent stays up, keeps writing windows, warns once and counts it."""
    out = tmp_path / "prof"
    agent = Agent(tmp_path, ["--dir", str(out), "--interval", "1s", "-F", "99"])
    p = None
    try:
        agent.start()
        p, lib = start_attack(user, udir)
        wait_for_name(out, "trunc_attack", "trunc_first_inner")
        truncate_now(p)
        t_trunc = time.time()
        assert p.wait(timeout=20) == 0
        time.sleep(2.5)  # two more windows
        assert agent.alive(), f"the agent died (exit {agent.p.returncode}):\n{agent.log()}"
        m = agent.metrics()
        status, _, _ = agent.get("/healthz")
        assert status == 200
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        if p:
            stop(p)
    assert m.get("prowl_objects_broken_total") >= 1
    warns = warnings_about(agent.log(), lib)
    assert len(warns) == 1 and "level=warn" in warns[0], warns
    after = [f for f in window_files(out, "trunc_attack") if f.stat().st_mtime > t_trunc]
    assert len(after) >= 4, f"{len(after)} windows of the attacker after the truncation"
    # The second file's code was sampled and is in the windows, by name or address.
    names, raws = names_in(after)
    in_lib = [l for r in raws for l in r.locations.values()
              if "libtrunc.so" in r.mappings.get(l["mapping"], {}).get("file", "")]
    assert in_lib, names


@pytest.mark.sanitizer_pass
def test_truncation_attack_record(tmp_path, user, udir):
    """The same attack during `prowl record -a`: it finishes and writes its profile,
    with one warning."""
    out, err = tmp_path / "host.pb.gz", tmp_path / "record.err"
    watch_stderr(err)
    with open(err, "w") as ef:
        rec = subprocess.Popen([PROWL, "record", "-a", "-F", "99", "-o", str(out)], stdout=subprocess.DEVNULL,
                               stderr=ef)
    p = None
    try:
        time.sleep(1.5)
        p, lib = start_attack(user, udir)
        time.sleep(2.5)  # samples of the first file's code, symbolized as they come
        truncate_now(p)
        assert p.wait(timeout=20) == 0
        assert rec.poll() is None, f"record died (exit {rec.returncode}):\n{err.read_text()}"
        rec.send_signal(signal.SIGINT)
        assert rec.wait(timeout=60) == 0, err.read_text()
    finally:
        for q in (rec, p):
            if q:
                stop(q)
    warns = warnings_about(err.read_text(), lib)
    assert len(warns) == 1, err.read_text()
    raw = pprof_raw(str(out))
    attack = [s for s in raw.samples if s["labels"].get("process_name") == "trunc_attack"]
    assert attack, "no samples of the attacker"
    names = {fn for s in attack for fn in raw.frames(s)}
    assert "trunc_first_inner" in names, names


# --------------------------------------------------------------------------- forged build id

def section(data, name):
    """(offset, size) of an ELF64 section of data."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3a)
    def shdr(i):
        return struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize)
    stroff = shdr(shstrndx)[4]
    for i in range(shnum):
        h = shdr(i)
        if data[stroff + h[0]:].split(b"\0", 1)[0] == name:
            return h[4], h[5]
    raise AssertionError(f"no section {name}")


def forge(victim, path):
    """The victim with its function names changed and its .eh_frame wiped where the
    content hash (first and last 4 KiB, length) does not look: same build id, same
    hash, same size, other names and no unwind rules."""
    data = open(victim, "rb").read()
    out = bytearray(data)
    lo, hi = 4096, len(data) - 4096
    patched = 0
    for old, new in ((b"victim_hot", b"forger_hot"), (b"victim_loop", b"forger_loop")):
        for m in re.finditer(re.escape(old), data):
            if lo <= m.start() and m.end() <= hi:
                out[m.start():m.end()] = new
                patched += 1
    off, size = section(data, b".eh_frame")
    assert lo <= off and off + size <= hi
    out[off:off + size] = bytes(size)
    assert patched >= 2 and out[:4096] == data[:4096] and out[-4096:] == data[-4096:]
    with open(path, "wb") as f:
        f.write(out)
    os.chmod(path, 0o755)
    addr = int(subprocess.run(["nm", victim], capture_output=True, text=True, check=True).stdout
               .split(" T victim_hot")[0].split()[-1], 16)
    named = subprocess.run(["eu-addr2line", "-f", "-e", path, hex(addr)], capture_output=True, text=True)
    assert named.stdout.split()[0] == "forger_hot", named.stdout  # the forgery works on its own


@pytest.mark.sanitizer_pass
@pytest.mark.parametrize("forger_first", [True, False], ids=["forger_first", "victim_first"])
def test_forged_build_id(tmp_path, user, udir, forger_first):
    """A user's program claims the build id, head, tail and size of root's program, with
    other names and no unwind info: the victim's profile shows only its own names, and
    its stacks are whole (its own .eh_frame unwinds it)."""
    victim = os.path.join(tmp_path, "victim")
    shutil.copy2(workload("buildid_victim"), victim)
    forged = os.path.join(udir, "forger")
    forge(victim, forged)
    os.chown(forged, user.uid, user.gid)
    out = tmp_path / "prof"
    agent = Agent(tmp_path, ["--dir", str(out), "--interval", "1s", "-F", "99"])
    procs = []
    try:
        agent.start()
        first = (user.popen([forged, "9"]) if forger_first else start([victim, "9"]))
        procs.append(first)
        # The first one's file is what prowl reads first (symbols and unwind table).
        wait_for_name(out, "forger" if forger_first else "victim",
                      "forger_hot" if forger_first else "victim_hot")
        procs.append(start([victim, "4"]) if forger_first else user.popen([forged, "4"]))
        assert procs[1].wait(timeout=20) == 0
        time.sleep(1.5)
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        for p in procs:
            stop(p)
    names, raws = names_in(window_files(out, "victim"))
    assert "victim_hot" in names, names
    assert not any(n.startswith("forger") for n in names), names
    hot = [(r, s) for r in raws for s in r.samples if r.frames(s)[:1] == ["victim_hot"]]
    n = sum(s["values"][0] for _, s in hot)
    whole = sum(s["values"][0] for r, s in hot if "main" in r.frames(s))
    assert n >= 50, f"{n} samples in victim_hot"
    assert whole >= 0.9 * n, f"only {whole} of {n} victim stacks reach main"
    assert "forger_hot" in names_in(window_files(out, "forger"))[0]


# --------------------------------------------------------------------------- copies

@pytest.mark.skipif("san" in os.path.basename(BUILD),
                    reason="resident memory under ASan (quarantine, shadow) says nothing of prowl's own")
def test_forty_copies_cost_one(tmp_path):
    """40 running copies of one binary at 40 paths are one object: one mapping in the
    profiles, one read of the file and one unwind table (the agent's debug log names
    each object it reads and each table it builds; 39 more objects would add 39 of
    each). The gauges are whole-host and so move with whatever else runs (the test's
    own Python, sampled once, adds 20 objects): they are printed, not judged.
    Resident memory is a loose check only (< 8 MiB for 39 processes): each process has
    its own maps and state, and the floor of RSS moves by 2-4 MiB with the host."""
    src = workload("sipper")
    paths = []
    for i in range(40):
        d = tmp_path / f"copy{i:02d}"
        d.mkdir()
        paths.append(str(d / "sipper"))
        shutil.copy2(src, paths[-1])
        # Trusted copies only are shared: owned by root, written by nobody else
        # (whatever the umask of the build), and the file PID 1 sees at that path.
        os.chmod(paths[-1], 0o755)
    try:
        seen_by_init = os.stat(f"/proc/1/root{paths[0]}").st_ino == os.stat(paths[0]).st_ino
    except PermissionError:
        seen_by_init = True  # prowl then falls back to its own root, which is this one
    except OSError:
        seen_by_init = False
    if not seen_by_init:
        pytest.skip("PID 1 sees another root than this test (a chroot or container): "
                    "prowl trusts no copy there, by design, so none is shared")
    out = tmp_path / "prof"
    agent = Agent(tmp_path, ["--dir", str(out), "--interval", "1s", "-F", "99", "-v"])
    procs = [start([paths[0], "30"])]

    def floor_kb(seconds):
        rss = []
        for _ in range(int(seconds / 0.25)):
            rss.append(agent.rss_kb())
            time.sleep(0.25)
        return min(rss)

    try:
        agent.start()
        time.sleep(3)
        one = floor_kb(4)
        m1 = agent.metrics()
        t_forty = time.time()
        procs += [start([p, "20"]) for p in paths[1:]]
        time.sleep(3)
        forty = floor_kb(4)
        m40 = agent.metrics()
        assert agent.alive(), agent.log()
        assert agent.stop() == 0, agent.log()
    finally:
        agent.kill()
        for p in procs:
            stop(p)
    grown = (forty - one) / 1024
    print(f"agent RSS floor: one copy {one / 1024:.1f} MiB, 40 copies {forty / 1024:.1f} MiB")
    counts = {k: (m1.sum(k), m40.sum(k)) for k in
              ("prowl_symbol_modules", "prowl_unwind_tables", "prowl_processes")}
    print("one copy -> 40 copies:", counts)
    assert counts["prowl_processes"][1] - counts["prowl_processes"][0] >= 30, counts
    log = agent.log()
    copy_path = re.compile(re.escape(str(tmp_path)) + r"/copy(\d\d)/sipper")
    reads = {m.group(1) for line in log.splitlines() if "msg=\"object " in line and ": read" in line
             for m in [copy_path.search(line)] if m}
    shared = {m.group(1) for line in log.splitlines() if "msg=\"object " in line and ": a copy of" in line
              for m in [copy_path.search(line)] if m}
    tables = [m.group(1) for line in log.splitlines() if "unwind: table for " in line
              for m in [copy_path.search(line)] if m]
    print(f"copies read {sorted(reads)}, found to be copies {len(shared)}, tables built for {tables}")
    assert reads == {"00"}, f"copies read as objects of their own: {sorted(reads)}"
    assert tables == ["00"], f"unwind tables built for the copies: {tables}"
    assert len(shared) >= 30, f"only {len(shared)} of the copies were found to be copies"
    assert grown < 8.0, f"RSS grew {grown:.1f} MiB from one copy to 40"
    files = [f for f in window_files(out, "sipper") if f.stat().st_mtime > t_forty + 2]
    raws = [pprof_raw(str(f)) for f in files]
    pids = {s["labels"].get("pid") for r in raws for s in r.samples}
    seen = {m["file"] for r in raws for m in r.mappings.values() if m["file"].endswith("/sipper")}
    assert len(pids) >= 30, f"only {len(pids)} of the copies were sampled"
    assert len(seen) == 1, f"the copies are {len(seen)} objects: {sorted(seen)[:5]}"


# --------------------------------------------------------------------------- deleted binaries

@pytest.mark.sanitizer_pass
def test_deleted_binaries_without_checkpoint_restore(tmp_path, user, udir):
    """Without CAP_CHECKPOINT_RESTORE: a deleted main executable is still read (through
    /proc/PID/exe), and a deleted library's frames and stack marker say what is missing."""
    exe = os.path.join(tmp_path, "victim")
    shutil.copy2(workload("buildid_victim"), exe)
    p_exe = start([exe, "12"])
    p_lib, lib = start_attack(user, udir)
    out, err = tmp_path / "host.pb.gz", tmp_path / "record.err"
    try:
        time.sleep(0.3)
        os.unlink(exe)
        os.unlink(lib)
        watch_stderr(err)
        with open(err, "w") as ef:
            res = subprocess.run(["setpriv", "--bounding-set", NO_MAP_FILES, "--inh-caps=-all", PROWL, "record",
                                  "-a", "-F", "99", "-d", "4s", "-o", str(out)], stdout=subprocess.DEVNULL,
                                 stderr=ef, timeout=60)
    finally:
        stop(p_exe)
        stop(p_lib)
    log = err.read_text()
    assert res.returncode == 0, log
    raw = pprof_raw(str(out))

    def names_of(comm):
        return {fn for s in raw.samples if s["labels"].get("process_name") == comm for fn in raw.frames(s)}

    assert "victim_hot" in names_of("victim"), names_of("victim")
    lib_names = names_of("trunc_attack")
    said = [n for n in lib_names if n.startswith("libtrunc.so [deleted; reading it needs CAP_CHECKPOINT_RESTORE]+0x")]
    assert said, lib_names
    assert any(n.startswith("[truncated: no unwind table for libtrunc.so [deleted; reading it needs "
                            "CAP_CHECKPOINT_RESTORE]") for n in lib_names), lib_names
    warns = [l for l in log.splitlines() if "CAP_CHECKPOINT_RESTORE" in l]
    assert len(warns) == 1 and "libtrunc.so" in warns[0], log
