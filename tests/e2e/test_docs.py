"""test_docs.py: the documentation says what prowl does. Every fenced block of README.md and
docs/*.md carries a docs-check marker that says how it is checked (docs/testing.md, "The
documentation check"), and an unmarked block fails; messages quoted in prose are found in
the C sources; configuration.md's defaults and ranges are fed to `--check`."""
import os
import re
import shlex
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import docslib
from conftest import BUILD, PROWL, ROOT, pprof_raw
from pprofgen import Profile

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

ENV = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
BLOCKS = [b for d in docslib.DOCS for b in docslib.blocks(d)]

# Blocks that fail today because the code (not the doc) is wrong; another branch fixes the
# item named. A block listed here that passes fails the test (strict), so the entry goes.
# Keyed by the document and the block's first line.
XFAIL = {}
# Programs a `commands` block may name that are not installed here, and where the
# commands are exercised instead.
ELSEWHERE = {
    "sudoedit": "an editor: nothing to check",
    "skopeo": "tests/package/test_package.py reads the OCI layout with umoci",
    "podman": "tests/package/test_package.py reads the OCI layout with umoci",
    "flamegraph.pl": "reads folded stacks; test_report.py checks prowl's folded output",
}


def by_kind(kind):
    return [pytest.param(b, id=b.where) for b in BLOCKS if b.kind == kind]


def xfail_if_listed(block, request):
    for (doc, first), why in XFAIL.items():
        if block.doc == doc and block.text.startswith(first):
            request.applymarker(pytest.mark.xfail(reason=why, strict=True))


# ---- every block is marked ------------------------------------------------------------------

def test_every_block_has_a_marker():
    """A block without a marker, with an unknown one, or `tested by` a test that does not
    exist (or does not read this document) fails, naming file:line."""
    assert len(BLOCKS) >= 40, len(BLOCKS)
    bad = [f"{b.where}: no docs-check marker before this block" for b in BLOCKS if b.kind is None]
    bad += [f"{b.where}: unknown marker '{b.kind}'" for b in BLOCKS if b.kind and b.kind not in docslib.KINDS]
    for b in BLOCKS:
        if b.kind in ("output of", "tested by") and not b.arg:
            bad.append(f"{b.where}: `{b.kind}` needs its argument")
        if b.kind == "tested by" and b.arg:
            path, _, func = b.arg.partition("::")
            src = open(os.path.join(ROOT, path)).read() if os.path.exists(os.path.join(ROOT, path)) else ""
            if not re.search(rf"^def {re.escape(func)}\(", src, re.M) or os.path.basename(b.doc) not in src:
                bad.append(f"{b.where}: {b.arg} does not exist or does not read {b.doc}")
    for doc in docslib.DOCS:
        text = open(os.path.join(ROOT, doc)).read()
        for m in docslib.MARKER.finditer(text):
            at_block = text[m.end():].lstrip(" ").startswith("\n```")
            quoted = text[m.start() - 1:m.start()] == "`"
            if not at_block and not quoted and not m.group(1).startswith("range:"):
                bad.append(f"{doc}:{text.count(chr(10), 0, m.start()) + 1}: a marker in prose must be `range:`")
    assert not bad, "\n".join(bad)


# ---- run: README's commands in a scratch checkout --------------------------------------------

def scratch_checkout(tmp_path):
    """A directory that looks like the checkout a reader follows the README in: the
    sources as links, build/ the build under test. Files the commands write land here."""
    d = tmp_path / "checkout"
    d.mkdir()
    for name in os.listdir(ROOT):
        if name in (".git", "build", "build-san") or name.startswith("."):
            continue
        os.symlink(os.path.join(ROOT, name), d / name)
    os.symlink(BUILD, d / "build")
    return d


def run_lines(block):
    return [c for c in block.text.splitlines() if c.strip() and not c.startswith("#")]


@pytest.mark.slow
def test_readme_runnable_commands(tmp_path):
    """Each command of README.md's `run` blocks, as root in a shell, in order (later
    commands read what earlier ones wrote). The first one is the quick start: a 10 s
    capture of this host that must leave a file pprof reads and print what it found."""
    blocks = [b for b in BLOCKS if b.kind == "run"]
    assert {b.doc for b in blocks} == {"README.md"}, "`run` blocks run in README.md's scratch checkout only"
    assert len(blocks) >= 3, "README.md marks too few blocks as runnable"
    cwd = scratch_checkout(tmp_path)
    outs = []
    for b in blocks:
        for cmd in run_lines(b):
            res = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=600, env=ENV)
            assert res.returncode == 0, f"{b.where}: `{cmd}` exited {res.returncode}:\n{res.stderr[-3000:]}"
            assert "Sanitizer" not in res.stderr, res.stderr
            outs.append((cmd, res))
    quick = next(res for cmd, res in outs if "record -a -d 10s -o host.pb.gz" in cmd)
    assert pprof_raw(str(cwd / "host.pb.gz")) is not None
    assert "Top 10 functions by self time" in quick.stdout or quick.stdout.count("No samples: ") == 1, quick.stdout
    python = next(res for cmd, res in outs if "-- python3" in cmd)
    assert pprof_raw(str(cwd / "python.pb.gz")).total() > 20, python.stdout


# ---- output of: what a command prints ---------------------------------------------------------

def scratch(tmp_path):
    """A scratch directory with prowl on PATH and an etc/prowl/ standing for /etc/prowl/
    (the example configuration of packaging/ in it) and var/lib/prowl/ for /var/lib/prowl/."""
    d = tmp_path / "scratch"
    (d / "bin").mkdir(parents=True)
    (d / "etc" / "prowl").mkdir(parents=True)
    (d / "var" / "lib" / "prowl").mkdir(parents=True)
    os.symlink(PROWL, d / "bin" / "prowl")
    shutil.copy(os.path.join(ROOT, "packaging", "prowl.yaml"), d / "etc" / "prowl" / "agent.yaml")
    os.chmod(d / "etc" / "prowl" / "agent.yaml", 0o600)
    return d


def to_scratch(text, d):
    return re.sub(r"(?<![\w.])/(etc/prowl|var/lib/prowl)\b", lambda m: f"{d}/{m.group(1)}", text)


def from_scratch(text, d):
    return text.replace(f"{d}/", "/")


def sh(cmd, d, **kw):
    env = dict(ENV, PATH=f"{d}/bin:{ENV['PATH']}")
    return subprocess.run(["bash", "-c", to_scratch(cmd, d)], cwd=d, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, **kw)


@pytest.mark.parametrize("block", by_kind("output of"))
def test_output_blocks(block, tmp_path, request):
    """The block's lines are lines that its command prints, in order and together (stdout
    and stderr as one stream; trailing blanks ignored). /etc/prowl/ and /var/lib/prowl/ in
    the command are a scratch directory's, and read back as those paths."""
    xfail_if_listed(block, request)
    d = scratch(tmp_path)
    res = sh("{\n" + block.arg + "\n} 2>&1", d)
    got = [l.rstrip() for l in from_scratch(res.stdout, d).splitlines()]
    want = [l.rstrip() for l in block.text.splitlines()]
    assert want and got, (block.where, res.stdout)
    found = any(got[i:i + len(want)] == want for i in range(len(got) - len(want) + 1))
    if not found:
        diff = [f"- {w}" for w in want if w not in got]
        raise AssertionError(f"{block.where}: the block is not what `{block.arg}` prints.\nnot printed:\n"
                             + "\n".join(diff) + "\nprinted:\n" + "\n".join(got[:40]))


# ---- config: a file the agent accepts ---------------------------------------------------------

@pytest.mark.parametrize("block", by_kind("config"))
def test_config_blocks(block, tmp_path):
    """The block, as the agent's configuration file (mode 0600), passes `--check` without
    a word on stderr, with the variables the marker gives (`config: VAR=VALUE ...`, for a
    file the next example completes from the environment). Files it names under
    /etc/prowl/ are made, empty, in the scratch directory (`--check` wants TLS files
    readable, not valid)."""
    d = scratch(tmp_path)
    env = dict(ENV, **dict(w.split("=", 1) for w in shlex.split(block.arg or "")))
    text = to_scratch(block.text, d)
    for path in re.findall(rf"{re.escape(str(d))}/etc/prowl/\S+", text):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()
    cfg = d / "doc.yaml"
    cfg.write_text(text)
    os.chmod(cfg, 0o600)
    res = subprocess.run([PROWL, "agent", "--config", str(cfg), "--check"], capture_output=True, text=True,
                         env=env, timeout=30, cwd=d)
    assert res.returncode == 0 and not res.stderr.strip(), f"{block.where}: {res.stderr}"
    assert yaml.safe_load(res.stdout), res.stdout


# ---- commands: each command line parses, each program exists -------------------------------

def doc_profiles(d):
    """The pprof files the examples name, made up: hot_a and hot_b in a 3:1 split, labelled
    with pid and process_name (postgres among them), 800 samples each."""
    for name in ("app", "a", "b", "host", "base", "new"):
        p = Profile()
        for i in range(800):
            proc = "postgres" if i % 2 else "nginx"
            p.add(["main", "hot_a" if i % 4 else "hot_b"], labels={"pid": 100 + i % 2, "process_name": proc})
        (d / f"{name}.pb.gz").write_bytes(p.encode())
    # Off-CPU captures (prowl record --off-cpu): waits in read and in a lock, in nanoseconds.
    for name in ("wait", "before", "after"):
        p = Profile(sample_types=(("samples", "count"), ("off_cpu", "nanoseconds")))
        for i in range(400):
            p.add(["main", "wait_read" if i % 4 else "wait_lock"], labels={"pid": 100, "process_name": "app"},
                  values=[1, 1_000_000 + i])
        (d / f"{name}.pb.gz").write_bytes(p.encode())


def simple_commands(line):
    """The simple commands of a shell line (split at &&, ||, ;, & and |), each without
    sudo, its variable assignments and redirections; `$!` stands for a pid."""
    line = re.sub(r"\s#.*$", "", line).replace("$!", "1")
    out = []
    for part in re.split(r"&&|\|\||[;&|]", line):
        words = [w for w in shlex.split(part.split(">")[0]) if w != "sudo"]
        env = {}
        while words and re.match(r"^[A-Z_]+=", words[0]):
            k, _, v = words.pop(0).partition("=")
            env[k] = v
        if words:
            out.append((env, words))
    return out


def check_command(env, words, d, unprivileged):
    """None if the command is sound, else what is wrong."""
    prog = words[0]
    if prog in ("prowl", "./build/prowl", "build/prowl"):
        sub = words[1] if len(words) > 1 else ""
        if sub == "agent":
            cmd = ["prowl"] + words[1:] + ([] if "--check" in words else ["--check"])
            res = sh(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(cmd), d)
            return None if res.returncode == 0 else f"--check exits {res.returncode}: {res.stderr.strip()}"
        if sub == "record":
            res = unprivileged.run([PROWL] + words[1:], text=True, cwd="/", env=ENV)
            ok = res.returncode == 1 and res.stderr.startswith("prowl: error: missing capabilities")
            return None if ok else f"unprivileged, it should stop at the capabilities, not: {res.stderr.strip()}"
        if sub in ("report", "diff"):
            res = sh(shlex.join(["prowl"] + words[1:]), d)
            selects = "--dir" in words or "--label" in words
            if res.returncode == 0 or (selects and res.returncode == 1 and res.stderr.count("\n") == 1):
                return None
            return f"exits {res.returncode}: {res.stderr.strip()}"
        return f"no check for `prowl {sub}`"
    if prog == "make":
        res = subprocess.run(["make", "-n"] + words[1:], cwd=ROOT, capture_output=True, text=True, timeout=60)
        return None if res.returncode == 0 else f"`make -n` exits {res.returncode}: {res.stderr.strip()[-300:]}"
    if "/" in prog:
        if prog.startswith("/tmp/"):
            return None   # made by an earlier command of the block
        rel = prog[2:] if prog.startswith("./") else prog
        path = os.path.join(BUILD, rel[6:]) if rel.startswith("build/") else os.path.join(ROOT, rel)
        return None if os.access(path, os.X_OK) else f"{prog} does not exist"
    if shutil.which(prog) or prog in ELSEWHERE:
        return None
    return f"{prog} is not installed here and not in ELSEWHERE"


@pytest.mark.parametrize("block", by_kind("commands"))
def test_command_blocks(block, tmp_path, unprivileged):
    """Each command of the block: `prowl agent` lines pass `--check` (the example
    configuration at /etc/prowl/agent.yaml); `prowl record` lines, run by a user without
    privileges, get as far as the capability check (a usage error exits 2 before it);
    `prowl report`/`diff` lines run on made-up profiles of the names they give and exit 0
    (1 when --dir or --label select nothing here); `make` targets exist (`make -n`);
    other programs exist here, or ELSEWHERE says what stands for them."""
    d = scratch(tmp_path)
    doc_profiles(d)
    lines = [l for l in block.text.splitlines() if l.strip() and not l.lstrip().startswith("#")]
    assert lines, block.where
    bad = []
    for line in lines:
        for env, words in simple_commands(line):
            why = check_command(env, words, d, unprivileged)
            if why:
                bad.append(f"{block.where}: `{line.strip()}`: {why}")
    assert not bad, "\n".join(bad)


# ---- messages quoted in prose: pieces of the C sources' format strings ----------------------

@pytest.fixture(scope="module")
def formats():
    f = docslib.Formats()
    assert len(f.formats) > 1000, len(f.formats)
    return f


def test_inline_messages(formats):
    """Every message quoted in prose (docslib.inline_messages) is a piece of a message of
    the C sources: Formats.explain, the quote allowed to be cut at either end."""
    found = [(d, n, s) for d in docslib.DOCS for n, s in docslib.inline_messages(d)]
    assert len(found) >= 40, found
    bad = [f"{d}:{n}: `{s}`" for d, n, s in found if formats.explain(s, open_ends=True) is not None]
    assert not bad, "quoted, but no format string of the C sources prints it:\n" + "\n".join(bad)


# One word changed in messages the docs quote: each must fail, and the quote as the docs
# have it must pass.
MUTANTS = [
    ("spool: skipping the rest of damaged file", "spool: skipping the rest of broken file"),
    ("missing capabilities: CAP_BPF ...", "missing capability: CAP_BPF ..."),
    ("[truncated: no unwind table for libfoo.so]", "[truncated: no unwind tables for libfoo.so]"),
    ("otlp: 5 undelivered profiles (32914 bytes) kept in the spool for the next start",
     "otlp: 5 undelivered profiles (32914 bytes) kept in the spool for the next run"),
    ("window ended early: ... limits.max_stacks_per_window", "window ended late: ... limits.max_stacks_per_window"),
    ("... needs X (Linux N+), which this kernel (R) lacks", "... needs X (Linux N+), which the kernel (R) lacks"),
    ("regression: hot_c: total 19.94% -> 49.16% (+29.22 pp > 5 pp + 3.49 pp noise)",
     "regression: hot_c: total 19.94% -> 49.16% (+29.22 pp > 5 pp + 3.49 pp margin)"),
    ("5 queued profiles (32914 bytes) not delivered before shutdown",
     "5 queued profiles (32914 bytes) not sent before shutdown"),
]


def test_message_check_can_fail(formats):
    """The matcher of test_inline_messages tells a quoted message from one with a word
    changed."""
    quoted = {s for d in docslib.DOCS for _, s in docslib.inline_messages(d)}
    for good, bad in MUTANTS:
        assert good in quoted, f"the docs no longer quote `{good}`: pick another"
        assert formats.explain(good, open_ends=True) is None, good
        assert formats.explain(bad, open_ends=True) is not None, f"`{bad}` passes as a message of prowl"


# ---- promql: expressions Prometheus accepts ------------------------------------------------------

@pytest.mark.parametrize("block", by_kind("promql"))
def test_promql_blocks(block, tmp_path):
    """The block is a PromQL expression that promtool accepts (as a recording rule)."""
    promtool = shutil.which("promtool")
    if not promtool:
        pytest.skip("promtool (Debian package prometheus) not installed")
    f = tmp_path / "rules.yml"
    f.write_text(yaml.safe_dump({"groups": [{"name": "doc", "rules": [{"record": "doc:expr", "expr": block.text}]}]}))
    res = subprocess.run([promtool, "check", "rules", str(f)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"{block.where}: {res.stdout}{res.stderr}"


# ---- configuration.md: the complete file, the defaults and the ranges where they stand ----------

def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def check_output(extra_env=None):
    res = subprocess.run([PROWL, "agent", "--check"], capture_output=True, text=True,
                         env=dict(ENV, **(extra_env or {})), timeout=20)
    return res


def test_configuration_listing_matches_check():
    """The "complete file, every key" of docs/configuration.md and what `--check` prints
    for an empty configuration: the same keys, and the same defaults but where the
    listing says "" stands for a value found at run time."""
    text = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    listing = re.search(r"A complete file, every key at its default:\n\n(<!--.*?-->\n)?```yaml\n(.*?)^```$", text,
                        re.S | re.M)
    assert listing, "docs/configuration.md lost its complete file"
    documented = flatten(yaml.safe_load(listing.group(2)))
    resolved = {".".join(path) for path in _keys_marked(listing.group(2), '# "" = ')}
    res = check_output()
    assert res.returncode == 0, res.stderr
    actual = flatten(yaml.safe_load(res.stdout))
    missing, extra = sorted(set(actual) - set(documented)), sorted(set(documented) - set(actual))
    assert not missing and not extra, f"not in the docs' listing: {missing}; not a key of --check: {extra}"
    wrong = {k: (documented[k], actual[k]) for k in actual if k not in resolved and documented[k] != actual[k]}
    assert not wrong, f"defaults differ (docs, --check): {wrong}"
    # Each key has its row in the tables below the listing.
    for k in actual:
        leaf = k.split(".")[-1] if re.match(r"exporters\.(pyroscope|otlp|parca)\.", k) else k
        assert re.search(rf"`{leaf}[`:]", text), f"docs/configuration.md describes no `{leaf}`"


SIZE_ROW = re.compile(r"^\| `([a-z_.]+)` \| `[^`]*` \| (\d+)([KMGT])iB to (\d+)([KMGT])iB(, or `0`)? \| `(PROWL_\w+)`", re.M)


def test_configuration_size_ranges_hold_at_both_ends():
    """Each size key of docs/configuration.md's tables with a range "LO to HI": LO and
    HI as written are accepted (and --check prints them back as written), one byte
    below LO and one above HI are refused with the range, and `0` only where the row
    allows it."""
    text = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    rows = SIZE_ROW.findall(text)
    assert len(rows) >= 5, rows
    assert any(r[0] == "limits.debug_inflate_size" and r[3:5] == ("1", "T") for r in rows), rows
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
    shift = {"K": 10, "M": 20, "G": 30, "T": 40}

    def check(var, value):
        return subprocess.run([PROWL, "agent", "--check"], capture_output=True, text=True, timeout=20,
                              env=dict(env, **{var: value}))

    for key, lo, lu, hi, hu, zero, var in rows:
        lo_b, hi_b = int(lo) << shift[lu], int(hi) << shift[hu]
        for written in (f"{lo}{lu}iB", f"{hi}{hu}iB"):
            res = check(var, written)
            assert res.returncode == 0, (key, written, res.stderr)
            assert flatten(yaml.safe_load(res.stdout))[key] == written, (key, written)
        for outside in (lo_b - 1, hi_b + 1) + (() if zero else (0,)):
            res = check(var, str(outside))
            assert res.returncode == 2, (key, outside, res.stdout)
            assert f"out of range: use {lo}{lu}iB to {hi}{hu}iB" in res.stderr, (key, res.stderr)
        if zero:
            assert check(var, "0").returncode == 0, key


def _keys_marked(block, comment):
    """Key paths of the YAML lines of block that carry comment."""
    stack, out = [], []
    for line in block.splitlines():
        m = re.match(r"^( *)([a-z_]+):", line)
        if not m:
            continue
        depth = len(m.group(1)) // 2
        stack = stack[:depth] + [m.group(2)]
        if comment in line:
            out.append(list(stack))
    return out


def key_rows():
    """The rows of docs/configuration.md's key tables: [(line, key, default cell, row text)].
    Keys of the `exporters.X.` table are given as exporters.pyroscope.KEY."""
    out = []
    lines = open(os.path.join(ROOT, "docs", "configuration.md")).read().split("\n")
    for n, line in enumerate(lines, 1):
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] if line.startswith("| `") else []
        if len(cells) < 4:
            continue
        m = re.fullmatch(r"`([a-z_.]+)`( \(pyroscope\))?", cells[0])
        if not m:
            continue
        key = m.group(1) if "." in m.group(1) or m.group(1) in TOP_KEYS else f"exporters.pyroscope.{m.group(1)}"
        out.append((n, key, cells[1], line))
    return out


TOP_KEYS = ("frequency", "interval", "idle", "include_self", "per_thread", "unwind", "python", "java", "node", "off_cpu",
            "off_cpu_threshold", "bpf_pin", "demangle",
            "hostname", "labels", "state_dir", "shutdown_timeout")


def env_name(key):
    return "PROWL_" + key.replace("exporters.", "").replace(".", "_").upper()


def test_table_defaults_match_check():
    """Each row's Default cell, where it is a value in backticks, is what `--check` prints
    for that key with no configuration. `$VAR` is the variable's value (set here to a
    made-up one, with Kubernetes on) and `<state_dir>` the state directory's default."""
    res = check_output()
    assert res.returncode == 0, res.stderr
    actual = flatten(yaml.safe_load(res.stdout))
    rows = key_rows()
    assert len(rows) >= 45, len(rows)
    bad, checked = [], 0
    for n, key, default, _ in rows:
        m = re.fullmatch(r"`([^`]*)`( \(off\))?", default)
        if not m:
            continue
        doc = m.group(1)
        want = "" if doc == '""' else doc.replace("<state_dir>", str(actual["state_dir"]))
        got = actual.get(key)
        if re.fullmatch(r"\$[A-Z_]+", doc):
            on = check_output({doc[1:]: "docs-check-value", "PROWL_KUBERNETES_API_URL": "http://127.0.0.1:8001"})
            want, got = "docs-check-value", flatten(yaml.safe_load(on.stdout)).get(key)
        checked += 1
        if str(got).lower() != want.lower() and not (got is None and want == ""):
            bad.append(f"docs/configuration.md:{n}: {key}: the table says {doc}, --check prints {got!r}")
    assert checked >= 40, checked
    assert not bad, "\n".join(bad)


SIZE = {"": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}
DUR_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}


def _bounds(text):
    """The `LOW to HIGH` of a row and the values just outside: [(value, accepted)]."""
    m = re.search(r"\b(\d+)(ms|s|m|h|KiB|MiB|GiB|TiB)? to (\d+)(ms|s|m|h|KiB|MiB|GiB|TiB)?\b", text)
    if not m:
        return None
    lo, lu, hi, hu = int(m.group(1)), m.group(2) or "", int(m.group(3)), m.group(4) or ""
    if lu in DUR_MS or hu in DUR_MS:
        lo_ms, hi_ms = lo * DUR_MS[lu or "s"], hi * DUR_MS[hu or "s"]
        return [(f"{lo}{lu}", True), (f"{hi}{hu}", True), (f"{lo_ms - 1}ms", False), (f"{hi_ms + 1}ms", False)]
    if lu in SIZE and (lu or hu):
        lo_b, hi_b = lo * SIZE[lu], hi * SIZE[hu]
        return [(f"{lo}{lu}", True), (f"{hi}{hu}", True), (str(lo_b - 1), False), (str(hi_b + 1), False)]
    return [(str(lo), True), (str(hi), True), (str(lo - 1), False), (str(hi + 1), False)]


# Ranges the code gets wrong today; another branch fixes the item named.
RANGE_XFAIL = {}


@pytest.mark.parametrize("row", [pytest.param(r, id=r[1]) for r in key_rows() if _bounds(r[3])])
def test_table_ranges(row, request):
    """A row that gives a range (`1s to 1h`, `1MiB to 16GiB`, `1 to 1000`): both bounds
    pass `--check` through the key's variable, and the values just outside them (1 ms,
    1 byte, 1 below or above) exit 2 with one line naming the variable."""
    n, key, _, text = row
    if key in RANGE_XFAIL:
        request.applymarker(pytest.mark.xfail(reason=RANGE_XFAIL[key], strict=True))
    var, bad = env_name(key), []
    for value, accepted in _bounds(text):
        res = check_output({var: value})
        lines = res.stderr.strip().splitlines()
        if accepted and res.returncode != 0:
            bad.append(f"{var}={value} refused: {res.stderr.strip()}")
        if not accepted and (res.returncode != 2 or len(lines) != 1 or var not in lines[0]):
            bad.append(f"{var}={value} exits {res.returncode}: {res.stderr.strip()}")
    assert not bad, f"docs/configuration.md:{n}: " + "\n".join(bad)


def range_claims():
    """The `range` markers in prose: `<!-- docs-check: range: LOW to HIGH: CMD -->` (or
    `LOW and more`), CMD with {} where the value goes."""
    out = []
    for doc in docslib.DOCS:
        for n, arg in docslib.prose_markers(doc, "range"):
            values, _, cmd = arg.partition(": ")
            out.append(pytest.param(f"{doc}:{n}", values, cmd, id=f"{doc}:{n}"))
    return out


@pytest.mark.parametrize("where,values,cmd", range_claims())
def test_prose_ranges(where, values, cmd, unprivileged):
    """A range a sentence states, where a `range` marker follows it: CMD with each bound
    gets past the argument checks (run without privileges, it stops at the capability
    check, or exits 0 or 1, but not 2), and with the values just outside them exits 2
    with one line."""
    assert "{}" in cmd and cmd.startswith("prowl "), (where, cmd)
    low, _, high = values.partition(" to ")
    if values.endswith(" and more"):
        low = values[:-len(" and more")]
        bounds = [b for i, b in enumerate(_bounds(f"{low} to {low}") or []) if i in (0, 2)]
    else:
        bounds = _bounds(values)
    assert bounds, (where, values)
    bad = []
    for value, accepted in bounds:
        res = unprivileged.run([PROWL] + shlex.split(cmd.replace("{}", value))[1:], text=True, cwd="/", env=ENV)
        lines = res.stderr.strip().splitlines()
        if accepted and res.returncode == 2:
            bad.append(f"{value} refused: {res.stderr.strip()}")
        if not accepted and (res.returncode != 2 or len(lines) != 1):
            bad.append(f"{value} exits {res.returncode}: {res.stderr.strip()}")
    assert not bad, f"{where}: " + "\n".join(bad)


# ---- versions ----------------------------------------------------------------------------------

def test_versions_in_docs_are_the_version():
    """Every prowl version a document names (`prowl_0.1.0_amd64.deb`, an image tag
    `oci:0.1.0`, `prowl:0.1.0`, "tag 0.1.0") is VERSION, which `prowl --version` prints."""
    version = open(os.path.join(ROOT, "VERSION")).read().strip()
    res = subprocess.run([PROWL, "--version"], capture_output=True, text=True, timeout=10)
    assert version in res.stdout, res.stdout
    seen, bad = 0, []
    for doc in docslib.DOCS:
        for n, line in enumerate(open(os.path.join(ROOT, doc)).read().split("\n"), 1):
            for m in re.finditer(r"(?:prowl_|prowl-dbgsym_|oci:|prowl:|tag )(\d+\.\d+\.\d+)", line):
                seen += 1
                if m.group(1) != version:
                    bad.append(f"{doc}:{n}: {m.group(0)} (VERSION is {version})")
    assert seen >= 5, seen
    assert not bad, "\n".join(bad)


# ---- commands quoted in prose ----------------------------------------------------------------------

def test_inline_commands():
    """Commands quoted in prose: a `make ...` names a target that exists (`make -n`, its
    variables as given), and every option of a `prowl SUBCOMMAND ...` is one that the
    subcommand's --help lists."""
    spans = []
    for doc in docslib.DOCS:
        text = "\n".join("" if l.strip().startswith("```") else l for l in open(os.path.join(ROOT, doc)).read().split("\n"))
        for m in re.finditer(r"`(?:sudo )?((?:make|prowl) [^`]+)`", text):
            spans.append((f"{doc}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1)))
    assert len(spans) >= 25, spans
    makes = sorted({cmd for _, cmd in spans if cmd.startswith("make ")})
    with ThreadPoolExecutor(4) as pool:
        made = dict(zip(makes, pool.map(lambda c: subprocess.run(["make", "-n"] + c.split()[1:], cwd=ROOT,
                                                                   capture_output=True, text=True, timeout=60), makes)))
    helps, bad, checked = {}, [], 0
    for where, cmd in spans:
        words = cmd.split()
        if words[0] == "make":
            checked += 1
            if made[cmd].returncode != 0:
                bad.append(f"{where}: `{cmd}`: {made[cmd].stderr.strip()[-200:]}")
            continue
        sub = words[1]
        if sub.startswith("-"):
            sub = ""
        if sub not in helps:
            helps[sub] = subprocess.run([PROWL] + ([sub] if sub else []) + ["--help"], capture_output=True,
                                        text=True, timeout=10).stdout
        for opt in (w.split("=")[0] for w in words[1:] if w.startswith("-") and w != "--"):
            checked += 1
            if not re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", helps[sub]):
                bad.append(f"{where}: `{cmd}`: `prowl {sub} --help` lists no {opt}")
    assert checked >= 25, checked
    assert not bad, "\n".join(bad)


# ---- blocks that show code's shape ---------------------------------------------------------------

def marked_block(doc, test):
    """The one block of doc whose marker names this test (`tested by: ...::test`)."""
    found = [b for b in BLOCKS if b.doc == doc and b.kind == "tested by" and b.arg.endswith("::" + test)]
    assert len(found) == 1, (doc, test, found)
    return found[0]


def test_unwind_row_layout():
    """docs/unwinding.md's picture of an unwind row lists the fields of struct
    prowl_unwind_row (bpf/prowl.h), in order, with their types."""
    block = marked_block("docs/unwinding.md", "test_unwind_row_layout")
    doc = [tuple(l.split()[:2]) for l in block.text.splitlines() if l.strip()]
    src = open(os.path.join(ROOT, "bpf", "prowl.h")).read()
    body = re.search(r"struct prowl_unwind_row \{(.*?)\};", src, re.S).group(1)
    code = [(t, n) for t, n in re.findall(r"__([us]\d+) (\w+);", body)]
    assert len(code) == 4 and doc == code, (doc, code)


def test_suite_summary_shape():
    """docs/testing.md's sample of the suite's closing lines: the heading of the skips and
    the count line are what tests/run.sh echoes."""
    block = marked_block("docs/testing.md", "test_suite_summary_shape")
    lines = block.text.splitlines()
    run = open(os.path.join(ROOT, "tests", "run.sh")).read()
    assert lines[0] == "skipped (with the reason):" and f'echo "{lines[0]}"' in run, lines[0]
    assert all(l.startswith("  ") for l in lines[1:-1]) and "printf '  %s\\n' \"${skips[@]}\"" in run
    assert re.fullmatch(r"\d+ passed, \d+ failed, \d+ skipped", lines[-1]), lines[-1]
    assert 'echo "$passed passed, $failed failed, $skipped skipped"' in run


def exposition_pattern(line):
    """A /metrics line of the docs as a regex: label values and the sample value masked."""
    name, labels, value = re.fullmatch(r"(\w+)\{(.*)\} (\S+)", line).groups()
    masked = ",".join(re.escape(l.split("=")[0]) + '="[^"]*"' for l in labels.split(","))
    return rf"{re.escape(name)}\{{{masked}\}} [0-9.e+-]+"


def test_metrics_examples(tmp_path):
    """docs/metrics.md's /metrics samples: the real agent, with worked example 1's rule
    (its match and function widened to `.`, so that this host has a series of it) and the
    static label env=prod, serves the rule's `# HELP`/`# TYPE` lines as shown, and lines
    of the shown form (label names in that order; values masked) for it and the built-in
    counter."""
    from agentlib import Agent
    builtin = [b for b in BLOCKS if b.doc == "docs/metrics.md" and b.text.startswith("prowl_profile_cpu_seconds_total{")]
    shown = [b for b in BLOCKS if b.doc == "docs/metrics.md" and b.text.startswith("# HELP go_gc_cpu_seconds_total")]
    example = [b for b in BLOCKS if b.doc == "docs/metrics.md" and b.kind == "config"
               and "metric: go_gc_cpu_seconds_total" in b.text]
    assert len(builtin) == len(shown) == len(example) == 1
    assert builtin[0].arg.endswith("::test_metrics_examples") and shown[0].arg.endswith("::test_metrics_examples")
    cfg = yaml.safe_load(example[0].text)
    for rule in cfg["recording_rules"]:
        rule["match"] = {k: "=~.+" for k in rule.get("match", {})}
        rule["function"] = "."
    cfg["labels"] = {"env": "prod"}
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump(cfg))
    spin = subprocess.Popen([os.path.join(BUILD, "workloads", "spin"), "-t", "1", "-s", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with Agent(tmp_path, ["--config", str(tmp_path / "agent.yaml"), "--interval", "1s", "-F", "99",
                              "--dir", str(tmp_path / "profiles")]) as agent:
            deadline, text = time.time() + 30, ""   # windows of 1 s; the first symbolizes the host
            while time.time() < deadline and "\ngo_gc_cpu_seconds_total{" not in text:
                time.sleep(0.5)
                text = agent.get("/metrics")[1]
    finally:
        spin.kill()
        spin.wait()
    lines = text.splitlines()
    for line in builtin[0].text.splitlines() + shown[0].text.splitlines():
        if line.startswith("#"):
            assert line in lines, f"/metrics has no line `{line}`:\n" + "\n".join(l for l in lines if "go_gc" in l)
        else:
            pat = exposition_pattern(line)
            assert any(re.fullmatch(pat, l) for l in lines), f"/metrics has no line like `{line}`"
