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


SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _check(**extra):
    """`prowl agent --check` with no PROWL_ variable of the caller's but extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
    env.update(extra)
    return subprocess.run([PROWL, "agent", "--check"], capture_output=True, text=True, env=env, timeout=20)


def test_size_ranges_as_documented():
    """Every size key (a default like 64MiB in --check) has the range its row in
    docs/configuration.md gives, "1MiB to 16GiB": both ends are taken from the key's
    environment variable and a byte past either is refused with one line. So a bound
    changed in the code and not in the docs, or not checked, fails here."""
    text = open(os.path.join(ROOT, "docs", "configuration.md")).read()
    res = _check()
    assert res.returncode == 0, res.stderr
    sizes = {k: v for k, v in flatten(yaml.safe_load(res.stdout)).items()
             if isinstance(v, str) and re.fullmatch(r"\d+(KiB|MiB|GiB)", v)}
    assert len(sizes) >= 9, sizes
    for key in sizes:
        m = re.match(r"exporters\.(pyroscope|otlp|parca)\.(.*)", key)
        leaf = m.group(2) if m else key
        row = next((line for line in text.splitlines() if line.startswith(f"| `{leaf}` |")), None)
        assert row, f"docs/configuration.md has no row for `{leaf}`"
        rng = re.search(r"(\d+)(MiB|GiB|TiB) to (\d+)(MiB|GiB|TiB)", row)
        var = re.search(r"`(PROWL_[A-Z_]+)`", row)
        assert rng and var, f"the row of `{leaf}` gives no range or no variable: {row}"
        lo = int(rng.group(1)) * SIZE_UNITS[rng.group(2)]
        hi = int(rng.group(3)) * SIZE_UNITS[rng.group(4)]
        name = var.group(1).replace("PROWL_X_", f"PROWL_{m.group(1).upper()}_") if m else var.group(1)
        for value, ok in ((lo, True), (hi, True), (lo - 1, False), (hi + 1, False)):
            r = _check(**{name: str(value)})
            if ok:
                assert r.returncode == 0, f"{key}: {name}={value} (documented range {rng.group(0)}) refused: {r.stderr}"
                printed = flatten(yaml.safe_load(r.stdout))[key]
                num, unit = re.fullmatch(r"(\d+)(B|KiB|MiB|GiB)?", str(printed)).groups()
                assert int(num) * SIZE_UNITS[unit or "B"] == value, (key, value, printed)
            else:
                lines = r.stderr.strip().splitlines()
                assert r.returncode != 0 and len(lines) == 1 and "out of range" in lines[0], \
                    f"{key}: {name}={value}, outside the documented range {rng.group(0)}, not refused: {r.stderr}"
