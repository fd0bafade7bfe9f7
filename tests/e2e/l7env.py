"""Test environment for l7fast's end-to-end tests: a cgroup of our own, real
backends, a real l7fastd, and raw-socket HTTP helpers precise enough to test
framing (pipelining, split writes, half-close).

Sockets are "local" to the data plane when the process that creates them is
in the test cgroup (that is where l7fastd attaches sockops). The test process
itself moves into the cgroup for local clients (Env.local()) and stays out of
it for remote ones.
"""
import array
import base64
import contextlib
import hashlib
import hmac
import ipaddress
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKEND = Path(__file__).resolve().parent / "backend.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
sys.path.insert(0, str(ROOT / "scripts" / "dbus"))
from l7fast_bus import BUILD, L7FASTCTL, L7FASTD, PrivateBus  # noqa: E402,F401
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))
from l7fast_abi import SLOT_STATES, SYNC_FLAGS  # noqa: E402
L7_SYNC_CLOSING = SYNC_FLAGS["CLOSING"]
import l7fast_pools  # noqa: E402
from l7fast_host import Cgroup as HostCgroup  # noqa: E402
from l7fast_host import cgroup2_root, ensure_bpffs, free_port, pinned_counters  # noqa: E402,F401
from l7fast_host import wait_port as host_wait_port  # noqa: E402


def skip_reason():
    """Why the end-to-end tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (BPF, cgroups)"
    if not L7FASTD.exists():
        return f"{L7FASTD} not built (make build)"
    if cgroup2_root() is None:
        return "no cgroup v2 hierarchy mounted"
    problem = ensure_bpffs()
    if problem:
        return problem
    if shutil.which("bpftool") is None and not os.path.exists("/usr/sbin/bpftool"):
        return "bpftool missing (apt install bpftool)"
    return None


def skip_unless_runnable():
    """Skips the calling test or fixture when the end-to-end tests cannot run
    here (skip_reason); with L7FAST_REQUIRE_E2E=1 it fails instead."""
    reason = skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        pytest.skip(reason)


class Side:
    """One of kernel_and_reference's two environments (attributes are the
    caller's)."""


@contextlib.contextmanager
def kernel_and_reference(name, start):
    """Two environments for a differential module: {"kernel": side with the
    data plane, "user": side with kernel_dataplane = false}. start(side,
    settings) makes its backends and calls side.env.start(policy,
    daemon_settings=settings); side.dataplane says which one it is. Both
    are closed at the end, backends first (any side attribute with a
    close()), and the kernel must not have warned meanwhile."""
    skip_unless_runnable()
    sides = {}
    try:
        for key, dataplane in (("kernel", True), ("user", False)):
            s = Side()
            s.dataplane = dataplane
            s.env = Env(name + ("" if dataplane else "-nodp"))
            sides[key] = s
            start(s, "" if dataplane else "kernel_dataplane = false")
        yield sides
    finally:
        warnings = []
        for s in sides.values():
            warnings += s.env.kernel_warnings()
            s.env.close()
            for k, v in vars(s).items():
                if k != "env" and hasattr(v, "close"):
                    v.close()
    assert not warnings, "kernel warnings during the test:\n" + "\n".join(warnings)


@contextlib.contextmanager
def answering_pair(name, policy):
    """kernel_and_reference for `policy(port, backend)` with its one backend
    "app" and every request in the access log (the kernel's answers too);
    each side's listener port is side.port."""
    def start(s, settings):
        s.port = free_port()
        s.env.start(policy(s.port, s.env.backend("app")),
                    daemon_settings=(settings + "\naccess_log_sample = 1").strip())
    with kernel_and_reference(name, start) as sides:
        yield sides


# A deadline only a real hang exceeds. Liveness checks ("the client is not
# left hanging") and waits for a condition use it; no test waits a fixed time
# for something to happen or judges how fast it happened, so a busy machine
# (scripts/run-tests.sh --under-load) changes how long tests take, never
# their verdicts.
LIVENESS = 30.0
# l7fastd's start, restart and reload: loading the data plane is seconds of
# the verifier's work, which two busy loops on two shared CPUs stretched
# past 30 s. Only a hang takes two minutes.
STARTUP = 120.0


def wait_until(cond, timeout=LIVENESS, interval=0.05):
    """Polls cond() until it holds or timeout seconds pass; its last value."""
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(interval)
    return cond()


def wait_port(host, port, timeout=LIVENESS):
    return host_wait_port(host, port, timeout)


class Cgroup(HostCgroup):
    """A cgroup v2 directory of our own, `name` under the hierarchy's root."""

    def __init__(self, name):
        super().__init__(cgroup2_root() / name)


class Backend:
    def __init__(self, name, port, cgroup=None, host="127.0.0.1"):
        self.name, self.port, self.host = name, port, host
        pre = (lambda: cgroup.add(os.getpid())) if cgroup else None
        self.proc = subprocess.Popen([PYTHON, str(BACKEND), name, str(port), host],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=pre)
        if not wait_port(host, port):
            raise RuntimeError(f"backend {name} did not start on {host}:{port}")

    def address(self):
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def b64u(data):
    """base64url without padding (RFC 7515 section 2) of bytes or text."""
    if isinstance(data, str):
        data = data.encode()
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def jws_signing_input(payload, header):
    """The JWS signing input: base64url(header) "." base64url(payload)."""
    return b64u(json.dumps(header, separators=(",", ":"))) + "." + b64u(json.dumps(payload, separators=(",", ":")))


def hs256(payload, secret, header=None):
    """A JWT signed with HMAC-SHA256 (header {"alg": "HS256", "typ": "JWT"} by default)."""
    inp = jws_signing_input(payload, header or {"alg": "HS256", "typ": "JWT"})
    return inp + "." + b64u(hmac.new(secret, inp.encode(), hashlib.sha256).digest())


class RawBackend:
    """An HTTP/1.1 server on a raw socket, for tests that need the exact
    bytes a backend receives: each Content-Length-framed request is answered
    with answer(head, body) (head with its final CRLF); every chunk received
    is passed to on_bytes, if given, as it arrives. close_after_answer: the
    connection is closed right after each answer, without saying so in the
    answer (like a keep-alive timeout that expires at once); on_close(answers)
    is called after each connection's close returned, with the number of
    requests it answered."""

    # every backend not closed yet: a module's env closes those it leaves
    # open (close_all), so that none of them outlives its module
    live = set()

    def __init__(self, answer, on_bytes=None, close_after_answer=False, on_close=None):
        self.answer, self.on_bytes = answer, on_bytes
        self.close_after_answer, self.on_close = close_after_answer, on_close
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.conns = set()
        self.threads = []
        self.closed = False
        RawBackend.live.add(self)
        self._start(self._accept)

    def address(self):
        return f"127.0.0.1:{self.port}"

    def _start(self, target, *args):
        t = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.threads = [x for x in self.threads if x.is_alive()]  # the ended ones need no join
            self.threads.append(t)
        t.start()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                if self.closed:
                    c.close()
                    return
                self.conns.add(c)
            self._start(self._serve, c)

    def _recv(self, c):
        data = c.recv(65536)
        if data and self.on_bytes:
            self.on_bytes(data)
        return data

    def _serve(self, c):
        buf = b""
        answers = 0
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = self._recv(c)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(b"\r\n\r\n", 1)
                head += b"\r\n\r\n"
                n = 0
                for line in head.split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"):
                        n = int(line.split(b":", 1)[1])
                while len(buf) < n:
                    data = self._recv(c)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:n], buf[n:]
                c.sendall(self.answer(head, body))
                answers += 1
                if self.close_after_answer:
                    return
        except OSError:
            pass
        finally:
            with self.lock:
                self.conns.discard(c)
            c.close()
            if self.on_close:
                self.on_close(answers)

    def close(self):
        """Stops listening and ends every connection, and waits for its
        threads: closing a socket another thread is blocked on does not wake
        that thread (the kernel keeps the socket open, a listener keeps
        accepting), so each socket is shut down first."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            conns = list(self.conns)
        RawBackend.live.discard(self)
        for s in [self.sock] + conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        with self.lock:
            threads = list(self.threads)
        for t in threads:
            if t is not threading.current_thread():
                t.join(LIVENESS)
        self.sock.close()

    @classmethod
    def close_all(cls):
        for b in list(cls.live):
            b.close()


class HeldBackend(RawBackend):
    """A RawBackend that holds every answer (a 200) until the test calls
    release(): requests are in flight for as long as the test needs, not
    for a delay that a busy machine may outlast. received() counts the
    requests that arrived (held or answered)."""

    OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"

    def __init__(self):
        self.cv = threading.Condition()
        self.count = 0
        self.gate = threading.Event()
        super().__init__(self._answer)

    def _answer(self, head, body):
        with self.cv:
            self.count += 1
            self.cv.notify_all()
        self.gate.wait()
        return self.OK

    def received(self):
        with self.cv:
            return self.count

    def wait_received(self, n):
        """Waits (LIVENESS at most) until n requests arrived; whether they did."""
        with self.cv:
            return self.cv.wait_for(lambda: self.count >= n, LIVENESS)

    def release(self):
        self.gate.set()

    def close(self):
        self.release()  # its threads wait for the gate
        super().close()


# Execs l7fastd with the given descriptors renumbered to 3, 4, ... and
# LISTEN_PID set to its own pid, as systemd passes its fd store back.
_LAUNCHER = """
import fcntl, os, sys
fds = [int(x) for x in sys.argv[1].split(",") if x]
high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1000) for fd in fds]
for fd in fds:
    os.close(fd)
for i, h in enumerate(high):
    os.dup2(h, 3 + i)
    os.close(h)
os.execve(sys.argv[2], sys.argv[2:], dict(os.environ, LISTEN_PID=str(os.getpid())))
"""


def _tuple_key(ip, port):
    """An address as l7_conn_key holds it (bpftool's formatted view)."""
    packed = ipaddress.ip_address(ip).packed.ljust(16, b"\0")
    return tuple(int.from_bytes(packed[i:i + 4], "little") for i in range(0, 16, 4)), port


class Daemon:
    """A real l7fastd with its own policy file, bpffs directory and cgroup.

    With fdstore=True this object also plays systemd's file descriptor store
    (sd_notify FDSTORE=1 / FDSTOREREMOVE=1, LISTEN_FDS on the next start),
    so kill9_and_restart() restarts l7fastd the way systemd would after a
    crash."""

    def __init__(self, policy_body, cgroup, workdir, extra_args=(), daemon_settings="",
                 policy_dir=None, bus_env=None, fdstore=False, extra_env=None, rlimits=None,
                 preexec=None):
        self.cgroup = cgroup
        self.workdir = Path(workdir)
        self.bpffs = f"/sys/fs/bpf/l7fast-test-{os.getpid()}-{id(self) & 0xffff:x}"
        self.policy = self.workdir / "policy.toml"
        self.policy_dir = Path(policy_dir) if policy_dir else self.workdir / "policy.d"
        self.header = (f'[daemon]\ncgroup = "{cgroup.path}"\nbpffs = "{self.bpffs}"\n'
                       f"{daemon_settings}\n")
        self.write_policy(policy_body)
        self.log_path = self.workdir / "l7fastd.log"
        self.notify_path = self.workdir / "notify.sock"
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(str(self.notify_path))
        self.notify.settimeout(0.2)
        self.notifications = []
        self.seen = 0  # notifications wait_notify has looked at
        self.cond = threading.Condition()
        self.closing = False
        self.reader = threading.Thread(target=self._read_notify, daemon=True)
        self.fdstore = fdstore
        self.store = {}  # FDNAME -> our copies of the descriptors
        self.env = dict(bus_env or os.environ, NOTIFY_SOCKET=str(self.notify_path))
        self.env.pop("JOURNAL_STREAM", None)
        if fdstore:
            self.env["L7FAST_FDSTORE"] = "1"
        self.env.update(extra_env or {})
        self.rlimits = dict(rlimits or {})  # resource.RLIMIT_* -> (soft, hard)
        self.preexec = preexec  # run in the child before exec (e.g. join another cgroup)
        self.args = [str(L7FASTD), "--config", str(self.policy), "--policy-dir", str(self.policy_dir),
                     "--log-level", "debug", *extra_args] + (["--trace"] if os.environ.get("L7FAST_TRACE") else [])
        self.logf = open(self.log_path, "w")
        self.reader.start()
        self._spawn()
        self.wait_notify("READY=1")

    def _read_notify(self):
        # like the service manager, read notifications as they come: a
        # daemon storing many sockets must never find the queue full
        while not self.closing:
            try:
                msg, fds = self._recv()
            except socket.timeout:
                continue
            except OSError:
                return
            with self.cond:
                self._handle(msg, fds)
                self.cond.notify_all()

    def _spawn(self):
        env = dict(self.env)
        names, fds = [], []
        for name, held in self.store.items():
            for fd in held:
                names.append(name)
                fds.append(fd)
        cmd = self.args
        if fds:
            env["LISTEN_FDS"] = str(len(fds))
            env["LISTEN_FDNAMES"] = ":".join(names)
            cmd = [PYTHON, "-c", _LAUNCHER, ",".join(map(str, fds)), *self.args]
        cgroup, rlimits, extra = self.cgroup, self.rlimits, self.preexec

        def pre():
            cgroup.add(os.getpid())
            for res, lim in rlimits.items():
                resource.setrlimit(res, lim)
            if extra:
                extra()
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env,
                                     pass_fds=fds, preexec_fn=pre)

    def kill9_and_restart(self, downtime=0.0, during=None):
        """SIGKILL, optionally `during()` while nothing runs, then start again
        with the stored descriptors; returns when the new daemon is READY."""
        self.proc.kill()
        self.proc.wait()
        self._drain_notifications()
        with self.cond:
            self.seen = len(self.notifications)
        if during:
            during()
        time.sleep(downtime)
        self.logf.write("\n----- restarted by the test -----\n")
        self.logf.flush()
        self._spawn()
        self.wait_notify("READY=1")

    def _drain_notifications(self):
        """Returns once the reader has handled every notification sent so far
        (those of a daemon that just died included): datagrams queue in
        order, so a marker sent now is read after them."""
        marker = f"L7ENV_DRAINED={len(self.notifications)}-{time.monotonic_ns()}"
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(marker.encode(), str(self.notify_path))
        with self.cond:
            assert self.cond.wait_for(lambda: marker in self.notifications, LIVENESS), \
                "the notification reader is stuck"

    def _recv(self):
        fds = array.array("i")
        msg, anc, _, _ = self.notify.recvmsg(4096, socket.CMSG_SPACE(253 * fds.itemsize))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
        return msg.decode(), list(fds)

    def _handle(self, msg, fds):
        self.notifications.append(msg)
        fields = dict(line.split("=", 1) for line in msg.split("\n") if "=" in line)
        name = fields.get("FDNAME", "stored")
        if fields.get("FDSTORE") == "1" and self.fdstore:
            self.store.setdefault(name, []).extend(fds)
            fds = []
        if fields.get("FDSTOREREMOVE") == "1":
            for fd in self.store.pop(name, []):
                os.close(fd)
        for fd in fds:
            os.close(fd)

    def stored(self, prefix=""):
        return sum(len(v) for k, v in self.store.items() if k.startswith(prefix))

    def write_policy(self, body):
        self.policy.write_text(self.header + body)

    def wait_notify(self, needle, timeout=STARTUP):
        """The next notification (after the ones already looked at) that
        contains `needle`."""
        deadline = time.time() + timeout
        with self.cond:
            while time.time() < deadline:
                while self.seen < len(self.notifications):
                    msg = self.notifications[self.seen]
                    self.seen += 1
                    if needle in msg:
                        return msg
                if self.proc.poll() is not None:
                    raise RuntimeError(f"l7fastd exited with {self.proc.returncode}:\n{self.log()}")
                self.cond.wait(0.1)
        raise RuntimeError(f"l7fastd did not notify {needle!r}:\n{self.log()}")

    def reload(self):
        """SIGHUP; returns the READY notification that ends the reload."""
        self.proc.send_signal(signal.SIGHUP)
        self.wait_notify("RELOADING=1")
        return self.wait_notify("READY=1")

    def log(self):
        self.logf.flush()
        return self.log_path.read_text()

    def access_json(self, since, client):
        """The access-log lines in JSON (access_log_format = "json") for the
        client "ip:port" among the lines of log() from `since` on, as objects."""
        out = []
        for line in self.log().splitlines()[since:]:
            text = line.split(": ", 1)[1] if line.startswith("info: ") else line
            if text.startswith("{"):
                obj = json.loads(text)
                if obj.get("type") == "access" and obj["client"] == client:
                    out.append(obj)
        return out

    def map_dump(self, name):
        out = subprocess.run(["bpftool", "-j", "map", "dump", "pinned", f"{self.bpffs}/maps/{name}"],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out)

    def counters(self):
        """Data-plane counters summed over CPUs, by name."""
        out = pinned_counters(f"{self.bpffs}/maps")
        assert out is not None, f"bpftool cannot read {self.bpffs}/maps/l7_counters"
        return out

    def fds(self):
        """The daemon's open descriptors: {fd: what it is} (readlink of /proc/PID/fd)."""
        out = {}
        d = f"/proc/{self.proc.pid}/fd"
        for fd in os.listdir(d):
            try:
                out[int(fd)] = os.readlink(f"{d}/{fd}")
            except OSError:
                pass
        return out

    def rss_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def map_entries(self, name):
        """Entries of a pinned hash map (bpftool), 0 when the data plane is not loaded."""
        if not os.path.exists(f"{self.bpffs}/maps/{name}"):
            return 0
        return len(self.map_dump(name))

    def slot_states(self):
        """Pool slots by state name, EMPTY ones left out (l7_slot_state)."""
        out = {}
        if not os.path.exists(f"{self.bpffs}/maps/l7_slot_state"):
            return out
        for e in self.map_dump("l7_slot_state"):
            st = e.get("formatted", e)["value"]
            if st:
                name = SLOT_STATES.get(st, str(st))
                out[name] = out.get(name, 0) + 1
        return out

    def conn_entries(self):
        """Client connections the data plane tracks (l7_conn_by_tuple)."""
        return self.map_entries("l7_conn_by_tuple")

    def untracked(self, socks):
        """The client sockets (connected to a listener) whose connection has
        no entry in the data plane (l7_conn_by_tuple): sockops makes one
        for a local client as it connects, l7fastd for a remote client once
        it accepted it."""
        key = _tuple_key
        known = set()
        if os.path.exists(f"{self.bpffs}/maps/l7_conn_by_tuple"):
            for e in self.map_dump("l7_conn_by_tuple"):
                k = e.get("formatted", e)["key"]
                known.add(((tuple(k["client_ip"]), k["client_port"]), (tuple(k["server_ip"]), k["server_port"])))
        return [s for s in socks if (key(*s.getsockname()[:2]), key(*s.getpeername()[:2])) not in known]

    def conn_index(self, sock):
        """The data plane's index of the client connection of `sock` (its
        l7_conn_by_tuple entry), None when it has none."""
        for e in self.map_dump("l7_conn_by_tuple"):
            f = e.get("formatted", e)
            k = f["key"]
            if ((tuple(k["client_ip"]), k["client_port"]), (tuple(k["server_ip"]), k["server_port"])) == \
                    (_tuple_key(*sock.getsockname()[:2]), _tuple_key(*sock.getpeername()[:2])):
                return f["value"]["idx"]
        return None

    def sync_flags(self, sock):
        """l7_conn_sync[idx].flags of the client connection of `sock`
        (L7_SYNC_CLOSING, L7_SYNC_HALF_CLOSED), 0 when it has no entry."""
        idx = self.conn_index(sock)
        if idx is None:
            return 0
        out = subprocess.run(["bpftool", "-j", "map", "lookup", "pinned", f"{self.bpffs}/maps/l7_conn_sync",
                              "key"] + [str(b) for b in idx.to_bytes(4, "little")],
                             capture_output=True, text=True, check=True).stdout
        return json.loads(out).get("formatted", {}).get("value", {}).get("flags", 0)

    def pool_states(self, address):
        """The pooled upstream connections to `address` (as Backend.address()
        gives it) by state name ({"IDLE": 2, ...}; scripts/pylib/l7fast_pools)."""
        return l7fast_pools.pool_states(f"{self.bpffs}/maps", address)

    def idle_slots(self, address):
        """Pooled upstream connections to `address` that are IDLE now, which
        the data plane can claim for kernel requests."""
        return self.pool_states(address).get("IDLE", 0)

    def wait_idle(self, *addresses, n=1):
        """Waits until every upstream address has at least n IDLE pooled
        connections. The pool opens them asynchronously (at start, after a
        reload, to replace one that closed), and a kernel request that finds
        none goes to the slow path (pool_miss); with n idle, the next n
        concurrent kernel requests to the address all take the kernel path,
        and so does every request of a client that does not pipeline (its
        exchange returns the slot before the client reads the response)."""
        ok = wait_until(lambda: all(self.idle_slots(a) >= n for a in addresses))
        assert ok, f"fewer than {n} idle pooled connections: " + \
            ", ".join(f"{a}: {self.idle_slots(a)}" for a in addresses)

    @contextlib.contextmanager
    def paused(self):
        """l7fastd stopped (SIGSTOP) inside, continued after: only the data
        plane runs meanwhile, so whatever happens happened in the kernel,
        without the daemon's timers, pool refills or slow path."""
        self.proc.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.proc.send_signal(signal.SIGCONT)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STARTUP)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        self.closing = True
        self.reader.join()
        self.notify.close()
        for held in self.store.values():
            for fd in held:
                os.close(fd)
        self.store = {}
        return self.proc.returncode


class Env:
    """One test module's world: a cgroup, backends and a daemon."""

    def __init__(self, name):
        self.cgroup = Cgroup(f"l7fast-test-{os.getpid()}-{name}")
        self.tmp = tempfile.TemporaryDirectory(prefix=f"l7fast-{name}-")
        self.backends = {}
        self.daemon = None
        self.bus = None
        self.dmesg_start = dmesg_lines()

    def backend(self, name, local=True, host="127.0.0.1"):
        b = Backend(name, free_port(host), self.cgroup if local else None, host)
        self.backends[name] = b
        return b

    def start(self, policy_body, **kw):
        """Starts l7fastd, serving org.l7fast.Manager1 on a private bus."""
        if self.bus is None:
            self.bus = PrivateBus(self.tmp.name, open=True)
        self.daemon = Daemon(policy_body, self.cgroup, self.tmp.name, bus_env=self.bus.env(), **kw)
        return self.daemon

    def ctl(self, *args):
        """l7fastctl against this environment's daemon: (exit status, stdout, stderr)."""
        out = subprocess.run([str(L7FASTCTL), *args], capture_output=True, text=True,
                             env=self.bus.env(), timeout=60, stdin=subprocess.DEVNULL)
        return out.returncode, out.stdout, out.stderr

    def stats(self):
        """`l7fastctl --json stats`, with routes as a dict by name."""
        rc, out, err = self.ctl("--json", "stats")
        assert rc == 0, err
        st = json.loads(out)
        st["routes"] = {r["name"]: r for r in st["routes"]}
        return st

    def client(self, port, local=True, host="127.0.0.1", source=None):
        """A client connection to a listener: from the test cgroup (a local
        client, SK_MSG) or from outside it (a remote one, SK_SKB). With a
        data plane, a remote one is returned once l7fastd has accepted it
        into the data plane: its first request is then the data plane's to
        decide, as a local client's is from the start (bytes that arrive
        before can take the slow path)."""
        if local:
            with self.local():
                return Conn(port, host, source=source)
        c = Conn(port, host, source=source)
        if os.path.exists(f"{self.daemon.bpffs}/maps/l7_conn_by_tuple"):
            assert wait_until(lambda: not self.daemon.untracked([c.sock])), \
                "l7fastd did not add the remote client's connection to the data plane"
        return c

    @contextlib.contextmanager
    def local(self):
        """Sockets created inside belong to the test cgroup (local clients)."""
        root = cgroup2_root()
        self.cgroup.add(os.getpid())
        try:
            yield
        finally:
            (root / "cgroup.procs").write_text(str(os.getpid()))

    def close(self):
        if self.daemon:
            self.daemon.stop()
        for b in self.backends.values():
            b.stop()
        if self.bus:
            self.bus.stop()
        self.cgroup.remove()
        self.tmp.cleanup()

    def kernel_warnings(self):
        return [l for l in dmesg_lines()[len(self.dmesg_start):] if is_our_warning(l)]


# A user-space fault is logged by the kernel as "traps: COMM[PID] general
# protection fault ..." or "COMM[PID]: segfault at ...". On a shared machine
# those lines come from any process (seen: another tenant's "drv" crashing in
# libc during a run); they are ours only when COMM is one of our programs.
# Kernel-side lines (WARNING, BUG, Oops, a kernel GPF with RIP:) are always ours
# to report: the data plane runs in that kernel.
_USER_FAULT = re.compile(r"(?:traps: )?([^\s\[]+)\[\d+\]:? (?:general protection|segfault|trap )")
OUR_PROGRAMS = ("l7fastd", "l7fastctl")


def is_our_warning(line):
    m = _USER_FAULT.search(line)
    if m:
        return m.group(1) in OUR_PROGRAMS
    return re.search(r"WARNING|BUG|Oops|general protection|refcount_t|RIP:", line) is not None


def dmesg_lines():
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    return r.stdout.splitlines()


# ---- HTTP over raw sockets -------------------------------------------------

class Response:
    def __init__(self, status, reason, headers, body, raw_head):
        self.status, self.reason, self.headers, self.body = status, reason, headers, body
        self.raw_head = raw_head

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def json(self):
        return json.loads(self.body)

    def __repr__(self):
        return f"<Response {self.status} {len(self.body)} bytes>"


class Conn:
    """One client connection; responses are read with exact framing."""

    def __init__(self, port, host="127.0.0.1", timeout=LIVENESS, source=None):
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.buf = b""

    def send(self, data):
        self.sock.sendall(data)

    def request(self, method="GET", path="/", headers=None, body=None, host="test"):
        self.send(make_request(method, path, headers, body, host))

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise EOFError("connection closed")
        self.buf += chunk

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _take(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_response(self, head_request=False):
        """Reads one final response (interim 1xx responses are skipped)."""
        while True:
            status_line = self._line()
            m = re.match(rb"HTTP/1\.[01] (\d{3})(?: (.*))?$", status_line)
            assert m, f"bad status line {status_line!r}"
            status = int(m.group(1))
            headers, raw = [], status_line + b"\r\n"
            while True:
                line = self._line()
                raw += line + b"\r\n"
                if not line:
                    break
                k, v = line.split(b":", 1)
                headers.append((k.decode().strip(), v.decode().strip()))
            if 100 <= status < 200 and status != 101:
                continue
            break
        hdr = {k.lower(): v for k, v in headers}
        body = b""
        if head_request or status in (204, 304):
            pass
        elif hdr.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int(self._line().split(b";")[0], 16)
                if size == 0:
                    while self._line():
                        pass
                    break
                body += self._take(size)
                assert self._take(2) == b"\r\n"
        elif "content-length" in hdr:
            body = self._take(int(hdr["content-length"]))
        else:
            while True:
                try:
                    self._fill()
                except EOFError:
                    break
            body, self.buf = self.buf, b""
        return Response(status, (m.group(2) or b"").decode(), headers, body, raw)

    def closed_by_peer(self, timeout=LIVENESS):
        """True if the peer closes the connection (clean EOF) within timeout."""
        self.sock.settimeout(timeout)
        try:
            return self.sock.recv(1) == b"" and not self.buf
        except (socket.timeout, ConnectionResetError):
            return False

    def close(self):
        self.sock.close()


def listener_toml(port, name="web", host="127.0.0.1"):
    """A [[listener]] table (TOML) on host:port."""
    return f'[[listener]]\nname = "{name}"\naddress = "{host}:{port}"\n'


def cluster_toml(name, *addresses):
    """A [[cluster]] table (TOML) with these endpoints ("host:port")."""
    endpoints = ", ".join(f'{{ address = "{a}" }}' for a in addresses)
    return f'[[cluster]]\nname = "{name}"\nendpoints = [ {endpoints} ]\n'


def catch_all_toml(port, address, cluster="a"):
    """The smallest policy that serves: listener "web" on `port`, cluster
    `cluster` of the one endpoint `address`, and route "all" taking every
    request there."""
    return listener_toml(port) + cluster_toml(cluster, address) + f'[[route]]\nname = "all"\ncluster = "{cluster}"\n'


def make_request(method="GET", path="/", headers=None, body=None, host="test"):
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    hdrs = dict(headers or {})
    if body is not None and "Transfer-Encoding" not in hdrs:
        hdrs.setdefault("Content-Length", str(len(body)))
    for k, v in hdrs.items():
        lines.append(f"{k}: {v}")
    data = ("\r\n".join(lines) + "\r\n\r\n").encode()
    if body is not None:
        if hdrs.get("Transfer-Encoding") == "chunked":
            step = 65536
            for i in range(0, len(body), step):
                part = body[i:i + step]
                data += b"%x\r\n%s\r\n" % (len(part), part)
            data += b"0\r\n\r\n"
        else:
            data += body
    return data


def get(port, path="/", **kw):
    c = Conn(port)
    try:
        c.request("GET", path, **kw)
        return c.read_response()
    finally:
        c.close()
