"""test_report.py: `prowl report` and `prowl diff` end to end: real captures whose split
moves, deltas checked against Google pprof's shares, the CI gate's exit codes, the
agent's directory over a time range, every output format, and hostile input."""
import json
import os
import re
import signal
import time

import pytest

from agentlib import Agent, private_cpusplit
from conftest import one_error_line, pprof_raw, run_prowl, start, stop
from pprofgen import Profile
from reportlib import FUNCS, caps, pprof_top  # noqa: F401 (caps is a fixture)


def diff_json(*args):
    res = run_prowl(["diff", "-f", "json", *map(str, args)])
    return res, (json.loads(res.stdout) if res.stdout else None)


def test_captures_have_the_split(caps):
    """The workload did what the other tests assume: 50/30/20, then 20/30/50."""
    for path, want in ((caps.base, (50, 30, 20)), (caps.base2, (50, 30, 20)), (caps.new, (20, 30, 50))):
        rows, total = pprof_top(path)
        assert total >= 400, f"{path}: only {total} samples"
        for f, w in zip(("hot_a", "hot_b", "hot_c"), want):
            assert abs(rows[f][1] - w) <= 6, (path, f, rows[f], w)


def test_diff_json_agrees_with_pprof(caps):
    res, d = diff_json(caps.base, caps.new)
    assert res.returncode == 0, res.stderr
    base, btot = pprof_top(caps.base)
    new, ntot = pprof_top(caps.new)
    assert d["base"]["samples"] == btot and d["new"]["samples"] == ntot
    funcs = {f["name"]: f for f in d["functions"]}
    for name in FUNCS:
        assert name in funcs, f"{name} missing from {sorted(funcs)}"
    checked = 0
    for name in set(base) | set(new):
        if name not in funcs:
            continue
        f = funcs[name]
        b, n = base.get(name, (0.0, 0.0)), new.get(name, (0.0, 0.0))
        for ours, theirs in ((f["base_self_pct"], b[0]), (f["new_self_pct"], n[0]),
                             (f["base_total_pct"], b[1]), (f["new_total_pct"], n[1]),
                             (f["delta_self_pp"], n[0] - b[0]), (f["delta_total_pp"], n[1] - b[1])):
            assert abs(ours - theirs) <= 0.5, (name, f, b, n)
        checked += 1
    assert checked >= len(FUNCS)
    # The move itself: hot_c +30 pp, hot_a -30 pp, and sorted by the size of the change.
    assert 22 <= funcs["hot_c"]["delta_total_pp"] <= 38
    assert -38 <= funcs["hot_a"]["delta_total_pp"] <= -22
    # The program's code first, then the rows apart from the gate; each by the size of the change.
    kinds = [f["kind"] != "code" for f in d["functions"]]
    assert kinds == sorted(kinds), kinds
    for apart in (False, True):
        changes = [max(abs(f["delta_self_pp"]), abs(f["delta_total_pp"])) for f in d["functions"]
                   if (f["kind"] != "code") == apart]
        assert changes == sorted(changes, reverse=True)
    assert {d["functions"][0]["name"], d["functions"][1]["name"]} == {"hot_a", "hot_c"}


def test_diff_of_a_file_with_itself_is_zero(caps):
    res, d = diff_json(caps.base, caps.base, "--fail-on-increase", "0")
    assert res.returncode == 0, res.stderr
    assert d["functions"]
    for f in d["functions"]:
        assert f["delta_self_pp"] == 0 and f["delta_total_pp"] == 0, f
        assert f["status"] == "changed" and f["regression"] is False


def test_diff_marks_new_and_gone(tmp_path):
    a, b = Profile(), Profile()
    a.add(["main", "old_path"], 300)
    a.add(["main", "kept"], 100)
    b.add(["main", "new_path"], 250)
    b.add(["main", "kept"], 150)
    (tmp_path / "a.pb.gz").write_bytes(a.encode())
    (tmp_path / "b.pb").write_bytes(b.encode(compress=False))
    res, d = diff_json(tmp_path / "a.pb.gz", tmp_path / "b.pb")
    assert res.returncode == 0, res.stderr
    st = {f["name"]: f for f in d["functions"]}
    assert st["new_path"]["status"] == "new" and st["new_path"]["delta_total_pp"] == 62.5
    assert st["old_path"]["status"] == "gone" and st["old_path"]["delta_total_pp"] == -75
    assert st["kept"]["status"] == "changed" and st["kept"]["delta_self_pp"] == 12.5
    text = run_prowl(["diff", str(tmp_path / "a.pb.gz"), str(tmp_path / "b.pb")]).stdout
    assert re.search(r"\+62\.50\s+new_path\s+\[new\]", text), text
    assert re.search(r"-75\.00\s+old_path\s+\[gone\]", text), text


def offenders(stderr):
    return [l for l in stderr.splitlines() if l.startswith("regression: ")]


def test_gate_fails_the_moved_split(caps):
    res = run_prowl(["diff", str(caps.base), str(caps.new), "--fail-on-increase", "5"])
    assert res.returncode == 3, res.stderr
    lines = offenders(res.stderr)
    assert [l.split(":")[1].strip() for l in lines] == ["hot_c"], res.stderr
    m = re.search(r"total ([\d.]+)% -> ([\d.]+)% \(\+([\d.]+) pp", lines[0])
    assert m and float(m.group(2)) - float(m.group(1)) == pytest.approx(float(m.group(3)), abs=0.011), lines[0]
    assert "hot_c" in res.stdout  # the table is still printed


def test_gate_passes_two_runs_of_the_same_build(caps):
    res = run_prowl(["diff", str(caps.base), str(caps.base2), "--fail-on-increase", "5"])
    assert res.returncode == 0, res.stdout + res.stderr
    assert not offenders(res.stderr)
    assert "no function grew by more than 5 pp" in res.stderr


def test_gate_refuses_too_few_samples(caps):
    tiny = pprof_top(caps.tiny)[1]
    assert tiny <= 40, tiny  # about 10: 0.5 s of CPU at 20 Hz
    res = run_prowl(["diff", str(caps.base), str(caps.tiny), "--fail-on-increase", "5"])
    assert res.returncode == 4, res.stderr
    line = one_error_line(res)
    assert "too few samples" in line and f"new has {tiny}" in line and "--min-samples is 200" in line
    assert not offenders(res.stderr)
    res = run_prowl(["diff", str(caps.base), str(caps.tiny), "--fail-on-increase", "5", "--min-samples", str(tiny)])
    assert res.returncode in (0, 3), res.stderr


def test_gate_calls_an_empty_side_too_few(caps, tmp_path):
    """A capture in which the program never ran on a CPU (0 samples) is under any
    floor: exit 4 with the gate or --min-samples, as for 10 samples; without either
    there is nothing to compare (exit 1), and so with --min-samples 0."""
    idle = tmp_path / "idle.pb.gz"
    sleeper = start(["sleep", "60"])
    try:
        time.sleep(0.2)  # past its start: from now on it never runs on a CPU
        res = run_prowl(["record", "-q", "-p", str(sleeper.pid), "-d", "1s", "-o", str(idle)])
    finally:
        stop(sleeper)
    assert res.returncode == 0 and "no samples" in res.stderr, res.stderr
    assert pprof_raw(str(idle)).total() == 0
    base = pprof_top(caps.base)[1]
    for args, line in (
            ([str(caps.base), str(idle), "--fail-on-increase", "5"],
             f"too few samples for a verdict: base has {base}, new has 0, --min-samples is 200: "),
            ([str(idle), str(caps.base), "--fail-on-increase", "5", "--min-samples", "10"],
             f"too few samples for a verdict: base has 0, new has {base}, --min-samples is 10: "),
            ([str(idle), str(caps.base), "--min-samples", "10"],
             f"too few samples for a verdict: base has 0, new has {base}, --min-samples is 10: ")):
        res = run_prowl(["diff", *args])
        assert res.returncode == 4, (args, res.stderr)
        assert one_error_line(res).startswith("prowl: error: " + line), res.stderr
        assert not res.stdout and not offenders(res.stderr)
    for args in ([str(caps.base), str(idle)], [str(caps.base), str(idle), "--fail-on-increase", "5",
                                                "--min-samples", "0"]):
        res = run_prowl(["diff", *args])
        assert res.returncode == 1, (args, res.stderr)
        assert one_error_line(res) == f"prowl: error: {idle} has no samples: nothing to compare"


def test_gate_focus(caps):
    common = ["diff", str(caps.base), str(caps.new), "--fail-on-increase", "5"]
    res = run_prowl(common + ["--focus", "^hot_a$"])
    assert res.returncode == 0 and not offenders(res.stderr), res.stderr
    res = run_prowl(common + ["--focus", "hot_[bc]", "-f", "json"])
    assert res.returncode == 3, res.stderr
    d = json.loads(res.stdout)
    assert [f["name"] for f in d["functions"] if f["regression"]] == ["hot_c"]
    assert d["fail_on_increase_pp"] == 5


def test_report_top_agrees_with_pprof(caps):
    res = run_prowl(["report", str(caps.base)])
    assert res.returncode == 0, res.stderr
    rows, total = pprof_top(caps.base)
    assert res.stdout.startswith(f"{total} samples")
    tables = res.stdout.split("Top 10 functions by total")
    for name in ("hot_a", "hot_b", "hot_c"):
        m = re.search(rf"^\s+([\d.]+)%\s+([\d.]+)%\s+{name} \(cpusplit\.c\)$", tables[1], re.M)
        assert m, res.stdout
        assert abs(float(m.group(2)) - rows[name][1]) <= 0.5


def test_report_merges_like_pprof(caps, tmp_path):
    out = tmp_path / "merged.pb.gz"
    res = run_prowl(["report", str(caps.base), str(caps.base2), "-o", str(out)])
    assert res.returncode == 0, res.stderr
    ours, ours_total = pprof_top(out)
    theirs, theirs_total = pprof_top(caps.base, caps.base2)  # pprof's own merge of the two
    assert ours_total == theirs_total == pprof_top(caps.base)[1] + pprof_top(caps.base2)[1]
    assert set(ours) == set(theirs)
    for name, (flat, cum) in theirs.items():
        assert ours[name] == pytest.approx((flat, cum), abs=0.011), name


def test_report_formats(caps, tmp_path):
    rows, total = pprof_top(caps.base)
    for name, fmt in (("p.folded", "folded"), ("p.json", "json"), ("p.speedscope.json", "speedscope"),
                      ("p.html", "html"), ("p.pb", "pprof")):
        res = run_prowl(["report", str(caps.base), "-o", str(tmp_path / name)])
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith(f"Wrote {tmp_path / name} ({fmt},"), res.stdout
    folded = (tmp_path / "p.folded").read_text().splitlines()
    assert sum(int(l.rsplit(" ", 1)[1]) for l in folded) == total
    j = json.loads((tmp_path / "p.json").read_text())
    assert j["samples"] == total and sum(s["count"] for s in j["stacks"]) == total
    fn = {f["name"]: f for f in j["functions"]}
    assert abs(fn["hot_a"]["total_pct"] - rows["hot_a"][1]) <= 0.5
    hot_c_samples = sum(s["count"] for s in j["stacks"] if "hot_c" in [j["functions"][i]["name"] for i in s["frames"]])
    assert hot_c_samples == fn["hot_c"]["total"]
    sp = json.loads((tmp_path / "p.speedscope.json").read_text())
    prof = sp["profiles"][0]
    assert prof["type"] == "sampled" and sum(prof["weights"]) == total == prof["endValue"]
    assert len(prof["samples"]) == len(prof["weights"])
    names = [f["name"] for f in sp["shared"]["frames"]]
    assert all(0 <= i < len(names) for s in prof["samples"] for i in s) and "hot_c" in names
    assert pprof_raw(str(tmp_path / "p.pb")).total() == total
    assert (tmp_path / "p.html").read_bytes().startswith(b"<!DOCTYPE html>")
    # To stdout with -o -, nothing else on it.
    res = run_prowl(["report", str(caps.base), "-f", "folded", "-o", "-"])
    assert res.stdout.splitlines() == folded


@pytest.fixture(scope="module")
def agent_dir(tmp_path_factory):
    """The agent's directory exporter at 1 s windows while a private cpusplit runs."""
    d = tmp_path_factory.mktemp("agentdir")
    exe, svc = private_cpusplit(d)
    wl = start([exe, "30", "1", "50/30/20"])
    agent = Agent(d, ["--dir", str(d / "profiles"), "--interval", "1s", "-F", "199", "--label", "env=i10test"])
    try:
        agent.start()
        time.sleep(5.5)
        assert agent.stop(signal.SIGTERM) == 0, agent.log()
    finally:
        agent.kill()
        stop(wl)
    files = sorted((d / "profiles" / svc).glob("*.pb.gz"))
    assert len(files) >= 5, files
    return d / "profiles", svc, files


def name_time(path):
    m = re.match(r"(\d{4})(\d\d)(\d\d)T(\d\d)(\d\d)(\d\d)\.(\d{3})Z", path.name)
    return "%s-%s-%sT%s:%s:%s.%sZ" % m.groups()


def test_dir_selects_windows_by_time(agent_dir):
    root, svc, files = agent_dir
    pick = files[1:-1]
    res = run_prowl(["report", "--dir", str(root), "--service", svc, "--from", name_time(pick[0]),
                     "--to", name_time(files[-1]), "-f", "json", "-o", "-"])
    assert res.returncode == 0, res.stderr
    j = json.loads(res.stdout)
    assert j["files"] == len(pick)
    assert j["samples"] == sum(pprof_raw(str(f)).total() for f in pick)
    assert j["labels"]["service_name"] == svc and j["labels"]["env"] == "i10test"
    # Everything, and by a label instead of --service: the same samples.
    res = run_prowl(["report", "--dir", str(root), "--label", f"service_name={svc}", "-f", "json", "-o", "-"])
    assert json.loads(res.stdout)["samples"] == sum(pprof_raw(str(f)).total() for f in files)
    res = run_prowl(["report", "--dir", str(root), "--service", svc, "--from", "-1h", "--to", "-30m"])
    assert res.returncode == 1
    assert "widen --from/--to" in one_error_line(res)


def test_dir_diff_ranges(agent_dir):
    root, svc, files = agent_dir
    counts = [pprof_raw(str(f)).total() for f in files]
    # Split where half the samples are behind (a loaded machine starves some windows).
    k = next(i for i in range(1, len(files)) if sum(counts[:i]) * 2 >= sum(counts))
    k = min(k, len(files) - 1)
    mid = name_time(files[k])
    # One unchanged workload throughout. Its first windows may hold stacks cut short
    # while the unwinder loads the process (shares of _start and main move), so the
    # gate judges the workload's own functions.
    res = run_prowl(["diff", "--dir", str(root), "--service", svc, "--base", f"..{mid}", "--new", f"{mid}..",
                     "-f", "json", "--fail-on-increase", "5", "--min-samples", "20", "--focus", "^hot_"])
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["base"]["files"] == k and d["new"]["files"] == len(files) - k
    assert d["base"]["samples"] == sum(counts[:k]) and d["new"]["samples"] == sum(counts[k:])


def bad(args):
    res = run_prowl(args, timeout=30)
    assert res.returncode in (1, 2), (args, res.returncode, res.stderr)
    return res.returncode, one_error_line(res)


def test_bad_input(caps, tmp_path):
    (tmp_path / "text.pb.gz").write_text("hello, not a profile\n")
    (tmp_path / "empty.pb.gz").write_bytes(b"")
    (tmp_path / "trunc.pb.gz").write_bytes(caps.base.read_bytes()[:200])
    (tmp_path / "nosamples.pb.gz").write_bytes(Profile().encode())
    wall = Profile(sample_types=(("samples", "count"), ("wall", "nanoseconds")))
    wall.add(["main", "work"], 5)
    (tmp_path / "wall.pb.gz").write_bytes(wall.encode())
    heap = Profile(sample_types=(("alloc_objects", "count"),))
    heap.add(["main", "work"], 5)
    (tmp_path / "heap.pb.gz").write_bytes(heap.encode())
    broken = Profile()
    broken.add(["main"], 5)
    broken.raw_functions[0] += b"\x10\x63"  # function name = string 99: out of the table
    (tmp_path / "broken.pb.gz").write_bytes(broken.encode())
    os.mkfifo(tmp_path / "fifo")
    t = lambda n: str(tmp_path / n)  # noqa: E731
    cases = [
        (["report", t("text.pb.gz")], 1, "not a pprof profile"),
        (["report", t("empty.pb.gz")], 1, "empty"),
        (["report", t("trunc.pb.gz")], 1, "gzip stream is corrupt or truncated"),
        (["report", t("nosamples.pb.gz")], 1, "no samples"),
        (["report", t("heap.pb.gz")], 1, "not a CPU sample profile"),
        (["report", t("broken.pb.gz")], 1, "string table"),
        (["report", str(caps.base), t("wall.pb.gz")], 1, "different sample types"),
        (["diff", str(caps.base), t("wall.pb.gz")], 1, "different sample types"),
        (["diff", t("nosamples.pb.gz"), str(caps.base)], 1, "no samples"),
        (["report", t("fifo")], 1, "not a regular file"),
        (["report", str(tmp_path)], 1, "directory"),
        (["report", t("missing.pb.gz")], 1, "No such file"),
        (["report"], 2, "nothing to read"),
        (["report", "--bogus", str(caps.base)], 2, "unknown option"),
        (["report", str(caps.base), "-f", "svg", "-o", t("x")], 2, "unknown format"),
        (["report", "--dir", str(tmp_path), "--from", "yesterday"], 2, "invalid --from"),
        (["report", "--from", "-1h", str(caps.base)], 2, "--dir"),
        (["report", str(caps.base), "--label", "novalue"], 2, "NAME=VALUE"),
        (["diff", str(caps.base)], 2, "two profiles"),
        (["diff", str(caps.base), str(caps.new), "--fail-on-increase", "lots"], 2, "--fail-on-increase"),
        (["diff", str(caps.base), str(caps.new), "--fail-on-increase", "5", "--focus", "("], 2, "--focus"),
        (["diff", "--dir", str(tmp_path), "--base", "-1h", "--new", "-1h.."], 2, "--base range"),
        (["report", str(caps.base), "-o", "/proc/prowl-i10/x.html"], 1, "cannot write"),
    ]
    for args, code, words in cases:
        got, line = bad(args)
        assert got == code and words in line, (args, got, line)
