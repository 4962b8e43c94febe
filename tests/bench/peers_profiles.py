"""peers_profiles.py: one workload's samples in each profiler's own output (prowl's pprof
windows, the OpenTelemetry eBPF profiler's OTLP as the Collector's file exporter wrote it,
perf script) -> samples, rooted share, named-frame share and the known split (make bench-peers).
Usage: peers_profiles.py prowl|otel|perf PATH PID FUNC=SHARE,... (prints one JSON line)"""
import glob
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import otlp_check  # noqa: E402  (protoc-based decoder of OTLP bodies)

BUILD = os.environ.get("PROWL_BUILD", "build")
# A thread's first frames: the main thread's entry, or libc's clone for the others.
ROOTS = {"_start", "__clone3", "clone3", "__clone", "clone"}


class Frame:
    def __init__(self, name, file="", addr=0):
        # "gzip+0x3df0" (prowl: a function's start from the unwind tables, no symbol),
        # "[unknown]" or "[truncated...]" is not a function name.
        real = name and not name.startswith("[") and not re.search(r"\+0x[0-9a-f]+$", name)
        self.name, self.file, self.addr = (name if real else ""), file, addr


_RAW = {}


def prowl_samples(d, pid, comm="**"):
    """(count, frames leaf first) of pid's samples in the agent's pprof windows in d (the
    directory exporter keeps each service, here the program's name, in its own folder)."""
    from conftest import Raw  # the e2e tests' reader of pprof -raw
    out = []
    for f in sorted(glob.glob(os.path.join(d, comm, "*.pb.gz"), recursive=True)):
        if f not in _RAW:
            res = subprocess.run([os.path.join(BUILD, "tools", "pprof"), "-raw", "-symbolize=none", f],
                                 capture_output=True, text=True, timeout=120)
            _RAW[f] = Raw(res.stdout) if res.returncode == 0 else None
        raw = _RAW[f]
        if raw is None:
            continue
        for s in raw.samples:
            if s["labels"].get("pid") != str(pid):
                continue
            fr = []
            for lid in s["locs"]:
                loc = raw.locations[lid]
                m = raw.mappings.get(loc["mapping"], {})
                names = [l[0] for l in loc["lines"]] or [""]
                fr.extend(Frame(n, m.get("file", ""), loc["addr"]) for n in names)
            out.append((s["values"][0], fr))
    return out


def otel_samples(path, pid):
    """The same from the Collector's file exporter output (4-byte length, ProfilesData);
    pid None: every sample, as (pid, count, frames)."""
    data = open(path, "rb").read() if os.path.exists(path) else b""
    out, i = [], 0
    while i + 4 <= len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        root = otlp_check.decode(data[i + 4:i + 4 + n])
        i += 4 + n
        d = root.msg("dictionary")
        strs = [otlp_check._text(s, "string_table") for s in d.all("string_table")]
        maps, locs, funcs = d.all("mapping_table"), d.all("location_table"), d.all("function_table")
        stacks, attrs = d.all("stack_table"), d.all("attribute_table")

        def kv(a):
            """(key, value) of a KeyValue or KeyValueAndUnit, keys and strings inline or indexed."""
            key = strs[a.int("key_strindex")] if a.one("key_strindex") is not None else \
                otlp_check._text(a.one("key", b""), "key")
            v = a.msg("value")
            if v.one("int_value") is not None:
                return key, v.int("int_value")
            if v.one("string_value_strindex") is not None:
                return key, strs[v.int("string_value_strindex")]
            return key, otlp_check._text(v.one("string_value", b""), "value")

        def attr(ai):
            return kv(attrs[ai])

        for rp in root.all("resource_profiles"):
            rattrs = dict(kv(a) for a in rp.msg("resource").all("attributes"))
            for sp in rp.all("scope_profiles"):
                for prof in sp.all("profiles"):
                    for s in prof.all("samples"):
                        sattrs = dict(attr(ai) for ai in s.all("attribute_indices"))
                        spid = sattrs.get("process.pid", rattrs.get("process.pid"))
                        if pid is not None and str(spid) != str(pid):
                            continue
                        fr = []
                        for li in stacks[s.int("stack_index")].all("location_indices"):
                            loc = locs[li]
                            m = maps[loc.int("mapping_index")]
                            file = strs[m.int("filename_strindex")]
                            lines = loc.all("lines") or [None]
                            for ln in lines:
                                name = strs[funcs[ln.int("function_index")].int("name_strindex")] if ln else ""
                                fr.append(Frame(name, file, loc.int("address")))
                        n = len(s.all("timestamps_unix_nano")) or sum(s.all("values")) or 1
                        out.append((n, fr) if pid is not None else (spid, n, fr))
    return out


def perf_samples(path, pid):
    """The same from `perf script -F pid,ip,sym,dso` output."""
    out, cur, keep = [], [], False
    for line in open(path, errors="replace"):
        if not line.strip():
            if keep and cur:
                out.append((1, cur))
            cur, keep = [], False
            continue
        if re.match(r"^\s*\d+\s*$", line):  # a sample's header: its pid
            keep = line.split()[0] == str(pid)
            continue
        m = re.match(r"\s*([0-9a-f]+)\s+(.*?)\s+\((.*)\)\s*$", line)
        if m:
            name = re.sub(r"\+0x[0-9a-f]+$", "", m.group(2))
            cur.append(Frame("" if name == "[unknown]" else name, m.group(3), int(m.group(1), 16)))
    if keep and cur:
        out.append((1, cur))
    return out


def entry(file):
    """The ELF entry point of file (its _start), or None."""
    try:
        res = subprocess.run(["eu-readelf", "-h", file], capture_output=True, text=True, timeout=30)
        m = re.search(r"Entry point address:\s+0x([0-9a-f]+)", res.stdout)
        return int(m.group(1), 16) if m else None
    except OSError:
        return None


def load_maps(path):
    """{file name: path} of the files a process mapped (a copy of its /proc/PID/maps)."""
    out = {}
    if path and os.path.exists(path):
        for line in open(path):
            p = line.split()[5] if len(line.split()) > 5 else ""
            if p.startswith("/"):
                out.setdefault(os.path.basename(p), p)
    return out


def resolve(frames, maps):
    """Names for unnamed native frames, the same way for every profiler (the peer leaves
    naming to a backend and names a mapping by its file name only): the symbol
    eu-addr2line finds in the process's file, or _start at the ELF entry point."""
    want = {}
    for f in frames:
        path = f.file if f.file.startswith("/") else maps.get(f.file, "")
        if not f.name and path and os.path.exists(path):
            want.setdefault((f.file, path), set()).add(f.addr)
    names = {}
    for (orig, file), addrs in want.items():
        addrs = sorted(addrs)
        res = subprocess.run(["eu-addr2line", "-f", "-e", file] + [hex(a) for a in addrs],
                             capture_output=True, text=True, timeout=120)
        got = res.stdout.splitlines()[0::2]
        ent = entry(file)
        for a, n in zip(addrs, got + [""] * len(addrs)):
            n = "" if n.startswith("??") else n
            if not n and ent is not None and ent <= a < ent + 64:
                n = "_start"
            names[(orig, a)] = n
    return names


def summary(kind, samples, split, maps=None):
    total = sum(n for n, _ in samples)
    frames = [f for _, fr in samples for f in fr]
    named = sum(1 for f in frames if f.name) / len(frames) if frames else 0.0
    extra = resolve(frames, load_maps(maps))
    name = lambda f: f.name or extra.get((f.file, f.addr), "")  # noqa: E731
    rooted = sum(n for n, fr in samples if fr and name(fr[-1]) in ROOTS)
    shares = {}
    for func in split:
        shares[func] = sum(n for n, fr in samples if any(name(f) == func for f in fr)) / total if total else 0.0
    return {"samples": total, "rooted": rooted / total if total else 0.0, "named": named, "shares": shares}


def main(argv):
    kind, path, pid, split = argv[1], argv[2], argv[3], argv[4]
    want = {k: float(v) for k, v in (x.split("=") for x in split.split(","))} if split != "-" else {}
    read = {"prowl": prowl_samples, "otel": otel_samples, "perf": perf_samples}[kind]
    s = summary(kind, read(path, pid), want)
    s["split_error"] = max((abs(s["shares"][k] - v) for k, v in want.items()), default=0.0) if want else None
    print(json.dumps(s))


if __name__ == "__main__":
    main(sys.argv)
