"""daemon.idle_timeout_ms closes keep-alive connections that are idle, and
only those. A client whose requests the kernel path serves never sends the
daemon a byte, so the daemon counts idleness from the kernel's last response
to it (l7_conn_sync.k_done_ns) and not while one is in flight (k_busy).
Before, a busy kernel-path connection was closed when idle_timeout_ms had
passed since the daemon last read from it: every 60 s by default, with a
request possibly on its way (seen: EOF after 197 responses at 2.00 s with
idle_timeout_ms = 2000)."""
import socket
import time

import pytest

from l7env import LIVENESS, Conn, cluster_toml, free_port, listener_toml, wait_until

IDLE_MS = 2000

ROUTES = """
[[route]]
name = "k"
cluster = "b"
match = { path_prefix = "/k/" }
[[route]]
name = "u"
cluster = "b"
offload = false
match = { path_prefix = "/u/" }
"""


@pytest.fixture(scope="module")
def idle(env):
    b = env.backend("b")
    env.idle_port = free_port()
    env.start(listener_toml(env.idle_port) + cluster_toml("b", b.address()) + ROUTES,
              daemon_settings=f"idle_timeout_ms = {IDLE_MS}\npool_min_idle = 2")
    env.daemon.wait_idle(b.address(), n=2)
    return env


def connect(env, local):
    if local:
        with env.local():
            return Conn(env.idle_port)
    return Conn(env.idle_port)


def kernel_requests(env):
    return env.stats()["routes"]["k"]["requests_kernel"]


def closed_by_peer(c):
    """True once the daemon has closed the connection (EOF, or a reset)."""
    c.sock.settimeout(0.05)
    try:
        return c.sock.recv(1) == b""
    except socket.timeout:
        return False
    except (ConnectionResetError, OSError):
        return True


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_a_busy_kernel_path_connection_is_not_idle(idle, local):
    """Requests on one connection, 50 ms apart, for three idle periods:
    every one answered on the same connection, all of them by the kernel
    path. (Only a pause of the test itself as long as idle_timeout_ms would
    make a close legitimate; that is the one case accepted.)"""
    env = idle
    c = connect(env, local)
    before = kernel_requests(env)
    n = 0
    t0 = last = time.monotonic()
    while time.monotonic() - t0 < 3 * IDLE_MS / 1000:
        sent = time.monotonic()
        try:
            c.request("GET", f"/k/{n}")
            r = c.read_response()
        except (EOFError, ConnectionError, OSError, AssertionError) as e:
            assert sent - last >= IDLE_MS / 1000, \
                f"closed after {n} responses, {sent - last:.2f}s after the last one: {e!r}"
            pytest.skip(f"the test itself paused {sent - last:.2f}s, as long as idle_timeout_ms")
        assert r.status == 200, (n, r.status)
        assert r.json()["path"] == f"/k/{n}"
        n += 1
        last = time.monotonic()
        time.sleep(0.05)
    c.close()
    assert kernel_requests(env) - before == n, "every request on the kernel path"


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
@pytest.mark.parametrize("plane", ["k", "u"], ids=["kernel", "slow"])
def test_an_idle_connection_is_closed_after_idle_timeout(idle, local, plane):
    """After its last response a connection that sends nothing is closed:
    not before idle_timeout_ms has passed since that response, whichever
    path answered it."""
    env = idle
    c = connect(env, local)
    sent = time.monotonic()  # the response, and so the idle period, begins later
    c.request("GET", f"/{plane}/last")
    r = c.read_response()
    assert r.status == 200
    assert wait_until(lambda: closed_by_peer(c), timeout=LIVENESS + IDLE_MS / 1000, interval=0.05), \
        "the idle connection was never closed"
    closed = time.monotonic()
    c.close()
    assert closed - sent >= IDLE_MS / 1000, \
        f"closed {closed - sent:.2f}s after the last request was sent, before idle_timeout_ms"
