"""Absolute-form request targets (RFC 9112 section 3.2.2; issue 13, item 6).

A server must accept `GET http://host/path HTTP/1.1`. l7fast routes such a
request by the target's authority — host conditions match it, a Host field
that says otherwise is ignored — and its path conditions by the path; it
forwards the request in origin-form with Host set to the authority, never
two Host fields (ARCHITECTURE.md sections 4 and 6). The kernel hands every
absolute-form request to the slow path (to_slow_path_absolute_form). Local
and remote clients, with and without the data plane.
"""
import threading
import time

import pytest

import l7env
from l7env import free_port, wait_until


class NamedBackend(l7env.RawBackend):
    """Keeps the heads it receives, byte for byte, and answers each request
    with its name."""

    def __init__(self, name):
        self.name = name.encode()
        self.heads_lock = threading.Lock()
        self.heads = []
        super().__init__(self._answer)

    def _answer(self, head, body):
        with self.heads_lock:
            self.heads.append(head)
        text = self.name + b"\n"
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(text) + text

    def take(self):
        with self.heads_lock:
            heads, self.heads = self.heads, []
        return heads


# route and cluster names, with each route's match
ROUTES = [("api", 'host = "api.example", path_prefix = "/v1/"'), ("www", 'host = "www.example"'),
          ("rest", 'path_prefix = "/"')]


@pytest.fixture(scope="module", params=["with-dataplane", "without-dataplane"])
def env(request):
    l7env.skip_unless_runnable()
    e = l7env.Env("absform" + ("" if request.param == "with-dataplane" else "-nodp"))
    e.named = {name: NamedBackend(name) for name, _ in ROUTES}
    e.dataplane = request.param == "with-dataplane"
    e.port = free_port()
    policy = f'[[listener]]\nname = "web"\naddress = "127.0.0.1:{e.port}"\n'
    for name, match in ROUTES:
        policy += (f'[[cluster]]\nname = "{name}"\nendpoints = [ {{ address = "{e.named[name].address()}" }} ]\n'
                   f'[[route]]\nname = "{name}"\ncluster = "{name}"\nmatch = {{ {match} }}\n')
    try:
        e.start(policy, daemon_settings='access_log_sample = 1\naccess_log_format = "json"\n' +
                ("" if e.dataplane else "kernel_dataplane = false\n"))
        yield e
        assert not e.kernel_warnings()
    finally:
        e.close()
        for b in e.named.values():
            b.close()


def exchange(env, raw, local):
    """One request on a new connection; with the data plane, once every
    upstream has an idle pooled connection (and a remote client is in the
    data plane): an origin-form request would then be the kernel's."""
    if env.dataplane:
        env.daemon.wait_idle(*(b.address() for b in env.named.values()))
    c = env.client(env.port, local)
    try:
        c.send(raw)
        return c.read_response(), c
    except BaseException:
        c.close()
        raise


def request(env, raw, local):
    r, c = exchange(env, raw, local)
    c.close()
    return r


def take_all(env):
    return {n: b.take() for n, b in env.named.items()}


# (request as sent, backend, head that backend must receive)
ROUTED = [
    # the authority decides the host condition; the Host field is ignored
    (b"GET http://API.example:8080/v1/items?q=1 HTTP/1.1\r\nHost: www.example\r\nX-A: 1\r\n\r\n",
     "api", b"GET /v1/items?q=1 HTTP/1.1\r\nHost: API.example:8080\r\nX-A: 1\r\n\r\n"),
    (b"GET http://www.example/v1/items HTTP/1.1\r\nX-A: 1\r\nHost: api.example\r\n\r\n",
     "www", b"GET /v1/items HTTP/1.1\r\nX-A: 1\r\nHost: www.example\r\n\r\n"),
    # the path condition sees the path part: api.example but not /v1/
    (b"GET hTTp://api.example/v2/items HTTP/1.1\r\nHost: api.example\r\n\r\n",
     "rest", b"GET /v2/items HTTP/1.1\r\nHost: api.example\r\n\r\n"),
    # no path: "/"
    (b"GET http://www.example HTTP/1.1\r\nHost: x\r\n\r\n",
     "www", b"GET / HTTP/1.1\r\nHost: www.example\r\n\r\n"),
    (b"GET http://www.example?a=b HTTP/1.1\r\nHost: x\r\n\r\n",
     "www", b"GET /?a=b HTTP/1.1\r\nHost: www.example\r\n\r\n"),
    # OPTIONS with neither path nor query: "*" (RFC 9112 3.2.4)
    (b"OPTIONS http://www.example HTTP/1.1\r\nHost: x\r\n\r\n",
     "www", b"OPTIONS * HTTP/1.1\r\nHost: www.example\r\n\r\n"),
    # a path not in normal form is routed and forwarded normalised
    (b"GET http://api.example/x/../v1/%61 HTTP/1.1\r\nHost: www.example\r\n\r\n",
     "api", b"GET /v1/a HTTP/1.1\r\nHost: api.example\r\n\r\n"),
    # a body follows the rewritten head
    (b"POST http://api.example/v1/p HTTP/1.1\r\nHost: www.example\r\nContent-Length: 3\r\n\r\nabc",
     "api", b"POST /v1/p HTTP/1.1\r\nHost: api.example\r\nContent-Length: 3\r\n\r\n"),
]


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_routed_by_the_authority_and_forwarded_in_origin_form(env, local):
    take_all(env)
    before = env.stats()["counters"] if env.dataplane else None
    for raw, backend, head in ROUTED:
        r = request(env, raw, local)
        assert (r.status, r.body) == (200, backend.encode() + b"\n"), (raw, r.status, r.body)
        got = take_all(env)
        # exactly one request reached exactly that backend, in origin-form,
        # with one Host field: the authority
        assert got == {n: ([head] if n == backend else []) for n in env.named}, (raw, got)
    if env.dataplane:
        after = env.stats()["counters"]
        assert after["to_slow_path_absolute_form"] - before["to_slow_path_absolute_form"] == len(ROUTED)
        assert after["requests_kernel"] - before["requests_kernel"] == 0


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_the_same_request_in_origin_form_is_the_kernels(env, local):
    """The hand-over is for the absolute-form itself: the origin-form request
    it becomes is taken by the kernel, on the same connection after it."""
    take_all(env)
    before = env.stats()["counters"] if env.dataplane else None
    if env.dataplane:
        env.daemon.wait_idle(*(b.address() for b in env.named.values()))
    c = env.client(env.port, local)
    try:
        c.send(b"GET http://api.example/v1/k HTTP/1.1\r\nHost: api.example\r\n\r\n")
        r1 = c.read_response()
        c.send(b"GET /v1/k HTTP/1.1\r\nHost: api.example\r\n\r\n")
        r2 = c.read_response()
    finally:
        c.close()
    assert (r1.status, r1.body, r2.status, r2.body) == (200, b"api\n", 200, b"api\n")
    assert take_all(env)["api"] == [b"GET /v1/k HTTP/1.1\r\nHost: api.example\r\n\r\n"] * 2
    if env.dataplane:
        after = env.stats()["counters"]
        assert after["to_slow_path_absolute_form"] - before["to_slow_path_absolute_form"] == 1
        assert after["requests_kernel"] - before["requests_kernel"] == 1


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_http10_without_host_gets_the_authority_as_host(env, local):
    take_all(env)
    r = request(env, b"GET http://www.example/x HTTP/1.0\r\nX-A: 1\r\n\r\n", local)
    assert (r.status, r.body) == (200, b"www\n")
    assert take_all(env)["www"] == [b"GET /x HTTP/1.0\r\nHost: www.example\r\nX-A: 1\r\n\r\n"]


# (request, status, refusal reason)
REFUSED = [
    (b"GET http:///x HTTP/1.1\r\nHost: www.example\r\n\r\n", 400, "bad_request:bad_target"),
    (b"GET http://:80/x HTTP/1.1\r\nHost: www.example\r\n\r\n", 400, "bad_request:bad_target"),
    (b"GET http://u:p@www.example/x HTTP/1.1\r\nHost: www.example\r\n\r\n", 400, "bad_request:bad_target"),
    (b"GET http://www.example:8x/x HTTP/1.1\r\nHost: www.example\r\n\r\n", 400, "bad_request:bad_target"),
    (b"GET ftp://www.example/x HTTP/1.1\r\nHost: www.example\r\n\r\n", 400, "bad_request:bad_target"),
    (b"GET https://www.example/x HTTP/1.1\r\nHost: www.example\r\n\r\n", 421, "bad_request:https_target"),
    # Host is still required in HTTP/1.1, once and valid (RFC 9112 3.2)
    (b"GET http://www.example/x HTTP/1.1\r\n\r\n", 400, "bad_request:no_host"),
    (b"GET http://www.example/x HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "bad_request:duplicate_host"),
]


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
@pytest.mark.parametrize("case", range(len(REFUSED)), ids=[r[2] + f"-{i}" for i, r in enumerate(REFUSED)])
def test_malformed_absolute_forms_are_refused_and_never_forwarded(env, case, local):
    raw, status, reason = REFUSED[case]
    take_all(env)
    refused0 = env.stats().get("refused", {}).get(reason, 0)
    r, c = exchange(env, raw, local)
    try:
        assert r.status == status, (raw, r.status, r.body)
        assert r.header("connection", "").lower() == "close"
        assert c.closed_by_peer(), raw
    finally:
        c.close()
    assert env.stats().get("refused", {}).get(reason, 0) - refused0 == 1
    time.sleep(0.05)
    assert take_all(env) == {n: [] for n in env.named}, raw


def test_the_access_log_shows_the_target_as_received_and_the_authority(env):
    """The JSON access line of an absolute-form exchange: the target as the
    client sent it, the authority it was routed by (not the Host field)."""
    mark = len(env.daemon.log().splitlines())
    r, c = exchange(env, b"GET http://Www.Example:81/a?b=1 HTTP/1.1\r\nHost: api.example\r\n\r\n", True)
    port = c.sock.getsockname()[1]
    c.close()
    assert (r.status, r.body) == (200, b"www\n")
    take_all(env)

    def lines():
        return env.daemon.access_json(mark, f"127.0.0.1:{port}")
    assert wait_until(lambda: len(lines()) == 1), env.daemon.log().splitlines()[mark:]
    line = lines()[0]
    assert {k: line[k] for k in ("method", "authority", "target", "route", "cluster", "status", "path")} == {
        "method": "GET", "authority": "Www.Example:81", "target": "http://Www.Example:81/a?b=1", "route": "www",
        "cluster": "www", "status": 200, "path": "user"}
