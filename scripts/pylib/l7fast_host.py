"""What the tests and the benchmark need of the host, found or made the same
way everywhere: the cgroup v2 hierarchy and a BPF filesystem at /sys/fs/bpf.

systemd mounts bpffs at boot; a machine without systemd as PID 1 (a
container, a VM booted straight into a shell, CI) may have none, and the
data plane pins its maps there, so the suite mounts it itself, as root,
when nothing is mounted at /sys/fs/bpf."""
import os
import subprocess
from pathlib import Path

BPFFS = Path("/sys/fs/bpf")


def _mounts():
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            sep = parts.index("-")
            yield parts[4], parts[sep + 1]


def cgroup2_root():
    """Where the cgroup v2 hierarchy is mounted (/sys/fs/cgroup, or
    /sys/fs/cgroup/unified on a hybrid host), or None."""
    for point, fstype in _mounts():
        if fstype == "cgroup2":
            return Path(point)
    return None


def bpffs_mounted(path=BPFFS):
    return any(point == str(path) and fstype == "bpf" for point, fstype in _mounts())


def ensure_bpffs(path=BPFFS):
    """Mounts a BPF filesystem at `path` unless one is there; returns None,
    or why it cannot (not root, mount failed)."""
    if bpffs_mounted(path):
        return None
    if os.geteuid() != 0:
        return f"no BPF filesystem at {path} (as root: mount -t bpf bpf {path})"
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "bpf", "bpf", str(path)], capture_output=True, text=True)
    if r.returncode != 0 or not bpffs_mounted(path):
        return f"cannot mount a BPF filesystem at {path}: {r.stderr.strip() or 'mount failed'}"
    return None
