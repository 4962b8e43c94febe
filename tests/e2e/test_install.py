"""test_install.py: `make install` into a scratch DESTDIR, and the unit with the secrets
drop-in that docs/configuration.md shows; systemd-analyze verifies both in a scratch root
(no chroot: --root), which must hold the unit, what it runs and systemd's own units."""
import difflib
import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from conftest import BUILD, PROWL, ROOT

pytestmark = pytest.mark.skipif(not shutil.which("systemd-analyze"), reason="systemd-analyze not installed")

UNIT = os.path.join(ROOT, "packaging", "prowl.service")


def systemd_root(root):
    """What systemd-analyze --root needs besides the unit: the targets the unit depends
    on by default and the ExecReload command. Copies, as symlinks would resolve inside."""
    shutil.copytree("/lib/systemd/system", root / "usr" / "lib" / "systemd" / "system", symlinks=True,
                    dirs_exist_ok=True)
    (root / "bin").mkdir(exist_ok=True)
    shutil.copy2("/bin/kill", root / "bin" / "kill")
    return root


def verify(root, unit="prowl.service"):
    """(problems, dump): what systemd-analyze verify says about the unit (nothing when it
    is fine), and the settings of the unit as systemd loaded them, drop-ins applied."""
    cmd = ["systemd-analyze", f"--root={root}", "verify", unit]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    problems = ([f"exit {res.returncode}"] if res.returncode else []) + \
        [l for l in (res.stdout + res.stderr).splitlines() if l.strip()]
    dbg = subprocess.run(cmd, capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, SYSTEMD_LOG_LEVEL="debug"))
    dump = {}
    for m in re.finditer(r"^\t\t(DropIn Path|EnvironmentFile|Documentation|Fragment Path): (.*)$",
                         dbg.stdout + dbg.stderr, re.M):
        dump.setdefault(m.group(1), []).append(m.group(2))
    for m in re.finditer(r"^\t\t\t(Command Line): (.*)$", dbg.stdout + dbg.stderr, re.M):
        dump.setdefault(m.group(1), []).append(m.group(2))
    return problems, dump


def doc_block(path, first_line):
    """The fenced block of a document whose first line is first_line."""
    text = open(os.path.join(ROOT, path)).read()
    for block in re.findall(r"^```[a-z]*\n(.*?)^```$", text, re.M | re.S):
        if block.splitlines()[0].strip().startswith(first_line):
            return block
    raise AssertionError(f"{path} has no block starting with {first_line!r}")


def test_secrets_dropin_of_the_docs_applies(tmp_path):
    """The drop-in of docs/configuration.md, next to the unit: systemd-analyze verify has
    nothing to say, systemd loads the drop-in, and the files it names exist (a comment
    after a value would have become part of the path)."""
    root = systemd_root(tmp_path / "root")
    block = doc_block("docs/configuration.md", "# /etc/systemd/system/prowl.service.d/")
    dropin = block.splitlines()[0].split()[1]
    # One name for the secrets file: both guides show /etc/prowl/agent.env, as the unit reads.
    env_block = doc_block("docs/configuration.md", "# /etc/prowl/agent.env")
    doc_block("docs/agent.md", "# /etc/prowl/agent.env")
    assert all(re.fullmatch(r"PROWL_[A-Z_]+=\S+", l) for l in env_block.splitlines()[1:]), env_block
    files = {"/etc/systemd/system/prowl.service": open(UNIT).read(), dropin: block,
             "/etc/prowl/agent.env": env_block}
    for path, text in files.items():
        p = root / path.lstrip("/")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "usr/local/bin").mkdir(parents=True)
    shutil.copy2(PROWL, root / "usr/local/bin/prowl")
    problems, dump = verify(root)
    assert not problems, problems
    assert dump.get("DropIn Path") == [str(root / dropin.lstrip("/"))], dump
    envs = dump["EnvironmentFile"]
    assert len(envs) == 2, envs                      # the unit's and the drop-in's
    for e in envs:
        assert (root / e.lstrip("-").lstrip("/")).is_file(), f"EnvironmentFile={e} names no file"
    assert "EnvironmentFile=-/etc/prowl/agent.env" in open(UNIT).read()


LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def linked_docs():
    """{source path: document it links from}: README.md and every document reached from it
    by relative links to Markdown files or LICENSE (not to sources, manifests or URLs)."""
    found, todo = {"README.md": None}, ["README.md"]
    while todo:
        doc = todo.pop()
        for target in LINK.findall(open(os.path.join(ROOT, doc)).read()):
            if re.match(r"[a-z]+:", target):
                continue
            path = os.path.normpath(os.path.join(os.path.dirname(doc), target))
            if (path.endswith(".md") or os.path.basename(path) == "LICENSE") and path not in found:
                assert os.path.isfile(os.path.join(ROOT, path)), f"{doc} links to {target}, which does not exist"
                found[path] = doc
                todo.append(path)
    return found


def missing_docs(installed):
    """The linked documents whose name is not among installed (names in the doc folder)."""
    docs = linked_docs()
    assert {"docs/agent.md", "docs/decisions.md", "docs/metrics.md", "LICENSE"} <= docs.keys(), docs
    return {p: f"linked from {src}" for p, src in docs.items() if os.path.basename(p) not in installed}


def effective_config(binary, cfg, *flags, env=None):
    """What `prowl agent --check` prints as the effective configuration of cfg and flags
    (PROWL_* variables of the test's environment left out; env added), without the
    file's name."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")} | (env or {})
    res = subprocess.run([str(binary), "agent", "--config", str(cfg), "--check", *flags], capture_output=True,
                         text=True, env=env, timeout=30)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    return [l for l in res.stdout.splitlines() if not l.startswith("# config file:")]


def assert_neutral_example(binary, cfg, tmp_path):
    """The example configuration that is installed chooses nothing: its effective
    configuration is the defaults', as it is and with each HTTP exporter a user would
    add first (a file that enabled the directory exporter would keep it on then).
    Its commented-out examples (lines of "#" and a key), all uncommented, are a valid
    configuration once the password is in the environment, as the file says."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    for flags in ([], ["--pyroscope-url", "http://127.0.0.1:4040"], ["--otlp-url", "http://127.0.0.1:4318"]):
        mine, defaults = effective_config(binary, cfg, *flags), effective_config(binary, empty, *flags)
        assert len(defaults) > 50, defaults
        assert mine == defaults, "\n".join(difflib.unified_diff(defaults, mine, "defaults", str(cfg), lineterm=""))
    examples = tmp_path / "examples.yaml"
    examples.write_text(re.sub(r"^#(?=\s*[a-z_]+:(\s|$))", "", Path(cfg).read_text(), flags=re.M))
    shown = effective_config(binary, examples, env={"PROWL_PYROSCOPE_BASIC_PASSWORD": "s3cret"})
    assert any(l.strip() == 'env: "prod"' for l in shown) and any("profiles-prod-001" in l for l in shown), shown


def make_install(dest, *args):
    return subprocess.run(["make", "-s", "install", f"O={os.path.relpath(BUILD, ROOT)}", f"DESTDIR={dest}"] + list(args),
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("prefix,unitdir", [(None, "usr/local/lib/systemd/system"), ("/usr", "usr/lib/systemd/system")])
def test_make_install(tmp_path, prefix, unitdir):
    """Binary, unit, docs, alert rules and an example configuration land under DESTDIR
    and PREFIX; the unit's paths point at what was installed and pass systemd-analyze
    verify; a second install keeps a configuration the operator edited."""
    dest = tmp_path / "dest"
    args = [f"PREFIX={prefix}"] if prefix else []
    res = make_install(dest, *args)
    assert res.returncode == 0, res.stdout + res.stderr
    prefix = (prefix or "/usr/local").lstrip("/")
    binary = dest / prefix / "bin" / "prowl"
    assert os.access(binary, os.X_OK)
    docdir = dest / prefix / "share" / "doc" / "prowl"
    for f in ("prowl-alerts.yaml", "agent.yaml.example"):
        assert (docdir / f).is_file(), f
    # Every document the README and the guides link to is there (decisions.md was not).
    assert not missing_docs({p.name for p in docdir.iterdir() if p.is_file()}), missing_docs(os.listdir(docdir))
    cfg = dest / "etc" / "prowl" / "agent.yaml"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    unit = dest / unitdir / "prowl.service"
    assert unit.is_file()
    problems, dump = verify(systemd_root(dest))
    assert not problems, problems
    assert dump["Fragment Path"] == [str(unit)]
    # Every path the unit names is one that was installed.
    (doc,) = dump["Documentation"]
    assert doc.startswith("file:/") and (dest / doc[len("file:/"):]).is_file(), doc
    (cmd,) = dump["Command Line"][:1]
    exe, _, rest = cmd.partition(" ")
    assert (dest / exe.lstrip("/")) == binary, cmd
    conf = re.search(r"--config (\S+)", rest).group(1)
    assert (dest / conf.lstrip("/")) == cfg
    # The installed example is a valid configuration that sets nothing but the defaults.
    assert_neutral_example(binary, cfg, tmp_path)
    # An edited configuration survives the next install.
    cfg.write_text("frequency: 49\n")
    res = make_install(dest, *args)
    assert res.returncode == 0, res.stderr
    assert cfg.read_text() == "frequency: 49\n"
    assert "keeping" in res.stdout and str(cfg) in res.stdout
