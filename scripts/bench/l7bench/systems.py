"""The systems under test, each started per scenario with that scenario's
policy, and the backend they all forward to.

Placement (see docs/bench.md): the load generator runs on the client CPUs,
everything else (backend, proxy or l7fastd) on the server CPUs. Sockets are
"local" to l7fast when the process creating them is in that l7fast
instance's cgroup (where l7fastd attaches sockops).
"""
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from . import policies
from .env import free_port, proc_status, wait_port
from .policies import Ctx

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))
from l7fast_host import pinned_counters  # noqa: E402

DESCRIPTIONS = {
    "direct": "direct client→backend (no proxy): the floor",
    "l7fast-local": "l7fast kernel path, local→local (client, l7fastd and backend in the "
                    "l7fast cgroup: SK_MSG socket-to-socket, no TCP)",
    "l7fast-proxied": "l7fast kernel path, proxied to a TCP upstream (client in the cgroup, "
                      "backend outside: SK_MSG to the pooled upstream, responses via SK_SKB)",
    "l7fast-remote": "l7fast kernel path, remote client (client outside the cgroup: SK_SKB on "
                     "the accepted socket; backend in the cgroup)",
    "l7fast-raw": "the kernel path's ceiling: as l7fast-local, but l7fastd runs with "
                  "L7FAST_TEST_FAULT=bench-raw (every request message to an idle pooled "
                  "connection of the first kernel route's first endpoint and every response "
                  "back, same sockets and redirects, no parsing, matching, framing or "
                  "statistics; no policy enforced)",
    "l7fast-slow": "l7fast slow path forced (kernel_dataplane = false: every request in "
                   "l7fastd's user-space proxy)",
    "haproxy": "HAProxy, 1 thread, keep-alive both sides (http-reuse always)",
    "nginx": "nginx, 1 worker, proxy_pass with upstream keepalive",
}
ALL = list(DESCRIPTIONS)


def safe_name(text):
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", str(text))[:80]


def tool_version(argv, pattern):
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        m = re.search(pattern, r.stdout + r.stderr)
        return m.group(1) if m else None
    except (OSError, subprocess.TimeoutExpired):
        return None


def l7fastd_path():
    build = Path(os.environ.get("L7FAST_BUILD", ROOT / "build"))
    return build / "daemon" / "l7fastd"


_frozen_l7fastd = None


def freeze_l7fastd(directory):
    """Copies the built l7fastd into `directory` (the run's runtime dir) and
    runs that copy from now on: a rebuild while the benchmark runs (the
    machine may be shared with someone working on the daemon) must not
    change the binary between scenarios. The BPF object is embedded."""
    global _frozen_l7fastd
    dst = Path(directory) / "l7fastd"
    shutil.copy2(l7fastd_path(), dst)
    _frozen_l7fastd = dst
    return dst


def run_l7fastd():
    return _frozen_l7fastd or l7fastd_path()


class Backend:
    """nginx answering 200 "ok" on four ports (four endpoints for the hash)."""

    def __init__(self, world, name, cgroup):
        self.world = world
        self.workdir = world.workdir / f"backend-{name}"
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ports = [free_port() for _ in range(4)]
        conf = self.workdir / "nginx.conf"
        conf.write_text(policies.nginx.render_backend(self.ports, Ctx(0, [], self.workdir)))
        self.proc = world.spawn(["nginx", "-e", str(self.workdir / "stderr.log"), "-p",
                                 str(self.workdir), "-c", str(conf)],
                                cgroup, world.server_cpus, self.workdir / "stdout.log")
        for p in self.ports:
            if not wait_port("127.0.0.1", p, 10.0, proc=self.proc):
                raise RuntimeError(f"backend {name} did not start: "
                                   f"{(self.workdir / 'stderr.log').read_text()[-500:]}")

    @property
    def endpoints(self):
        return [("127.0.0.1", p) for p in self.ports]

    def stop(self):
        self.world.stop(self.proc)


class System:
    kind = ""
    template = None

    def __init__(self, world, name, outside_backend):
        self.world = world
        self.name = name
        self.description = DESCRIPTIONS[name]
        self.outside_backend = outside_backend
        self.client_cgroup = world.child_cgroup("outside")
        self.proc = None
        self.port = None
        self.workdir = None
        self.config_text = ""

    def unavailable(self, policy):
        return policies.unavailable(self.template, policy) if self.template else None

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def setup(self):
        """Once per run (backends of their own)."""

    def start(self, sc, index):
        self.launch(sc, index)
        self.wait_ready()

    def launch(self, sc, index):
        """Starts the system with the scenario's policy; wait_ready() waits
        for it (launching every system first overlaps their start-up)."""
        raise NotImplementedError

    def wait_ready(self):
        if not wait_port("127.0.0.1", self.port, 10.0, proc=self.proc):
            raise RuntimeError(f"{self.name} did not start: {self.log_tail()}")

    def log_tail(self, n=800):
        try:
            return self.log_path.read_text()[-n:]
        except (OSError, AttributeError):
            return ""

    def stop(self):
        if self.proc is not None:
            self.world.stop(self.proc)
            self.proc = None

    def teardown(self):
        self.stop()

    def counters(self):
        return None

    def rss(self):
        """Resident memory of the system's processes (bytes), by pid."""
        if self.proc is None:
            return {}
        pids = [self.proc.pid]
        try:
            pids += [int(x) for x in
                     Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except OSError:
            pass
        return {pid: proc_status(pid) for pid in pids}

    def _workdir(self, sc, index):
        d = self.world.workdir / self.name / safe_name(f"{index:02d}-{sc.group}-{sc.x}")
        d.mkdir(parents=True, exist_ok=True)
        self.workdir = d
        return d


class Direct(System):
    kind = "direct"

    def launch(self, sc, index):
        self._workdir(sc, index)
        self.port = self.outside_backend.ports[0]

    def wait_ready(self):
        pass

    def stop(self):
        pass


class HAProxy(System):
    kind = "haproxy"
    template = policies.haproxy

    def launch(self, sc, index):
        d = self._workdir(sc, index)
        self.port = free_port()
        self.config_text = self.template.render(
            sc.policy, Ctx(self.port, self.outside_backend.endpoints, d))
        (d / "haproxy.cfg").write_text(self.config_text)
        self.log_path = d / "haproxy.log"
        self.proc = self.world.spawn(["haproxy", "-db", "-f", str(d / "haproxy.cfg")],
                                     self.world.child_cgroup("outside"), self.world.server_cpus,
                                     self.log_path)


class Nginx(System):
    kind = "nginx"
    template = policies.nginx

    def launch(self, sc, index):
        d = self._workdir(sc, index)
        self.port = free_port()
        self.config_text = self.template.render(
            sc.policy, Ctx(self.port, self.outside_backend.endpoints, d))
        (d / "nginx.conf").write_text(self.config_text)
        self.log_path = d / "stderr.log"
        self.proc = self.world.spawn(["nginx", "-e", str(self.log_path), "-p", str(d),
                                      "-c", str(d / "nginx.conf")],
                                     self.world.child_cgroup("outside"), self.world.server_cpus,
                                     d / "stdout.log")


class L7fast(System):
    """l7fastd in a cgroup of its own. Variants:
    local   client and backend in the cgroup
    raw     as local, the data plane in its benchmark ceiling mode
            (L7FAST_TEST_FAULT=bench-raw: forwards without looking)
    proxied client in the cgroup, backend outside (TCP upstream)
    remote  client outside, backend in the cgroup
    slow    kernel_dataplane = false (client and backend outside)

    Every variant serves its statistics on a metrics_address of its own:
    the requests the slow path served are counted there (the data plane's
    requests_user counts hand-overs, not requests).
    """
    PROGRAMS = ("l7_sockops", "l7_req_msg", "l7_resp_msg", "l7_req_skb", "l7_resp_skb", "l7_remote_out_msg")
    kind = "l7fast"
    template = policies.l7fast

    def __init__(self, world, name, outside_backend):
        super().__init__(world, name, outside_backend)
        self.variant = name.split("-", 1)[1]
        self.cgroup = world.child_cgroup(name)
        if self.variant in ("local", "raw", "proxied"):
            self.client_cgroup = self.cgroup
        self.backend = None
        self.notify = None
        self.bpffs = None
        self.metrics_port = None
        self.daemon_settings = ""
        self.messages = {}    # log_messages() over the whole run
        self.env = {}
        if self.variant == "slow":
            self.daemon_settings = "kernel_dataplane = false\n"
        if self.variant == "raw":
            self.env["L7FAST_TEST_FAULT"] = "bench-raw"

    def setup(self):
        if self.variant in ("local", "raw", "remote"):
            self.backend = Backend(self.world, self.name, self.cgroup)

    @property
    def endpoints(self):
        return (self.backend or self.outside_backend).endpoints

    def render(self, policy, endpoints=None):
        header = (f'[daemon]\ncgroup = "{self.cgroup.path}"\nbpffs = "{self.bpffs}"\n'
                  f'metrics_address = "127.0.0.1:{self.metrics_port}"\n'
                  f"{self.daemon_settings}\n")
        return self.template.render(policy, Ctx(self.port, endpoints or self.endpoints,
                                                self.workdir, header))

    def launch(self, sc, index):
        d = self._workdir(sc, index)
        self.port = free_port()
        self.metrics_port = free_port()
        self.bpffs = self.world.bpffs_dir(f"{self.name}-{index}")
        self.config_text = self.render(sc.policy)
        self.policy_file = d / "policy.toml"
        self.policy_file.write_text(self.config_text)
        # sun_path holds 108 bytes: the socket lives in the run's short runtime dir
        notify_path = self.world.runtime_dir / f"{self.name}-{index}.notify"
        notify_path.unlink(missing_ok=True)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(notify_path))
        env = dict(os.environ, NOTIFY_SOCKET=str(notify_path), **self.env)
        env.pop("JOURNAL_STREAM", None)
        self.log_path = d / "l7fastd.log"
        self.t_launch = time.monotonic()
        self.proc = self.world.spawn([str(run_l7fastd()), "--config", str(self.policy_file),
                                      "--policy-dir", str(d / "policy.d"), "--no-dbus"],
                                     self.cgroup, self.world.server_cpus, self.log_path,
                                     env=env)

    def wait_ready(self):
        self.wait_notify("READY=1", 60)
        self.startup_s = time.monotonic() - self.t_launch

    def degraded(self):
        """The daemon's "running degraded" line (the kernel refused the data
        plane: every request takes the slow path), or None; l7fast-slow is
        degraded on purpose."""
        if self.variant == "slow":
            return None
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, AttributeError):
            return None
        m = re.search(r"^warning: running degraded.*$", text, re.M)
        return m.group(0)[len("warning: "):] if m else None

    def wait_notify(self, needle, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"l7fastd exited with {self.proc.returncode}: "
                                   f"{self.log_tail()}")
            self.notify.settimeout(max(0.05, min(0.5, deadline - time.monotonic())))
            try:
                msg = self.notify.recv(4096).decode()
            except socket.timeout:
                continue
            if needle in msg:
                return msg
        raise RuntimeError(f"l7fastd did not notify {needle!r}: {self.log_tail()}")

    def reload(self, policy_text):
        """Writes the policy and sends SIGHUP; returns (seconds from SIGHUP to
        READY=1, the READY notification)."""
        self.policy_file.write_text(policy_text)
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGHUP)
        msg = self.wait_notify("READY=1", 30)
        return time.monotonic() - t0, msg

    ROUTINE = re.compile(r"^info: (l7fastd \S+: policy|feature |data plane loaded|listening on|"
                         r"reloaded|stopping|D-Bus|serving Prometheus metrics)")
    # the raw system's own setting, logged at every start
    RAW_NOTICE = re.compile(r"^warning: test fault injection active \(L7FAST_TEST_FAULT=bench-raw\)")

    def log_messages(self):
        """The daemon's log lines other than routine start/reload/stop ones,
        with numbers and addresses blanked, counted."""
        out = {}
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except (OSError, AttributeError):
            return out
        for line in lines:
            if not line or self.ROUTINE.match(line):
                continue
            if self.variant == "raw" and self.RAW_NOTICE.match(line):
                continue
            key = re.sub(r"\d+(\.\d+){3}(:\d+)?", "ADDR", line)
            key = re.sub(r"\b\d+\b", "N", key)[:200]
            out[key] = out.get(key, 0) + 1
        return out

    def counters(self):
        if self.variant == "slow" or self.proc is None:
            return None
        return pinned_counters(f"{self.bpffs}/maps")

    METRIC = re.compile(r"^(l7fast_route_requests_total|l7fast_requests_no_route_total)"
                        r"(?:\{([^}]*)\})?\s+(\d+)\s*$", re.M)

    def metrics(self):
        """Requests by the path that served them, from the daemon's own
        Prometheus endpoint: {"kernel": n, "user": n} summed over routes
        (requests that matched no route are answered by the slow path and
        count as user), or None when the endpoint does not answer."""
        if self.proc is None or self.metrics_port is None:
            return None
        # http.client, not urllib: no proxy from the environment
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=5)
        try:
            conn.request("GET", "/metrics")
            r = conn.getresponse()
            text = r.read().decode(errors="replace")
            if r.status != 200:
                return None
        except (OSError, http.client.HTTPException):
            return None
        finally:
            conn.close()
        out = {"kernel": 0, "user": 0}
        for name, labels, value in self.METRIC.findall(text):
            if name == "l7fast_requests_no_route_total":
                out["user"] += int(value)
                continue
            plane = re.search(r'(?:^|,)plane="([^"]*)"', labels or "")
            if plane and plane.group(1) in out:
                out[plane.group(1)] += int(value)
        return out

    def _prog_ids(self):
        """Ids of the BPF programs this daemon holds open (its fds)."""
        ids = set()
        fd_dir = Path(f"/proc/{self.proc.pid}/fd")
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            return ids
        for fd in fds:
            try:
                if os.readlink(fd) != "anon_inode:bpf-prog":
                    continue
                m = re.search(r"^prog_id:\s*(\d+)",
                              Path(f"/proc/{self.proc.pid}/fdinfo/{fd.name}").read_text(), re.M)
            except OSError:
                continue
            if m:
                ids.add(int(m.group(1)))
        return ids

    def wakeups(self):
        """Context switches of l7fastd's threads so far (voluntary ones are
        its wake-ups: it slept in epoll_wait and something woke it)."""
        if self.proc is None:
            return None
        total = 0
        try:
            tasks = list(Path(f"/proc/{self.proc.pid}/task").iterdir())
        except OSError:
            return None
        for t in tasks:
            try:
                m = re.search(r"^voluntary_ctxt_switches:\s*(\d+)", (t / "status").read_text(), re.M)
            except OSError:
                continue
            if m:
                total += int(m.group(1))
        return total

    def bpf_programs(self):
        """{prog id: (name, run_time_ns, run_cnt)} of this daemon's BPF
        programs (kernel.bpf_stats_enabled must be 1 for the figures to
        move). bpftool names the holding processes (pids) when it was built
        with skeletons; Debian's is not, so the daemon's programs are then
        the ones its file descriptors refer to."""
        if self.proc is None or self.variant == "slow":
            return None
        r = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
        if r.returncode != 0:
            return None
        progs = json.loads(r.stdout or "[]")
        if any("pids" in p for p in progs):
            mine = [p for p in progs if any(h.get("pid") == self.proc.pid
                                            for h in p.get("pids", []))]
        else:
            ids = self._prog_ids()
            mine = [p for p in progs if p.get("id") in ids]
        # bpftool leaves run_time_ns/run_cnt out while they are 0
        return {p["id"]: (p.get("name", str(p["id"])), p.get("run_time_ns", 0), p.get("run_cnt", 0))
                for p in mine}

    def stop(self):
        if self.proc is not None:
            self.world.stop(self.proc)
            self.proc = None
            for k, v in self.log_messages().items():
                self.messages[k] = self.messages.get(k, 0) + v
        if self.notify is not None:
            self.notify.close()
            self.notify = None
        if self.bpffs is not None:
            shutil.rmtree(self.bpffs, ignore_errors=True)

    def teardown(self):
        self.stop()
        if self.backend:
            self.backend.stop()


def make(world, name, outside_backend):
    if name == "direct":
        return Direct(world, name, outside_backend)
    if name == "haproxy":
        return HAProxy(world, name, outside_backend)
    if name == "nginx":
        return Nginx(world, name, outside_backend)
    if name.startswith("l7fast-") and name.split("-", 1)[1] in ("local", "raw", "proxied",
                                                               "remote", "slow"):
        return L7fast(world, name, outside_backend)
    raise ValueError(f"unknown system {name!r}; known: {', '.join(ALL)}")


def versions():
    return {
        "haproxy": tool_version(["haproxy", "-v"], r"version (\S+)"),
        "nginx": tool_version(["nginx", "-v"], r"nginx/(\S+)"),
        "wrk": tool_version(["wrk", "-v"], r"wrk (\S+)"),
        "l7fastd": tool_version([str(l7fastd_path()), "--version"], r"(\d+\.\d+\S*)"),
    }
