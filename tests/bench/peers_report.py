"""peers_report.py: the tables of make bench-peers (tests/bench/peers.sh) from its run
directory: cost per workload window as ratios prowl/peer, memory, and each profile's
quality (rooted stacks, named frames, the known split).
Usage: peers_report.py RUN_DIR PEAK_PROWL_KIB PEAK_PEER_KIB HZ SECONDS"""
import csv
import os
import statistics
import sys

import peers_profiles as pp

SPLITS = {"c": {"share50": 0.5, "share30": 0.3, "share20": 0.2},
          "py": {"alpha": 0.1, "beta": 0.3, "gamma": 0.6},
          "stripped": {}}
NAMES = {"c": "split532 (C, -O2, no frame pointers, 50/30/20)",
         "py": "pyrandsplit.py on Debian's CPython 3.11 (10/30/60)",
         "stripped": "gzip -9 (Debian's stripped binary)"}


def ratio(a, b):
    return f"{a / b:.2f}" if b else "n/a"


COMM = {"c": "split532", "py": "python3.11", "stripped": "gzip"}
_OTEL = {}


def quality(kind, path, pid, split, maps, comm):
    if not os.path.exists(path):
        return None
    if kind == "prowl":
        samples = pp.prowl_samples(path, pid, comm)
    elif kind == "otel":  # decoded once: protoc takes seconds on a large file
        if path not in _OTEL:
            _OTEL[path] = pp.otel_samples(path, None)
        samples = [(n, fr) for p, n, fr in _OTEL[path] if str(p) == str(pid)]
    else:
        samples = pp.perf_samples(path, pid)
    return pp.summary(kind, samples, split, maps)


def fmt_q(q, split):
    if not q or not q["samples"]:
        return "no samples | | |"
    sh = "/".join(f"{100 * q['shares'][k]:.0f}" for k in split) if split else "(no known split)"
    return f"{q['samples']} | {100 * q['rooted']:.1f}% | {100 * q['named']:.1f}% | {sh}"


def main(argv):
    d, peak_prowl, peak_peer, hz, secs = argv[1], int(argv[2]), int(argv[3]), argv[4], argv[5]
    rows = list(csv.DictReader(open(os.path.join(d, "rows.tsv")), delimiter="\t"))
    print(f"#### Cost per {secs} s workload window, both agents at {hz} Hz, side by side\n")
    print("| workload | round | load (1/5/15 min) | agent CPU ms prowl / peer | ratio | BPF run time ms prowl / peer "
          "| ratio | RSS MiB prowl / peer | prowl's lost samples |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        a, b, c, e = (int(r[k]) for k in ("prowl_ms", "peer_ms", "prowl_bpf_ns", "peer_bpf_ns"))
        print(f"| {r['workload']} | {r['round']} | {r['load']} | {a} / {b} | {ratio(a, b)} | "
              f"{c / 1e6:.1f} / {e / 1e6:.1f} | {ratio(c, e)} | "
              f"{int(r['prowl_rss']) / 1024:.1f} / {int(r['peer_rss']) / 1024:.1f} | {r['prowl_lost']} |")
    tot = lambda k: sum(int(r[k]) for r in rows)  # noqa: E731
    print(f"\nAll windows: agent CPU ratio {ratio(tot('prowl_ms'), tot('peer_ms'))}, BPF run time ratio "
          f"{ratio(tot('prowl_bpf_ns'), tot('peer_bpf_ns'))}; RSS steady (median of the windows) "
          f"{statistics.median(int(r['prowl_rss']) for r in rows) / 1024:.1f} MiB prowl, "
          f"{statistics.median(int(r['peer_rss']) for r in rows) / 1024:.1f} MiB peer; peak (VmHWM) "
          f"{peak_prowl / 1024:.1f} MiB prowl, {peak_peer / 1024:.1f} MiB peer (ratio {ratio(peak_prowl, peak_peer)}).\n")
    print("#### Profiles of the same windows\n")
    print("rooted: samples whose outermost frame is _start or clone/clone3; named: frames with a function "
          "name as the profiler delivers them; split: inclusive shares in %, against the known split.\n")
    print("| workload | round | profiler | samples | rooted | named frames | split |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        w, pid, split = r["workload"], r["pid"], SPLITS[r["workload"]]
        want = "/".join(f"{100 * v:.0f}" for v in split.values())
        srcs = [("prowl agent", "prowl", os.path.join(d, "prowl")), ("OTel eBPF profiler", "otel", os.path.join(d, "otel.pb"))]
        if w != "py":
            srcs.append(("perf --call-graph dwarf", "perf", os.path.join(d, f"perf.{w}.{r['round']}.txt")))
        for label, kind, path in srcs:
            print(f"| {NAMES[w]}{' (want ' + want + ')' if want else ''} | {r['round']} | {label} | "
                  f"{fmt_q(quality(kind, path, pid, split, os.path.join(d, f'maps.{pid}'), COMM[w]), split)} |")


if __name__ == "__main__":
    main(sys.argv)
