"""test_node.py: node's JavaScript stacks (issue 29). The machine's node (Node 20, no node
flags but --jitless where named), sampled by the real BPF program and read back with Google's
pprof: V8's frames are unwound through the builtins and JIT code by frame pointer, JavaScript
functions are named with their script and line, the stacks reach the thread's root, and
--node=off leaves V8's code as [jit] and builtins. One capture per node mode, shared by the
module's tests."""
import os
import re
import select
import signal
import subprocess


import pytest

import jdkfetch
from agentlib import otlp_window_run
from conftest import BUILD, pprof_raw, run_prowl, stop

NODE = "/usr/bin/node"
SCRIPT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", "workloads", "node", "split.js"))
INLINED = os.path.join(os.path.dirname(SCRIPT), "inlined.js")
SPLIT = {"fifty": 0.50, "thirty": 0.30, "twenty": 0.20}
ROOTS = {"_start", "__clone3", "__clone", "clone", "clone3", "start_thread"}


def _source_lines():
    """From split.js's text: each function's busy loop line (marked "loop: NAME") and its
    body (its declaration's line to its closing brace)."""
    text = open(SCRIPT).read().splitlines()
    loop, body = {}, {}
    for i, l in enumerate(text):
        m = re.search(r"// loop: (\w+)", l)
        if m:
            loop[m.group(1)] = i + 1
    for name in list(SPLIT) + ["restock"]:
        start = next(i for i, l in enumerate(text) if re.match(rf"\s*(function )?{name}\(", l))
        end = next(i for i in range(start, len(text)) if text[i] in ("}", "  }"))
        body[name] = range(start + 1, end + 2)
    return loop, body


LOOP_LINE, BODY_LINES = _source_lines()

pytestmark = pytest.mark.skipif(not os.access(NODE, os.X_OK), reason=f"{NODE} is not installed (apt-get install nodejs)")


def start_node(node_flags=(), mode="split", script=SCRIPT, node=(NODE,)):
    p = subprocess.Popen([*node, *node_flags, script, "60", mode], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    ready, _, _ = select.select([p.stdout], [], [], 30)
    if not (ready and p.stdout.readline() == b"ready\n"):
        p.kill()
        pytest.fail("node did not start")
    return p


def _run(tmp_path_factory, name, node_flags=(), mode="split", extra=(), seconds=2, script=SCRIPT, node=(NODE,)):
    """Starts node on split.js (or script), records it at 999 Hz, stops it: the pprof -raw."""
    out = tmp_path_factory.mktemp("node") / f"{name}.pb.gz"
    p = start_node(node_flags, mode, script, node)
    try:
        res = run_prowl(["record", "-p", str(p.pid), "-F", "999", "-d", str(seconds), "-o", str(out)] + list(extra))
        assert res.returncode == 0, res.stderr
    finally:
        p.send_signal(signal.SIGKILL)
        stop(p)
    return pprof_raw(str(out), "-symbolize=none"), res.stderr


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    return _run(tmp_path_factory, "default", seconds=3)


@pytest.fixture(scope="module")
def jitless_run(tmp_path_factory):
    return _run(tmp_path_factory, "jitless", node_flags=("--jitless",), seconds=3)


@pytest.fixture(scope="module")
def inlined_run(tmp_path_factory):
    return _run(tmp_path_factory, "inlined", seconds=3, script=INLINED)


def js_frames(raw, s):
    """(function, file, line) of the [js] frames of sample s, leaf first."""
    jm = {mid for mid, m in raw.mappings.items() if m["file"] == "[js]"}
    out = []
    for lid in s["locs"]:
        if raw.locations[lid]["mapping"] in jm:
            out.extend(raw.locations[lid]["lines"])
    return out


def assert_shares_and_root(raw):
    """The 50/30/20 split within 5 points among the three functions, which hold at least
    85 % of the samples (the rest is mostly their caller's loops: 5 to 8 % of inlined.js's
    in round() itself); at least 95 % of the samples rooted."""
    total = raw.total()
    assert total > 200, f"only {total} samples of node"
    shares = {f: raw.share(f) for f in SPLIT}
    split = sum(shares.values())
    print({k: round(v, 3) for k, v in shares.items()}, f"the three: {split:.3f}")
    assert split >= 0.85, shares
    for f, want in SPLIT.items():
        assert abs(shares[f] / split - want) <= 0.05, (f, shares)
    rooted = raw.total(lambda s: raw.frames(s)[-1] in ROOTS)
    assert rooted / total >= 0.95, f"{rooted} of {total} samples reach the thread's root"
    return total


def assert_split_and_root(raw, entry="Builtins_JSEntry"):
    assert_shares_and_root(raw)
    # The work is under main() and node's own loader (whose module wrapper has no name),
    # through V8's entry into JavaScript (entry: a frame of it that has a name).
    for s in [s for s in raw.samples if set(raw.frames(s)) & set(SPLIT)]:
        fr = raw.frames(s)
        assert "main" in fr and entry in fr and "(anonymous)" in fr, fr
        assert fr.index("main") < fr.index("(anonymous)") < fr.index(entry), fr


def assert_named_in_body(raw):
    """Each split function named with split.js and a line in its body."""
    seen = set()
    for s in raw.samples:
        for func, file, line in js_frames(raw, s):
            if func in SPLIT:
                assert file == SCRIPT, (func, file)
                assert line in BODY_LINES[func], (func, line, BODY_LINES[func])
                seen.add(func)
    assert seen == set(SPLIT)


def assert_mix_inlined(raw):
    """At least a third of each split function's samples show mix() as a frame TurboFan
    inlined into it (one location, innermost first), called from its loop line."""
    in_mix = dict.fromkeys(SPLIT, 0)
    for s in raw.samples:
        for lid in s["locs"]:
            lines = raw.locations[lid]["lines"]
            if len(lines) >= 2 and lines[0][0] == "mix" and lines[1][0] in SPLIT:
                assert lines[1][2] == LOOP_LINE[lines[1][0]], lines
                in_mix[lines[1][0]] += s["values"][0]
    for f in SPLIT:
        assert in_mix[f] >= raw.total() * raw.share(f) / 3, (f, in_mix, raw.share(f))


def assert_baseline_lines(raw):
    """Sparkplug's frames named with the line of the bytecode their pc runs (the code's
    bytecode offset table walked beside the bytecodes): each function's frames that called
    another JavaScript function (mix) all at its loop line (95 %), and 75 % of all its
    frames, leaf ones included (a leaf in a frameless builtin, or at a function's entry
    before its frame is built, is stepped by the return address on the stack; the rest
    keep the first line). Naming every baseline frame by its first line gives 0 %."""
    for func in SPLIT:
        calls, lines = [], []
        for s in raw.samples:
            fr = js_frames(raw, s)
            for i, (f, file, line) in enumerate(fr[:2]):
                if f == func:
                    lines.append((line, s["values"][0]))
                    if i:
                        calls.append((line, s["values"][0]))
        for got, want in ((calls, 0.95), (lines, 0.75)):
            total = sum(n for _, n in got)
            assert total, (func, got)
            hot = sum(n for line, n in got if line == LOOP_LINE[func])
            assert hot / total >= want, (func, LOOP_LINE[func], want, sorted(set(got)))


@pytest.mark.more
def test_node18(tmp_path_factory):
    """Debian 12's own Node 18 (V8 10.2, in libnode.so.108; fetched from bookworm, run
    beside the machine's node): the split, rooted stacks, names and lines, and mix()
    inlined into each function (V8 10's code objects, in code space)."""
    node = jdkfetch.node18(BUILD)
    if isinstance(node, str):
        pytest.skip(node)
    raw, _ = _run(tmp_path_factory, "node18", seconds=3, node=node)
    # libnode.so.108 keeps no symbols for V8's builtins: its C++ entry names the way in.
    assert_split_and_root(raw, entry="v8::internal::Execution::Call")
    assert_named_in_body(raw)
    assert_mix_inlined(raw)
    # Kept at Sparkplug (V8 10 has no --max-opt): its builtins, without symbols, are
    # recognized in libnode.so's text.
    raw, _ = _run(tmp_path_factory, "node18-sparkplug", node_flags=("--sparkplug", "--no-opt"), seconds=3, node=node)
    assert_split_and_root(raw, entry="v8::internal::Execution::Call")
    assert_baseline_lines(raw)
    raw, _ = _run(tmp_path_factory, "node18-async", node_flags=("--jitless",), mode="async", node=node)
    assert_class_method(raw)


@pytest.mark.more
def test_node22(tmp_path_factory):
    """Node 22 (V8 12.4; nodejs.org's build from the npm registry, run beside the machine's
    node; its v8dbg_ constants spell types "Tagged_T_", and it keeps optimized code's
    deoptimization data and position table in its trusted space): the split, rooted stacks,
    names and lines, and mix() inlined into each function; a class method with its class."""
    node = jdkfetch.node22(BUILD)
    if isinstance(node, str):
        pytest.skip(node)
    raw, _ = _run(tmp_path_factory, "node22", seconds=3, node=node)
    assert_split_and_root(raw)
    assert_named_in_body(raw)
    assert_mix_inlined(raw)
    # Kept at Sparkplug: V8 12 exports no function_data (the SharedFunctionInfo's word 1)
    # and keeps a BytecodeArray's position table after its wrapper, in its trusted space.
    raw, _ = _run(tmp_path_factory, "node22-sparkplug", node_flags=("--max-opt=1",), seconds=3, node=node)
    assert_split_and_root(raw)
    assert_baseline_lines(raw)
    raw, _ = _run(tmp_path_factory, "node22-async", node_flags=("--jitless",), mode="async", node=node)
    assert_class_method(raw)


def test_split_file_line_and_root(default_run):
    """Default tiers (Ignition, Sparkplug, Maglev, TurboFan as V8 picks them): the three
    functions' shares, every stack rooted, each function named with split.js and a line
    in its body. TurboFan inlines mix() into each: at least a third of each function's
    samples show mix as an inlined frame of it (one location), called from its loop line."""
    raw, _ = default_run
    assert_split_and_root(raw)
    assert_named_in_body(raw)
    assert_mix_inlined(raw)


def test_inlined_functions(inlined_run):
    """inlined.js: the three functions are inlined by TurboFan into round(), so their
    samples are of round()'s optimized code: prowl splits each such frame into the function
    inlined at its pc (with its line) under round() (the line of the call), lines of one
    location (round() itself may be inlined into the script's loop, optimized on the stack).
    The 50/30/20 split holds and the stacks reach the thread's root."""
    raw, _ = inlined_run
    total = assert_shares_and_root(raw) * sum(raw.share(f) for f in SPLIT)  # the three functions' samples
    text = open(INLINED).read().splitlines()
    body = {m.group(1): i + 1 for i, l in enumerate(text) for m in [re.search(r"// body: (\w+)", l)] if m}
    call = {m.group(1): i + 1 for i, l in enumerate(text) for m in [re.search(r"// call: (\w+)", l)] if m}
    inlined = 0
    for s in raw.samples:
        for lid in s["locs"]:
            lines = raw.locations[lid]["lines"]
            if len(lines) >= 2 and lines[0][0] in SPLIT and lines[1][0] == "round":
                f = lines[0][0]
                assert lines[0][1:] == (INLINED, body[f]) and lines[1][1:] == (INLINED, call[f]), lines
                inlined += s["values"][0]
    assert inlined / total >= 0.9, f"{inlined} of {total:.0f} samples of the three in a function inlined into round()"


@pytest.mark.parametrize("tier", [pytest.param(("--max-opt=1",), id="sparkplug"),
                                  pytest.param(("--maglev", "--max-opt=2"), id="maglev", marks=pytest.mark.more)])
def test_tier_split_and_root(tmp_path_factory, tier):
    """Kept at one tier: Sparkplug's baseline code calls V8's builtins where V8 mapped
    them a second time, near its code (short builtin calls): a sample in one is walked
    as in the binary's own copy, so the split holds and the stacks reach the root; and
    baseline frames name the line their pc runs."""
    raw, _ = _run(tmp_path_factory, tier[-1].strip("-"), node_flags=tier, seconds=3)
    assert_split_and_root(raw)
    assert_named_in_body(raw)
    if tier == ("--max-opt=1",):
        assert_baseline_lines(raw)


def test_jitless_busy_loop_line(jitless_run):
    """--jitless: every frame is Ignition's, and the line comes from the bytecode offset:
    at least 90 % of each function's samples name its busy loop's line."""
    raw, _ = jitless_run
    assert_split_and_root(raw)
    for func in SPLIT:
        lines = [(line, s["values"][0]) for s in raw.samples for f, file, line in js_frames(raw, s)[:2] if f == func]
        total = sum(n for _, n in lines)
        assert total, func
        hot = sum(n for line, n in lines if line == LOOP_LINE[func])
        assert hot / total >= 0.9, (func, LOOP_LINE[func], sorted(set(lines)))


def assert_class_method(raw):
    """Shop.restock (the method with its class, as Error.stack names it) under inner
    under outer, with restock's busy loop line; no frame is restock alone."""
    assert raw.share("Shop.restock") >= 0.8, raw.share("Shop.restock")
    assert raw.share("restock") == 0
    # Its callers in order in all but a rare sample (a caller's frame moved by the
    # collector before it was named gets a marker).
    chained, total, odd = 0, 0, []
    for s in raw.samples:
        fr = raw.frames(s)
        if "Shop.restock" in fr:
            n = s["values"][0]
            total += n
            if all(f in fr for f in ("inner", "outer", "main")) and \
                    fr.index("Shop.restock") < fr.index("inner") < fr.index("outer") < fr.index("main"):
                chained += n
            else:
                odd.append(fr)
    assert chained >= 0.98 * total, (chained, total, odd[:3])
    lines = [(line, s["values"][0]) for s in raw.samples for f, file, line in js_frames(raw, s)[:2]
             if f == "Shop.restock"]
    hot = sum(n for line, n in lines if line == LOOP_LINE["restock"])
    assert hot / sum(n for _, n in lines) >= 0.9, sorted(set(lines))


def test_class_method_and_async_chain(tmp_path_factory):
    """A class method called from an async chain, interpreted (--jitless)."""
    raw, _ = _run(tmp_path_factory, "async", node_flags=("--jitless",), mode="async")
    assert_class_method(raw)


def test_node_off(tmp_path_factory):
    """--node=off: no [js] frame; V8's code stays [jit] and builtins, and the stacks are
    cut where the builtins have no unwind info."""
    raw, _ = _run(tmp_path_factory, "off", extra=["--node", "off"])
    assert not [m for m in raw.mappings.values() if m["file"] == "[js]"]
    assert raw.share("fifty") == 0
    assert raw.share("[jit]") > 0.5


def test_agent_otlp_frame_type_and_metrics(tmp_path):
    """The agent (whole host) exports node's frames over OTLP, read by the strict checker:
    mapping [js] and frame type v8js for the JavaScript functions, native for V8's own
    C++; a second node's functions TurboFan inlined into round() come as inlined frames
    (innermost first, then round); the name cache shows in /metrics."""
    p = start_node(("--jitless",))
    p2 = start_node(script=INLINED)
    try:
        profs, m = otlp_window_run(tmp_path)
    finally:
        for q in (p, p2):
            q.kill()
            stop(q)
    inl = [s for prof in profs for s in prof["samples"]
           if prof["resource"].get("process.pid") == p2.pid and set(s["stack"]) & set(SPLIT)]
    assert sum(s["value"] for s in inl) > 100, len(inl)
    for s in inl:
        f = next(i for i, name in enumerate(s["stack"]) if name in SPLIT)
        assert s["stack"][f + 1] == "round", s["stack"]
        callee, caller = s["frames"][f], s["frames"][f + 1]
        # Lines of one location: one address.
        assert callee["address"] == caller["address"] and {callee["frame_type"], caller["frame_type"]} == {"v8js"}, \
            (callee, caller)
    mine = [s for prof in profs for s in prof["samples"]
            if prof["resource"].get("process.pid") == p.pid and set(s["stack"]) & set(SPLIT)]
    assert sum(s["value"] for s in mine) > 100, len(mine)
    for s in mine:
        for f in s["frames"]:
            if f["function"] in SPLIT:
                assert (f["frame_type"], f["mapping"], f["file"]) == ("v8js", "[js]", SCRIPT), f
            elif f["function"] in ("node::Start", "Builtins_JSEntry"):
                assert f["frame_type"] == "native", f
    assert m.get("prowl_js_names") >= 4, m.text
    assert m.get("prowl_js_name_lookups_total", result="hit") > m.get("prowl_js_name_lookups_total", result="miss")
