"""pprofgen.py: writes pprof Profile messages by hand (protobuf wire format, field numbers
from proto/profile.proto) for inputs no real capture makes: hostile names, other sample
types, empty profiles, broken indices, and 100k distinct stacks for the HTML benchmark."""
import gzip
import random


def _varint(v):
    v &= (1 << 64) - 1  # negative int64 values are 10-byte two's complement
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field, wire):
    return _varint(field << 3 | wire)


def _int(field, v):
    return _key(field, 0) + _varint(v) if v else b""


def _bytes(field, data):
    return _key(field, 2) + _varint(len(data)) + data


def _packed(field, values):
    if not values:
        return b""
    return _bytes(field, b"".join(_varint(v) for v in values))


class Profile:
    """Builds a pprof profile. Functions and locations are made on demand by name."""

    def __init__(self, sample_types=(("samples", "count"), ("cpu", "nanoseconds")), period=10_000_000,
                 time_nanos=1_700_000_000_000_000_000, duration_nanos=10_000_000_000):
        self.strings = [""]
        self.index = {"": 0}
        self.sample_types = [(self.s(t), self.s(u)) for t, u in sample_types]
        self.period = period
        self.time_nanos = time_nanos
        self.duration_nanos = duration_nanos
        self.functions = {}  # name -> id
        self.locations = {}  # name -> id
        self.samples = []    # (location ids leaf first, values, labels)
        self.comments = []
        self.raw_functions = []
        self.raw_locations = []

    def s(self, text):
        if text not in self.index:
            self.index[text] = len(self.strings)
            self.strings.append(text)
        return self.index[text]

    def loc(self, name, file="gen.c", line=1):
        if name not in self.locations:
            fid = len(self.functions) + 1
            self.functions[name] = fid
            self.raw_functions.append(_int(1, fid) + _int(2, self.s(name)) + _int(4, self.s(file)))
            lid = len(self.locations) + 1
            self.locations[name] = lid
            line_msg = _int(1, fid) + _int(2, line)
            self.raw_locations.append(_int(1, lid) + _int(3, 0x1000 + lid * 16) + _bytes(4, line_msg))
        return self.locations[name]

    def add(self, stack_root_first, count=1, labels=None, values=None):
        locs = [self.loc(n) for n in reversed(stack_root_first)]
        vals = values if values is not None else [count] + [count * self.period] * (len(self.sample_types) - 1)
        self.samples.append((locs, vals, labels or {}))

    def encode(self, compress=True):
        out = bytearray()
        for t, u in self.sample_types:
            out += _bytes(1, _int(1, t) + _int(2, u))
        for locs, vals, labels in self.samples:
            msg = _packed(1, locs) + _packed(2, vals)
            for k, v in labels.items():
                if isinstance(v, int):
                    msg += _bytes(3, _int(1, self.s(k)) + _int(3, v))
                else:
                    msg += _bytes(3, _int(1, self.s(k)) + _int(2, self.s(v)))
            out += _bytes(2, msg)
        for raw in self.raw_locations:
            out += _bytes(4, raw)
        for raw in self.raw_functions:
            out += _bytes(5, raw)
        comment_ids = [self.s(c) for c in self.comments]
        for text in self.strings:
            out += _bytes(6, text.encode("utf-8", "surrogateescape"))
        out += _int(9, self.time_nanos) + _int(10, self.duration_nanos)
        out += _bytes(11, _int(1, self.sample_types[0][0]) + _int(2, self.sample_types[0][1]))
        out += _int(12, self.period)
        out += _packed(13, comment_ids)
        return gzip.compress(bytes(out)) if compress else bytes(out)


def many_stacks(n, seed=1, funcs=3000, depth=(8, 28), count_seed=None, boost=None):
    """A profile with n distinct stacks: random walks over a call graph of `funcs`
    functions in which most calls follow a fixed edge, so stacks share prefixes as in
    real programs. count_seed draws other counts for the same stacks, and boost=(name, k)
    multiplies the counts of stacks through that function: a "new" side for diffs."""
    rnd = random.Random(seed)
    counts = random.Random(count_seed if count_seed is not None else seed + 1000)
    names = [f"mod{i % 40}::fn_{i}_{'x' * (i % 17)}" for i in range(funcs)]
    succ = [rnd.randrange(funcs) for _ in range(funcs)]
    p = Profile()
    seen = set()
    while len(seen) < n:
        d = rnd.randint(*depth)
        stack = [0, 1 + rnd.randrange(8)]
        while len(stack) < d:
            stack.append(rnd.randrange(funcs) if rnd.random() < 0.35 else succ[stack[-1]])
        key = tuple(stack)
        if key in seen:
            continue
        seen.add(key)
        frames = [names[i] for i in stack]
        c = counts.randint(1, 20)
        if boost and boost[0] in frames:
            c *= boost[1]
        p.add(frames, count=c)
    return p
