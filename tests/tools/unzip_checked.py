#!/usr/bin/python3
"""unzip_checked.py: unpacks a Go toolchain module zip (golang.org/toolchain) after
checking it against its checksum-database hash (go.sum's h1:, dirhash Hash1).
Usage: unzip_checked.py ZIP H1 DIR   -- exit 1 with one line when the hash differs."""
import base64
import hashlib
import os
import sys
import zipfile


def main(zpath, want, dest):
    with zipfile.ZipFile(zpath) as z:
        names = sorted(n for n in z.namelist() if not n.endswith("/"))
        lines = "".join(f"{hashlib.sha256(z.read(n)).hexdigest()}  {n}\n" for n in names)
        got = "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()
        if not want or got != want:
            print(f"{zpath}: hash {got} is not the checksum database's {want or '(none)'}: "
                  "remove it and retry", file=sys.stderr)
            return 1
        tmp = dest + ".tmp"
        for n in names:
            rel = n.split("/", 2)[2] if n.count("/") >= 2 else None  # golang.org/toolchain@V/...
            if not rel or rel.startswith("/") or ".." in rel.split("/"):
                continue
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(z.read(n))
            # the zip keeps no modes: the go command and its tools are executables
            if rel.startswith("bin/") or rel.startswith("pkg/tool/"):
                os.chmod(path, 0o755)
        os.rename(tmp, dest)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__.splitlines()[-1].strip())
    sys.exit(main(*sys.argv[1:]))
