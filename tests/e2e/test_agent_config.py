"""test_agent_config.py: `prowl agent` configuration through the real binary: every
invalid field (flag, PROWL_* variable or YAML key) exits 2 with one precise line naming
where it is; --check prints the effective configuration with secrets masked."""
import os
import re
import subprocess
import time

import pytest

from conftest import PROWL

yaml = pytest.importorskip("yaml")  # Debian python3-yaml

BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}


def agent(args, env=None, cwd=None, timeout=20):
    e = dict(BASE_ENV)
    e.update(env or {})
    return subprocess.run([PROWL, "agent"] + args, capture_output=True, text=True, env=e, cwd=cwd,
                          timeout=timeout)


def one_line(res):
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, f"want exactly one line on stderr, got {lines}"
    assert res.stdout == "", res.stdout
    return lines[0]


F = "agent.yaml"
URL = "http://127.0.0.1:9"

# (id, flags, env, yaml text, regex the one error line must match after "prowl: error: ")
CASES = [
    # ---- flags
    ("flag-frequency-0", ["--frequency", "0"], {}, None,
     r"option --frequency: invalid frequency '0': give a whole number of Hz from 1 to 1000"),
    ("flag-frequency-1001", ["-F", "1001"], {}, None, r"option -F: invalid frequency '1001'|option --frequency: invalid frequency '1001'"),
    ("flag-frequency-abc", ["--frequency", "abc"], {}, None, r"option --frequency: invalid frequency 'abc'"),
    ("flag-interval-short", ["--interval", "500ms"], {}, None,
     r"option --interval: duration '500ms' out of range: use 1s to 1h"),
    ("flag-interval-long", ["--interval", "2h"], {}, None, r"option --interval: duration '2h' out of range"),
    ("flag-interval-junk", ["--interval", "soon"], {}, None, r"option --interval: invalid duration 'soon'"),
    ("flag-label-no-eq", ["--label", "bad"], {}, None, r"option --label: invalid label 'bad': use NAME=VALUE"),
    ("flag-label-reserved", ["--label", "service_name=x"], {}, None, r"option --label: label name 'service_name' is reserved"),
    ("flag-label-host", ["--label", "host_name=x"], {}, None, r"option --label: label name 'host_name' is reserved"),
    ("flag-label-dunder", ["--label", "__name__=x"], {}, None, r"option --label: label name '__name__' is reserved"),
    ("flag-label-badname", ["--label", "1x=y"], {}, None, r"option --label: .*'1x'"),
    ("flag-label-empty", ["--label", "env="], {}, None, r"option --label: label 'env' has an empty value"),
    ("flag-unwind", ["--unwind", "lbr"], {}, None, r"option --unwind: invalid unwind mode 'lbr': use fp or dwarf"),
    ("flag-log-level", ["--log-level", "loud"], {}, None, r"option --log-level: invalid log level 'loud'"),
    ("flag-log-format", ["--log-format", "xml"], {}, None, r"option --log-format: invalid log format 'xml'"),
    ("flag-metrics-address", ["--metrics-address", "nope"], {}, None, r"option --metrics-address: invalid address 'nope'"),
    ("flag-metrics-port-0", ["--metrics-address", "127.0.0.1:0"], {}, None, r"option --metrics-address: invalid address"),
    ("flag-url-scheme", ["--pyroscope-url", "ftp://x"], {}, None, r"option --pyroscope-url: invalid URL 'ftp://x': use http:// or https://"),
    ("flag-url-credentials", ["--parca-url", "http://u:p@h"], {}, None,
     r"option --parca-url: invalid URL: do not put credentials in the URL"),
    ("flag-url-query", ["--otlp-url", "http://h/?q=1"], {}, None, r"option --otlp-url: invalid URL .*without a query"),
    ("flag-unknown", ["--bogus"], {}, None, r"unknown option '--bogus'"),
    ("flag-secret-not-a-flag", ["--bearer-token", "x"], {}, None, r"unknown option '--bearer-token'"),
    # ---- environment
    ("env-frequency", [], {"PROWL_FREQUENCY": "abc"}, None, r"PROWL_FREQUENCY=abc: invalid frequency 'abc'"),
    ("env-interval", [], {"PROWL_INTERVAL": "soon"}, None, r"PROWL_INTERVAL=soon: invalid duration 'soon'"),
    ("env-idle", [], {"PROWL_IDLE": "maybe"}, None, r"PROWL_IDLE=maybe: invalid boolean 'maybe'"),
    ("env-per-thread", [], {"PROWL_PER_THREAD": "2"}, None, r"PROWL_PER_THREAD=2: invalid boolean '2'"),
    ("env-labels", [], {"PROWL_LABELS": "env"}, None, r"PROWL_LABELS=env: invalid label 'env'"),
    ("env-labels-reserved", [], {"PROWL_LABELS": "a=b,service_name=c"}, None, r"PROWL_LABELS=.*'service_name' is reserved"),
    ("env-hostname-ctl", [], {"PROWL_HOSTNAME": "a\tb"}, None, r"PROWL_HOSTNAME=.*control characters"),
    ("env-state-dir", [], {"PROWL_STATE_DIR": ""}, None, r"PROWL_STATE_DIR=: the state directory must not be empty"),
    ("env-log-level", [], {"PROWL_LOG_LEVEL": "loud"}, None, r"PROWL_LOG_LEVEL=loud: invalid log level"),
    ("env-log-format", [], {"PROWL_LOG_FORMAT": "xml"}, None, r"PROWL_LOG_FORMAT=xml: invalid log format"),
    ("env-metrics-enabled", [], {"PROWL_METRICS_ENABLED": "perhaps"}, None, r"PROWL_METRICS_ENABLED=perhaps: invalid boolean"),
    ("env-metrics-address", [], {"PROWL_METRICS_ADDRESS": "host"}, None, r"PROWL_METRICS_ADDRESS=host: invalid address"),
    ("env-max-series", [], {"PROWL_LIMITS_MAX_SERIES": "0"}, None, r"PROWL_LIMITS_MAX_SERIES=0: invalid series limit '0'"),
    ("env-max-stacks", [], {"PROWL_LIMITS_MAX_STACKS_PER_WINDOW": "999"}, None, r"PROWL_LIMITS_MAX_STACKS_PER_WINDOW=999: invalid stack limit"),
    ("env-symbol-cache", [], {"PROWL_LIMITS_SYMBOL_CACHE_ENTRIES": "x"}, None, r"PROWL_LIMITS_SYMBOL_CACHE_ENTRIES=x: invalid cache size"),
    ("env-max-processes", [], {"PROWL_LIMITS_MAX_PROCESSES": "15"}, None, r"PROWL_LIMITS_MAX_PROCESSES=15: invalid process limit"),
    ("env-shutdown-timeout", [], {"PROWL_SHUTDOWN_TIMEOUT": "0"}, None,
     r"PROWL_SHUTDOWN_TIMEOUT=0: duration '0' out of range: use 100ms to 10m"),
    ("env-spool-max-size", [], {"PROWL_SPOOL_MAX_SIZE": "1KiB"}, None,
     r"PROWL_SPOOL_MAX_SIZE=1KiB: size '1KiB' out of range: use 1MiB to 16GiB"),
    ("env-spool-max-age", [], {"PROWL_SPOOL_MAX_AGE": "30s"}, None,
     r"PROWL_SPOOL_MAX_AGE=30s: duration '30s' out of range: use 1m to 168h"),
    ("env-dir-enabled", [], {"PROWL_DIR_ENABLED": "nah"}, None, r"PROWL_DIR_ENABLED=nah: invalid boolean"),
    ("env-dir-max-age", [], {"PROWL_DIR_MAX_AGE": "30s"}, None, r"PROWL_DIR_MAX_AGE=30s: duration '30s' out of range: use 1m to 87600h"),
    ("env-dir-max-size", [], {"PROWL_DIR_MAX_SIZE": "1KiB"}, None, r"PROWL_DIR_MAX_SIZE=1KiB: size '1KiB' out of range: use 1MiB"),
    ("env-pyro-url", [], {"PROWL_PYROSCOPE_URL": "localhost:4040"}, None, r"PROWL_PYROSCOPE_URL=localhost:4040: invalid URL"),
    ("env-pyro-api", [], {"PROWL_PYROSCOPE_API": "grpc"}, None, r"PROWL_PYROSCOPE_API=grpc: invalid API 'grpc': use ingest or push"),
    ("env-pyro-timeout", [], {"PROWL_PYROSCOPE_URL": URL, "PROWL_PYROSCOPE_TIMEOUT": "1ms"}, None,
     r"PROWL_PYROSCOPE_TIMEOUT=1ms: duration '1ms' out of range: use 100ms to 10m"),
    ("env-otlp-buffer", [], {"PROWL_OTLP_URL": URL, "PROWL_OTLP_BUFFER_SIZE": "100"}, None,
     r"PROWL_OTLP_BUFFER_SIZE=100: size '100' out of range: use 1MiB to 16GiB"),
    ("env-parca-retries", [], {"PROWL_PARCA_URL": URL, "PROWL_PARCA_MAX_RETRIES": "-1"}, None,
     r"PROWL_PARCA_MAX_RETRIES=-1: invalid retry count"),
    ("env-insecure", [], {"PROWL_OTLP_URL": URL, "PROWL_OTLP_INSECURE_SKIP_VERIFY": "sometimes"}, None,
     r"PROWL_OTLP_INSECURE_SKIP_VERIFY=sometimes: invalid boolean"),
    ("env-basic-without-password", [], {"PROWL_PYROSCOPE_URL": URL, "PROWL_PYROSCOPE_BASIC_USER": "u"}, None,
     r"PROWL_PYROSCOPE_BASIC_USER=u: basic_user is set without basic_password"),
    ("env-password-without-user", [], {"PROWL_PYROSCOPE_URL": URL, "PROWL_PYROSCOPE_BASIC_PASSWORD": "pw-secret-1"}, None,
     r"PROWL_PYROSCOPE_BASIC_PASSWORD=\*\*\*: "),
    ("env-bearer-and-basic", [], {"PROWL_OTLP_URL": URL, "PROWL_OTLP_BEARER_TOKEN": "tok-secret-2",
                                  "PROWL_OTLP_BASIC_USER": "a", "PROWL_OTLP_BASIC_PASSWORD": "pw-secret-3"}, None,
     r"PROWL_OTLP_\w+=\S+: bearer_token and basic_user/basic_password exclude each other"),
    ("env-ca-missing", [], {"PROWL_PARCA_URL": URL, "PROWL_PARCA_CA_FILE": "/nonexistent/ca.pem"}, None,
     r"PROWL_PARCA_CA_FILE=/nonexistent/ca.pem: cannot read '/nonexistent/ca.pem'"),
    ("env-cert-without-key", [], {"PROWL_OTLP_URL": URL, "PROWL_OTLP_CERT_FILE": "/etc/hostname"}, None,
     r"PROWL_OTLP_CERT_FILE=/etc/hostname: cert_file is set without key_file"),
    ("env-config-missing", [], {"PROWL_CONFIG": "/nonexistent/agent.yaml"}, None, r"/nonexistent/agent.yaml.*No such file"),
    # ---- YAML
    ("yaml-frequency", [], {}, "frequency: 0\n", rf"{F}:1: frequency: invalid frequency '0'"),
    ("yaml-frequency-list", [], {}, "frequency: [1, 2]\n", rf"{F}:1: frequency: expected a .*got a list"),
    ("yaml-frequency-empty", [], {}, "interval: 10s\nfrequency:\n", rf"{F}:2: frequency: invalid frequency ''"),
    ("yaml-interval", [], {}, "# comment\ninterval: soon\n", rf"{F}:2: interval: invalid duration 'soon'"),
    ("yaml-idle", [], {}, "idle: perhaps\n", rf"{F}:1: idle: invalid boolean 'perhaps'"),
    ("yaml-unwind", [], {}, "unwind: lbr\n", rf"{F}:1: unwind: invalid unwind mode 'lbr'"),
    ("yaml-hostname-list", [], {}, "hostname: [x]\n", rf"{F}:1: hostname: expected a string, got a list"),
    ("yaml-labels-list", [], {}, "labels: [a]\n", rf"{F}:1: labels: expected a mapping of name: value, got a list"),
    ("yaml-labels-reserved", [], {}, "labels:\n  env: a\n  service_name: x\n", rf"{F}:3: labels.service_name: label name 'service_name' is reserved"),
    ("yaml-labels-badname", [], {}, "labels:\n  bad-name: x\n", rf"{F}:2: labels.bad-name: "),
    ("yaml-labels-empty", [], {}, "labels:\n  env: ''\n", rf"{F}:2: labels.env: "),
    ("yaml-state-dir", [], {}, "state_dir: ''\n", rf"{F}:1: state_dir: the state directory must not be empty"),
    ("yaml-log-scalar", [], {}, "log: info\n", rf"{F}:1: log: expected a mapping of settings, got a single value"),
    ("yaml-log-level", [], {}, "log:\n  level: loud\n", rf"{F}:2: log.level: invalid log level 'loud'"),
    ("yaml-log-format", [], {}, "log:\n  format: xml\n", rf"{F}:2: log.format: invalid log format 'xml'"),
    ("yaml-metrics-address", [], {}, "metrics:\n  address: x\n", rf"{F}:2: metrics.address: invalid address 'x'"),
    ("yaml-metrics-enabled", [], {}, "metrics:\n  enabled: 3\n", rf"{F}:2: metrics.enabled: invalid boolean '3'"),
    ("yaml-max-series", [], {}, "limits:\n  max_series: 0\n", rf"{F}:2: limits.max_series: invalid series limit '0'"),
    ("yaml-max-stacks", [], {}, "limits:\n  max_stacks_per_window: 10\n", rf"{F}:2: limits.max_stacks_per_window: invalid stack limit '10'"),
    ("yaml-symbol-cache", [], {}, "limits:\n  symbol_cache_entries: 10\n", rf"{F}:2: limits.symbol_cache_entries: invalid cache size '10'"),
    ("yaml-max-processes", [], {}, "limits:\n  max_processes: 1\n", rf"{F}:2: limits.max_processes: invalid process limit '1'"),
    ("yaml-shutdown-timeout", [], {}, "shutdown_timeout: 11m\n", rf"{F}:1: shutdown_timeout: duration '11m' out of range"),
    ("yaml-shutdown-flush-renamed", [], {}, "limits:\n  shutdown_flush: 5s\n",
     rf"{F}:2: 'limits.shutdown_flush' was replaced by 'shutdown_timeout'"),
    ("yaml-spool-max-size", [], {}, "spool:\n  max_size: 10\n", rf"{F}:2: spool.max_size: size '10' out of range"),
    ("yaml-spool-max-age", [], {}, "spool:\n  max_age: 1000h\n", rf"{F}:2: spool.max_age: duration '1000h' out of range"),
    ("yaml-deep", [], {}, "labels:\n  env: " + "[" * 40000 + "]" * 40000 + "\n", rf"{F}:2: nested more than 64 levels deep"),
    ("yaml-anchors", [], {}, "x: [" + ", ".join(f"&a{i} v" for i in range(300)) + "]\n",
     rf"{F}:1: more than 256 anchors and aliases"),
    ("yaml-dir-enabled", [], {}, "exporters:\n  dir:\n    enabled: 2\n", rf"{F}:3: exporters.dir.enabled: invalid boolean '2'"),
    ("yaml-dir-max-age", [], {}, "exporters:\n  dir:\n    max_age: 1s\n", rf"{F}:3: exporters.dir.max_age: duration '1s' out of range"),
    ("yaml-dir-max-size", [], {}, "exporters:\n  dir:\n    max_size: 1KB\n", rf"{F}:3: exporters.dir.max_size: size '1KB' out of range"),
    ("yaml-no-exporter", [], {}, "exporters:\n  dir:\n    enabled: false\n", rf"{F}:3: exporters.dir.enabled: no exporter is enabled"),
    ("yaml-url", [], {}, "exporters:\n  otlp:\n    url: otel:4318\n", rf"{F}:3: exporters.otlp.url: invalid URL 'otel:4318'"),
    ("yaml-api", [], {}, f"exporters:\n  pyroscope:\n    url: {URL}\n    api: grpc\n", rf"{F}:4: exporters.pyroscope.api: invalid API 'grpc'"),
    ("yaml-api-not-parca", [], {}, "exporters:\n  parca:\n    api: push\n", rf"{F}:3: unknown key 'exporters.parca.api' \(known: url, "),
    ("yaml-timeout", [], {}, f"exporters:\n  parca:\n    url: {URL}\n    timeout: 50ms\n", rf"{F}:4: exporters.parca.timeout: duration '50ms' out of range"),
    ("yaml-buffer", [], {}, f"exporters:\n  otlp:\n    url: {URL}\n    buffer_size: 10\n", rf"{F}:4: exporters.otlp.buffer_size: size '10' out of range"),
    ("yaml-retries", [], {}, f"exporters:\n  otlp:\n    url: {URL}\n    max_retries: -1\n", rf"{F}:4: exporters.otlp.max_retries: invalid retry count '-1'"),
    ("yaml-insecure", [], {}, f"exporters:\n  otlp:\n    url: {URL}\n    insecure_skip_verify: maybe\n",
     rf"{F}:4: exporters.otlp.insecure_skip_verify: invalid boolean 'maybe'"),
    ("yaml-basic-user-alone", [], {}, f"exporters:\n  pyroscope:\n    url: {URL}\n    basic_user: a\n",
     rf"{F}:4: exporters.pyroscope.basic_user: basic_user is set without basic_password"),
    ("yaml-bearer-ctl", [], {}, f"exporters:\n  pyroscope:\n    url: {URL}\n    bearer_token: \"tok\\nX-Evil: 1\"\n",
     rf"{F}:4: exporters.pyroscope.bearer_token: invalid value"),
    ("yaml-cert-alone", [], {}, f"exporters:\n  otlp:\n    url: {URL}\n    cert_file: /etc/hostname\n",
     rf"{F}:4: exporters.otlp.cert_file: cert_file is set without key_file"),
    ("yaml-key-unreadable", [], {}, f"exporters:\n  otlp:\n    url: {URL}\n    cert_file: /etc/hostname\n    key_file: /nonexistent.key\n",
     rf"{F}:5: exporters.otlp.key_file: cannot read '/nonexistent.key'"),
    ("yaml-unknown-top", [], {}, "frequency: 19\nfrequncy: 3\n", rf"{F}:2: unknown key 'frequncy' \(known: frequency, interval, "),
    ("yaml-unknown-nested", [], {}, "log:\n  level: info\n  colour: yes\n", rf"{F}:3: unknown key 'log.colour' \(known: level, format\)"),
    ("yaml-unknown-exporter", [], {}, "exporters:\n  jaeger: {}\n", rf"{F}:2: unknown key 'exporters.jaeger' \(known: dir, pyroscope, otlp, parca\)"),
    ("yaml-duplicate", [], {}, "frequency: 19\nfrequency: 20\n", rf"{F}:2: duplicate key 'frequency' \(first at line 1\)"),
    # ---- a setting that cannot take effect: Python frames need the DWARF unwinder
    ("python-on-fp-flags", ["--unwind", "fp", "--python", "on"], {}, None,
     r"option --python: Python frames need unwind: dwarf \(frame pointers alone read none\): "
     r"set unwind to dwarf, or python to false"),
    ("python-on-fp-env", ["--unwind", "fp"], {"PROWL_PYTHON": "true"}, None,
     r"PROWL_PYTHON=true: Python frames need unwind: dwarf"),
    ("python-on-fp-file", [], {}, "unwind: fp\npython: yes\n", rf"{F}:2: python: Python frames need unwind: dwarf"),
    ("yaml-syntax", [], {}, "frequency: [1\n", rf"{F}:1: invalid YAML: "),
    ("yaml-top-list", [], {}, "- a\n", rf"{F}:1: expected a mapping"),
]


@pytest.mark.parametrize("flags,env,text,want", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_configuration_exits_2_with_one_precise_line(tmp_path, flags, env, text, want):
    args = list(flags)
    if text is not None:
        (tmp_path / F).write_text(text)
        args += ["--config", F]
    # Both with --check and as a real start: validation comes before anything else.
    for extra in (["--check"], ["--state-dir", str(tmp_path / "state"), "--no-metrics"]):
        res = agent(args + extra, env=env, cwd=tmp_path)
        assert res.returncode == 2, f"exit {res.returncode}: {res.stderr}"
        line = one_line(res)
        assert line.startswith("prowl: error: "), line
        assert re.search(want, line[len("prowl: error: "):]), f"{line!r} !~ {want!r}"
        for secret in ("pw-secret-1", "tok-secret-2", "pw-secret-3"):
            assert secret not in res.stderr, "a secret in an error message"
        assert not (tmp_path / "state").exists(), "the agent started doing things despite the error"


def test_env_config_is_overridden_by_flags_and_file_by_env(tmp_path):
    (tmp_path / F).write_text("frequency: 29\ninterval: 20s\nlabels:\n  env: file\n  team: a\nlog:\n  level: warn\n")
    res = agent(["--config", F, "--check", "-F", "49", "--label", "env=flag"], cwd=tmp_path,
                env={"PROWL_FREQUENCY": "39", "PROWL_INTERVAL": "30s", "PROWL_LABELS": "team=b,zone=z"})
    assert res.returncode == 0, res.stderr
    c = yaml.safe_load(res.stdout)
    assert c["frequency"] == 49           # flag > env > file
    assert c["interval"] == "30s"         # env > file
    assert c["log"]["level"] == "warn"    # file > default
    assert c["labels"] == {"env": "flag", "team": "b", "zone": "z"}   # merged


def test_check_prints_effective_config_with_secrets_masked(tmp_path):
    (tmp_path / F).write_text(f"""\
labels:
  env: prod
exporters:
  pyroscope:
    url: {URL}/
    basic_user: alice
    basic_password: file-password-1
    tenant: team-a
  otlp:
    url: https://otlp.example.com
""")
    (tmp_path / F).chmod(0o600)
    res = agent(["--config", F, "--check"], cwd=tmp_path, env={"PROWL_OTLP_BEARER_TOKEN": "env-token-2"})
    assert res.returncode == 0, res.stderr
    assert "file-password-1" not in res.stdout + res.stderr
    assert "env-token-2" not in res.stdout + res.stderr
    c = yaml.safe_load(res.stdout)
    py, ot, pa = (c["exporters"][k] for k in ("pyroscope", "otlp", "parca"))
    assert py["basic_password"] == "***" and ot["bearer_token"] == "***"
    assert py["url"] == URL, "trailing / dropped"
    assert py["basic_user"] == "alice" and py["tenant"] == "team-a"
    assert pa["url"] == ""
    assert re.search(r"^  pyroscope:\s+# enabled", res.stdout, re.M)
    assert re.search(r"^  parca:\s+# disabled", res.stdout, re.M)
    # Resolved defaults.
    assert c["frequency"] == 19 and c["interval"] == "10s"
    assert c["hostname"] == os.uname().nodename
    assert c["exporters"]["dir"]["enabled"] is False, "an HTTP exporter is configured: no dir by default"
    assert c["exporters"]["dir"]["path"] == "/var/lib/prowl/profiles"
    assert c["metrics"]["address"] == "127.0.0.1:9464"
    # The output is itself a valid configuration (secrets given again via env).
    (tmp_path / "again.yaml").write_text(res.stdout.replace('"***"', '""'))
    again = agent(["--config", "again.yaml", "--check"], cwd=tmp_path,
                  env={"PROWL_OTLP_BEARER_TOKEN": "t", "PROWL_PYROSCOPE_BASIC_PASSWORD": "p"})
    assert again.returncode == 0, again.stderr
    assert yaml.safe_load(again.stdout) == c


def test_check_default_config_has_dir_exporter(tmp_path):
    res = agent(["--check", "--state-dir", "/srv/prowl"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    c = yaml.safe_load(res.stdout)
    assert c["exporters"]["dir"]["enabled"] is True
    assert c["exporters"]["dir"]["path"] == "/srv/prowl/profiles"


def test_world_readable_secret_file_warns(tmp_path):
    (tmp_path / F).write_text(f"exporters:\n  otlp:\n    url: {URL}\n    bearer_token: tok-secret-9\n")
    (tmp_path / F).chmod(0o644)
    res = agent(["--config", F, "--check"], cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert re.search(r"chmod o-r", res.stderr), res.stderr
    assert "tok-secret-9" not in res.stderr + res.stdout


def test_unknown_env_variable_warns_once(tmp_path):
    res = agent(["--check"], cwd=tmp_path, env={"PROWL_FREQUNCY": "49"})
    assert res.returncode == 0
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "PROWL_FREQUNCY" in lines[0], lines


def test_python_default_gives_way_to_fp(tmp_path):
    """unwind: fp without python set: --check prints python: false, so the file it
    prints is valid as it stands (the warning comes when CPython is sampled:
    test_python.py's test_agent_fp_python_default_warns_once)."""
    res = agent(["--unwind", "fp", "--check"], cwd=tmp_path)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    printed = yaml.safe_load(res.stdout)
    assert (printed["unwind"], printed["python"]) == ("fp", False), printed
    (tmp_path / F).write_text(res.stdout)
    again = agent(["--config", F, "--check"], cwd=tmp_path)
    assert again.returncode == 0 and again.stderr == "", again.stderr
    res = agent(["--check"], cwd=tmp_path, env={"PROWL_UNWIND": "fp", "PROWL_PYTHON": "off"})
    assert res.returncode == 0 and res.stderr == "", res.stderr
    assert yaml.safe_load(agent(["--check"], cwd=tmp_path).stdout)["python"] is True  # dwarf: on


def test_renamed_env_variable_names_its_successor(tmp_path):
    res = agent(["--check"], cwd=tmp_path, env={"PROWL_LIMITS_SHUTDOWN_FLUSH": "5s"})
    assert res.returncode == 0
    lines = [l for l in res.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "PROWL_LIMITS_SHUTDOWN_FLUSH ignored: it was replaced by PROWL_SHUTDOWN_TIMEOUT" in lines[0], lines


def test_deep_yaml_is_refused_quickly(tmp_path):
    """An 80 KB file nested 40,000 levels deep took 4 CPU-seconds to refuse; the
    depth limit refuses it before libyaml builds the document."""
    (tmp_path / "deep.yaml").write_text("[" * 40000 + "]" * 40000 + "\n")
    (tmp_path / "flat.yaml").write_text("[]\n")
    times = {}
    for name in ("flat.yaml", "deep.yaml"):
        best = None
        for _ in range(3):  # the best of three: the host is shared
            t0 = time.monotonic()
            res = agent(["--config", name, "--check"], cwd=tmp_path)
            dt = time.monotonic() - t0
            best = dt if best is None else min(best, dt)
            assert res.returncode == 2, res.stderr
        times[name] = best
        line = one_line(res)
    assert re.search(r"deep.yaml:1: nested more than 64 levels deep", line), line
    # The process start (and a sanitizer runtime's) is the same for both files.
    assert times["deep.yaml"] - times["flat.yaml"] < 0.1, times
    assert times["deep.yaml"] < 0.1 or "san" in PROWL, times


def test_help_exits_0():
    res = agent(["--help"])
    assert res.returncode == 0 and "--config FILE" in res.stdout and res.stderr == ""
