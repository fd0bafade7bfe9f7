"""What the tests and the benchmark need of the host, found or made the same
way everywhere: the cgroup v2 hierarchy and a BPF filesystem at /sys/fs/bpf.

systemd mounts bpffs at boot; a machine without systemd as PID 1 (a
container, a VM booted straight into a shell, CI) may have none, and the
data plane pins its maps there, so the suite mounts it itself, as root,
when nothing is mounted at /sys/fs/bpf. Also: ports for the listeners they
start (free_port), waiting for one to listen (wait_port), a cgroup of their
own (Cgroup) and the data plane's counters (pinned_counters)."""
import json
import os
import random
import socket
import subprocess
import time
from pathlib import Path

from l7fast_abi import counter_name

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


def _ephemeral_range():
    try:
        lo, hi = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


_issued_ports = set()


def free_port(host="127.0.0.1"):
    """A port nothing listens on at `host`, for a listener a test or the
    benchmark starts a moment later, chosen outside the kernel's ephemeral
    range (net.ipv4.ip_local_port_range). A port the kernel picked for
    bind(0) is one it also gives to outgoing connections: between the pick
    and the listener's bind, one of the thousands of pooled upstream
    connections the suite opens can take it, and the listener then fails
    with EADDRINUSE. Random within the range, never the same twice in one
    process, checked by binding it."""
    lo, hi = _ephemeral_range()
    ranges = [r for r in ((10000, lo - 1), (hi + 1, 65535)) if r[1] - r[0] >= 1000]
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    for _ in range(1000):
        first, last = random.choice(ranges) if ranges else (1024, 65535)
        port = random.randint(first, last)
        if port in _issued_ports:
            continue
        with socket.socket(fam, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _issued_ports.add(port)
        return port
    raise RuntimeError(f"no free port outside the ephemeral range {lo}-{hi} at {host}")


def wait_port(host, port, timeout, proc=None):
    """True once something accepts connections at host:port; False after
    `timeout` seconds, or as soon as `proc` (the process that should listen
    there) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.02)
    return False


class Cgroup:
    """A cgroup v2 directory (made if missing) and the tasks in it."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.mkdir(exist_ok=True)

    def add(self, pid):
        (self.path / "cgroup.procs").write_text(str(pid))

    def procs(self):
        return cgroup_procs(self.path)

    def remove(self):
        """Moves what still runs in it to the root cgroup and removes it
        (and any cgroup below it)."""
        remove_cgroup_tree(self.path, cgroup2_root())


def cgroup_procs(path):
    try:
        return [int(p) for p in (Path(path) / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def remove_cgroup_tree(path, root):
    """Moves stray tasks to the root cgroup and removes the directories,
    deepest first."""
    path = Path(path)
    if not path.exists():
        return
    dirs = sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts))
    for d in dirs + [path]:
        for pid in cgroup_procs(d):
            try:
                (root / "cgroup.procs").write_text(str(pid))
            except OSError:
                pass
        for _ in range(50):
            try:
                d.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.05)


def pinned_counters(maps_dir):
    """The data plane's counters (the pinned l7_counters map under
    `maps_dir`) summed over CPUs, by name; None when bpftool cannot read
    them."""
    r = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", f"{maps_dir}/l7_counters"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        return None
    out = {}
    for e in json.loads(r.stdout):
        f = e.get("formatted", e)
        out[counter_name(f["key"])] = sum(v["value"] for v in f["values"])
    return out
