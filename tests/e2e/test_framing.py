"""Message framing through the kernel path and the slow path: bodies by
Content-Length and chunked (both directions), HEAD/1xx/204/304, bodies
delimited by close, pipelining, writes split mid-head, half-close,
Connection: close."""
import hashlib
import os
import select
import socket
import time

import pytest

from l7env import L7_SYNC_CLOSING, LIVENESS, Conn, catch_all_toml, free_port, make_request, wait_until


@pytest.fixture(scope="module")
def web(env):
    env.backend("a")
    port = free_port()
    env.start(catch_all_toml(port, env.backends["a"].address()))
    return port


CLIENTS = [True, False]
IDS = ["local", "remote"]


def connect(env, port, local):
    if local:
        with env.local():
            return Conn(port)
    return Conn(port)


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
@pytest.mark.parametrize("coding", ["length", "chunked"])
def test_one_megabyte_request_body(env, web, local, coding):
    body = os.urandom(1 << 20)
    c = connect(env, web, local)
    headers = {"Transfer-Encoding": "chunked"} if coding == "chunked" else None
    c.request("POST", "/upload", headers=headers, body=body)
    r = c.read_response()
    assert r.status == 200
    d = r.json()
    assert d["body_len"] == len(body)
    assert d["body_sha256"] == hashlib.sha256(body).hexdigest()
    # the connection is still in sync afterwards
    c.request("GET", "/after")
    assert c.read_response().json()["path"] == "/after"
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
@pytest.mark.parametrize("query,length", [("size=100", 100), ("size=200000", 200000),
                                          ("size=3000&chunked=1", 3000),
                                          ("size=300000&chunked=1", 300000)])
def test_response_bodies(env, web, local, query, length):
    c = connect(env, web, local)
    for _ in range(2):
        c.request("GET", "/r?" + query)
        r = c.read_response()
        assert r.status == 200 and len(r.body) == length and set(r.body) == {ord("x")}
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_head_204_304_and_interim_keep_framing(env, web, local):
    c = connect(env, web, local)
    c.request("HEAD", "/h?size=5000")
    r = c.read_response(head_request=True)
    assert r.status == 200 and r.header("content-length") == "5000" and r.body == b""
    c.request("GET", "/n?status=204")
    assert c.read_response().status == 204
    c.request("GET", "/n?status=304")
    assert c.read_response().status == 304
    c.request("GET", "/i?interim=1&size=7")
    r = c.read_response()
    assert r.status == 200 and r.body == b"x" * 7
    c.request("GET", "/last")
    assert c.read_response().json()["path"] == "/last"
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_body_delimited_by_close(env, web, local):
    c = connect(env, web, local)
    c.request("GET", "/old?http10=1&size=5000")
    r = c.read_response()
    assert r.status == 200 and r.body == b"x" * 5000
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_pipelined_requests_answered_in_order(env, web, local):
    c = connect(env, web, local)
    paths = [f"/p/{i}" for i in range(5)]
    c.send(b"".join(make_request("GET", p) for p in paths))
    got = [c.read_response().json()["path"] for _ in paths]
    assert got == paths
    # and the connection keeps working
    c.request("GET", "/p/after")
    assert c.read_response().json()["path"] == "/p/after"
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_pipelined_with_bodies(env, web, local):
    c = connect(env, web, local)
    reqs = [make_request("POST", f"/pb/{i}", body=bytes([65 + i]) * (1000 * i + 1))
            for i in range(4)]
    c.send(b"".join(reqs))
    for i in range(4):
        d = c.read_response().json()
        assert d["path"] == f"/pb/{i}" and d["body_len"] == 1000 * i + 1
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_head_split_across_writes(env, web, local):
    c = connect(env, web, local)
    req = make_request("GET", "/split", headers={"X-Long": "v" * 300})
    for i in range(0, len(req), 37):
        c.send(req[i:i + 37])
        time.sleep(0.005)
    assert c.read_response().json()["headers"]["x-long"] == "v" * 300
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_body_split_across_writes(env, web, local):
    c = connect(env, web, local)
    body = os.urandom(100000)
    req = make_request("POST", "/slow", body=body)
    for i in range(0, len(req), 9000):
        c.send(req[i:i + 9000])
        time.sleep(0.002)
    d = c.read_response().json()
    assert d["body_len"] == len(body) and d["body_sha256"] == hashlib.sha256(body).hexdigest()
    c.close()


def local_kernel_exchange(env, port, request, half_close=False):
    """One request of a new local client, taken by the kernel (the pool is
    warm), and its response; returns (connection, response). l7fastd runs
    meanwhile and sends its FIN when it sees the client's EOF or an exchange
    that asked for a close, while the kernel's response may still be on its
    way: the FIN must not overtake it (ARCHITECTURE.md, "Closing a
    connection"; it once did for ~26% of local half-closes on an idle
    machine, ~45% under load)."""
    env.daemon.wait_idle(env.backends["a"].address())
    c = connect(env, port, True)
    k0 = kernel_requests(env)
    c.send(request)
    if half_close:
        c.sock.shutdown(socket.SHUT_WR)
    r = c.read_response()
    assert kernel_requests(env) == k0 + 1
    return c, r


TCP_CLOSE = 7


def tcp_state(sock):
    """tcpi_state (struct tcp_info's first byte)."""
    return sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]


def kernel_requests(env):
    return env.stats()["routes"]["all"]["requests_kernel"]


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_client_half_close(env, web, local):
    """The response to the request before a half-close arrives, then the
    daemon closes. A remote client's bytes all pass the daemon's socket, in
    order; a local client's request is the kernel's (local_kernel_exchange
    says why l7fastd is stopped meanwhile)."""
    if local:
        c, r = local_kernel_exchange(env, web, make_request("GET", "/half"), half_close=True)
    else:
        c = connect(env, web, local)
        c.request("GET", "/half")
        c.sock.shutdown(socket.SHUT_WR)
        r = c.read_response()
    assert r.json()["path"] == "/half"
    assert c.closed_by_peer()
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_client_half_close_after_its_response_arrived(env, web, local):
    """The kernel's response is already waiting in the client's socket
    (a local client: its BPF ingress queue, which the kernel frees when the
    socket leaves the sockmap, as a half-closed socket does once the
    daemon's FIN arrives) when the client half-closes, and the client reads
    only after l7fastd saw the EOF (it marks a local client's connection
    closing in l7_conn_sync): the daemon's FIN must not cost the response
    (l7_sync_flags in bpf/include/l7fast_abi.h)."""
    env.daemon.wait_idle(env.backends["a"].address())
    c = connect(env, web, local)
    # a remote client's bytes are the kernel's once l7fastd accepted it
    assert wait_until(lambda: not env.daemon.untracked([c.sock]))
    k0 = kernel_requests(env)
    c.request("GET", "/half-late")
    # the response is there (readable), not read
    assert select.select([c.sock], [], [], LIVENESS)[0], "no response"
    assert kernel_requests(env) == k0 + 1
    c.sock.shutdown(socket.SHUT_WR)
    if local:
        assert wait_until(lambda: env.daemon.sync_flags(c.sock) & L7_SYNC_CLOSING), "l7fastd did not see the EOF"
    else:
        # a remote client's bytes all pass the daemon's socket in order:
        # read once its FIN is in (the socket is CLOSED)
        assert wait_until(lambda: tcp_state(c.sock) == TCP_CLOSE), "no FIN from l7fastd"
    assert c.read_response().json()["path"] == "/half-late"
    assert c.closed_by_peer()
    c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_connection_close_is_honoured(env, web, local):
    for request in (make_request("GET", "/bye", headers={"Connection": "close"}),
                    make_request("GET", "/bye2?close=1")):
        if local:
            c, r = local_kernel_exchange(env, web, request)
        else:
            c = connect(env, web, local)
            c.send(request)
            r = c.read_response()
        assert r.status == 200
        assert c.closed_by_peer()
        c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_upstream_closed_after_a_client_close_is_not_reused(env, web, local):
    """The slow path forwards a client's Connection: close, so the backend
    closes its end after responding: that upstream connection must not go
    back to a pool as idle, or the next request is sent into a socket about
    to close (502, or EFAULT for a local client). "/x/../" sends a request
    to the slow path. The backend lingers long after answering before it
    closes (LIVENESS), so a reused connection would still be the closing one
    whenever the next request comes; the next requests go through the slow
    path (its own pool) and the kernel (the kernel's)."""
    linger = int(LIVENESS * 1000)
    for i in range(10):
        c = connect(env, web, local)
        c.request("GET", f"/x/../slow{i}?linger={linger}", headers={"Connection": "close"})
        assert c.read_response().status == 200
        assert c.closed_by_peer()
        c.close()
        c = connect(env, web, local)
        for path in (f"/x/../again{i}", f"/fast{i}"):
            c.request("GET", path)
            r = c.read_response()
            assert r.status == 200
            assert r.json()["path"] == path.replace("/x/..", "")
        c.close()


@pytest.mark.parametrize("local", CLIENTS, ids=IDS)
def test_kernel_path_serves_keep_alive_requests(env, web, local):
    """With an idle pooled connection, the kernel takes every request of a
    client that does not pipeline, and completes every response (SK_MSG
    for a local client, SK_SKB for a remote one)."""
    env.daemon.wait_idle(env.backends["a"].address())
    before = env.daemon.counters()
    c = connect(env, web, local)
    for i in range(25):
        c.request("GET", f"/k/{i}")
        assert c.read_response().json()["path"] == f"/k/{i}"
    c.close()
    after = env.daemon.counters()
    moved = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    assert moved == {"requests_kernel": 25, "responses_kernel": 25}, moved
