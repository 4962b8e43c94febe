"""test_java.py: Java stacks (issue 28). Real HotSpot JVMs: OpenJDK 17 from Debian 12 and
this machine's Temurin 25, OpenJDK 11, 21 and 26 from Debian 11, 13 and sid (jdkfetch.py), no JVM
flags but -Xint and -XX:TieredStopAtLevel=1 where named, sampled by the real BPF
program and read back with Google's pprof: the JVM's code cache frames become
package.Class.method (interpreted: with file and line), the stacks reach the thread's
root through them, and --java=off leaves the [jit] frames. One JVM per (JDK, mode),
shared by the module's tests: a JVM is slow to start."""
import os
import select
import signal
import subprocess
import time

import pytest

import jdkfetch
import otlp_check
from agentlib import Agent, otlp_window_run
from conftest import BUILD, pprof_raw, run_prowl, stop

JDKS = {
    "openjdk17": "/usr/lib/jvm/java-17-openjdk-amd64/bin/java",
    "temurin25": "/usr/lib/jvm/temurin-25-jdk-amd64/bin/java",
}
FETCHED = ["openjdk11", "openjdk21", "openjdk26"]
# The suite checks OpenJDK 17 and Temurin 25; make check-long also the fetched JDKs
# (11, 21, 26), C1-only on 25, and interpreted and C1-only on 11 and 21.
ALL_JDKS = list(JDKS) + FETCHED
MORE_JDKS = [pytest.param(j, marks=pytest.mark.more) if j in FETCHED else j for j in ALL_JDKS]
# Checks the suite runs on OpenJDK 17 only.
ONE_JDK = [j if j == "openjdk17" else pytest.param(j, marks=pytest.mark.more) for j in ALL_JDKS]
CLASSES = os.path.join(BUILD, "workloads", "java")
SPLIT = {"Split.fifty": 0.50, "Split.thirty": 0.30, "Split.twenty": 0.20}
SOURCE = os.path.join(os.path.dirname(__file__), "..", "workloads", "java", "Split.java")


def _source_lines():
    """From Split.java's text: each method's body (its declaration's next line to its
    closing brace) and its loop (the for head and the busy line: mix's own, or the call
    of mix)."""
    text = open(SOURCE).read().splitlines()
    start = next(i for i, l in enumerate(text) if l.strip().startswith("static long mix("))
    assert text[start + 2].strip().endswith("// mix's busy line"), text[start + 2]
    body, loop = {"Split.mix": range(start + 2, start + 5)}, {"Split.mix": {start + 2, start + 3}}
    for name in ("fifty", "thirty", "twenty"):
        start = next(i + 1 for i, l in enumerate(text) if l.strip() == f"static void {name}() {{")
        end = next(i + 1 for i in range(start, len(text)) if text[i].strip() == "}")
        body[f"Split.{name}"] = range(start + 1, end + 1)
        loop[f"Split.{name}"] = {i + 1 for i in range(start, end) if text[i].strip().startswith(("for (", "x = mix"))}
    return body, loop


BODY_LINES, LOOP_LINES = _source_lines()
ROOTS = {"__clone3", "__clone", "clone", "clone3", "start_thread"}

pytestmark = pytest.mark.skipif(not os.path.exists(os.path.join(CLASSES, "Split.class")),
                                reason="Split.class not built (make workloads needs a javac)")

_jvms = {}


@pytest.fixture(scope="module", autouse=True)
def _stop_jvms():
    yield
    for p in _jvms.values():
        p.send_signal(signal.SIGCONT)
        stop(p)


@pytest.fixture(autouse=True)
def _pause_jvms():
    """The module's JVMs spin: all are stopped (SIGSTOP) between tests, and a test
    continues the one it uses, so that no two compete for the CPUs."""
    yield
    for p in _jvms.values():
        if p.poll() is None:
            p.send_signal(signal.SIGSTOP)


def java_command(jdk):
    """The command that runs jdk's java: installed, or fetched from Debian's archive."""
    if jdk in FETCHED:
        cmd = jdkfetch.fetch(BUILD, jdk)
        if isinstance(cmd, str):
            pytest.skip(cmd)
        return cmd
    if not os.access(JDKS[jdk], os.X_OK):
        pytest.skip(f"{JDKS[jdk]} is not installed")
    return [JDKS[jdk]]


def jvm(jdk, *flags, mode=()):
    """A running Split JVM of jdk with flags (and Split's mode arguments), started once
    per module."""
    java = java_command(jdk)
    key = (jdk,) + flags + tuple(mode)
    if key not in _jvms:
        p = subprocess.Popen([*java, *flags, "-cp", CLASSES, "Split", "600", *mode], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        _jvms[key] = p
        ready, _, _ = select.select([p.stdout], [], [], 60)
        assert ready and p.stdout.readline() == b"ready\n", "the JVM did not start"
        time.sleep(2)  # in its loop, hot methods compiled (default mode)
    _jvms[key].send_signal(signal.SIGCONT)
    return _jvms[key]


def record(tmp_path, p, name, extra=()):
    out = tmp_path / f"{name}.pb.gz"
    res = run_prowl(["record", "-p", str(p.pid), "-F", "999", "-d", "4", "--per-thread", "-q", "-o", str(out)]
                    + list(extra))
    assert res.returncode == 0, res.stderr
    return pprof_raw(str(out), "-symbolize=none")


def java_lines(raw, s):
    """(function, file, line) of the [java] frames of sample s, leaf first."""
    jm = {mid for mid, m in raw.mappings.items() if m["file"] == "[java]"}
    out = []
    for lid in s["locs"]:
        if raw.locations[lid]["mapping"] in jm:
            out.extend(raw.locations[lid]["lines"])
    return out


def main_thread(s):
    """The thread that runs Split.main (the launcher's main thread waits in join); it
    has the process's name: java, or ld.so's for a JDK run through its own glibc."""
    return s["labels"].get("thread_name") in ("java", "ld-linux-x86-64")


def at_root(frames):
    """The stack ends at the thread's root: start_thread or clone by name; with the
    fetched glibc (no symbols), libc's two frames (start_thread, clone3) right above
    ThreadJavaMain, the launcher's thread body."""
    return frames[-1] in ROOTS or (len(frames) >= 3 and frames[-3] == "ThreadJavaMain"
                                   and all(f.startswith("libc.so.6+0x") for f in frames[-2:]))


def assert_split_and_root(raw):
    total = raw.total(main_thread)
    assert total > 200, f"only {total} samples of the Java main thread"
    shares = {f: raw.share(f, main_thread) for f in SPLIT}
    print({k: round(v, 3) for k, v in shares.items()})
    for f, want in SPLIT.items():
        assert abs(shares[f] - want) <= 0.05, (f, shares)
    rooted = raw.total(lambda s: main_thread(s) and at_root(raw.frames(s)))
    assert rooted / total >= 0.95, f"{rooted} of {total} samples reach the thread's root"
    # Through the Java frames: Split.main is under every rooted sample of the work.
    assert raw.share("Split.main", main_thread) >= 0.95


def java_locations(raw, s):
    """The lines of each [java] location of sample s, leaf first: a compiled frame's
    inlined methods are the first lines of its location."""
    jm = {mid for mid, m in raw.mappings.items() if m["file"] == "[java]"}
    return [raw.locations[lid]["lines"] for lid in s["locs"] if raw.locations[lid]["mapping"] in jm]


def assert_compiled_lines(raw, inlined_min):
    """Every frame of the three methods names Split.java and a line of its body, mix
    only ever inlined into one of them (one location: mix's line, then its caller's
    loop line); at least inlined_min of the work's samples show mix that way."""
    work = inlined = 0
    for s in raw.samples:
        if not main_thread(s) or not any(f in raw.frames(s) for f in SPLIT):
            continue
        work += s["values"][0]
        for lines in java_locations(raw, s):
            for k, (fn, file, line) in enumerate(lines):
                if fn == "Split.mix":
                    assert k + 1 < len(lines) and lines[k + 1][0] in SPLIT, lines
                if fn in SPLIT or fn == "Split.mix":
                    assert file == "Split.java" and (not line or line in BODY_LINES[fn]), lines
        leaf = java_locations(raw, s)[0]
        if (len(leaf) == 2 and leaf[0][0] == "Split.mix" and leaf[0][2] in LOOP_LINES["Split.mix"] and leaf[1][0] in SPLIT
                and leaf[1][2] in LOOP_LINES[leaf[1][0]]):
            inlined += s["values"][0]
    print(f"mix inlined, with lines, in {inlined} of {work}")
    assert work > 200 and inlined / work >= inlined_min, (inlined, work)


@pytest.mark.parametrize("jdk", MORE_JDKS)
def test_split_compiled(tmp_path, jdk):
    """Default flags (tiered C1/C2): the three methods' shares within 5 points, and 95 %
    of the samples reach the thread's root through the compiled Java frames. C2 inlines
    mix into each: 80 % of the samples show it as an inlined frame (from the nmethod's
    scopes) on its loop's line, under its caller's loop line."""
    raw = record(tmp_path, jvm(jdk), "split")
    assert_split_and_root(raw)
    assert_compiled_lines(raw, 0.8)


@pytest.mark.parametrize("jdk", ONE_JDK)
def test_split_c1_only(tmp_path, jdk):
    """-XX:TieredStopAtLevel=1 (C1 only): the same split and roots; lines right where
    given (C1's debug information is sparser: half the samples show mix inlined)."""
    raw = record(tmp_path, jvm(jdk, "-XX:TieredStopAtLevel=1"), "c1")
    assert_split_and_root(raw)
    assert_compiled_lines(raw, 0.5)


@pytest.mark.parametrize("jdk", MORE_JDKS)
def test_split_interpreted_file_and_line(tmp_path, jdk):
    """-Xint: the same split and roots; every interpreted frame of the three methods
    names Split.java and a line of its loop, and mix the line of its body."""
    raw = record(tmp_path, jvm(jdk, "-Xint"), "xint")
    assert_split_and_root(raw)
    checked = lined = in_loop = 0
    for s in raw.samples:
        for fn, file, line in java_lines(raw, s):
            if fn in LOOP_LINES:
                assert file == "Split.java", (fn, file)
                checked += s["values"][0]
                if line:
                    assert line in BODY_LINES[fn], (fn, line)
                    lined += s["values"][0]
                    in_loop += s["values"][0] if line in LOOP_LINES[fn] else 0
    assert checked > 300 and lined / checked >= 0.85 and in_loop / lined >= 0.9, (in_loop, lined, checked)


def test_java_off_leaves_jit_frames(tmp_path):
    """--java=off: no Java names, the JVM's code is [jit] again."""
    raw = record(tmp_path, jvm("openjdk17"), "off", extra=["--java", "off"])
    names = {f for s in raw.samples for f in raw.frames(s)}
    assert not any(n.startswith("Split.") for n in names)
    assert not any(m["file"] == "[java]" for m in raw.mappings.values())
    assert "[jit]" in names


def test_agent_otlp_java_frame_type(tmp_path):
    """The agent exports the Java frames over OTLP (the strict checker reads them):
    mapping [java], frame type java, native frames native; the split holds, and the
    name cache shows in /metrics."""
    p = jvm("openjdk17")
    profs, m = otlp_window_run(tmp_path)
    mine = [s for prof in profs for s in prof["samples"]
            if prof["resource"].get("process.pid") == p.pid and "Split.main" in s["stack"]]
    n = sum(s["value"] for s in mine)
    assert n > 150, n
    for s in mine:
        for f in s["frames"]:
            if f["function"].startswith("Split."):
                assert (f["frame_type"], f["mapping"]) == ("java", "[java]"), f
            elif f["function"] in ("JavaCalls::call_helper", "start_thread"):
                assert f["frame_type"] == "native", f
    shares = {f: sum(s["value"] for s in mine if f in s["stack"]) / n for f in SPLIT}
    print(n, {k: round(v, 3) for k, v in shares.items()}, mine[0]["stack"])
    for f, want in SPLIT.items():
        assert abs(shares[f] - want) <= 0.05, (f, shares)
    assert m.get("prowl_java_names") >= 4, m.text
    assert m.get("prowl_java_name_lookups_total", result="hit") > m.get("prowl_java_name_lookups_total",
                                                                         result="miss") >= 4
    assert p.poll() is None


def test_jvm_started_after_prowl(tmp_path):
    """record -- java ...: the JVM starts after prowl and is registered once its code
    cache is set up (BPF asks again while it starts): of the samples in its code cache,
    95 % have Java frames, not [jit]."""
    java = JDKS["openjdk17"]
    if not os.access(java, os.X_OK):
        pytest.skip(f"{java} is not installed")
    out = tmp_path / "cmd.pb.gz"
    res = run_prowl(["record", "-F", "499", "-q", "-o", str(out), "--", java, "-cp", CLASSES, "Split", "4"])
    assert res.returncode == 0, res.stderr
    raw = pprof_raw(str(out), "-symbolize=none")
    in_cache = raw.total(lambda s: bool(java_lines(raw, s)) or "[jit]" in raw.frames(s))
    jit = raw.total(lambda s: "[jit]" in raw.frames(s))
    assert in_cache > 150 and jit / in_cache <= 0.05, (jit, in_cache)
    assert raw.share("Split.main") > 0.5


def test_container_mount_and_pid_namespaces(tmp_path):
    """The JVM in a mount namespace of its own (its JDK and class at a path the host
    does not have) and a PID namespace: libjvm is read through /proc/PID/root, and the
    split is found as on the host."""
    java_home = os.path.dirname(os.path.dirname(JDKS["openjdk17"]))
    d = "/opt/prowl-jct"
    os.makedirs(d, exist_ok=True)
    inner = (f"mount -t tmpfs tmpfs {d} && mkdir {d}/jdk {d}/app && mount --bind {java_home} {d}/jdk && "
             f"cp {CLASSES}/Split.class {d}/app/ && exec {d}/jdk/bin/java -cp {d}/app Split 30")
    p = subprocess.Popen(["unshare", "--mount", "--pid", "--fork", "sh", "-c", inner],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        kids = []
        for _ in range(50):
            time.sleep(0.2)
            kids = subprocess.run(["pgrep", "-f", f"^{d}/jdk/bin/java "], capture_output=True,
                                  text=True).stdout.split()
            if kids:
                break
        assert kids, "the namespaced JVM did not start"
        time.sleep(2)
        out = tmp_path / "ct.pb.gz"
        res = run_prowl(["record", "-p", kids[0], "-F", "999", "-d", "4", "--per-thread", "-q", "-o", str(out)])
        assert res.returncode == 0, res.stderr
    finally:
        for k in kids:  # the namespace's first process: killing unshare leaves it
            os.kill(int(k), signal.SIGKILL)
        stop(p)
    raw = pprof_raw(str(out), "-symbolize=none")
    assert_split_and_root(raw)


@pytest.mark.parametrize("jdk", ONE_JDK)
def test_two_threads_name_their_own_methods(tmp_path, jdk):
    """Thread alpha runs only fifty, beta only twenty: each thread's samples name its
    own method, never the other's."""
    raw = record(tmp_path, jvm(jdk, mode=["threads"]), "threads")
    seen = {"alpha": 0, "beta": 0}
    own = {"alpha": "Split.fifty", "beta": "Split.twenty"}
    for s in raw.samples:
        t = s["labels"].get("thread_name")
        if t not in own:
            continue
        fr = raw.frames(s)
        other = own["beta" if t == "alpha" else "alpha"]
        assert other not in fr and "Split.thirty" not in fr, (t, fr)
        seen[t] += s["values"][0] if own[t] in fr else 0
    assert seen["alpha"] > 100 and seen["beta"] > 100, seen


@pytest.mark.parametrize("jdk", ONE_JDK)
def test_churn_names_only_methods_on_the_stack(tmp_path, jdk):
    """Code that moves: threads ant and bee load fresh copies of their own worker class
    round after round, compile and deoptimize them, and unload the old copies (their
    compiled code freed, the code cache reused). No sample names a method that could not
    be on its thread's stack: ant never shows BeeWork, bee never AntWork, neither Split;
    freed code gets a marker, not the name of what took its place."""
    p = subprocess.Popen([*java_command(jdk), "-cp", CLASSES, "Churn", "30"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        ready, _, _ = select.select([p.stdout], [], [], 60)
        assert ready and p.stdout.readline() == b"ready\n", "the JVM did not start"
        time.sleep(1)
        raw = record(tmp_path, p, "churn")
    finally:
        stop(p)
    allowed = {"ant": ("Churn", "AntWork."), "bee": ("Churn", "BeeWork.")}
    own = {"ant": 0, "bee": 0}
    markers, total, wrong = {}, 0, []
    for s in raw.samples:
        t = s["labels"].get("thread_name")
        if t not in allowed:
            continue
        names = [fn for fn, _, _ in java_lines(raw, s) if not fn.startswith("[")]  # not stubs nor markers
        total += s["values"][0]
        if not all(fn.startswith(allowed[t] + ("java.", "jdk.", "sun.")) for fn in names):
            wrong.append((t, raw.frames(s)[:6]))
        own[t] += s["values"][0] if any(fn.startswith(allowed[t][1]) for fn in names) else 0
        for f in raw.frames(s):
            if f.startswith("[java: "):
                markers[f] = markers.get(f, 0) + s["values"][0]
    print(own, "markers:", markers, "samples:", total)
    assert not wrong, f"{len(wrong)} of {total} samples name a method not on their thread's stack: {wrong[:3]}"
    assert own["ant"] > 150 and own["bee"] > 150, own
