"""jdkfetch.py: the JDKs Debian 12 lacks, from Debian's own archive: OpenJDK 11 from
bullseye (runs on Debian 12's glibc), OpenJDK 21 from trixie and 26 from sid (with their
suite's glibc and zlib, run through that glibc's own loader; sid moves on: a JDK it no
longer has is a skip). Fetched with apt-get download under a private apt state
(tests/kmatrix/kmatrix.py's apt_opts: the system's sources are neither read nor written), unpacked with dpkg-deb, never installed. Cached in
/var/cache/prowl/jdks (BUILD/jdks when that is not writable)."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kmatrix"))
from kmatrix import KEYRING, MIRROR, apt_opts  # noqa: E402

# name: (suite, packages, JAVA_HOME in the unpacked tree, needs the suite's glibc)
JDKS = {
    "openjdk11": ("bullseye", ["openjdk-11-jre-headless"], "usr/lib/jvm/java-11-openjdk-amd64", False),
    "openjdk21": ("trixie", ["openjdk-21-jre-headless", "libc6", "zlib1g"], "usr/lib/jvm/java-21-openjdk-amd64",
                  True),
    "openjdk26": ("sid", ["openjdk-26-jre-headless", "libc6", "zlib1g"], "usr/lib/jvm/java-26-openjdk-amd64", True),
}


def cache_dir(build):
    d = "/var/cache/prowl/jdks"
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    return os.path.join(build, "jdks")


def fetch(build, name):
    """The command that runs name's java (a list), or a string saying why there is none."""
    suite, packages, home, own_libc = JDKS[name]
    root = os.path.join(cache_dir(build), name)
    libdir = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
    java = os.path.join(root, home, "bin", "java")
    command = ([os.path.join(libdir, "ld-linux-x86-64.so.2"), "--library-path", libdir] if own_libc else []) + [java]
    if os.path.exists(os.path.join(root, ".complete")):
        return command
    d = os.path.join(cache_dir(build), "apt", suite)
    for sub in ("lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d", "debs"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    with open(os.path.join(d, "sources.list"), "w") as f:
        f.write(f"deb [signed-by={KEYRING}] {MIRROR} {suite} main\n")
    open(os.path.join(d, "status"), "a").close()
    debs = os.path.join(d, "debs")
    try:
        subprocess.run(["apt-get"] + apt_opts(d) + ["update"], check=True, capture_output=True, text=True,
                       timeout=600)
        subprocess.run(["apt-get"] + apt_opts(d) + ["download"] + packages, check=True, capture_output=True,
                       text=True, cwd=debs, timeout=1200)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        detail = (getattr(e, "stderr", "") or str(e)).strip()
        return f"cannot fetch {name} from Debian's {suite}: {detail[-300:]}"
    os.makedirs(root, exist_ok=True)
    for deb in sorted(os.listdir(debs)):
        if deb.endswith(".deb") and deb.split("_")[0] in packages:
            subprocess.run(["dpkg-deb", "-x", os.path.join(debs, deb), root], check=True)
            os.unlink(os.path.join(debs, deb))
    if not os.access(java, os.X_OK):
        return f"{name}: no {java} in Debian's {' '.join(packages)}"
    open(os.path.join(root, ".complete"), "w").close()
    return command
