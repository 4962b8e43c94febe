"""pbwire.py: a minimal protobuf wire-format reader for the tests, for what protoc's text
output mangles (bytes fields, strings that are not UTF-8)."""


def varint(b, i):
    """The varint at b[i]; returns (value, index after it)."""
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """[(field number, wire type, value)] of one message: int for varint and fixed
    fields, bytes for length-delimited ones. Fails on anything malformed."""
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt in (1, 5):
            n = 8 if wt == 1 else 4
            v, i = int.from_bytes(b[i:i + n], "little"), i + n
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {wt} for field {f}")
        out.append((f, wt, v))
    assert i == len(b), "message runs past its end"
    return out
