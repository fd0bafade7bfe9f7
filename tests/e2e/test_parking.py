"""A remote client's socket wakes its readers after every SK_SKB verdict,
also for the bytes the kernel answered or forwarded itself
(sk_psock_verdict_data_ready): a session waiting in l7fastd's epoll set
woke the daemon's thread once per request the kernel served, only for
epoll to find nothing to report. l7fastd waits for a remote client's next
request outside its epoll set instead (ClientSession::park,
proxy/ParkSet.hpp): a request for the slow path wakes the session through
the kernel's L7_EV_WAKE, and a client that closes or resets wakes it
through the park set's hang-up events.

The daemon here never looks at parked sessions by itself
(L7FAST_TEST_FAULT=no-park-check), and its idle timeout is far beyond the
clients' LIVENESS timeout: a wake-up that does not come leaves the client
hanging, and the test fails. Its header timeout is short, and a parked wait
is not a request head's: a client may pause longer than that between
requests."""
import json
import socket
import struct
import time

import pytest

from l7env import LIVENESS, HeldBackend, cluster_toml, free_port, listener_toml, make_request, wait_until

HEADER_MS = 300
IDLE_MS = int(4 * LIVENESS * 1000)

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
[[route]]
name = "h"
cluster = "held"
match = { path_prefix = "/h/" }
"""


@pytest.fixture(scope="module")
def parking(env):
    b = env.backend("b")
    env.held = HeldBackend()
    env.park_port = free_port()
    env.start(listener_toml(env.park_port) + cluster_toml("b", b.address()) +
              cluster_toml("held", env.held.address()) + ROUTES,
              daemon_settings=f"idle_timeout_ms = {IDLE_MS}\nheader_timeout_ms = {HEADER_MS}\npool_min_idle = 2",
              extra_env={"L7FAST_TEST_FAULT": "no-park-check"})
    env.daemon.wait_idle(b.address(), n=2)
    env.daemon.wait_idle(env.held.address(), n=2)
    yield env
    env.held.close()


def status(env):
    rc, out, err = env.ctl("--json", "status")
    assert rc == 0, err
    return json.loads(out)


def figures(env):
    st = env.stats()["routes"]
    return st["k"]["requests_kernel"], st["u"]["requests_user"]


def parked(env):
    return status(env)["parked_connections"]


def get(c, path):
    c.request("GET", path)
    r = c.read_response()
    assert r.status == 200, (path, r.status)
    assert r.json()["path"] == path
    return r


def test_a_remote_client_waits_parked(parking):
    """Its session parks before the first request, and again after every
    request, whichever path served it; a local client's never does (its
    socket is not the data plane's: the kernel's bytes never reach it)."""
    env = parking
    base = parked(env)
    c = env.client(env.park_port, local=False)
    assert wait_until(lambda: parked(env) == base + 1)
    before = figures(env)
    for i in range(20):
        get(c, f"/k/{i}")
    assert figures(env)[0] - before[0] == 20, "every request in the kernel"
    get(c, "/u/0")
    assert wait_until(lambda: parked(env) == base + 1)
    local = env.client(env.park_port, local=True)
    get(local, "/u/local")
    assert parked(env) == base + 1
    local.close()
    c.close()
    assert wait_until(lambda: parked(env) == base)


def test_a_slow_path_request_wakes_a_parked_session(parking):
    """Kernel and slow-path requests alternate on one connection, each sent
    after the last answer was read: each slow-path request finds the
    session parked (or about to park, when it sees the request's bytes
    counted in k_passed first) and is answered."""
    env = parking
    c = env.client(env.park_port, local=False)
    before = figures(env)
    for i in range(20):
        get(c, f"/k/{i}")
        get(c, f"/u/{i}")
    after = figures(env)
    c.close()
    assert (after[0] - before[0], after[1] - before[1]) == (20, 20)


def test_a_connection_the_slow_path_serves_stops_parking_until_the_kernel_serves_it(parking):
    """Parking costs a request the slow path answers (two epoll_ctl, two
    ioctl, a timer): after two parks in a row that only such requests ended,
    the session waits in asio. The kernel's requests do not wake it there,
    so the tick parks it again once the kernel served one (k_done_ns moved);
    a slow-path request then still wakes it."""
    env = parking
    base = parked(env)
    c = env.client(env.park_port, local=False)
    assert wait_until(lambda: parked(env) == base + 1)
    for i in range(10):
        get(c, f"/u/only/{i}")
        if parked(env) == base:
            break
    assert parked(env) == base, "still parking after slow-path requests only"
    get(c, "/k/again")
    assert wait_until(lambda: parked(env) == base + 1), "not parked again once the kernel served the connection"
    get(c, "/u/after")
    get(c, "/k/after")
    c.close()


def test_a_session_parks_again_after_a_relay(parking):
    """A response over the kernel's socket-to-socket budget (64 KiB) is
    handed over to the daemon to relay (responses_relayed) while the
    session waits parked: the relay takes the socket out of the park, and
    once it is done the session parks again. (It stayed in asio's epoll set
    until the client's next slow-path request, and every request the kernel
    served meanwhile woke the daemon.)"""
    env = parking
    d = env.daemon
    base = parked(env)
    c = env.client(env.park_port, local=False)
    assert wait_until(lambda: parked(env) == base + 1)
    for i in range(3):
        before = d.counters()
        c.request("GET", f"/k/big/{i}?size=200000")
        r = c.read_response()
        assert (r.status, len(r.body)) == (200, 200000)
        assert wait_until(lambda: d.counters()["responses_relayed"] == before["responses_relayed"] + 1)
        assert wait_until(lambda: parked(env) == base + 1), "not parked again after the relay"
        get(c, f"/k/after-relay/{i}")
    c.close()


def test_a_relay_ahead_of_a_pipelined_request(parking):
    """A request the kernel forwards to a backend that holds its answer,
    and then a second one on the same connection: the second is the slow
    path's (pipelined), so the kernel hands the first response over to the
    daemon (responses_relayed), which relays it ahead of its own. Both
    answers arrive, and the session parks again."""
    env = parking
    d = env.daemon
    base = parked(env)
    c = env.client(env.park_port, local=False)
    assert wait_until(lambda: parked(env) == base + 1)
    before = d.counters()
    c.send(make_request("GET", "/h/first"))
    assert env.held.wait_received(1)
    c.send(make_request("GET", "/h/second"))
    assert wait_until(lambda: d.counters()["requests_user"] == before["requests_user"] + 1)
    env.held.release()
    for _ in range(2):
        r = c.read_response()
        assert (r.status, r.body) == (200, b"ok\n")
    after = d.counters()
    assert after["responses_relayed"] == before["responses_relayed"] + 1
    assert after["to_slow_path_pipelined"] == before["to_slow_path_pipelined"] + 1
    assert wait_until(lambda: parked(env) == base + 1), "not parked again after the relay"
    get(c, "/k/after-relay")
    c.close()


def test_a_pause_longer_than_the_header_timeout_keeps_the_connection(parking):
    env = parking
    c = env.client(env.park_port, local=False)
    get(c, "/k/before")
    time.sleep(3 * HEADER_MS / 1000)
    get(c, "/k/after")
    get(c, "/u/after")
    c.close()


def sessions(env):
    return status(env)["connections"]


@pytest.mark.parametrize("how", ["fin", "reset"])
def test_a_parked_client_that_goes_away_ends_its_session(parking, how):
    env = parking
    base = sessions(env)
    c = env.client(env.park_port, local=False)
    for i in range(3):
        get(c, f"/k/{how}/{i}")
    assert sessions(env) == base + 1
    if how == "fin":
        c.sock.shutdown(socket.SHUT_WR)
        # the daemon closes its side in turn: EOF
        c.sock.settimeout(LIVENESS)
        assert c.sock.recv(1) == b""
    else:
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
    assert wait_until(lambda: sessions(env) == base), "the session outlived its client"
