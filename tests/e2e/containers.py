"""containers.py: real cgroups in the host's hierarchies shaped as container runtimes
make them (containerd, CRI-O, Docker, Podman; systemd and cgroupfs drivers; v2 and v1),
with workloads started inside (and in mount+PID namespaces), for prowl's end-to-end tests.

Podman cannot start containers on the test machine, so the tests build what a runtime
leaves behind that prowl reads: the cgroup path of the process.
"""
import os
import shutil
import signal
import subprocess
import time
import uuid

from conftest import workload


def cgroup2_root():
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup or, on hybrid hosts,
    /sys/fs/cgroup/unified)."""
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype = line.split()[:3]
            if fstype == "cgroup2":
                return mnt
    raise AssertionError("no cgroup2 hierarchy mounted")


def cgroup1_root(name="systemd"):
    """The mount point of the named v1 hierarchy (name=systemd), or None on pure v2."""
    with open("/proc/self/mounts") as f:
        for line in f:
            dev, mnt, fstype, opts = line.split()[:4]
            if fstype == "cgroup" and f"name={name}" in opts.split(","):
                return mnt
    return None


def new_id():
    return uuid.uuid4().hex + uuid.uuid4().hex  # 64 hex digits, like every runtime's ids


def new_uid():
    return str(uuid.uuid4())


def shape(kind, cid, pod_uid=None, qos="burstable"):
    """The cgroup path (relative to the hierarchy) a runtime gives container cid."""
    under = pod_uid.replace("-", "_") if pod_uid else None
    return {
        "containerd-systemd": f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{under}.slice/"
                              f"cri-containerd-{cid}.scope",
        "crio-systemd": f"kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{under}.slice/crio-{cid}.scope",
        "kubepods-cgroupfs": f"kubepods/{qos}/pod{pod_uid}/{cid}",
        "docker-systemd": f"system.slice/docker-{cid}.scope",
        "docker-cgroupfs": f"docker/{cid}",
        "podman": f"machine.slice/libpod-{cid}.scope",
    }[kind]


class Cgroups:
    """Cgroups made for one test under a private top directory (named after the branch
    and a random suffix) in each hierarchy used; removed, leaf first, by cleanup()."""

    def __init__(self, prefix="i9"):
        self.top = f"{prefix}-{uuid.uuid4().hex[:8]}"
        self.made = []  # absolute paths, in creation order
        self.procs = []

    def make(self, rel, v1=False):
        root = cgroup1_root() if v1 else cgroup2_root()
        assert root, "no v1 name=systemd hierarchy on this host"
        path = os.path.join(root, self.top, rel)
        os.makedirs(path, exist_ok=True)
        parts = rel.split("/")
        for i in range(len(parts) + 1):
            p = os.path.join(root, self.top, *parts[:i])
            if p not in self.made:
                self.made.append(p)
        return path

    def start(self, cgroup, argv, mntns_copy=None):
        """Starts argv as a process of cgroup (absolute path). With mntns_copy (a file
        name), the process runs in new mount and PID namespaces, from a copy of argv[0]
        on a tmpfs only its mount namespace sees."""
        if mntns_copy:
            inner = (f'mount -t tmpfs i9 /mnt && cp "$1" /mnt/{mntns_copy} && shift && '
                     f'exec /mnt/{mntns_copy} "$@"')
            cmd = ["sh", "-c", f'echo $$ > "$0/cgroup.procs" && exec unshare --mount --pid --fork '
                               f'--mount-proc --propagation private sh -c \'{inner}\' sh "$@"', cgroup] + argv
        else:
            cmd = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', cgroup] + argv
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self.procs.append(p)
        return p

    def pids(self, cgroup):
        with open(os.path.join(cgroup, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]

    def kill(self, p):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()

    def cleanup(self):
        for p in self.procs:
            self.kill(p)
        for path in sorted(self.made, key=len, reverse=True):
            remove_cgroup(path)


def remove_cgroup(path, seconds=5):
    """Removes a cgroup directory once its killed processes have left it (rmdir says
    EBUSY until then); raises if it is still busy after `seconds`."""
    deadline = time.time() + seconds
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def private_workload(tmp_path, base="cpusplit"):
    """A copy of a workload under a unique name (its process name in profiles)."""
    name = "i9" + uuid.uuid4().hex[:8]
    dst = tmp_path / name
    shutil.copy2(workload(base), dst)
    return str(dst), name
