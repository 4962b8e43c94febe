#!/usr/bin/python3
"""kmatrix.py: the kernel matrix. Downloads Debian's kernels (newest 5.10, 6.1, 6.12) with
apt-get and a private apt state, boots each under QEMU with an initramfs of prowl, and
judges what guest.sh reports there and on this machine's own kernel. With --arch arm64:
Debian's arm64 kernels under qemu-system-aarch64 (TCG), with a cross-built prowl.

Usage: tests/kmatrix/kmatrix.py [--arch x86|arm64] [--build DIR] [--markdown FILE] [--only NAME,...]
       [--jobs N] [--share-slots DIR] [--seconds S] [--both] [--no-host]
Environment: PROWL_KMATRIX_ACCEL=auto|kvm|tcg (default auto: KVM when /dev/kvm works),
PROWL_KMATRIX_REFRESH=1 (ask the archive for newer kernels now; otherwise weekly),
PROWL_KMATRIX_CACHE=DIR (where the kernels and arm64's packages are kept across clones; default
/var/cache/prowl/kmatrix as root, else ~/.cache/prowl/kmatrix)."""
import argparse
import concurrent.futures
import contextlib
import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import judge  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
MIRROR = "http://deb.debian.org/debian"
SECURITY = "http://deb.debian.org/debian-security"
# (name, Debian suite, what the suite's linux-image-amd64 must depend on)
KERNELS = [("5.10", "bullseye", "linux-image-5.10."), ("6.1", "bookworm", "linux-image-6.1."),
           ("6.12", "trixie", "linux-image-6.12.")]
REFRESH_S = 7 * 86400
PYTHON = "/usr/bin/python3.11"  # Debian 12's, libpython linked in
PY_ENCODINGS = ["__init__", "aliases", "utf_8", "ascii", "latin_1"]
BOOT_TIMEOUT_S = 600  # four guests at once on two CPUs (tried in make test) took 5.10 about 200 s
KVM_PROBE_S = 6  # under KVM a guest reaches init in 1-2 s; too short only costs the TCG it falls back to
# and ends its checks in well under a minute: a KVM guest that has not ended in KVM_GUEST_S
# (some nested setups run guests that stall) is booted again under TCG.
KVM_GUEST_S = 240
ARM64_BOOT_TIMEOUT_S = 1200  # TCG emulates every arm64 instruction: several times slower
# What an arm64 guest needs from Debian 12's arm64 packages (unpacked, not installed):
# a static busybox, CPython 3.11 and the library it needs beyond prowl's, libc's debug file.
ARM64_DEBS = ["busybox-static", "python3.11-minimal", "libexpat1", "libc6-dbg"]
# And bullseye's CPython 3.9 (pinned: its release, which the archive keeps), whose threads
# are matched by pthread_self(), on arm64 below the thread pointer by glibc's struct pthread.
ARM64_OLD_SUITE = "bullseye"
ARM64_OLD_DEBS = ["python3.9-minimal=3.9.2-1", "libpython3.9-minimal=3.9.2-1"]
PYTHON_OLD = "/usr/bin/python3.9"
PY_OLD_MODULES = ["codecs", "abc", "io"]  # what 3.9 -I -S imports at start besides encodings
ARM64_LIBDIRS = ["/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu"]


def log(msg):
    print(f"kmatrix: {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ kernels from the archive

def apt_opts(d, arch="amd64"):
    """apt options that keep every piece of state under d: the system's sources,
    lists, caches and dpkg status are neither read for packages nor written."""
    return ["-o", f"Dir::Etc::SourceList={d}/sources.list", "-o", f"Dir::Etc::SourceParts={d}/sources.list.d",
            "-o", f"Dir::Etc::Preferences={d}/preferences", "-o", f"Dir::Etc::PreferencesParts={d}/preferences.d",
            "-o", f"Dir::State::Lists={d}/lists", "-o", f"Dir::State::status={d}/status",
            "-o", f"Dir::Cache={d}/cache", "-o", f"Dir::Cache::archives={d}/cache/archives",
            "-o", f"APT::Architecture={arch}", "-o", f"APT::Architectures::={arch}", "-o", "Acquire::Languages=none",
            "-o", "APT::Sandbox::User=root", "-q"]


def downloads_dir(arch):
    """The folder of one architecture's kernels, apt states and arm64 root, kept across
    clones and builds (a fresh clone spent a minute downloading them): PROWL_KMATRIX_CACHE,
    else /var/cache/prowl/kmatrix as root, else ~/.cache/prowl/kmatrix. Guests boot what
    it holds, so it and each folder above it must be root's or ours and writable by no
    one else (sticky folders such as /tmp excepted, above it)."""
    top = os.environ.get("PROWL_KMATRIX_CACHE") or ("/var/cache/prowl/kmatrix" if os.geteuid() == 0 else
                                                   os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                                os.path.expanduser("~/.cache"), "prowl/kmatrix"))
    top = os.path.abspath(top)
    mine = os.path.join(top, arch)

    def refuse(why):
        raise SystemExit(f"kmatrix: error: cannot use the download cache {top}: {why}: fix it, or set "
                         "PROWL_KMATRIX_CACHE to a folder of your own")

    def check(d, sticky_ok):
        st = os.stat(d)
        if st.st_uid not in (0, os.geteuid()):
            refuse(f"{d} is owned by uid {st.st_uid}")
        if st.st_mode & 0o022 and not (sticky_ok and st.st_mode & 0o1000):
            refuse(f"{d} is writable by others (mode {st.st_mode & 0o7777:o})")

    try:
        os.makedirs(top, mode=0o755, exist_ok=True)
    except OSError as e:
        raise SystemExit(f"kmatrix: error: cannot create the download cache {top}: {e.strerror}: "
                         "set PROWL_KMATRIX_CACHE to a folder of your own")
    check(top, False)
    d = top
    while d != "/":
        d = os.path.dirname(d)
        check(d, True)
    os.makedirs(mine, mode=0o755, exist_ok=True)
    check(mine, False)
    return mine


@contextlib.contextmanager
def locked(d):
    """Holds d's lock file: two runs (two clones, or make test's fetch and a matrix) fetch
    into one folder one after the other."""
    with open(os.path.join(d, ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def apt_dir(cache, suite, arch):
    """The private apt state of one suite (and architecture), its lists fresh."""
    d = os.path.join(cache, "apt", suite if arch == "amd64" else f"{suite}-{arch}")
    for sub in ("lists/partial", "cache/archives/partial", "sources.list.d", "preferences.d", "debs"):
        os.makedirs(os.path.join(d, sub), exist_ok=True)
    with open(os.path.join(d, "sources.list"), "w") as f:
        f.write(f"deb [signed-by={KEYRING}] {MIRROR} {suite} main\n"
                f"deb [signed-by={KEYRING}] {SECURITY} {suite}-security main\n")
    open(os.path.join(d, "status"), "a").close()
    return d


def kernel_packages(d, arch, prefix):
    """The kernel packages linux-image-ARCH depends on, one per version the
    suite's sources hold, newest first, those whose names start with prefix."""
    opts = apt_opts(d, arch)
    pol = subprocess.run(["apt-cache"] + opts + ["policy", f"linux-image-{arch}"], check=True, capture_output=True,
                         text=True, timeout=120).stdout
    versions = re.findall(r"^\s+(?:\*\*\* )?(\S+) \d+$", pol, re.M)
    out = []
    for v in versions:
        dep = subprocess.run(["apt-cache"] + opts + ["depends", f"linux-image-{arch}={v}"], check=True,
                             capture_output=True, text=True, timeout=120).stdout
        out += [m.group(1) for m in re.finditer(r"Depends: (linux-image-\S+)", dep)
                if m.group(1).startswith(prefix) and m.group(1) not in out]
    if not out:
        raise StopIteration
    return out


def fetch_kernel(cache, name, suite, prefix, arch="amd64"):
    """Returns the path of the suite's newest kernel image, downloading it when the
    cached one is older than a week (or PROWL_KMATRIX_REFRESH=1) and a newer exists."""
    kdir = os.path.join(cache, "kernels", suite)
    stamp = os.path.join(kdir, "package")
    cached = [f for f in os.listdir(kdir) if f.startswith("vmlinuz-")] if os.path.isdir(kdir) else []
    fresh = os.path.exists(stamp) and time.time() - os.path.getmtime(stamp) < REFRESH_S
    if cached and fresh and os.environ.get("PROWL_KMATRIX_REFRESH") != "1":
        return os.path.join(kdir, cached[0])
    d = apt_dir(cache, suite, arch)
    t0 = time.time()
    try:
        subprocess.run(["apt-get"] + apt_opts(d, arch) + ["update"], check=True, capture_output=True, text=True,
                       timeout=600)
        pkgs = kernel_packages(d, arch, prefix)
        pkg = pkgs[0]
        if cached and open(stamp).read().strip() == pkg:
            os.utime(stamp)
            return os.path.join(kdir, cached[0])
        # A mirror may index a package it does not hold yet (a security update):
        # then the suite's previous kernel, and say so.
        for i, pkg in enumerate(pkgs):
            r = subprocess.run(["apt-get"] + apt_opts(d, arch) + ["download", pkg], capture_output=True, text=True,
                               cwd=os.path.join(d, "debs"), timeout=1800)
            if r.returncode == 0:
                break
            if i + 1 == len(pkgs):
                raise subprocess.CalledProcessError(r.returncode, r.args, r.stdout, r.stderr)
            log(f"{name}: {pkg} cannot be downloaded ({r.stderr.strip().splitlines()[-1][:160]}): trying {pkgs[i + 1]}")
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, StopIteration) as e:
        detail = getattr(e, "stderr", "") or str(e)
        if cached:
            log(f"{name}: cannot ask the archive for a newer kernel, using the cached one: {detail.strip()[:200]}")
            return os.path.join(kdir, cached[0])
        raise SystemExit(f"kmatrix: error: cannot download the {name} kernel ({suite}): {detail.strip()[:400]}")
    deb = [f for f in os.listdir(os.path.join(d, "debs")) if f.startswith(pkg + "_") and f.endswith(".deb")][0]
    tmp = tempfile.mkdtemp(dir=cache)
    subprocess.run(f"dpkg-deb --fsys-tarfile '{d}/debs/{deb}' | tar -x -C '{tmp}' --wildcards './boot/vmlinuz-*' "
                   f"'./boot/config-*'", shell=True, check=True)
    shutil.rmtree(kdir, ignore_errors=True)
    os.makedirs(os.path.dirname(kdir), exist_ok=True)
    os.rename(os.path.join(tmp, "boot"), kdir)
    shutil.rmtree(tmp)
    os.unlink(os.path.join(d, "debs", deb))  # only the image is kept
    with open(stamp, "w") as f:
        f.write(pkg + "\n")
    log(f"{name}: downloaded {pkg} in {time.time() - t0:.0f}s")
    return os.path.join(kdir, [f for f in os.listdir(kdir) if f.startswith("vmlinuz-")][0])


def kernel_config(vmlinuz):
    path = vmlinuz.replace("vmlinuz-", "config-")
    opts = {}
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r"^(CONFIG_\w+)=(.*)$", line)
            if m:
                opts[m.group(1)] = m.group(2)
    return opts


# ------------------------------------------------------------------ the initramfs

def ldd(path):
    out = subprocess.run(["ldd", path], check=True, capture_output=True, text=True).stdout
    libs = re.findall(r"=> (/\S+)", out) + re.findall(r"^\s*(/\S+ld-linux\S*)", out, re.M)
    return sorted(set(libs))


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else None


# The workloads guest.sh runs, in every guest of either architecture (build/workloads/NAME).
GUEST_WORKLOADS = ("split532", "split532_fp", "offsplit")


def initramfs_inputs(build, make):
    """What an initramfs is made of (it is remade when one is newer), each checked."""
    inputs = [os.path.join(build, "prowl")] + [os.path.join(build, "workloads", w) for w in GUEST_WORKLOADS] + [
              os.path.join(ROOT, "tests/kmatrix/guest.sh"),
              os.path.abspath(__file__)]
    for p in inputs:
        if not os.path.exists(p):
            raise SystemExit(f"kmatrix: error: {p} is missing: run {make}")
    return inputs


def make_initramfs(build, cache):
    """prowl, its shared libraries, libc's debug info (thread entries by name),
    busybox, the workloads and guest.sh, as an uncompressed newc cpio."""
    out = os.path.join(cache, "initramfs.cpio")
    inputs = initramfs_inputs(build, "make all workloads")
    busybox = "/bin/busybox"
    if subprocess.run(["ldd", busybox], capture_output=True).returncode == 0:
        raise SystemExit("kmatrix: error: /bin/busybox is not statically linked: install busybox-static "
                         "(packaging/install-deps.sh)")
    if os.path.exists(out) and os.path.getmtime(out) > max(os.path.getmtime(p) for p in inputs):
        return out
    stage = tempfile.mkdtemp(dir=cache)
    # The guest's / is this directory: 0755 as on any host (mkdtemp makes it 0700, and
    # prowl reads debug files only behind directories every user may search).
    os.chmod(stage, 0o755)
    try:
        def put(src, dst=None):
            dst = os.path.join(stage, (dst or src).lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.realpath(src), dst)

        put(busybox, "/bin/busybox")
        km = "/km"
        put(os.path.join(build, "prowl"), f"{km}/prowl")
        # prowl's own frames (it samples itself in record -a) are named from its
        # symbol table: parsing its DWARF under emulation doubled each capture's time.
        subprocess.run(["strip", "--strip-debug", os.path.join(stage, "km/prowl")], check=True)
        for w in GUEST_WORKLOADS:
            put(os.path.join(build, "workloads", w), f"{km}/{w}")
        put(os.path.join(ROOT, "tests/kmatrix/guest.sh"), f"{km}/guest.sh")
        # CPython 3.11 for guest.sh's Python capture: the interpreter, its libraries and
        # the encodings it imports at start (-I -S: nothing else).
        libs = set(ldd(os.path.join(build, "prowl")))
        if os.access(PYTHON, os.X_OK):
            put(PYTHON)
            libs |= set(ldd(PYTHON))
            for f in PY_ENCODINGS:
                put(f"/usr/lib/python3.11/encodings/{f}.py")
        for lib in sorted(libs):
            put(lib)
            bid = build_id(lib)
            dbg = f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug" if bid else None
            if dbg and os.path.basename(lib).startswith(("libc.so", "ld-linux")) and os.path.exists(dbg):
                put(dbg)
        write_cpio(stage, out, "/dev/ttyS1")
    finally:
        shutil.rmtree(stage)
    return out


def write_cpio(stage, out, tty):
    """/init, /etc/passwd and the empty mount points, then stage as out (newc cpio)."""
    for d in ("proc", "sys", "dev", "tmp", "etc"):
        os.makedirs(os.path.join(stage, d), exist_ok=True)
    with open(os.path.join(stage, "init"), "w") as f:
        f.write(INIT.replace("@TTY@", tty))
    os.chmod(os.path.join(stage, "init"), 0o755)
    with open(os.path.join(stage, "etc/passwd"), "w") as f:
        f.write("root:x:0:0:root:/:/bin/sh\n")
    files = subprocess.run(["find", "."], cwd=stage, check=True, capture_output=True).stdout
    with open(out + ".tmp", "wb") as f:
        subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=stage, input=files, stdout=f, check=True)
    os.rename(out + ".tmp", out)


def arm64_root(cache):
    """Debian 12's arm64 packages of ARM64_DEBS and bullseye's of ARM64_OLD_DEBS, unpacked
    into one folder (once: its .done names them)."""
    root = os.path.join(cache, "arm64-root")
    want = " ".join(ARM64_DEBS + ARM64_OLD_DEBS)
    done = os.path.join(root, ".done")
    if os.path.exists(done) and open(done).read() == want:
        return root
    shutil.rmtree(root, ignore_errors=True)
    for suite, pkgs in (("bookworm", ARM64_DEBS), (ARM64_OLD_SUITE, ARM64_OLD_DEBS)):
        d = apt_dir(cache, suite, "arm64")
        debs = os.path.join(d, "debs")
        try:
            subprocess.run(["apt-get"] + apt_opts(d, "arm64") + ["update"], check=True, capture_output=True,
                           text=True, timeout=600)
            subprocess.run(["apt-get"] + apt_opts(d, "arm64") + ["download"] + pkgs, check=True,
                           capture_output=True, text=True, cwd=debs, timeout=1800)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
            detail = getattr(e, "stderr", "") or str(e)
            raise SystemExit(f"kmatrix: error: cannot download the arm64 guest's packages ({suite}): "
                             f"{detail.strip()[:400]}")
        for f in sorted(os.listdir(debs)):
            if f.endswith("_arm64.deb"):
                subprocess.run(["dpkg-deb", "-x", os.path.join(debs, f), root], check=True)
                os.unlink(os.path.join(debs, f))
    with open(done, "w") as f:
        f.write(want)
    return root


def fetch_kernels(cache, todo, arch):
    """The image of each kernel of todo (KERNELS rows), by name, all downloaded at once
    into cache (downloads_dir()): each suite has its own apt state (27 s one after another here)."""
    with locked(cache), concurrent.futures.ThreadPoolExecutor(max(1, len(todo))) as pool:
        return dict(zip((k[0] for k in todo),
                        pool.map(lambda k: fetch_kernel(cache, k[0], k[1], k[2], arch), todo)))


def needed_libs(path, dirs):
    """The shared libraries path needs, transitively, found in dirs (readelf reads any
    architecture's ELF, where ldd would have to run it)."""
    found, todo = {}, [path]
    while todo:
        out = subprocess.run(["readelf", "-d", todo.pop()], check=True, capture_output=True, text=True).stdout
        for name in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out):
            if name in found:
                continue
            hit = next((os.path.join(d, name) for d in dirs if os.path.exists(os.path.join(d, name))), None)
            if not hit:
                raise SystemExit(f"kmatrix: error: {name} ({os.path.basename(path)} needs it) is not in "
                                 f"{', '.join(dirs)}: run packaging/install-deps.sh arm64")
            found[name] = hit
            todo.append(hit)
    return sorted(found.values())


def make_initramfs_arm64(build, cache, dl, deb=None):
    """The arm64 guest's initramfs: as make_initramfs(), from the cross build and
    Debian's arm64 packages; the results go to the one serial port, the console.
    deb: prowl's arm64 package, whose /usr/bin/prowl runs there in place of the build's."""
    out = os.path.join(cache, "initramfs.cpio")
    inputs = initramfs_inputs(build, "make ARCH=arm64 all workloads") + ([deb] if deb else [])
    with locked(dl):
        root = arm64_root(dl)
    if os.path.exists(out) and os.path.getmtime(out) > max(os.path.getmtime(p) for p in inputs):
        return out
    stage = tempfile.mkdtemp(dir=cache)
    os.chmod(stage, 0o755)
    dirs = [root + d for d in ARM64_LIBDIRS] + ARM64_LIBDIRS
    try:
        def put(src, dst):
            dst = os.path.join(stage, dst.lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy2(os.path.realpath(src), dst)

        put(os.path.join(root, "bin/busybox"), "/bin/busybox")
        put(os.path.join(build, "prowl"), "/km/prowl")
        for w in GUEST_WORKLOADS:
            put(os.path.join(build, "workloads", w), f"/km/{w}")
        prowl = os.path.join(build, "prowl")
        if deb:
            pkg = os.path.join(stage, "pkg")
            subprocess.run(["dpkg-deb", "-x", deb, pkg], check=True)
            prowl = os.path.join(pkg, "usr/bin/prowl")
            put(prowl, "/km/prowl")
        subprocess.run(["aarch64-linux-gnu-strip", "--strip-debug", os.path.join(stage, "km/prowl")], check=True)
        put(os.path.join(ROOT, "tests/kmatrix/guest.sh"), "/km/guest.sh")
        py = os.path.join(root, PYTHON.lstrip("/"))
        libs = set(needed_libs(prowl, dirs))
        put(py, PYTHON)
        libs |= set(needed_libs(py, dirs))
        for f in PY_ENCODINGS:
            put(f"/usr/lib/python3.11/encodings/{f}.py", f"/usr/lib/python3.11/encodings/{f}.py")
        old = os.path.join(root, PYTHON_OLD.lstrip("/"))
        put(old, PYTHON_OLD)
        libs |= set(needed_libs(old, dirs))
        lib_old = "/usr/lib/" + os.path.basename(PYTHON_OLD)
        for f in [f"encodings/{e}" for e in PY_ENCODINGS] + PY_OLD_MODULES:
            put(f"{root}{lib_old}/{f}.py", f"{lib_old}/{f}.py")
        # The dynamic loader, under the path the binaries name.
        put("/lib/ld-linux-aarch64.so.1", "/lib/ld-linux-aarch64.so.1")
        for lib in sorted(libs):
            put(lib, "/lib/aarch64-linux-gnu/" + os.path.basename(lib))
            bid = build_id(lib)
            dbg = f"{root}/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug" if bid else None
            if dbg and os.path.basename(lib).startswith("libc.so") and os.path.exists(dbg):
                put(dbg, dbg[len(root):])
        if deb:
            shutil.rmtree(pkg)
        write_cpio(stage, out, "/dev/ttyAMA0")
    finally:
        shutil.rmtree(stage)
    return out


INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
hostname kmatrix
echo 1 >/proc/sys/kernel/printk
echo "@@booted" >@TTY@
arg() { sed -n "s/.*km.$1=\\([0-9]*\\).*/\\1/p" /proc/cmdline; }
KM_BIN=/km KM_TMP=/tmp KM_OUT=@TTY@ KM_SECONDS="$(arg seconds)" KM_BOTH="$(arg both)" sh /km/guest.sh
sync
poweroff -f
"""


# ------------------------------------------------------------------ booting

def kvm_verdict(cache):
    """True/False when known, None when KVM should be tried: /dev/kvm opens, and no
    earlier run on this host kernel and QEMU saw it fail (some nested setups expose
    a /dev/kvm whose guests hang)."""
    mode = os.environ.get("PROWL_KMATRIX_ACCEL", "auto")
    if mode in ("kvm", "tcg"):
        return mode == "kvm"
    try:
        os.close(os.open("/dev/kvm", os.O_RDWR))
    except OSError:
        return False
    path = os.path.join(cache, "kvm-verdict")
    if os.path.exists(path):
        key, _, v = open(path).read().strip().rpartition(" ")
        if key == kvm_key():
            return v == "yes"
    return None


def kvm_key():
    qemu = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    return f"{os.uname().release} {qemu}".replace(" ", "_")


def remember_kvm(cache, ok):
    with open(os.path.join(cache, "kvm-verdict"), "w") as f:
        f.write(f"{kvm_key()} {'yes' if ok else 'no'}\n")


def boot(vmlinuz, initrd, name, cache, kvm, seconds, both, probe=False, arch="x86"):
    """Boots one kernel; returns (results text, seconds). probe: give up after
    KVM_PROBE_S when the guest has not reached its init."""
    res = os.path.join(cache, "results", f"{name}.txt")
    con = os.path.join(cache, "results", f"{name}.console")
    os.makedirs(os.path.dirname(res), exist_ok=True)
    for p in (res, con):
        if os.path.exists(p):
            os.unlink(p)
    accel = ["-accel", "kvm", "-cpu", "host"] if kvm else ["-accel", "tcg,thread=multi", "-cpu", "max"]
    args = f"panic=-1 quiet km.seconds={seconds} km.both={int(both)}"
    timeout = KVM_GUEST_S if kvm else BOOT_TIMEOUT_S
    if arch == "arm64":
        # QEMU's virt board has one UART: the console and the results share it
        # (printk is quieted first). pauth-impdef: pointer authentication stays on,
        # with QEMU's fast signature in place of the emulated QARMA cipher.
        cmd = ["qemu-system-aarch64", "-M", "virt", "-accel", "tcg,thread=multi", "-cpu", "max,pauth-impdef=on",
               "-m", "1024", "-smp", "2", "-nic", "none", "-no-reboot", "-nographic", "-monitor", "none",
               "-kernel", vmlinuz, "-initrd", initrd, "-append", f"console=ttyAMA0 loglevel=1 {args}",
               "-serial", f"file:{res}"]
        timeout = ARM64_BOOT_TIMEOUT_S
    else:
        # The TSC for a clock: under TCG 5.10 and 6.1 take the HPET, an emulated device
        # each read of which (every clock_gettime, every bpf_ktime_get_ns) costs
        # microseconds; the matrix took 264 s with it, 203 s without.
        cmd = ["qemu-system-x86_64", *accel, "-m", "1024", "-smp", "2", "-nic", "none", "-no-reboot", "-nographic",
               "-kernel", vmlinuz, "-initrd", initrd, "-append", f"console=ttyS0 clocksource=tsc tsc=reliable {args}",
               "-serial", "mon:stdio", "-serial", f"file:{res}"]
    with guest_slot(), open(con, "w") as out:
        t0 = time.time()
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        while p.poll() is None:
            late = time.time() - t0 > timeout or (probe and time.time() - t0 > KVM_PROBE_S and not booted(res))
            if late:
                p.kill()
                p.wait()
                why = f"no init after {KVM_PROBE_S}s" if probe and not booted(res) else "timed out"
                log(f"{name}: {why}; console in {con}")
                if not probe or booted(res):
                    console_tail(name, res if arch == "arm64" else con)
                break
            time.sleep(0.2)
    text = open(res, errors="replace").read() if os.path.exists(res) else ""
    return text, time.time() - t0


def console_tail(name, path, n=15):
    """The last lines a guest that never ended printed (kernel messages, a hung task), into
    the log: a CI log keeps the matrix's output, not the build directory."""
    try:
        text = open(path, errors="replace").read()
    except OSError:
        return
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\x1bc", "", l).strip() for l in text.splitlines()]
    lines = [l for l in lines if l and not l.startswith("@@")]
    for l in lines[-n:]:
        log(f"{name} console: {l[:200]}")


SLOTS = None  # --share-slots: (directory, count)


@contextlib.contextmanager
def guest_slot():
    """Held while a guest runs: one of --jobs slots (lock files) that other kmatrix.py runs
    with the same --share-slots directory also take theirs from, so that two matrices at
    once (make test: x86_64's and arm64's) never run more guests than --jobs together."""
    if not SLOTS:
        yield
        return
    d, n = SLOTS
    while True:
        for i in range(n):
            fd = os.open(os.path.join(d, f"slot.{i}"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            try:
                yield
            finally:
                os.close(fd)  # and with it the lock
            return
        time.sleep(0.5)


def booted(path):
    return os.path.exists(path) and "@@booted" in open(path, errors="replace").read()


def run_host(build, seconds, both):
    """guest.sh on this machine's own kernel, with the build's binaries. Captures
    are twice as long: unlike a guest, this machine may be busy with other work,
    which leaves the workload fewer samples."""
    tmp = tempfile.mkdtemp(prefix="i18-kmatrix-")
    try:
        kb = os.path.join(tmp, "bin")
        os.makedirs(kb)
        for src, dst in [("prowl", "prowl")] + [(f"workloads/{w}", w) for w in GUEST_WORKLOADS]:
            os.symlink(os.path.abspath(os.path.join(build, src)), os.path.join(kb, dst))
        out = os.path.join(tmp, "results.txt")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PROWL_")}
        env.update(KM_BIN=kb, KM_TMP=tmp, KM_OUT=out, KM_SECONDS=str(2 * seconds), KM_BOTH=str(int(both)))
        t0 = time.time()
        subprocess.run(["sh", os.path.join(ROOT, "tests/kmatrix/guest.sh")], env=env, timeout=BOOT_TIMEOUT_S,
                       stdin=subprocess.DEVNULL)
        return open(out, errors="replace").read(), time.time() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def report_same(name, text, prowl, host_prowl):
    """The agent's windows of one guest through prowl report and prowl diff, by the
    arm64 build (under qemu-user) and by this machine's: the same output, byte for byte."""
    row = {"kernel": name, "mode": "report, diff (arm64 build, qemu-user)", "rc": None, "problems": []}
    _, _, files = judge.parse(text)
    windows = [files[k] for k in sorted(files) if k.startswith("window:")][:2]
    if len(windows) < 2:
        row["problems"].append("fewer than 2 agent windows to report on")
        return row
    tmp = tempfile.mkdtemp(prefix="kmatrix-report-")
    try:
        paths = []
        for i, w in enumerate(windows):
            paths.append(os.path.join(tmp, f"w{i}.pb.gz"))
            with open(paths[-1], "wb") as f:
                f.write(w)
        for cmd in (["report", paths[0]], ["diff", paths[0], paths[1]]):
            outs = [subprocess.run(argv + cmd, capture_output=True, text=True, timeout=300)
                    for argv in (["qemu-aarch64-static", prowl], [host_prowl])]
            row["rc"] = outs[0].returncode
            if outs[0].returncode != 0 or outs[0].stdout != outs[1].stdout or not outs[0].stdout:
                row["problems"].append(f"prowl {cmd[0]}: the arm64 build says {outs[0].stdout[:120]!r} "
                                       f"{outs[0].stderr.strip()[:200]}, this machine's {outs[1].stdout[:120]!r}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return row


def step_times(text):
    return ", ".join(f"{m.group(1)} {m.group(2)}s" for m in re.finditer(r"^@@step (\S+) rc=-?\d+ sec=(\S+)", text, re.M))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", choices=["x86", "arm64"], default="x86",
                    help="the guests' architecture (arm64: TCG, a cross build in --build)")
    ap.add_argument("--build", default="build", help="build directory (prowl, workloads, tools/pprof)")
    ap.add_argument("--pprof", help="Google's pprof, built for this machine (default: BUILD/tools/pprof)")
    ap.add_argument("--deb", help="with --arch arm64: prowl's arm64 package, whose prowl the guests run")
    ap.add_argument("--markdown", help="also write the table as Markdown to this file")
    ap.add_argument("--only", help="comma-separated subset of: " + ",".join(k[0] for k in KERNELS) + ",host")
    ap.add_argument("--no-host", action="store_true",
                    help="guests only, not this machine's own kernel (make test: the end-to-end tests check it)")
    ap.add_argument("--seconds", type=int, default=3, help="length of each capture (default 3)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="guests booted at once (default 1; the workloads split work, not time, so "
                         "guests that share the CPUs still judge true; the BPF cost per run grows)")
    ap.add_argument("--share-slots", metavar="DIR",
                    help="take each guest's slot from lock files in DIR, shared with other runs given the "
                         "same DIR and --jobs: at most --jobs guests among them all (make test: both matrices)")
    ap.add_argument("--fetch-only", action="store_true",
                    help="download the kernels (and arm64's packages) into the download cache, then stop "
                         "(make test does it first, in the background)")
    ap.add_argument("--both", action="store_true",
                    help="also measure the DWARF unwinder each kernel does not pick by itself (benchmarks)")
    args = ap.parse_args()
    global SLOTS
    if args.share_slots:
        os.makedirs(args.share_slots, exist_ok=True)
        SLOTS = (args.share_slots, max(1, args.jobs))
    build = os.path.abspath(args.build)
    cache = os.path.join(build, "kmatrix")
    pprof = os.path.abspath(args.pprof) if args.pprof else os.path.join(build, "tools/pprof")
    arm64 = args.arch == "arm64"
    t_fetch = time.time()
    os.makedirs(cache, exist_ok=True)
    dl = downloads_dir(args.arch)
    if os.geteuid() != 0 and not args.fetch_only:
        raise SystemExit("kmatrix: error: run as root (prowl loads BPF on this machine's kernel too)")
    tools = ("qemu-system-aarch64", "qemu-aarch64-static", "aarch64-linux-gnu-strip") if arm64 else \
        ("qemu-system-x86_64", "strip", "busybox")
    for tool in tools + ("apt-get", "dpkg-deb", "cpio", "readelf"):
        if not shutil.which(tool):
            raise SystemExit(f"kmatrix: error: {tool} is missing: run packaging/install-deps.sh")
    only = set(args.only.split(",")) if args.only else None
    todo = [k for k in KERNELS if only is None or k[0] in only]
    if args.fetch_only:
        fetch_kernels(dl, todo, "arm64" if arm64 else "amd64")
        if arm64:
            with locked(dl):
                arm64_root(dl)
        log(f"kernels {'and packages ' if arm64 else ''}fetched in {time.time() - t_fetch:.0f}s")
        return 0
    if not os.access(pprof, os.X_OK):
        raise SystemExit(f"kmatrix: error: {pprof} is missing: run make tools")
    # arm64: report and diff by the arm64 build are compared with this machine's prowl.
    host_prowl = os.path.join(os.path.dirname(os.path.dirname(pprof)), "prowl")
    if arm64 and not os.access(host_prowl, os.X_OK):
        raise SystemExit(f"kmatrix: error: {host_prowl} is missing: run make all")
    t_all = time.time()
    rows = []
    images = fetch_kernels(dl, todo, "arm64" if arm64 else "amd64")
    if not todo:
        initrd = None
    elif arm64:
        initrd = make_initramfs_arm64(build, cache, dl, args.deb and os.path.abspath(args.deb))
    else:
        initrd = make_initramfs(build, cache)
    kvm = False if arm64 else kvm_verdict(cache)

    def check(name, suite, probe=False):
        """Boots one kernel (probe: with KVM, which nothing is known of yet); its rows, or
        None when the probe found that KVM does not boot guests."""
        nonlocal kvm
        cfg = kernel_config(images[name])
        if cfg.get("CONFIG_DEBUG_INFO_BTF") != "y" and not probe:
            log(f"{name}: {os.path.basename(images[name])} is built without CONFIG_DEBUG_INFO_BTF")
        text, secs = boot(images[name], initrd, name, cache, kvm is not False, args.seconds, args.both, probe=probe,
                          arch=args.arch)
        if probe:
            kvm = "@@done" in text
            remember_kvm(cache, kvm)
            if not kvm:
                what = "runs guests that do not end" if booted(os.path.join(cache, "results", f"{name}.txt")) \
                    else "does not boot guests"
                log(f"KVM {what} here: TCG from now on (remembered)")
                return None
        def boot_tcg():
            return boot(images[name], initrd, name, cache, False, args.seconds, args.both, arch=args.arch)

        accel = "KVM" if kvm else "TCG"
        if kvm and not probe and "@@done" not in text:
            log(f"{name}: under KVM it did not end in {KVM_GUEST_S}s: booted again under TCG")
            text, secs = boot_tcg()
            accel = "TCG"
        label = f"{name} ({suite}{', arm64' if arm64 else ''})"
        if "@@done" not in text and not probe:
            # Every step has a bound (guest.sh), so a guest that never ends stalled in its
            # kernel or the emulator, not in a check: it boots once more, and its row says so.
            done = step_times(text) or "no step ended"
            log(f"{name}: the guest did not end in {secs:.0f}s ({done}): booted once more")
            text, secs = boot_tcg()
            accel, label = "TCG", label + " 2nd boot"
        log(f"{name}: {os.path.basename(images[name])} booted and checked in {secs:.0f}s "
            f"({accel}; {step_times(text)})")
        out = judge.judge(label, text, pprof)
        if arm64:
            out.append(report_same(f"{name} ({suite}, arm64)", text, os.path.join(build, "prowl"), host_prowl))
        return out

    # While KVM is unknown, the first guest probes it alone; under TCG it then boots again
    # with the others.
    rest = list(todo)
    if kvm is None and rest:
        out = check(rest[0][0], rest[0][1], probe=True)
        if out is not None:
            rows += out
            rest = rest[1:]
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for out in list(pool.map(lambda k: check(k[0], k[1]), rest)):
            rows += out
    if (only is None or "host" in only) and not arm64 and not args.no_host:
        text, secs = run_host(build, args.seconds, args.both)
        log(f"host: {os.uname().release} checked in {secs:.0f}s ({step_times(text)})")
        rows += judge.judge(f"{os.uname().release.split('-')[0]} (this machine)", text, pprof)
    print(judge.table(rows))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(judge.table(rows, markdown=True) + "\n")
    bad = [r for r in rows if r["problems"]]
    print(f"kernel matrix: {len(rows) - len(bad)} of {len(rows)} checks passed in {time.time() - t_all:.0f}s")
    for r in bad:  # one line each, last, so that the tail of a CI log names what failed and why
        print(f"kernel matrix failed: {r['kernel']}, {r['mode']}: {'; '.join(r['problems'])}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
