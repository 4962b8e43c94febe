#!/usr/bin/python3
"""soak.py: runs the real `prowl agent` for a long time under process churn, a
Pyroscope stand-in that goes down on a schedule and regular SIGHUP reloads, and reports
crashes, RSS drift, lost samples and whether every window arrived exactly once.

    sudo tests/soak/soak.py --seconds 3600          # the documented run (make soak)
    sudo tests/soak/soak.py --seconds 120 --scale   # the suite's 2-minute version
    PROWL_TEST_BUILD=build-san tests/soak/soak.py ...  # another build directory

With --scale the schedule shrinks with the run: outages and reloads keep their share of
the time (60 s of every 300 s down, a reload every 300 s) and the window is 2 s.
Exit status 0 when every goal holds, 1 when one does not, 2 on bad usage.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "e2e"))
os.environ.setdefault("PROWL_TEST_BUILD", "build")  # read by agentlib on import

from agentlib import Agent, IngestProfile, Metrics, NS  # noqa: E402
from receiver import Receiver  # noqa: E402

SPIN_NAME = "soakspin"


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def write_config(path, rx_url, gen):
    # Each reload changes a recording rule (never a series label: the windows of one
    # series must stay one chain across reloads).
    path.write_text(f"# soak generation {gen}\n"
                    f"exporters:\n  pyroscope:\n    url: {rx_url}\n"
                    "recording_rules:\n"
                    f"  - metric: soak_gen_{gen % 2}_cpu_seconds_total\n"
                    f"    match: {{service_name: {SPIN_NAME}}}\n")


def chain_gaps(windows, freq):
    """windows: [(start_ns, end_ns)] sorted. Returns (gaps, overlaps, notes). A reload
    cuts a window short, and a cut window of a few ms may hold no sample of the busy
    series: no profile, a short hole in its chain. A hole longer than 10 sample periods
    (no sample of a busy thread in it by chance: e^-10) is a window that went missing."""
    gaps = overlaps = 0
    notes = []
    for (s0, e0), (s1, e1) in zip(windows, windows[1:]):
        if s1 - e0 > 10 * NS // freq:
            gaps += 1
            notes.append(f"a hole of {(s1 - e0) / 1e6:.0f} ms")
        elif s1 < e0:
            overlaps += 1
            notes.append(f"an overlap of {(e0 - s1) / 1e6:.0f} ms")
    return gaps, overlaps, notes


def median_of(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else None


def run(args):
    build = Path(HERE.parent.parent, os.environ["PROWL_TEST_BUILD"])
    L = args.seconds
    if args.scale:
        outage_every, outage_len, hup_every, interval = L / 5, L / 25, L / 5, 2
    else:
        outage_every, outage_len, hup_every, interval = 300, 60, 300, args.interval
    drift_at = min(600, L / 6)
    tmp = Path(tempfile.mkdtemp(prefix="prowl-soak."))
    spin_exe = tmp / SPIN_NAME
    shutil.copy(build / "workloads" / "spin", spin_exe)
    rx = Receiver().start()
    cfg = tmp / "agent.yaml"
    gen = 0
    write_config(cfg, rx.url, gen)
    agent = Agent(tmp, ["--config", str(cfg), "--interval", f"{interval}s", "-F", str(args.freq)])
    procs = []
    rss, crashes, hups, outages = [], [], 0, 0
    m = None
    try:
        procs.append(subprocess.Popen([str(spin_exe), "-t", "1", "-s", str(int(L + 60))],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen([str(build / "workloads" / "churn"), "-r", str(args.rate),
                                       "-s", str(int(L))], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        agent.start()
        t0 = time.time()
        next_outage, next_hup, next_rss, up_at = t0 + outage_every, t0 + hup_every, t0, None
        last_report = t0
        while time.time() < t0 + L:
            now = time.time()
            if not agent.alive():
                crashes.append(f"agent exited with {agent.p.returncode} at {now - t0:.0f}s")
                break
            if now >= next_rss:
                rss.append((now - t0, rss_kib(agent.pid)))
                next_rss += 5
            if up_at is None and now >= next_outage and now + outage_len < t0 + L - 2 * interval:
                rx.down()
                print(f"soak: backend down at {now - t0:.1f} s", flush=True)
                outages += 1
                up_at = now + outage_len
            if up_at is not None and now >= up_at:
                rx.up()
                up_at = None
                next_outage += outage_every
            if now >= next_hup:
                gen += 1
                write_config(cfg, rx.url, gen)
                agent.send(signal.SIGHUP)
                print(f"soak: SIGHUP at {now - t0:.1f} s", flush=True)
                hups += 1
                next_hup += hup_every
            if now - last_report >= 60:
                last_report = now
                print(f"soak: {now - t0:.0f}/{L}s  RSS {rss[-1][1] / 1024:.1f} MiB  "
                      f"requests {len(rx.requests)}  outages {outages}  reloads {hups}", flush=True)
            time.sleep(0.2)
        if up_at is not None:
            rx.up()
        # Let the queue drain with the backend up, then read the counters and stop.
        drain = time.time() + 6 * interval + 30
        while agent.alive() and time.time() < drain:
            m = agent.metrics()
            if (m.get("prowl_export_queue_items", backend="pyroscope") or 0) == 0:
                break
            time.sleep(0.5)
        if agent.alive():
            m = agent.metrics()
            rc = agent.stop(timeout=60)
            if rc != 0:
                crashes.append(f"agent exited with {rc} on SIGTERM")
    finally:
        for p in procs:
            p.kill()
            p.wait()
        if agent.alive():
            agent.p.kill()
        rx.stop()

    # Windows of the always-busy series, as the stand-in received them.
    mine = [IngestProfile(r) for r in rx.requests
            if r.path == "/ingest" and 200 <= r.status < 300 and r.arg("name").startswith(SPIN_NAME + "{")]
    keys = [(p.meta.time_ns, p.meta.end_ns) for p in mine]
    dups = len(keys) - len(set(keys))
    windows = sorted(set(keys))
    gaps, overlaps, notes = chain_gaps(windows, args.freq)
    for n in notes:
        print(f"soak: the busy series' windows: {n}")
    dropped = sent = lost = reload_ok = -1
    if m is not None:
        dropped = m.export("pyroscope", "dropped") + int(m.get("prowl_spool_dropped_total") or 0)
        sent = m.export("pyroscope", "sent")
        lost = int(m.get("prowl_lost_samples_total") or 0)
        reload_ok = int(m.get("prowl_config_reloads_total", result="ok") or 0)
    # RSS moves by +-5% from one 5-s reading to the next (allocator trims, the page
    # cache of objects read): each end of the drift is the median of 2 minutes.
    at = median_of([k for t, k in rss if drift_at - 60 <= t <= drift_at + 60])
    end = median_of([k for t, k in rss if t >= rss[-1][0] - 120]) if rss else None
    drift = (end - at) / at if at and end else None

    goals = [
        ("crashes", len(crashes) == 0, f"{len(crashes)} {'; '.join(crashes)}"),
        ("lost samples", lost == 0, str(lost)),
        ("windows of the busy series received twice", dups == 0 and overlaps == 0, f"{dups} twice, {overlaps} overlapping"),
        ("windows missing and not counted as dropped", gaps <= max(dropped, 0),
         f"{gaps} gaps in {len(windows)} windows, {dropped} counted dropped"),
        ("reloads applied", reload_ok == hups, f"{reload_ok} of {hups}"),
    ]
    if L >= 1200:
        # A leak is growth: the goal judges it; a fall is printed, not judged.
        goals.append(("RSS growth from {:.0f} s to the end (medians of 2 min)".format(drift_at),
                      drift is not None and drift <= 0.05,
                      f"{at / 1024:.1f} -> {end / 1024:.1f} MiB ({drift:+.1%})" if drift is not None else "n/a"))
    print(f"\n## Soak: {L} s, {args.rate} process starts/s, {outages} outages of {outage_len:.0f} s, "
          f"{hups} SIGHUPs, {interval} s windows, {args.freq} Hz ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n")
    print("| goal | result | figure |\n|---|---|---|")
    for name, ok, fig in goals:
        print(f"| {name} | {'ok' if ok else 'FAILED'} | {fig} |")
    if L < 1200 and drift is not None:
        print(f"| RSS from {drift_at:.0f} s to the end (not judged under 20 min) | | "
              f"{at / 1024:.1f} -> {end / 1024:.1f} MiB ({drift:+.1%}) |")
    print(f"| windows of the busy series delivered | | {len(windows)} ({sent} requests sent in all) |")
    if rss:
        print(f"| RSS max | | {max(k for _, k in rss) / 1024:.1f} MiB |")
    if os.environ.get("SOAK_KEEP"):
        print(f"soak: kept {tmp} (agent log: {agent.log_path})")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(ok for _, ok, _ in goals) else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=int, default=3600, help="length of the run (default 3600)")
    ap.add_argument("--rate", type=int, default=200, help="process starts per second (default 200)")
    ap.add_argument("--freq", type=int, default=19, help="sampling frequency, Hz (default 19)")
    ap.add_argument("--interval", type=int, default=10, help="window, s (default 10; 2 with --scale)")
    ap.add_argument("--scale", action="store_true", help="shrink outages and reloads with the run (short runs)")
    args = ap.parse_args()
    if args.seconds < 60:
        print("soak: error: --seconds must be at least 60", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("soak: error: run as root (the agent loads BPF)", file=sys.stderr)
        return 2
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
