"""Upstream behaviour: a backend outside the data plane's cgroup (responses
arrive through SK_SKB), a dead backend, a slow backend, and what the slow
path answers itself (404, 400, 431, 501, 505)."""
import os
import time

import pytest

from l7env import LIVENESS, Conn, HeldBackend, cluster_toml, free_port, listener_toml

# bounds every exchange of the module: long enough that only a stall ends one
REQUEST_TIMEOUT = 5.0


@pytest.fixture(scope="module")
def web(env):
    env.backend("near")
    env.backend("far", local=False)   # its sockets are invisible to sockops
    env.held = HeldBackend()
    dead_port = free_port()           # nothing listens here
    port = free_port()
    env.start(listener_toml(port) + cluster_toml("near", env.backends["near"].address()) +
              cluster_toml("far", env.backends["far"].address()) + cluster_toml("dead", f"127.0.0.1:{dead_port}") +
              f"""[[route]]
name = "far"
cluster = "far"
match = {{ path_prefix = "/far" }}
[[route]]
name = "dead"
cluster = "dead"
match = {{ path_prefix = "/dead" }}
[[cluster]]
name = "held"
endpoints = [ {{ address = "{env.held.address()}" }} ]
[[route]]
name = "held"
cluster = "held"
match = {{ path_prefix = "/held" }}
[[route]]
name = "near"
cluster = "near"
match = {{ path_prefix = "/near" }}
""", daemon_settings=f"request_timeout_ms = {int(REQUEST_TIMEOUT * 1000)}\nconnect_timeout_ms = 500\npool_max = 2")
    yield port
    env.held.release()
    env.held.close()


def daemon_wakeups(env):
    """Voluntary context switches of l7fastd's threads: its wake-ups."""
    total = 0
    for task in os.listdir(f"/proc/{env.daemon.proc.pid}/task"):
        with open(f"/proc/{env.daemon.proc.pid}/task/{task}/status") as f:
            total += next(int(l.split()[1]) for l in f if l.startswith("voluntary_ctxt_switches"))
    return total


def test_kernel_responses_from_a_tcp_backend_do_not_wake_the_daemon(env, web):
    """Responses arriving over TCP pass an SK_SKB verdict program on the
    daemon's pooled socket, and since Linux 6.4 every such segment wakes the
    socket's readers even when the program redirected it: the daemon must not
    have those sockets in its epoll set (proxy/UpstreamPool.hpp). It once
    woke for every response. What may wake it meanwhile is its own 500 ms
    tick, so the bound grows with the run's duration, far below one per
    response however slow the machine is."""
    n = 1000
    with env.local():
        c = Conn(web)
    c.request("GET", "/far/warm")
    assert c.read_response().status == 200
    kernel = lambda: env.stats()["routes"]["far"]["requests_kernel"]  # noqa: E731
    k0, w0, t0 = kernel(), daemon_wakeups(env), time.monotonic()
    for i in range(n):
        c.request("GET", f"/far/{i}")
        assert c.read_response().status == 200
    took = time.monotonic() - t0
    woke = daemon_wakeups(env) - w0
    c.close()
    assert kernel() - k0 == n, "requests left the kernel path"
    assert woke <= 20 + 4 * took, f"l7fastd woke {woke} times for {n} kernel responses in {took:.1f} s"


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_remote_backend_through_sk_skb(env, web, local):
    if local:
        with env.local():
            c = Conn(web)
    else:
        c = Conn(web)
    for q in ["", "?size=100000", "?size=5000&chunked=1", "?status=204"]:
        c.request("GET", "/far/x" + q)
        r = c.read_response()
        assert r.status in (200, 204)
        if q == "":
            assert r.json()["backend"] == "far"
    c.close()


def test_dead_backend_gets_502_not_a_hang(env, web):
    # 502 (refused), not the 504 of request_timeout_ms; a hang is the
    # client's LIVENESS read timeout
    with env.local():
        c = Conn(web)
    c.request("GET", "/dead/1")
    r = c.read_response()
    assert r.status == 502
    c.close()


def test_no_route_is_404_and_keeps_the_connection(env, web):
    with env.local():
        c = Conn(web)
    c.request("GET", "/nowhere")
    assert c.read_response().status == 404
    c.request("GET", "/near/after")
    assert c.read_response().json()["path"] == "/near/after"
    c.close()


def test_more_concurrent_requests_than_pooled_connections_all_succeed(env, web):
    """pool_max = 2: the data plane finds every slot busy and passes the rest
    to the slow path, which opens overflow connections instead of failing.
    The backend holds every answer until all n requests reached it, so
    exactly the first two are the kernel's (its two idle connections)."""
    env.daemon.wait_idle(env.held.address(), n=2)
    before = env.stats()["routes"]["held"]
    n = 8
    with env.local():
        conns = [Conn(web) for _ in range(n)]
    for i, c in enumerate(conns):
        c.request("GET", f"/held/{i}")
    if not env.held.wait_received(n):
        # seen when an earlier module's backend outlived it (7 of 8, and a
        # client answered by that backend): what the data plane and l7fastd
        # did, and what the clients got, for the next one who sees it
        log = [line for line in env.daemon.log().splitlines() if "Connection refused" not in line]
        early = {}
        for i, c in enumerate(conns):
            c.sock.setblocking(False)
            try:
                early[i] = c.sock.recv(4096)
            except BlockingIOError:
                pass
        pytest.fail(f"{env.held.received()} of {n} requests reached the backend; answered before "
                    f"the release: {early}; counters "
                    f"{env.daemon.counters()}; pool {env.daemon.pool_states(env.held.address())}; "
                    f"stats {env.stats()['routes']['held']}; log:\n" + "\n".join(log[-80:]))
    env.held.release()
    statuses = [c.read_response().status for c in conns]
    for c in conns:
        c.close()
    assert statuses == [200] * n
    after = env.stats()["routes"]["held"]
    assert after["requests_kernel"] - before["requests_kernel"] == 2
    assert after["requests_user"] - before["requests_user"] == n - 2
    assert after["responses"]["2xx"] - before["responses"]["2xx"] == n


def test_slow_backend_times_out_with_504(env, web):
    # the backend would answer after LIVENESS: a 504 is the timeout, which
    # never fires before request_timeout_ms (less its timers' rounding)
    with env.local():
        c = Conn(web)
    t0 = time.monotonic()
    c.request("GET", f"/near/slow?delay={int(LIVENESS * 1000)}")
    r = c.read_response()
    assert r.status == 504, r
    assert time.monotonic() - t0 > 0.9 * REQUEST_TIMEOUT
    c.close()


@pytest.mark.parametrize("raw,status", [
    (b"GET /near HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"GET /near HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", 400),
    (b"GET /near HTTP/1.1\r\nHost: a\r\n folded: x\r\n\r\n", 400),
    (b"GET /near HTTP/1.1\r\nHost : a\r\n\r\n", 400),
    (b"GET /near HTTP/1.1\nHost: a\n\n", 400),
    (b"GET /near HTTP/1.1\r\n\r\n", 400),
    (b"GET /near HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    (b"POST /near HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    (b"GET /near HTTP/2.0\r\nHost: a\r\n\r\n", 505),
    (b"GET /near HTTP/1.1\r\nHost: a\r\nX: " + b"y" * 70000 + b"\r\n\r\n", 431),
])
@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_malformed_requests_are_rejected_not_forwarded(env, web, raw, status, local):
    if local:
        with env.local():
            c = Conn(web)
    else:
        c = Conn(web)
    c.send(raw)
    r = c.read_response()
    assert r.status == status, r
    assert r.header("connection") == "close"
    assert c.closed_by_peer()
    c.close()
