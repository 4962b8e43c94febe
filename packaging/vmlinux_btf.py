#!/usr/bin/python3
"""vmlinux_btf.py: copies the kernel's BTF out of a Debian kernel image (vmlinuz: an
arm64 Image, plain or gzip'ed), for a cross build's vmlinux.h. Usage: vmlinux_btf.py VMLINUZ OUT"""
import gzip
import struct
import sys

BTF_MAGIC = b"\x9f\xeb\x01\x00"  # magic 0xeB9F (little-endian), version 1, flags 0
HDR_LEN = 24


def find_btf(img):
    """The largest well-formed BTF blob in img: header, types, then strings."""
    best = None
    at = img.find(BTF_MAGIC)
    while at >= 0:
        if at + HDR_LEN <= len(img):
            hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<IIIII", img, at + 4)
            end = at + hdr_len + str_off + str_len
            if (hdr_len == HDR_LEN and type_off == 0 and str_off == type_len and str_len > 0 and end <= len(img)
                    and img[end - 1] == 0 and (best is None or end - at > len(best))):
                best = img[at:end]
        at = img.find(BTF_MAGIC, at + 1)
    return best


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: vmlinux_btf.py VMLINUZ OUT")
    try:
        img = open(sys.argv[1], "rb").read()
    except OSError as e:
        sys.exit(f"vmlinux_btf: error: cannot read {sys.argv[1]}: {e.strerror}")
    if img[:2] == b"\x1f\x8b":
        img = gzip.decompress(img)
    btf = find_btf(img)
    if not btf:
        sys.exit(f"vmlinux_btf: error: {sys.argv[1]} holds no BTF: use a kernel built with CONFIG_DEBUG_INFO_BTF=y")
    with open(sys.argv[2] + ".tmp", "wb") as f:
        f.write(btf)
    import os
    os.replace(sys.argv[2] + ".tmp", sys.argv[2])


if __name__ == "__main__":
    main()
