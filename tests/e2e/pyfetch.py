"""pyfetch.py: CPython builds that Debian 12 lacks (3.13 from Debian 13, 3.14 from
Debian's testing), taken from Debian's archive as .deb files, unpacked (not installed)
with the glibc they were built for, and run through that glibc's own loader. Cached
under BUILD/pydebs, as the kernel matrix caches its kernels."""
import lzma
import os
import subprocess
import urllib.request

MIRROR = "http://deb.debian.org/debian"
PACKAGES = ["python{v}-minimal", "libpython{v}-minimal", "libpython{v}-stdlib", "libc6", "zlib1g", "libexpat1",
            "libffi8", "libbz2-1.0", "liblzma5", "libzstd1"]


class Fetched:
    def __init__(self, root, version):
        self.root = root
        self.libdir = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
        self.loader = os.path.join(self.libdir, "ld-linux-x86-64.so.2")
        self.python = os.path.join(root, "usr", "bin", f"python{version}")

    def command(self, *args):
        return [self.loader, "--library-path", self.libdir, self.python] + [str(a) for a in args]

    def env(self):
        return dict(os.environ, PYTHONHOME=os.path.join(self.root, "usr"))


def fetch(build, version, suite):
    """The unpacked interpreter, or a string saying why there is none."""
    root = os.path.join(build, "pydebs", f"{suite}-{version}")
    done = os.path.join(root, ".complete")
    if os.path.exists(done):
        return Fetched(root, version)
    try:
        with urllib.request.urlopen(f"{MIRROR}/dists/{suite}/main/binary-amd64/Packages.xz", timeout=60) as r:
            index = lzma.decompress(r.read()).decode("utf-8", "replace")
    except OSError as e:
        return f"Debian's archive is not reachable ({e})"
    files, pkg = {}, None
    for line in index.splitlines():
        if line.startswith("Package: "):
            pkg = line[9:]
        elif line.startswith("Filename: ") and pkg:
            files.setdefault(pkg, line[10:])
    os.makedirs(root, exist_ok=True)
    for name in (p.format(v=version) for p in PACKAGES):
        if name not in files:
            return f"{name} is not in Debian's {suite}"
        deb = os.path.join(root, os.path.basename(files[name]))
        try:
            with urllib.request.urlopen(f"{MIRROR}/{files[name]}", timeout=120) as r, open(deb, "wb") as f:
                f.write(r.read())
        except OSError as e:
            return f"cannot download {name} ({e})"
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
        os.unlink(deb)
    open(done, "w").close()
    return Fetched(root, version)
