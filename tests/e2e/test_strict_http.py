"""Strict HTTP/1.1 through the real daemon (ARCHITECTURE.md section 6).

Every malformed or ambiguous request shape (request smuggling vectors,
malformed lines, Host problems, oversized heads) must get the documented
status, the connection must close, and not one byte of it may reach the
backend — on the kernel path and with `kernel_dataplane = false`, from local
(SK_MSG) and remote (SK_SKB) clients, alone and pipelined behind a valid
request (which is answered normally first). Pipelined requests each get the
policy: a denied request behind an allowed one is denied.
"""
import os
import threading
import time

import pytest

import l7env
from l7env import Conn, free_port


class RecordingBackend(l7env.RawBackend):
    """Records every byte it receives; answers each Content-Length-framed
    request with 200 and the request line it saw."""

    def __init__(self):
        self.lock = threading.Lock()
        self.received = b""
        super().__init__(self._answer, self._record)

    def _record(self, data):
        with self.lock:
            self.received += data

    @staticmethod
    def _answer(head, body):
        line = head.split(b"\r\n", 1)[0] + b"\n"
        return b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(line)).encode() + b"\r\n\r\n" + line

    def take(self):
        with self.lock:
            data, self.received = self.received, b""
        return data


@pytest.fixture(scope="module", params=["with-dataplane", "without-dataplane"])
def env(request):
    reason = l7env.skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        pytest.skip(reason)
    e = l7env.Env("strict" + ("" if request.param == "with-dataplane" else "-nodp"))
    e.backend_rec = RecordingBackend()
    try:
        e.port = free_port()
        settings = "" if request.param == "with-dataplane" else "kernel_dataplane = false"
        e.start(f"""
[[listener]]
name = "web"
address = "127.0.0.1:{e.port}"
[[cluster]]
name = "rec"
endpoints = [ {{ address = "{e.backend_rec.address()}" }} ]
[[route]]
name = "denied"
cluster = "rec"
match = {{ path_prefix = "/denied" }}
[route.rbac]
default = "deny"
[[route]]
name = "all"
cluster = "rec"
match = {{ path_prefix = "/" }}
""", daemon_settings=settings)
        yield e
    finally:
        e.close()
        e.backend_rec.close()


def connect(env, local):
    if local:
        with env.local():
            return Conn(env.port)
    return Conn(env.port)


OK = b"GET /ok HTTP/1.1\r\nHost: t\r\n\r\n"

# name -> (raw request, status)
SHAPES = {
    "cl-and-te": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                  b"0\r\n\r\n", 400),
    "te-and-cl": (b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n"
                  b"0\r\n\r\n", 400),
    "two-cl-equal": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
    "two-cl-differ": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 400),
    "cl-list": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 1, 1\r\n\r\nx", 400),
    "cl-sign": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: +1\r\n\r\nx", 400),
    "cl-hex": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 0x1\r\n\r\nx", 400),
    "cl-huge": (b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 1234567890123456789012\r\n\r\nx", 400),
    "te-identity": (b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: identity\r\n\r\n", 501),
    "te-stacked": (b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501),
    "te-twice": (b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"
                 b"0\r\n\r\n", 400),
    "te-http10": (b"POST /a HTTP/1.0\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    "chunk-overflow": (b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                       b"10000000000000000\r\nx\r\n0\r\n\r\n", 400),
    "chunk-bad-size": (b"POST /a HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n0\r\n\r\n", 400),
    "bare-lf": (b"GET /a HTTP/1.1\nHost: t\n\n", 400),
    "bare-cr": (b"GET /a HTTP/1.1\r\nHost: t\rX: y\r\n\r\n", 400),
    "obs-fold": (b"GET /a HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n  folded\r\n\r\n", 400),
    "space-before-colon": (b"GET /a HTTP/1.1\r\nHost: t\r\nContent-Length : 0\r\n\r\n", 400),
    "ctl-in-value": (b"GET /a HTTP/1.1\r\nHost: t\r\nX-A: a\x01b\r\n\r\n", 400),
    "no-host": (b"GET /a HTTP/1.1\r\nX-A: 1\r\n\r\n", 400),
    "two-hosts": (b"GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
    "bad-host": (b"GET /a HTTP/1.1\r\nHost: a b\r\n\r\n", 400),
    # absolute-form is accepted (test_absolute_form.py); these are not
    "absolute-form-empty-authority": (b"GET http:///a HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    "absolute-form-userinfo": (b"GET http://evil@t/a HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    "absolute-form-https": (b"GET https://t/a HTTP/1.1\r\nHost: t\r\n\r\n", 421),
    "absolute-form-no-host": (b"GET http://t/a HTTP/1.1\r\n\r\n", 400),
    "bad-version": (b"GET /a HTTP/1.2\r\nHost: t\r\n\r\n", 505),
    "garbage-version": (b"GET /a HTXP/1.1\r\nHost: t\r\n\r\n", 400),
    "empty-line-first": (b"\r\nGET /a HTTP/1.1\r\nHost: t\r\n\r\n", 400),
    "too-many-fields": (b"GET /a HTTP/1.1\r\nHost: t\r\n" + b"".join(b"X-%d: v\r\n" % i for i in range(70)) +
                        b"\r\n", 431),
    "huge-head": (b"GET /a HTTP/1.1\r\nHost: t\r\nX-Big: " + b"a" * 70000 + b"\r\n\r\n", 431),
    "encoded-slash": (b"GET /a%2Fb HTTP/1.1\r\nHost: t\r\n\r\n", 400),
}


def expect_rejected(env, c, status, name):
    r = c.read_response()
    assert r.status == status, (name, r.status, r.body)
    assert r.header("connection", "").lower() == "close", (name, r.headers)
    assert c.closed_by_peer(), name


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_malformed_shapes_are_rejected_and_never_forwarded(env, name, local):
    data, status = SHAPES[name]
    env.backend_rec.take()
    c = connect(env, local)
    try:
        c.send(data)
        expect_rejected(env, c, status, name)
    finally:
        c.close()
    time.sleep(0.05)
    assert env.backend_rec.take() == b"", f"{name}: bytes reached the backend"


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
@pytest.mark.parametrize("name", ["cl-and-te", "two-cl-differ", "bare-lf", "obs-fold", "no-host", "te-stacked"])
def test_malformed_behind_a_valid_request(env, name, local):
    """A smuggling shape pipelined behind a valid request: the valid one is
    answered, the malformed one rejected, and only the valid one is
    forwarded."""
    data, status = SHAPES[name]
    env.backend_rec.take()
    c = connect(env, local)
    try:
        c.send(OK + data)
        r = c.read_response()
        assert r.status == 200 and r.body == b"GET /ok HTTP/1.1\n", (name, r.status, r.body)
        expect_rejected(env, c, status, name)
    finally:
        c.close()
    time.sleep(0.05)
    assert env.backend_rec.take() == OK, name


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_every_pipelined_request_gets_the_policy(env, local):
    env.backend_rec.take()
    c = connect(env, local)
    try:
        c.send(OK + b"GET /denied/x HTTP/1.1\r\nHost: t\r\n\r\n" + OK +
               b"POST /denied HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc" + OK)
        statuses = [c.read_response().status for _ in range(5)]
        assert statuses == [200, 403, 200, 403, 200], statuses
    finally:
        c.close()
    time.sleep(0.05)
    got = env.backend_rec.take()
    assert got == OK * 3, got


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_a_body_that_looks_like_a_request_is_a_body(env, local):
    """Content-Length decides where the request ends: a request hidden in a
    body is forwarded as body bytes of the first, never as a request."""
    env.backend_rec.take()
    hidden = b"GET /denied/x HTTP/1.1\r\nHost: t\r\n\r\n"
    c = connect(env, local)
    try:
        c.send(b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(hidden) + hidden + OK)
        assert c.read_response().status == 200
        r = c.read_response()
        assert r.status == 200 and r.body == b"GET /ok HTTP/1.1\n"
    finally:
        c.close()
    time.sleep(0.05)
    # (the two requests may reach the backend over two upstream connections,
    # in either order; the client's responses are in order)
    got = env.backend_rec.take()
    assert got.count(b"GET /denied/x") == 1 and got.count(OK) == 1, got
    assert len(got) == len(b"POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: %d\r\n\r\n" % len(hidden)) + \
        len(hidden) + len(OK), got
