"""Request header mutation in the kernel (SK_MSG, local clients): the same
byte sequences are sent to a daemon with the data plane and to one with
kernel_dataplane = false, and the backend must receive exactly the same
bytes from both, while the data-plane daemon serves the mutated requests in
the kernel (requests_kernel) wherever the kernel can rewrite them: one
request per message, head whole in the message, body in later writes
included. Pipelined requests and heads split over writes go to the slow
path there, and still arrive byte for byte as the slow path writes them."""
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import l7env
from l7env import Conn, free_port, make_request


def capture_answer(head, body):
    """{"head", "body"}: the bytes as received."""
    out = json.dumps({"head": head.decode("latin-1"), "body": body.decode("latin-1")}).encode()
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " +
            str(len(out)).encode() + b"\r\n\r\n" + out)


def CaptureBackend():
    return l7env.RawBackend(capture_answer)


def policy(port, local_backend, tcp_backend):
    mutation = """[route.request_headers]
remove = ["X-Internal"]
set = [ { name = "X-Env", value = "prod" } ]
add = [ { name = "x-tag", value = "a" }, { name = "X-Tag", value = "b" } ]
"""
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "local"
endpoints = [ {{ address = "{local_backend.address()}" }} ]
[[cluster]]
name = "tcp"
endpoints = [ {{ address = "{tcp_backend.address()}" }} ]

[[route]]
name = "kmut"
cluster = "local"
match = {{ path_prefix = "/k" }}
{mutation}
[[route]]
name = "kmut-tcp"
cluster = "tcp"
match = {{ path_prefix = "/t" }}
{mutation}
"""


def start_side(s, settings):
    # a backend in the cgroup: socket-to-socket ingress; the other one is
    # reached over TCP (the upstream socket's egress)
    with s.env.local():
        s.local_backend = CaptureBackend()
    s.tcp_backend = CaptureBackend()
    s.port = free_port()
    s.env.start(policy(s.port, s.local_backend, s.tcp_backend), daemon_settings=settings)


@pytest.fixture(scope="module")
def pair():
    with l7env.kernel_and_reference("kmut", start_side) as sides:
        yield sides


def warm(side, n=1):
    """With the data plane: n idle pooled connections to each backend, so
    that the kernel's decisions are the mutation's, never a pool_miss."""
    if side.dataplane:
        side.env.daemon.wait_idle(side.local_backend.address(), side.tcp_backend.address(), n=n)


def exchange(side, writes, n_responses, pause=0.05, local=True):
    """Sends each element of `writes` with its own send() from a local
    client (or a remote one); returns what the backend received for each
    response. (Each send() is a message of its own for SK_MSG whatever the
    pause; it spaces the segments of a remote client's writes.)"""
    warm(side)
    c = side.env.client(side.port, local)
    try:
        for i, w in enumerate(writes):
            if i:
                time.sleep(pause)
            c.send(w)
        out = []
        for _ in range(n_responses):
            r = c.read_response()
            assert r.status == 200, (r, r.body[:300])
            d = r.json()
            out.append(d["head"].encode("latin-1") + d["body"].encode("latin-1"))
        return out
    finally:
        c.close()


def kernel_count(side, route):
    return side.env.stats()["routes"][route]["requests_kernel"]


def mutation_handovers(side):
    return side.env.daemon.counters().get("to_slow_path_mutation", 0)


def both(pair, writes, n_responses, route="kmut", kernel_requests=None, handovers=None, local=True):
    """Runs the exchange on both daemons; the backend bytes must be equal.
    kernel_requests: how many the data-plane daemon must serve in the kernel;
    handovers: how many it must hand to the slow path for the mutation."""
    k, u = pair["kernel"], pair["user"]
    k0, u0, h0 = kernel_count(k, route), kernel_count(u, route), mutation_handovers(k)
    got_k = exchange(k, writes, n_responses, local=local)
    got_u = exchange(u, writes, n_responses, local=local)
    assert got_k == got_u
    if kernel_requests is not None:
        assert kernel_count(k, route) - k0 == kernel_requests
    if handovers is not None:
        assert mutation_handovers(k) - h0 == handovers
    assert kernel_count(u, route) == u0
    return got_k


GET_TWICE = (b"GET /k/1?y=1 HTTP/1.1\r\nHost: t\r\nX-Keep:  1 \r\nX-Internal: secret\r\nx-env: client\r\n"
             b"X-Tag: c\r\nx-internal: again\r\n\r\n")


def test_placement(pair):
    assert pair["kernel"].env.stats()["routes"]["kmut"]["placement"] == "kernel"
    assert pair["user"].env.stats()["routes"]["kmut"]["placement"] == "user"


def test_remove_twice_and_set_a_present_header(pair):
    got = both(pair, [GET_TWICE], 1, kernel_requests=1)
    assert got[0] == (b"GET /k/1?y=1 HTTP/1.1\r\nHost: t\r\nX-Keep:  1 \r\nX-Tag: c\r\n"
                      b"x-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n")


def test_set_an_absent_header(pair):
    got = both(pair, [b"GET /k/2 HTTP/1.1\r\nHost: t\r\nAccept: */*\r\n\r\n"], 1, kernel_requests=1)
    assert got[0] == b"GET /k/2 HTTP/1.1\r\nHost: t\r\nAccept: */*\r\nx-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n"


def test_request_with_a_body(pair):
    req = make_request("POST", "/k/3", {"X-Internal": "x", "Content-Type": "text/plain"}, b"0123456789")
    got = both(pair, [req], 1, kernel_requests=1)
    assert got[0].endswith(b"x-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n0123456789")


def test_keepalive_requests_one_after_another(pair):
    k, u = pair["kernel"], pair["user"]
    reqs = [make_request("GET", f"/k/seq/{i}", {"X-Internal": str(i)}) for i in range(3)]
    reqs.append(make_request("PUT", "/k/seq/body", {"x-env": "c"}, b"B" * 3000))
    for side in (k, u):
        side.k0 = kernel_count(side, "kmut")
        warm(side)
        with side.env.local():
            c = Conn(side.port)
        side.got = []
        for r in reqs:
            c.send(r)
            d = c.read_response().json()
            side.got.append(d["head"] + d["body"])
        c.close()
    assert k.got == u.got
    assert kernel_count(k, "kmut") - k.k0 == len(reqs)
    assert all("x-internal" not in g.lower() for g in k.got)


def test_pipelined_requests_in_one_write(pair):
    reqs = [make_request("GET", f"/k/p/{i}", {"X-Internal": "p"}) for i in range(3)]
    reqs.insert(1, make_request("POST", "/k/p/body", {"X-Env": "x"}, b"pipelined-body"))
    # the first is handed over for the bytes after it; the rest follow it
    # (user_pending): none in the kernel
    got = both(pair, [b"".join(reqs)], len(reqs), kernel_requests=0, handovers=1)
    assert [g.split(b" ")[1] for g in got] == [b"/k/p/0", b"/k/p/body", b"/k/p/1", b"/k/p/2"]


def test_body_in_a_second_write(pair):
    body = bytes(range(256)) * 8
    req = make_request("POST", "/k/split-body", {"X-Internal": "s"}, body)
    head_len = req.index(b"\r\n\r\n") + 4
    got = both(pair, [req[:head_len + 10], req[head_len + 10:]], 1, kernel_requests=1)
    assert got[0].endswith(b"x-tag: b\r\n\r\n" + body)


def test_head_split_over_two_writes(pair):
    req = make_request("GET", "/k/split-head", {"X-Internal": "h", "X-Env": "client"})
    got = both(pair, [req[:25], req[25:]], 1, kernel_requests=0)
    assert b"x-internal" not in got[0].lower() and got[0].endswith(b"x-tag: b\r\n\r\n")


def test_backend_over_tcp(pair):
    got = both(pair, [GET_TWICE.replace(b"/k/1", b"/t/1")], 1, route="kmut-tcp", kernel_requests=1)
    assert got[0].endswith(b"X-Tag: c\r\nx-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n")
    req = make_request("POST", "/t/body", {"X-Internal": "x"}, b"tcp-body")
    both(pair, [req], 1, route="kmut-tcp", kernel_requests=1)


def test_many_mutated_requests_stay_in_sync(pair):
    """Many requests of varied shapes on one connection."""
    reqs = []
    for i in range(40):
        hdrs = {"X-Internal": "a" * (i % 7)}
        if i % 3 == 0:
            hdrs["x-INTERNAL"] = "b"
        if i % 2:
            hdrs["X-Env"] = "dev"
        body = (b"%d" % i) * (i * 13) if i % 4 == 0 else None
        reqs.append(make_request("POST" if body else "GET", f"/k/many/{i}", hdrs, body))
    k, u = pair["kernel"], pair["user"]
    for side in (k, u):
        side.k0 = kernel_count(side, "kmut")
        warm(side)
        with side.env.local():
            c = Conn(side.port)
        side.got = []
        for r in reqs:
            c.send(r)
            d = c.read_response().json()
            side.got.append(d["head"] + d["body"])
        c.close()
    assert k.got == u.got
    assert kernel_count(k, "kmut") - k.k0 == len(reqs)


def test_large_head_lines_removed_first_middle_and_last(pair):
    """A head of nearly 8 KiB: removed lines at both ends and in the middle,
    wherever the message's scatterlist elements happen to split it."""
    lines = [b"GET /k/large HTTP/1.1", b"X-Internal: first", b"Host: t"]
    for i in range(56):
        lines.append(b"X-Fill-%02d: " % i + bytes([97 + i % 26]) * 120)
        if i == 28:
            lines.append(b"x-internal: middle")
    lines.append(b"X-INTERNAL: last")
    req = b"\r\n".join(lines) + b"\r\n\r\n"
    assert 7000 < len(req) < 8192
    got = both(pair, [req], 1, kernel_requests=1, handovers=0)
    assert b"nternal" not in got[0].lower()
    assert got[0].endswith(b"X-Fill-55: " + bytes([97 + 55 % 26]) * 120 +
                           b"\r\nx-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n")
    # twice on one connection: the second message starts elsewhere in the
    # socket's page fragment
    got = both(pair, [req, req], 2, kernel_requests=None)
    assert got[0] == got[1]


def test_large_body_in_the_same_write(pair):
    body = os.urandom(48 * 1024)
    req = make_request("POST", "/k/big", {"X-Internal": "big"}, body)
    got = both(pair, [req], 1, kernel_requests=1, handovers=0)
    assert got[0].endswith(b"x-tag: b\r\n\r\n" + body.decode("latin-1").encode("latin-1"))


def test_remote_client_goes_to_the_slow_path(pair):
    """SK_SKB does not rewrite an skb in place: handed over, same bytes."""
    got = both(pair, [GET_TWICE], 1, kernel_requests=0, handovers=1, local=False)
    assert got[0].endswith(b"X-Tag: c\r\nx-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n")


def test_concurrent_clients(pair):
    """Eight clients at once (scratch per CPU, slots claimed concurrently):
    every request arrives as the slow path writes it."""
    def client(c, n):
        out = []
        for i in range(25):
            hdrs = {"X-Internal": f"{n}-{i}", "X-Env": "e" * (i % 5)}
            body = b"b" * (i * 37) if i % 3 == 0 else None
            c.send(make_request("POST" if body else "GET", f"/k/c/{n}/{i}", hdrs, body))
            d = c.read_response().json()
            out.append(d["head"] + d["body"])
        c.close()
        return out

    k, u = pair["kernel"], pair["user"]
    k0, h0 = kernel_count(k, "kmut"), mutation_handovers(k)
    results = {}
    for side in (k, u):
        # connected before the threads start: local() moves the whole
        # process between cgroups; accepting them grows the pool
        with side.env.local():
            conns = [Conn(side.port) for _ in range(8)]
        warm(side, n=len(conns))
        with ThreadPoolExecutor(8) as ex:
            results[side] = list(ex.map(client, conns, range(8)))
    assert results[k] == results[u]
    # an idle pooled connection per client: every request in the kernel,
    # none handed over for the mutation itself
    assert kernel_count(k, "kmut") - k0 == 8 * 25
    assert mutation_handovers(k) - h0 == 0
