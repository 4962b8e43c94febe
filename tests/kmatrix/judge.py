"""judge.py: reads what guest.sh reported for one kernel and judges it: exit codes, the
50/30/20 split within 5 points, the rooted share, CPython 3.11's 2:1 split of Python functions, the agent's windows (read with Google's
pprof), the off-CPU split against the workload's own account, the one-line errors, and the BPF cost per
sample; rows for the matrix's table."""
import base64
import os
import re
import subprocess
import tempfile

SPLIT = {"share50": 50.0, "share30": 30.0, "share20": 20.0}
TOLERANCE_PP = 5.0
ROOTED_MIN = 95.0
MIN_SAMPLES = 400  # below this, a correct split misses 5 points too often to judge
WINDOWS_MIN = 3
# Where a complete user stack ends: the CFI of glibc's _start and clone3 says so.
DWARF_ROOTS = {"_start", "__clone3", "clone3", "__clone", "clone",
               "thread_start"}  # glibc's arm64 clone3: the new thread's entry (x30 undefined)
# Where a frame-pointer walk through Debian's glibc ends: the callers of user code.
FP_ROOTS = DWARF_ROOTS | {"start_thread", "__libc_start_call_main", "__libc_start_main_impl"}
COST_RE = re.compile(r"BPF program (\S+) \(([^)]*\)?) unwinding\): (\d+) runs, (\d+) of them samples, (\d+) ns per run")
P50_RE = re.compile(r"p50 <= ([0-9.]+) us")


def parse(text):
    """The tagged blocks of guest.sh: info, steps, files (base64 decoded)."""
    info, steps, files = {}, {}, {}
    cur, buf, b64 = None, [], False
    for line in text.splitlines():
        line = line.rstrip("\r")
        if cur is not None:
            if line == "@@end":
                data = "\n".join(buf) + ("\n" if buf else "")
                files[cur] = base64.b64decode("".join(buf)) if b64 else data
                cur, buf = None, []
            else:
                buf.append(line)
            continue
        if line.startswith("@@info "):
            _, k, v = (line.split(" ", 2) + [""])[:3]
            info[k] = v
        elif line.startswith("@@step "):
            m = re.match(r"@@step (\S+) rc=(-?\d+) sec=([0-9.]+)", line)
            if m:
                steps[m.group(1)] = (int(m.group(2)), float(m.group(3)))
        elif line.startswith(("@@file ", "@@b64 ")):
            cur, b64 = line.split(" ", 1)[1], line.startswith("@@b64 ")
        elif line.startswith("@@begin "):
            info["began"] = line.split(" ", 1)[1]
        elif line == "@@booted":
            info["booted"] = "1"
        elif line == "@@done":
            info["done"] = "1"
    return info, steps, files


def workload_stacks(folded, comm):
    """(count, frames) of the folded lines of process comm, frames root first."""
    out = []
    for line in folded.splitlines():
        stack, _, n = line.rpartition(" ")
        fr = stack.split(";")
        if fr and fr[0] == comm and n.isdigit():
            out.append((int(n), fr[1:]))
    return out


def split_and_rooted(folded, comm, roots):
    stacks = workload_stacks(folded, comm)
    total = sum(n for n, _ in stacks)
    shares = {k: sum(n for n, fr in stacks if k in fr) for k in SPLIT}
    counted = sum(shares.values())
    rooted = sum(n for n, fr in stacks if fr and fr[0] in roots and not any(f.startswith("[truncated") for f in fr))
    pct = {k: 100.0 * v / counted for k, v in shares.items()} if counted else {}
    return total, counted, pct, (100.0 * rooted / total if total else 0.0)


# The first kernel frame of a user thread's stack: an interrupt or a system call
# entering the kernel (x86_64; arm64's el0t_64_irq, and 5.10's el0_irq_naked, work_pending).
KERNEL_ENTRY = ("asm_sysvec_", "asm_common_interrupt", "entry_SYSCALL_64", "el0", "work_pending")


def kernel_frames(folded, comm):
    """(samples of comm with kernel frames, names of those frames that are not names)."""
    n, unnamed = 0, set()
    for c, fr in workload_stacks(folded, comm):
        at = next((i for i, f in enumerate(fr) if f.startswith(KERNEL_ENTRY)), None)
        if at is None:
            continue
        n += c
        unnamed |= {f for f in fr[at:] if not f or f.startswith(("0x", "[unknown", "[kernel"))}
    return n, unnamed


def cost(err):
    m = COST_RE.search(err or "")
    p = P50_RE.search(err or "")
    if not m:
        return None
    return {"prog": m.group(1), "runs": int(m.group(3)), "samples": int(m.group(4)), "ns": int(m.group(5)),
            "p50_us": float(p.group(1)) if p else None}


# What timeout(1) leaves when it ends a step at guest.sh's bound: coreutils' 124, busybox's
# (the guests') 143 for SIGTERM, and 137 for the SIGKILL after it.
TIMED_OUT = (124, 137, 143)


def exit_problem(rc, files, step):
    """A step's non-zero exit, with the end of its stderr; a step ended at its bound is called hung."""
    err = (files.get(f"{step}.err") or "").strip()[-300:]
    hung = " (ended at guest.sh's bound: it hung)" if rc in TIMED_OUT else ""
    return f"exit code {rc}{hung}: {err}"


def one_error_line(err, *words):
    lines = [l for l in (err or "").splitlines() if l.strip()]
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr, not one"
    missing = [w for w in words if w not in lines[0]]
    return f"the error does not name {', '.join(missing)}: {lines[0]}" if missing else None


def check_capture(row, steps, files, step, comm, roots, need_rooted):
    rc = steps.get(step, (None, 0))[0]
    folded = files.get(f"{step}.folded", "")
    total, counted, pct, rooted = split_and_rooted(folded, comm, roots)
    c = cost(files.get(f"{step}.err"))
    row.update(step=step, rc=rc, samples=counted, pct=pct, rooted=rooted, cost=c, sec=steps.get(step, (0, 0))[1])
    problems = []
    if rc != 0:
        problems.append(exit_problem(rc, files, step))
    elif counted < MIN_SAMPLES:
        problems.append(f"{counted} samples in the workload's functions, fewer than {MIN_SAMPLES}")
    else:
        for k, want in SPLIT.items():
            if abs(pct[k] - want) > TOLERANCE_PP:
                problems.append(f"{k} has {pct[k]:.1f}% of the samples, not {want:.0f} +- {TOLERANCE_PP:.0f}")
        if need_rooted and rooted < ROOTED_MIN:
            problems.append(f"{rooted:.1f}% of the samples reach a thread root, fewer than {ROOTED_MIN:.0f}%")
        kn, unnamed = kernel_frames(folded, comm)
        row["kernel_samples"] = kn
        if step == "dwarf" and not kn:
            problems.append("no sample of the workload has kernel frames (an interrupt's), so their names are untested")
        if unnamed:
            problems.append(f"kernel frames without a name: {', '.join(sorted(unnamed)[:5])}")
    row["problems"] = problems
    return row


OFF_WAITS = ("wait_pipe", "wait_sleep", "wait_lock")


def check_offcpu(row, steps, files):
    """record --off-cpu on offsplit: the off-CPU time of the stacks through each wait
    function, in % of the three, within 5 points of the time the workload says it spent
    in each; 95 % of it in stacks that reach a thread root."""
    rc = steps.get("offcpu", (None, 0))[0]
    truth = dict(re.findall(r"(wait_\w+)=(\d+)", files.get("offcpu.truth", "")))
    got = dict.fromkeys(OFF_WAITS, 0)
    rooted = 0
    for n, fr in workload_stacks(files.get("offcpu.folded", ""), "offsplit"):
        w = next((w for w in OFF_WAITS if w in fr), None)
        if w:
            got[w] += n
            rooted += n if fr and fr[0] in DWARF_ROOTS else 0
    total, ttotal = sum(got.values()), sum(int(v) for v in truth.values())
    pct = {w: 100.0 * got[w] / total for w in OFF_WAITS} if total else {}
    row.update(step="offcpu", rc=rc, samples=total // 1000000, pct=pct,
               rooted=100.0 * rooted / total if total else 0.0, sec=steps.get("offcpu", (0, 0))[1])
    problems = []
    if rc != 0:
        problems.append(exit_problem(rc, files, "offcpu"))
    elif not total or len(truth) != 3 or not ttotal:
        problems.append("no off-CPU time in the wait functions, or no account from the workload")
    else:
        for w in OFF_WAITS:
            want = 100.0 * int(truth[w]) / ttotal
            if abs(pct[w] - want) > TOLERANCE_PP:
                problems.append(f"{w} has {pct[w]:.1f}% of the off-CPU time, the workload says {want:.1f}")
        if row["rooted"] < ROOTED_MIN:
            problems.append(f"{row['rooted']:.1f}% of the off-CPU time reaches a thread root")
    row["problems"] = problems
    return row


PY_SPLIT = {"py_a": 100.0 * 2 / 3, "py_b": 100.0 / 3}
PY_MIN_SAMPLES = 200


def check_python(row, info, steps, files, step="python", comm="python3.11"):
    """guest.sh's CPython split (step: python3.11's, or python39: bullseye's 3.9 on arm64):
    py_a and py_b 2:1 within 5 points, each under main and <module> in place of the
    interpreter's frame."""
    rc = steps.get(step, (None, 0))[0]
    stacks = workload_stacks(files.get(f"{step}.folded", ""), comm)
    mine = [(n, fr) for n, fr in stacks if set(PY_SPLIT) & set(fr)]
    counted = sum(n for n, _ in mine)
    pct = {k: 100.0 * sum(n for n, fr in mine if k in fr) / counted for k in PY_SPLIT} if counted else {}
    chained = sum(n for n, fr in mine if "_PyEval_EvalFrameDefault" not in fr and "<module>" in fr and
                  "main" in fr and fr.index("<module>") < fr.index("main"))
    row.update(step=step, rc=rc, samples=counted, pct=pct, cost=cost(files.get(f"{step}.err")),
               sec=steps.get(step, (0, 0))[1])
    problems = []
    if info.get(step) == "missing":
        problems.append(f"/usr/bin/{comm} is not in the guest (install python3.11 on this machine)")
    elif rc != 0:
        problems.append(exit_problem(rc, files, step))
    elif counted < PY_MIN_SAMPLES:
        problems.append(f"{counted} samples in py_a and py_b, fewer than {PY_MIN_SAMPLES}")
    else:
        for k, want in PY_SPLIT.items():
            if abs(pct[k] - want) > TOLERANCE_PP:
                problems.append(f"{k} has {pct[k]:.1f}% of the samples, not {want:.0f} +- {TOLERANCE_PP:.0f}")
        if chained < 0.95 * counted:
            problems.append(f"{chained} of {counted} samples hold <module>, main and no interpreter frame")
    row["problems"] = problems
    return row


def pprof_samples(pprof, data):
    """Sample count of a gzip'ed pprof file as Google's pprof reads it, or None."""
    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
        f.write(data)
        f.flush()
        r = subprocess.run([pprof, "-raw", f.name], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return None
    body = r.stdout.split("Samples:", 1)[-1].split("Locations", 1)[0]
    return sum(int(m.group(1)) for m in re.finditer(r"^\s+(\d+)\s+\d+:", body, re.M))


def judge(name, text, pprof):
    """Rows (one per mode) with a "problems" list each; empty lists mean it passed."""
    info, steps, files = parse(text)
    base = {"kernel": name, "release": info.get("kernel", "?")}
    if "done" not in info:
        if "began" in info:
            done = ", ".join(steps) or "none"
            why = f"guest.sh did not finish: it never left step {info['began']} (steps done: {done})"
        elif "booted" in info or "kernel" in info:
            why = "guest.sh started but did not begin its first step"
        else:
            why = "the guest never reached its init"
        return [dict(base, mode="boot", problems=[why + " (its console's last lines are in the log above)"], rc=None)]
    rows = []
    dwarf = check_capture(dict(base, mode="record -a, dwarf"), steps, files, "dwarf", "split532", DWARF_ROOTS, True)
    rows.append(dwarf)
    if "dwarf-bounded" in steps:
        rows.append(check_capture(dict(base, mode="record -a, dwarf, bounded unwinder"), steps, files,
                                  "dwarf-bounded", "split532", DWARF_ROOTS, True))
    if "dwarf-loop" in steps:
        # This kernel lacks bpf_loop: forcing that unwinder must fail in one line naming it.
        err = files.get("dwarf-loop.err", "")
        rc = steps["dwarf-loop"][0]
        p = [f"exit code {rc}, not 1"] if rc != 1 else []
        e = one_error_line(err, "bpf_loop", "5.17")
        rows.append(dict(base, mode="PROWL_BPF_UNWINDER=loop (refused)", rc=rc,
                         problems=p + ([e] if e else []), note=err.strip()))
    rows.append(check_capture(dict(base, mode="record -p, dwarf"), steps, files, "pid", "split532", DWARF_ROOTS,
                              True))
    rows.append(check_python(dict(base, mode="record -p, CPython 3.11"), info, steps, files))
    if "arm64" in name:  # bullseye's 3.9: threads matched by pthread_self(), below the thread pointer there
        rows.append(check_python(dict(base, mode="record -p, CPython 3.9"), info, steps, files, "python39",
                                 "python3.9"))
    rows.append(check_offcpu(dict(base, mode="record --off-cpu (ms of waits)"), steps, files))
    rows.append(check_capture(dict(base, mode="record -a, fp"), steps, files, "fp", "split532_fp", FP_ROOTS, False))
    # window:SERVICE/STAMP-HASH.pb.gz, one file per series per window
    wfiles = sorted(k for k in files if k.startswith("window:"))
    windows = sorted({re.sub(r"-[^-]*$", "", w.rsplit("/", 1)[-1]) for w in wfiles})
    counts = [pprof_samples(pprof, files[w]) for w in wfiles]
    rc = steps.get("agent", (None, 0))[0]
    p = []
    if rc != 0:
        p.append("agent " + exit_problem(rc, files, "agent"))
    if len(windows) < WINDOWS_MIN:
        p.append(f"{len(windows)} windows written, fewer than {WINDOWS_MIN}")
    if any(c is None for c in counts):
        p.append("pprof cannot read a window")
    elif counts and not any(counts):
        p.append("the windows hold no samples")
    rows.append(dict(base, mode="agent, dir exporter", rc=rc, windows=len(windows), window_samples=counts, problems=p,
                     sec=steps.get("agent", (0, 0))[1]))
    err = files.get("nobtf.err", "")
    rc = steps.get("nobtf", (None, 0))[0]
    p = [f"exit code {rc}, not 1"] if rc != 1 else []
    e = one_error_line(err, "BTF", "5.4")
    rows.append(dict(base, mode="no BTF (refused)", rc=rc, problems=p + ([e] if e else []), note=err.strip()))
    return rows


def fmt_row(r):
    pct = r.get("pct") or {}
    split = "/".join(f"{v:.0f}" for v in pct.values()) if pct else ""
    c = r.get("cost") or {}
    unw = c.get("prog", "").replace("prowl_sample_", "")
    cost = f"{c['ns']:,} ns/run ({c['samples']}/{c['runs']} samples)" if c else ""
    if "windows" in r:
        split = f"{r['windows']} windows"
    rooted = f"{r['rooted']:.1f}%" if "rooted" in r else ""
    verdict = "ok" if not r["problems"] else "FAIL: " + "; ".join(r["problems"])
    return [r["kernel"], r["mode"], unw, "" if r.get("rc") is None else str(r["rc"]), str(r.get("samples", "")),
            split, rooted, cost, verdict]


HEADER = ["kernel", "mode", "BPF program", "exit", "samples", "split 50/30/20", "rooted", "BPF cost per run", "result"]


def table(rows, markdown=False):
    cells = [HEADER] + [fmt_row(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
        lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in cells[1:]]
        return "\n".join(lines)
    w = [max(len(row[i]) for row in cells) for i in range(len(HEADER) - 1)]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(row[:-1])) + "  " + row[-1] for row in cells)
