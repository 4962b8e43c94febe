"""test_docs.py: the documentation does what it says. Every command of README.md's code
blocks marked `<!-- docs-check: run -->` runs in a scratch directory and must succeed;
docs/configuration.md's complete file lists exactly the keys and defaults of --check."""
import os
import re
import subprocess

import pytest

from conftest import BUILD, PROWL, ROOT, pprof_raw

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

MARK = "<!-- docs-check: run -->"


def runnable_blocks(path):
    """The code blocks of a Markdown file that follow the marker line: [(line, [cmds])]."""
    lines = open(path).read().splitlines()
    out = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        assert lines[i + 1].startswith("```"), f"{path}:{i + 1}: {MARK} must precede a code block"
        end = next(j for j in range(i + 2, len(lines)) if lines[j].startswith("```"))
        out.append((i + 3, [c for c in lines[i + 2:end] if c.strip() and not c.startswith("#")]))
    return out


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


@pytest.mark.slow
def test_readme_runnable_commands(tmp_path):
    """Each marked command of README.md, as root in a shell, in order (later commands
    read what earlier ones wrote). The first one is the quick start: a 10 s capture of
    this host that must leave a file pprof reads and print what it found."""
    blocks = runnable_blocks(os.path.join(ROOT, "README.md"))
    assert len(blocks) >= 3, "README.md marks too few blocks as runnable"
    cwd = scratch_checkout(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
    outs = []
    for line, cmds in blocks:
        for cmd in cmds:
            res = subprocess.run(["bash", "-c", cmd], cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
            assert res.returncode == 0, f"README.md:{line}: `{cmd}` exited {res.returncode}:\n{res.stderr[-3000:]}"
            assert "Sanitizer" not in res.stderr, res.stderr
            outs.append((cmd, res))
    quick = next(res for cmd, res in outs if "record -a -d 10s -o host.pb.gz" in cmd)
    assert pprof_raw(str(cwd / "host.pb.gz")) is not None
    assert "Top 10 functions by self time" in quick.stdout or quick.stdout.count("No samples: ") == 1, quick.stdout
    python = next(res for cmd, res in outs if "-- python3" in cmd)
    assert pprof_raw(str(cwd / "python.pb.gz")).total() > 20, python.stdout


def flatten(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def test_configuration_listing_matches_check():
    """The "complete file, every key" of docs/configuration.md and what `--check` prints
    for an empty configuration: the same keys, and the same defaults but where the
    listing says "" stands for a value found at run time."""
    text = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    listing = re.search(r"A complete file, every key at its default:\n\n```yaml\n(.*?)^```$", text, re.S | re.M)
    assert listing, "docs/configuration.md lost its complete file"
    documented = flatten(yaml.safe_load(listing.group(1)))
    resolved = {".".join(path) for path in _keys_marked(listing.group(1), '# "" = ')}
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
    res = subprocess.run([PROWL, "agent", "--check"], capture_output=True, text=True, env=env, timeout=20)
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


def test_configuration_error_examples_are_prowls_own(tmp_path):
    """The sample error lines of docs/configuration.md, each produced by prowl from the
    input it describes (a file at /etc/prowl/agent.yaml, the environment, a flag):
    the docs quote them exactly, so a changed message or list of keys fails here."""
    text = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    block = re.search(r"what to write instead:\n\n```\n(.*?)^```$", text, re.S | re.M)
    assert block, "docs/configuration.md lost its sample error lines"
    files = {
        "timeout": "# prowl agent\nfrequency: 19\ninterval: 10s\nlabels:\n  env: staging\n\n"
                   "exporters:\n  pyroscope:\n    url: http://127.0.0.1:4040\n"
                   "    # how long one push may take\n\n    timeout: soon\n",
        "typo": "# prowl agent\n\nlabels:\n  env: staging\n\n# samples per second\nfrequncy: 19\n",
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
    produced = []
    for name, body in files.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(body)
        res = subprocess.run([PROWL, "agent", "--config", str(path), "--check"], capture_output=True, text=True,
                             env=env, timeout=20)
        produced.append((res, str(path)))
    res = subprocess.run([PROWL, "agent", "--check"], capture_output=True, text=True, timeout=20,
                         env=dict(env, PROWL_FREQUENCY="abc"))
    produced.append((res, None))
    res = subprocess.run([PROWL, "agent", "--interval", "2h", "--check"], capture_output=True, text=True, env=env,
                         timeout=20)
    produced.append((res, None))
    lines = []
    for res, path in produced:
        assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
        lines.append(res.stderr.strip().replace(path, "/etc/prowl/agent.yaml") if path else res.stderr.strip())
    assert block.group(1).splitlines() == lines, "docs/configuration.md's sample errors differ from prowl's"


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
