"""The benchmark's world on this host: one cgroup tree, pinned processes,
CPU accounting, and a cleanup path that runs however the run ends.

Every process the benchmark starts is a child in its own session (so a
process group of its own) and is stopped by that group's id; nothing is
killed by name. Every cgroup lives under one run directory
(<cgroup2>/l7fast-bench-<pid>) and every bpffs directory is named
/sys/fs/bpf/l7fast-bench-<pid>-*, so leftovers of a run that died are found
by their dead owner's pid and removed at the next start.
"""
import os
import re
import resource
import shutil
import signal
import subprocess
import tempfile
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "pylib"))
from l7fast_host import Cgroup as HostCgroup  # noqa: E402
from l7fast_host import BPFFS, cgroup2_root, cgroup_procs, ensure_bpffs, free_port, remove_cgroup_tree, wait_port  # noqa: E402,F401,E501

PREFIX = "l7fast-bench"
PF_KTHREAD = 0x00200000
CLK_TCK = os.sysconf("SC_CLK_TCK")
BPF_STATS = Path("/proc/sys/kernel/bpf_stats_enabled")


def nofile_limit(want=65536):
    """The RLIMIT_NOFILE every spawned process gets: at 512 client
    connections l7fastd holds the clients, its pooled upstream connections
    (a pool doubles when it runs dry) and the local backend's side of them,
    more than the 1,024 a login shell or a service often starts with. Never
    lower than what the harness itself has, at most fs.nr_open."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        nr_open = int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        nr_open = want
    n = min(max(want, soft), nr_open)
    return n, hard if hard == resource.RLIM_INFINITY or hard >= n else n


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


class Cgroup(HostCgroup):
    def cpu_usec(self):
        """CPU time of every task that ran in this subtree (cgroup v2 cpu.stat,
        present whether or not the cpu controller is enabled)."""
        for line in (self.path / "cpu.stat").read_text().splitlines():
            k, v = line.split()
            if k == "usage_usec":
                return int(v)
        return 0


class ProcStat:
    """Whole-host CPU and context switches from /proc/stat."""

    def __init__(self):
        self.cpus = {}
        self.ctxt = 0
        with open("/proc/stat") as f:
            for line in f:
                parts = line.split()
                if parts[0].startswith("cpu"):
                    vals = [int(x) for x in parts[1:]]
                    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
                    # guest time is already included in user/nice
                    total = sum(vals[:8])
                    self.cpus[parts[0]] = (total - idle, total)
                elif parts[0] == "ctxt":
                    self.ctxt = int(parts[1])

    def busy_seconds(self, earlier, cpu="cpu"):
        return (self.cpus[cpu][0] - earlier.cpus[cpu][0]) / CLK_TCK


def kthread_ticks():
    """CPU ticks of each kernel thread by pid (kworkers run the sockmap
    backlog, ksoftirqd the softirqs that do not run in a task's context)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rfind(")") + 2:].split()
        flags = int(rest[6])
        if flags & PF_KTHREAD:
            out[int(d)] = int(rest[11]) + int(rest[12])
    return out


class CpuSample:
    """A point in time for CPU accounting of one measured run."""

    def __init__(self, own_cgroup):
        self.t = time.monotonic()
        self.stat = ProcStat()
        self.own = own_cgroup.cpu_usec() / 1e6
        self.kthreads = kthread_ticks()

    def since(self, earlier):
        busy = self.stat.busy_seconds(earlier.stat)
        own = self.own - earlier.own
        # kworkers come and go: count the threads seen at both ends
        kth = sum(max(0, t - earlier.kthreads[pid]) for pid, t in self.kthreads.items()
                  if pid in earlier.kthreads) / CLK_TCK
        per_cpu = {c: self.stat.busy_seconds(earlier.stat, c)
                   for c in self.stat.cpus if c != "cpu"}
        return {
            "wall_s": self.t - earlier.t,
            "cpu_busy_s": busy,
            "cpu_own_s": own,
            "cpu_kthreads_s": kth,
            # what ran on the host that is neither ours nor a kernel thread:
            # other tenants of a shared machine (noise)
            "cpu_foreign_s": max(0.0, busy - own - kth),
            "cpu_per_core_s": per_cpu,
            "ctxt": self.stat.ctxt - earlier.stat.ctxt,
        }


def proc_status(pid):
    out = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("VmRSS", "VmHWM"):
                    out[k] = int(v.split()[0]) * 1024
    except OSError:
        pass
    return out


class World:
    """Owns everything a run creates. Use as a context manager; close() is
    idempotent and also runs on SIGTERM/SIGINT."""

    def __init__(self, workdir, server_cpus, client_cpus):
        root = cgroup2_root()
        if root is None:
            raise RuntimeError("no cgroup v2 hierarchy mounted")
        problem = ensure_bpffs()
        if problem:
            raise RuntimeError(problem)
        self.cg_root = root
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.server_cpus = server_cpus
        self.client_cpus = client_cpus
        self.tag = f"{PREFIX}-{os.getpid()}"
        clean_stale()
        self.cgroup = Cgroup(root / self.tag)
        self.runtime_dir = Path(tempfile.mkdtemp(prefix=f"{self.tag}-", dir="/tmp"))
        self._children = {}
        self._procs = []
        self._bpffs = []
        self._closed = False
        self.nofile = nofile_limit()
        self.bpf_stats_before = None  # what enable_bpf_stats() found, restored by close()
        self._old_handlers = {}
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._old_handlers[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, frame):
        self.close()
        raise SystemExit(128 + signum)

    def child_cgroup(self, name):
        if name not in self._children:
            self._children[name] = Cgroup(self.cgroup.path / name)
        return self._children[name]

    def bpffs_dir(self, name):
        p = BPFFS / f"{self.tag}-{name}"
        self._bpffs.append(p)
        return p

    def enable_bpf_stats(self):
        """kernel.bpf_stats_enabled = 1 for the rest of the run (per-program
        run_time_ns and run_cnt); close() puts back what was there. Returns
        the previous value, or None when the sysctl cannot be written."""
        try:
            before = BPF_STATS.read_text().strip()
            BPF_STATS.write_text("1")
        except OSError:
            return None
        if self.bpf_stats_before is None:
            self.bpf_stats_before = before
        return before

    def restore_bpf_stats(self):
        if self.bpf_stats_before is not None:
            try:
                BPF_STATS.write_text(self.bpf_stats_before)
            except OSError:
                pass
            self.bpf_stats_before = None

    def spawn(self, argv, cgroup, cpus, log, env=None, **kw):
        """Starts argv in `cgroup`, pinned to `cpus`, in a session of its own."""
        nofile = self.nofile

        def pre():
            cgroup.add(os.getpid())
            if cpus:
                os.sched_setaffinity(0, cpus)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
            except (ValueError, OSError):
                pass  # not root: the process keeps the harness's limit
        logf = open(log, "ab") if isinstance(log, (str, Path)) else log
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             preexec_fn=pre, start_new_session=True, env=env, **kw)
        if logf is not log:
            logf.close()
        self._procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, timeout=10.0):
        """Stops a process we started, then anything left in its group."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        else:
            # the leader is gone; its group may not be (nginx workers)
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if p in self._procs:
            self._procs.remove(p)
        return p.returncode

    def close(self):
        if self._closed:
            return
        self._closed = True
        self.restore_bpf_stats()
        for p in reversed(list(self._procs)):
            try:
                self.stop(p, timeout=5.0)
            except Exception:
                pass
        # anything still in our cgroups was started by us (a forked worker)
        for cg in list(self._children.values()) + [self.cgroup]:
            for pid in cg.procs():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        time.sleep(0.1)
        remove_cgroup_tree(self.cgroup.path, self.cg_root)
        for p in self._bpffs:
            shutil.rmtree(p, ignore_errors=True)
        shutil.rmtree(self.runtime_dir, ignore_errors=True)
        for sig, h in self._old_handlers.items():
            signal.signal(sig, h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def clean_stale():
    """Removes cgroups and bpffs directories left by benchmark runs whose
    process is gone (a run killed with SIGKILL cannot clean up itself)."""
    root = cgroup2_root()
    pat = re.compile(rf"^{PREFIX}-(\d+)")
    if root is not None:
        for d in root.iterdir():
            m = pat.match(d.name)
            if m and d.is_dir() and not _pid_alive(int(m.group(1))):
                for sub in [d] + [p for p in d.rglob("*") if p.is_dir()]:
                    for pid in cgroup_procs(sub):
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass
                time.sleep(0.1)
                remove_cgroup_tree(d, root)
    for parent in (BPFFS, Path("/tmp")):
        if parent.is_dir():
            for d in parent.iterdir():
                m = pat.match(d.name)
                if m and d.is_dir() and not _pid_alive(int(m.group(1))):
                    shutil.rmtree(d, ignore_errors=True)
