#!/usr/bin/python3
"""otlp_check.py: a strict, independent checker of OTLP profiles export requests: decodes
a body with Google's protoc (against proto/) and checks the v1development dictionary rules.

Library use: check(body) -> list of Resource summaries (raises CheckError);
function_shares(summary) -> {function: share of samples}.
CLI: otlp_check.py [--proto-dir DIR] [--allow-empty] [--dump] FILE...: exits 1 with
one clear line on the first violation.
"""
import gzip
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PROTO_DIR = os.path.join(ROOT, "proto")
PROTO_FILE = "otlp_profiles_service.proto"
REQUEST = "opentelemetry.proto.collector.profiles.v1development.ExportProfilesServiceRequest"


class CheckError(Exception):
    """A violation of the OTLP profiles rules (or an undecodable body)."""


# ---------------------------------------------------------------------------
# protoc's text format -> a tree of Nodes. Every field is kept as a list, so the
# parser needs no schema; the checks below know which fields are repeated.

class Node:
    def __init__(self):
        self.fields = {}

    def add(self, name, value):
        self.fields.setdefault(name, []).append(value)

    def all(self, name):
        return self.fields.get(name, [])

    def one(self, name, default=None):
        v = self.fields.get(name)
        if not v:
            return default
        if len(v) != 1:
            raise CheckError(f"singular field {name} appears {len(v)} times")
        return v[0]

    def int(self, name):
        v = self.one(name, 0)
        if not isinstance(v, int):
            raise CheckError(f"field {name} is not an integer: {v!r}")
        return v

    def msg(self, name):
        v = self.one(name, None)
        if v is None:
            return Node()
        if not isinstance(v, Node):
            raise CheckError(f"field {name} is not a message: {v!r}")
        return v

    def empty(self):
        return not self.fields


_ESC = {"n": 10, "r": 13, "t": 9, '"': 34, "'": 39, "\\": 92, "a": 7, "b": 8, "f": 12, "v": 11, "?": 63}


def _unescape(s):
    """protoc's C-escaped string literal body -> bytes."""
    out = bytearray()
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\":
            out += c.encode("utf-8")
            i += 1
            continue
        i += 1
        c = s[i]
        if c in "01234567":
            j = i
            while j < len(s) and j < i + 3 and s[j] in "01234567":
                j += 1
            out.append(int(s[i:j], 8) & 0xFF)
            i = j
        elif c == "x":
            j = i + 1
            while j < len(s) and j < i + 3 and s[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(s[i + 1:j], 16))
            i = j
        elif c in _ESC:
            out.append(_ESC[c])
            i += 1
        else:
            raise CheckError(f"bad escape \\{c} in protoc output")
    return bytes(out)


_FIELD = re.compile(r'^([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(?:: (.*)| \{)$')


def parse_text(text):
    root = Node()
    stack = [root]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            if len(stack) == 1:
                raise CheckError(f"protoc output line {lineno}: unbalanced '}}'")
            stack.pop()
            continue
        m = _FIELD.match(line)
        if not m:
            raise CheckError(f"protoc output line {lineno}: cannot parse {line!r}")
        name, value = m.group(1), m.group(2)
        if name.isdigit():
            raise CheckError(f"unknown field number {name} (wrong field number or type on the wire): {line!r}")
        if value is None:
            child = Node()
            stack[-1].add(name, child)
            stack.append(child)
            continue
        if value.startswith('"'):
            if not value.endswith('"') or len(value) < 2:
                raise CheckError(f"protoc output line {lineno}: bad string {value!r}")
            v = _unescape(value[1:-1])
        elif re.fullmatch(r"-?[0-9]+", value):
            v = int(value)
        elif value in ("true", "false"):
            v = value == "true"
        else:
            try:
                v = float(value)
            except ValueError:
                v = value  # an enum name
        stack[-1].add(name, v)
    if len(stack) != 1:
        raise CheckError("protoc output ends inside a message")
    return root


def decode(body, proto_dir=PROTO_DIR):
    """Body bytes (gzip'ed or not) -> Node tree, through Google's protoc."""
    if body[:2] == b"\x1f\x8b":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as e:
            raise CheckError(f"bad gzip body: {e}")
    protoc = os.environ.get("PROTOC") or shutil.which("protoc") or "/usr/bin/protoc"
    res = subprocess.run([protoc, f"--decode={REQUEST}", f"--proto_path={proto_dir}",
                          os.path.join(proto_dir, PROTO_FILE)],
                         input=body, capture_output=True)
    if res.returncode != 0:
        raise CheckError(f"protoc cannot decode the body as {REQUEST}: "
                         f"{res.stderr.decode(errors='replace').strip()}")
    return parse_text(res.stdout.decode("utf-8", errors="strict"))


# ---------------------------------------------------------------------------
# The checks.

def _text(b, where):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise CheckError(f"{where}: string is not valid UTF-8: {b!r}")


def _index(v, n, what, where, allow_zero=True):
    if not isinstance(v, int) or v < 0 or v >= n:
        raise CheckError(f"{where}: {what} {v} out of range (table has {n} elements)")
    if not allow_zero and v == 0:
        raise CheckError(f"{where}: {what} is 0 (the zero element) where a real entry is required")
    return v


def _any_value(node, where, strings=None):
    """AnyValue -> python value; exactly one of its oneof members must be set.
    string_value_strindex (profiles only) is resolved through strings when given."""
    set_ = [k for k in node.fields]
    if len(set_) != 1:
        raise CheckError(f"{where}: AnyValue must hold exactly one value, has {set_}")
    k = set_[0]
    v = node.one(k)
    if k == "string_value":
        return _text(v, where)
    if k in ("int_value", "bool_value", "double_value"):
        return v
    if k == "bytes_value":
        return v
    if k == "string_value_strindex" and strings is not None:
        return strings[_index(v, len(strings), "string_value_strindex", where)]
    raise CheckError(f"{where}: unsupported AnyValue member {k}")


class _Dict:
    def __init__(self, d):
        self.strings = [_text(s, f"dictionary.string_table[{i}]") for i, s in enumerate(d.all("string_table"))]
        self.mappings = d.all("mapping_table")
        self.locations = d.all("location_table")
        self.functions = d.all("function_table")
        self.links = d.all("link_table")
        self.attributes = d.all("attribute_table")
        self.stacks = d.all("stack_table")
        self.attr_values = []

    def s(self, idx, where, what="strindex", allow_zero=True):
        return self.strings[_index(idx, len(self.strings), what, where, allow_zero)]


def _zero(node):
    """A message holding nothing but empty messages and zeros (the Collector writes
    attribute_table[0] as a KeyValueAndUnit with an empty AnyValue: the zero value)."""
    return all(_zero(v) if isinstance(v, Node) else v in (0, b"", "")
               for vs in node.fields.values() for v in vs)


def _check_dictionary(d):
    if d.empty():
        raise CheckError("request has no dictionary")
    t = _Dict(d)
    tables = [("string_table", t.strings), ("mapping_table", t.mappings), ("location_table", t.locations),
              ("function_table", t.functions), ("link_table", t.links), ("attribute_table", t.attributes),
              ("stack_table", t.stacks)]
    for name, tab in tables:
        if not tab:
            raise CheckError(f"dictionary.{name} is empty: element 0 (the zero value) must be present")
        zero = tab[0]
        if (zero != "") if isinstance(zero, str) else not _zero(zero):
            raise CheckError(f"dictionary.{name}[0] is not the zero value: {zero if isinstance(zero, str) else zero.fields}")
    seen = {}
    for i, s in enumerate(t.strings):
        if s in seen:
            raise CheckError(f"dictionary.string_table[{i}] {s!r} duplicates [{seen[s]}]")
        seen[s] = i

    for i, a in enumerate(t.attributes):
        where = f"dictionary.attribute_table[{i}]"
        if i == 0:
            t.attr_values.append(None)
            continue
        key = t.s(a.int("key_strindex"), where, "key_strindex", allow_zero=False)
        t.s(a.int("unit_strindex"), where, "unit_strindex")
        t.attr_values.append((key, _any_value(a.msg("value"), where + ".value")))

    def attrs(node, where):
        out = {}
        for j, ai in enumerate(node.all("attribute_indices")):
            _index(ai, len(t.attributes), "attribute index", f"{where}.attribute_indices[{j}]", allow_zero=False)
            k, v = t.attr_values[ai]
            if k in out:
                raise CheckError(f"{where}: attribute {k!r} given twice")
            out[k] = v
        return out

    t.attrs = attrs
    for i, m in enumerate(t.mappings[1:], 1):
        where = f"dictionary.mapping_table[{i}]"
        t.s(m.int("filename_strindex"), where, "filename_strindex")
        start, limit = m.int("memory_start"), m.int("memory_limit")
        if limit and start > limit:
            raise CheckError(f"{where}: memory_start {start:#x} > memory_limit {limit:#x}")
        attrs(m, where)
    for i, f in enumerate(t.functions[1:], 1):
        where = f"dictionary.function_table[{i}]"
        t.s(f.int("name_strindex"), where, "name_strindex", allow_zero=False)
        t.s(f.int("system_name_strindex"), where, "system_name_strindex")
        t.s(f.int("filename_strindex"), where, "filename_strindex")
        if f.int("start_line") < 0:
            raise CheckError(f"{where}: negative start_line")
    for i, loc in enumerate(t.locations[1:], 1):
        where = f"dictionary.location_table[{i}]"
        _index(loc.int("mapping_index"), len(t.mappings), "mapping_index", where)
        lines = loc.all("lines")
        if not lines:
            raise CheckError(f"{where}: location has no lines (no function)")
        for j, ln in enumerate(lines):
            _index(ln.int("function_index"), len(t.functions), "function_index", f"{where}.lines[{j}]",
                   allow_zero=False)
            if ln.int("line") < 0:
                raise CheckError(f"{where}.lines[{j}]: negative line")
        a = attrs(loc, where)
        if not isinstance(a.get("profile.frame.type"), str) or not a["profile.frame.type"]:
            raise CheckError(f"{where}: no profile.frame.type attribute")
    for i, st in enumerate(t.stacks[1:], 1):
        where = f"dictionary.stack_table[{i}]"
        idx = st.all("location_indices")
        if not idx:
            raise CheckError(f"{where}: empty stack (only stack_table[0] may be empty)")
        for j, li in enumerate(idx):
            _index(li, len(t.locations), "location index", f"{where}.location_indices[{j}]", allow_zero=False)
    for i, ln in enumerate(t.links[1:], 1):
        if len(ln.one("trace_id", b"")) != 16 or len(ln.one("span_id", b"")) != 8:
            raise CheckError(f"dictionary.link_table[{i}]: trace_id/span_id must be 16/8 bytes")
    return t


def _frames(t, stack_index):
    """Stack -> frames leaf first, inlined frames expanded (innermost first)."""
    out = []
    for li in t.stacks[stack_index].all("location_indices"):
        loc = t.locations[li]
        mapping = t.mappings[loc.int("mapping_index")]
        mattrs = t.attrs(mapping, "mapping") if loc.int("mapping_index") else {}
        ftype = t.attrs(loc, "location").get("profile.frame.type")
        for ln in loc.all("lines"):
            f = t.functions[ln.int("function_index")]
            out.append({
                "function": t.strings[f.int("name_strindex")],
                "system_name": t.strings[f.int("system_name_strindex")],
                "file": t.strings[f.int("filename_strindex")],
                "line": ln.int("line"),
                "address": loc.int("address"),
                "frame_type": ftype,
                "mapping": t.strings[mapping.int("filename_strindex")],
                "build_id": mattrs.get("process.executable.build_id.gnu"),
            })
    return out


def _value_type(t, vt, where):
    return (t.s(vt.int("type_strindex"), where, "type_strindex"),
            t.s(vt.int("unit_strindex"), where, "unit_strindex"))


def _check_profile(t, p, where):
    st = _value_type(t, p.msg("sample_type"), where + ".sample_type")
    if st not in (("samples", "count"), ("off_cpu", "nanoseconds")):
        raise CheckError(f"{where}: sample_type is {st}, want ('samples', 'count') or ('off_cpu', 'nanoseconds')")
    pt = _value_type(t, p.msg("period_type"), where + ".period_type")
    if pt != ("cpu", "nanoseconds"):
        raise CheckError(f"{where}: period_type is {pt}, want ('cpu', 'nanoseconds')")
    if p.int("period") <= 0:
        raise CheckError(f"{where}: period {p.int('period')} is not positive")
    if p.int("time_unix_nano") <= 0:
        raise CheckError(f"{where}: time_unix_nano not set")
    if p.int("duration_nano") <= 0:
        raise CheckError(f"{where}: duration_nano not set")
    pid = p.one("profile_id", b"")
    if len(pid) != 16 or pid == bytes(16):
        raise CheckError(f"{where}: profile_id must be 16 non-zero bytes, is {pid!r}")
    pattrs = t.attrs(p, where)
    samples = p.all("samples")
    if not samples:
        raise CheckError(f"{where}: profile has no samples")
    seen = {}
    out = []
    for i, s in enumerate(samples):
        sw = f"{where}.samples[{i}]"
        si = _index(s.int("stack_index"), len(t.stacks), "stack_index", sw, allow_zero=False)
        li = _index(s.int("link_index"), len(t.links), "link_index", sw)
        values = s.all("values")
        if len(values) != 1:
            raise CheckError(f"{sw}: has {len(values)} values, want exactly 1 (of the sample type)")
        if values[0] <= 0:
            raise CheckError(f"{sw}: value {values[0]} is not positive")
        ts = s.all("timestamps_unix_nano")
        if ts and len(ts) != len(values):
            raise CheckError(f"{sw}: {len(ts)} timestamps for {len(values)} values")
        sattrs = t.attrs(s, sw)
        key = (si, tuple(sorted(s.all("attribute_indices"))), li)
        if key in seen:
            raise CheckError(f"{sw}: same {{stack, attributes, link}} as samples[{seen[key]}]; "
                             "duplicates must be aggregated")
        seen[key] = i
        frames = _frames(t, si)
        out.append({"value": values[0], "attrs": sattrs, "frames": frames,
                    "stack": [f["function"] for f in frames]})
    return {"sample_type": st, "period": p.int("period"), "time_unix_nano": p.int("time_unix_nano"),
            "duration_nano": p.int("duration_nano"), "profile_id": pid, "attrs": pattrs,
            "samples": out}


def _check_resource_attrs(res, where, strings):
    """A resource's attributes; a key or string value may be given as an index into the
    string_table instead (key_strindex, string_value_strindex: opentelemetry-proto's
    alpha, profiles-only fields, which the OpenTelemetry Collector writes)."""
    attrs = {}
    for i, kv in enumerate(res.all("attributes")):
        kw = f"{where}.attributes[{i}]"
        key = _text(kv.one("key", b""), kw)
        ks = kv.int("key_strindex")
        if key and ks:
            raise CheckError(f"{kw}: both key and key_strindex are set")
        if ks:
            key = strings[_index(ks, len(strings), "key_strindex", kw)]
        if not key:
            raise CheckError(f"{kw}: empty key")
        if key in attrs:
            raise CheckError(f"{kw}: attribute {key!r} given twice")
        attrs[key] = _any_value(kv.msg("value"), f"{kw} ({key})", strings)
    for k in ("service.name", "host.name"):
        if not isinstance(attrs.get(k), str) or not attrs[k]:
            raise CheckError(f"{where}: resource attribute {k} missing or not a non-empty string_value")
    if not isinstance(attrs.get("process.pid"), int) or isinstance(attrs["process.pid"], bool):
        raise CheckError(f"{where}: resource attribute process.pid missing or not an int_value")
    return attrs


def check_tree(root, allow_empty=False):
    t = _check_dictionary(root.msg("dictionary"))
    rps = root.all("resource_profiles")
    if not rps and not allow_empty:
        raise CheckError("request has no resource_profiles")
    summary = []
    for r, rp in enumerate(rps):
        where = f"resource_profiles[{r}]"
        if rp.msg("resource").empty():
            raise CheckError(f"{where}: no resource")
        attrs = _check_resource_attrs(rp.msg("resource"), where + ".resource", t.strings)
        sps = rp.all("scope_profiles")
        if not sps:
            raise CheckError(f"{where}: no scope_profiles")
        for s, sp in enumerate(sps):
            sw = f"{where}.scope_profiles[{s}]"
            scope = sp.msg("scope")
            name = _text(scope.one("name", b""), sw)
            version = _text(scope.one("version", b""), sw)
            profiles = sp.all("profiles")
            if not profiles:
                raise CheckError(f"{sw}: no profiles")
            for p, prof in enumerate(profiles):
                ps = _check_profile(t, prof, f"{sw}.profiles[{p}]")
                ps.update({"resource": attrs, "scope": (name, version)})
                summary.append(ps)
    return summary


def check(body, proto_dir=PROTO_DIR, allow_empty=False):
    """Checks a request body strictly; returns one dict per Profile: resource
    (attributes), scope (name, version), period, time_unix_nano, duration_nano,
    profile_id, attrs and samples (value, attrs, stack: function names leaf first
    with inlined frames expanded, frames: dicts with function/file/line/...).
    Raises CheckError on the first violation."""
    return check_tree(decode(body, proto_dir), allow_empty=allow_empty)


def check_file(path, **kw):
    with open(path, "rb") as f:
        return check(f.read(), **kw)


def total_samples(summary):
    return sum(s["value"] for p in summary for s in p["samples"])


def function_shares(summary, self_only=False, where=None):
    """{function name: share of all samples whose stack holds it (once per
    sample), or whose leaf it is (self_only)}; where(profile) filters profiles."""
    total = 0
    acc = {}
    for p in summary:
        if where and not where(p):
            continue
        for s in p["samples"]:
            total += s["value"]
            names = s["stack"][:1] if self_only else set(s["stack"])
            for n in names:
                acc[n] = acc.get(n, 0) + s["value"]
    return {k: v / total for k, v in acc.items()} if total else {}


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description="Strictly check OTLP profiles export request bodies.")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--proto-dir", default=PROTO_DIR)
    ap.add_argument("--allow-empty", action="store_true", help="accept a request with no resource_profiles")
    ap.add_argument("--dump", action="store_true", help="print each profile's samples")
    args = ap.parse_args(argv)
    for path in args.files:
        try:
            summary = check_file(path, proto_dir=args.proto_dir, allow_empty=args.allow_empty)
        except CheckError as e:
            print(f"otlp_check: {path}: {e}", file=sys.stderr)
            return 1
        except OSError as e:
            print(f"otlp_check: {path}: {e}", file=sys.stderr)
            return 2
        nsamples = sum(len(p["samples"]) for p in summary)
        print(f"otlp_check: {path}: ok: {len(summary)} profiles, {nsamples} samples, "
              f"{total_samples(summary)} counts")
        if args.dump:
            for p in summary:
                print(f"  resource {p['resource']}")
                for s in p["samples"]:
                    print(f"    {s['value']:6d} {s['attrs']} {';'.join(reversed(s['stack']))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
