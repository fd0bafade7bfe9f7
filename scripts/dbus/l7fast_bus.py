"""Helpers for l7fast's D-Bus and l7fastctl end-to-end tests
(tests/e2e/test_dbus*.py, tests/e2e/test_cli*.py): a private system bus
(scripts/dbus/private-bus.sh), the real l7fastd on it with a policy of the
test's own (its own cgroup v2 directory and bpffs directory), and runners for
l7fastctl and busctl as root or as an unprivileged user.

The tests run as root. They skip, saying why, only when not root or when
dbus-daemon is missing; anything else missing is a failure. With
L7FAST_REQUIRE_E2E=1 they fail instead of skipping.
"""
import grp
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "pylib"))
from l7fast_host import cgroup2_root, ensure_bpffs, free_port  # noqa: E402,F401

BUILD = Path(os.environ.get("L7FAST_BUILD", ROOT / "build")).resolve()  # tests chdir
L7FASTD = BUILD / "daemon" / "l7fastd"
L7FASTCTL = BUILD / "daemon" / "l7fastctl"
PRIVATE_BUS = ROOT / "scripts" / "dbus" / "private-bus.sh"
BUS_NAME = "org.l7fast.Manager1"
OBJECT = "/org/l7fast/Manager1"
IFACE = "org.l7fast.Manager1"
NOBODY = 65534


def _admin_gid():
    try:
        return grp.getgrnam("l7fast").gr_gid
    except KeyError:
        return 64999  # private-bus.sh and Daemon add the group in a mount namespace


ADMIN_GID = _admin_gid()
HOST_HAS_ADMIN_GROUP = ADMIN_GID != 64999


def skip_reason():
    if os.geteuid() != 0:
        return "needs root (l7fastd loads BPF programs and owns a system bus name)"
    if shutil.which("dbus-daemon") is None:
        return "dbus-daemon missing (apt install dbus-daemon)"
    return None


def require_environment():
    """Skips (or fails under L7FAST_REQUIRE_E2E=1) when the tests cannot run."""
    reason = skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    for tool in ("busctl", "setpriv", "unshare"):
        assert shutil.which(tool), f"{tool} missing (systemd, util-linux)"


class PrivateBus:
    """dbus-daemon on a socket of our own: Debian's system bus policy plus
    systemd/org.l7fast.Manager1.conf, or (open=True) no restrictions."""

    def __init__(self, workdir, open=False):
        self.dir = Path(workdir) / ("bus-open" if open else "bus")
        args = [str(PRIVATE_BUS), "start", str(self.dir)]
        if open:
            args.append("--open")
        if not HOST_HAS_ADMIN_GROUP:
            args += ["--admin-gid", str(ADMIN_GID)]
        out = subprocess.run(args, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, f"private bus did not start:\n{out.stderr}"
        self.address = out.stdout.strip().split("=", 1)[1]

    def env(self, **extra):
        return dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address, LC_ALL="C.UTF-8", **extra)

    def has_owner(self, name=BUS_NAME):
        out = subprocess.run(["busctl", "--system", "call", "org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus", "NameHasOwner", "s", name],
                             capture_output=True, text=True, env=self.env(), timeout=10)
        return out.stdout.strip() == "b true"

    def stop(self):
        subprocess.run([str(PRIVATE_BUS), "stop", str(self.dir)], timeout=30)


class Daemon:
    """The real l7fastd on a private bus, with its own cgroup, bpffs
    directory and policy file (workdir/policy.toml, policy.d next to it)."""

    def __init__(self, bus, workdir, body, tag="dbus", log_level="debug", daemon_settings=""):
        """log_level: l7fastd's --log-level, None for none (the policy's
        daemon.log_level applies); daemon_settings: more lines of [daemon]."""
        assert L7FASTD.exists(), f"{L7FASTD} not built (cmake -S . -B build && make -C build)"
        croot = cgroup2_root()
        assert croot, "no cgroup v2 hierarchy mounted"
        problem = ensure_bpffs()
        assert not problem, problem
        self.bus = bus
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workdir, 0o755)
        unique = f"{tag}-{os.getpid()}-{id(self) & 0xffffff:x}"
        self.cgroup = croot / f"l7fast-test-{unique}"
        self.cgroup.mkdir(exist_ok=True)
        self.bpffs = Path(f"/sys/fs/bpf/l7fast-test-{unique}")
        self.policy = self.workdir / "policy.toml"
        self.policy_dir = self.workdir / "policy.d"
        self.header = f'[daemon]\ncgroup = "{self.cgroup}"\nbpffs = "{self.bpffs}"\n{daemon_settings}\n\n'
        self.write_policy(body)
        os.chmod(self.policy, 0o644)
        self.log_path = self.workdir / "l7fastd.log"
        self.logf = open(self.log_path, "w")
        cmd = [str(L7FASTD), "--config", str(self.policy), "--policy-dir", str(self.policy_dir)]
        if log_level:
            cmd += ["--log-level", log_level]
        if not HOST_HAS_ADMIN_GROUP:
            # l7fastd resolves the group "l7fast" by name, like the bus does
            group = self.workdir / "group"
            group.write_text(Path("/etc/group").read_text() + f"l7fast:x:{ADMIN_GID}:\n")
            cmd = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c",
                   'mount --bind "$0" /etc/group && exec "$@"', str(group), *cmd]
        env = bus.env()
        env.pop("NOTIFY_SOCKET", None)
        self.proc = subprocess.Popen(cmd, stdout=self.logf, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 90
        while not bus.has_owner():
            if self.proc.poll() is not None:
                raise AssertionError(f"l7fastd exited with {self.proc.returncode}:\n{self.log()}")
            if time.time() > deadline:
                self.stop()
                raise AssertionError(f"l7fastd did not take {BUS_NAME} within 90 s:\n{self.log()}")
            time.sleep(0.1)

    def write_policy(self, body):
        self.policy.write_text(self.header + body)

    def log(self):
        self.logf.flush()
        return self.log_path.read_text()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        root = cgroup2_root()
        for _ in range(50):
            try:
                for pid in (self.cgroup / "cgroup.procs").read_text().split():
                    (root / "cgroup.procs").write_text(pid)
                self.cgroup.rmdir()
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        shutil.rmtree(self.bpffs, ignore_errors=True)


def as_user(uid=None, groups=None):
    """setpriv prefix running a command as uid with exactly these groups."""
    if uid is None:
        return []
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}"]
    prefix += [f"--groups={','.join(str(g) for g in groups)}"] if groups else ["--clear-groups"]
    return prefix


def run(bus_env, args, uid=None, groups=None, timeout=120):
    return subprocess.run(as_user(uid, groups) + [str(a) for a in args], capture_output=True, text=True,
                          env=bus_env, timeout=timeout, stdin=subprocess.DEVNULL)


def ctl(bus, *args, uid=None, groups=None):
    return run(bus.env(), [L7FASTCTL, *args], uid, groups)


def ctl_json(bus, *args, uid=None):
    out = ctl(bus, "--json", *args, uid=uid)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def busctl(bus, *args, uid=None, groups=None):
    return run(bus.env(), ["busctl", "--system", *args], uid, groups)


def call(bus, method, *args, uid=None, groups=None):
    """busctl call on l7fastd; returns the CompletedProcess (stdout in --json=short)."""
    return busctl(bus, "--json=short", "call", BUS_NAME, OBJECT, IFACE, method, *args, uid=uid, groups=groups)


def call_json(bus, method, *args, uid=None):
    out = call(bus, method, *args, uid=uid)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def policy_body(port=None, upstream=None, extra_routes=""):
    """A small valid policy: one listener, two clusters, four routes, one of
    them kept in user space."""
    port = port or free_port()
    upstream = upstream or free_port()
    return f"""[[listener]]
name = "web"
address = "127.0.0.1:{port}"

[[cluster]]
name = "app"
lb = "round_robin"
endpoints = [ {{ address = "127.0.0.1:{upstream}" }} ]

[[cluster]]
name = "canary"
lb = "round_robin"
endpoints = [ {{ address = "127.0.0.1:{upstream}" }} ]

[[route]]
name = "api"
clusters = [ {{ name = "app", weight = 90 }}, {{ name = "canary", weight = 10 }} ]
[route.match]
path_prefix = "/api"

[[route]]
name = "health"
cluster = "app"
[route.match]
path_exact = "/healthz"
method = ["GET", "HEAD"]

[[route]]
name = "admin"
cluster = "app"
offload = false
[route.match]
path_prefix = "/admin/"
{extra_routes}
[[route]]
name = "default"
cluster = "app"
"""


# ---- fixtures (imported by the test modules) --------------------------------------

@pytest.fixture(scope="module")
def workdir():
    require_environment()
    d = tempfile.mkdtemp(prefix="l7fast-dbus-e2e-")
    os.chmod(d, 0o755)
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def bus(workdir):
    b = PrivateBus(workdir)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def daemon(bus, workdir):
    d = Daemon(bus, workdir / "daemon", policy_body())
    yield d
    d.stop()


@pytest.fixture
def daemon_log_on_failure(request, daemon):
    yield
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print("--- l7fastd log (last 40 lines) ---\n" + "\n".join(daemon.log().splitlines()[-40:]))
