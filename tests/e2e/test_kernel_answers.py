"""Direct responses, RBAC denials and a JWT route's 401s answered by the
kernel (SK_MSG for local clients; for remote ones SK_SKB sends the request
to its own socket's egress, whose SK_MSG program makes it the answer): the
same byte sequences are sent to a daemon with the data plane
and to one with kernel_dataplane = false; both must send back exactly the
same bytes and close (or keep) the connection alike, while the data-plane
daemon answers in the kernel every request it can: one whole request per
message that does not ask to close. The rest goes to the slow path, counted
by reason (answer_close, pipelined, too_big, route_user, rbac_deny,
jwt_none, jwt_bad), and still gets the same bytes. Both count a
denial under the rule that decided it, and a 401 as a missing or an invalid
token; both write each answer's access-log line with the same reason."""
import re
import socket
import time

import pytest

import l7env
from l7env import Conn, b64u, make_request

LONG_BODY = "x" * 1100  # over L7_MAX_RESP_BYTES: the slow path sends it


def policy(port, backend):
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "app"
endpoints = [ {{ address = "{backend.address()}" }} ]

[[route]]
name = "hello"
match = {{ path_prefix = "/hello" }}
direct_response = {{ status = 200, headers = [ {{ name = "X-Direct", value = "yes" }}, {{ name = "Content-Type", value = "application/json" }} ], body = '{{"ok":true}}' }}
[[route]]
name = "gone"
match = {{ path_prefix = "/gone" }}
direct_response = {{ status = 410 }}
[[route]]
name = "empty"
match = {{ path_exact = "/empty" }}
direct_response = {{ status = 204 }}
[[route]]
name = "moved"
match = {{ path_prefix = "/old", method = ["GET", "HEAD"] }}
direct_response = {{ status = 301, headers = [ {{ name = "Location", value = "/new" }} ], body = "moved\\n" }}
[[route]]
name = "long"
match = {{ path_prefix = "/long" }}
direct_response = {{ status = 200, body = "{LONG_BODY}" }}
[[route]]
name = "guarded"
cluster = "app"
match = {{ path_prefix = "/guarded" }}
[route.rbac]
mode = "first_match"
default = "deny"
deny_status = 418
deny_body = "no tea for you\\n"
rules = [
  {{ action = "allow", method = ["GET"] }},
  {{ name = "admins-only", action = "deny", path_prefix = "/guarded/admin" }},
]
[[route]]
name = "fenced"
cluster = "app"
match = {{ path_prefix = "/fenced" }}
[route.rbac]
mode = "deny_overrides"
rules = [
  {{ action = "allow", method = ["GET"] }},
  {{ name = "blocked", action = "deny", headers = [ {{ name = "x-block", present = true }} ] }},
]
[[jwt_provider]]
name = "idp"
algorithms = ["HS256"]
keys = [ {{ alg = "HS256", secret_base64url = "{b64u(b"kernel-answers-e2e-secret-0123456789")}" }} ]
max_token_bytes = 64
[[route]]
name = "locked"
cluster = "app"
match = {{ path_prefix = "/locked" }}
jwt = "idp"
[[route]]
name = "throttled"
cluster = "app"
match = {{ path_prefix = "/throttled" }}
rate_limit = {{ rate = 1, burst = 1 }}
[[route]]
name = "throttled-by-user"
cluster = "app"
match = {{ path_prefix = "/per-user" }}
rate_limit = {{ rate = 1, burst = 1, key = {{ header = "X-User" }} }}
[[route]]
name = "app"
cluster = "app"
match = {{ path_prefix = "/" }}
"""


@pytest.fixture(scope="module")
def pair():
    with l7env.answering_pair("kans", policy) as sides:
        yield sides


def snapshot(side):
    return side.env.stats(), side.env.daemon.counters() if side.dataplane else {}


def moved(before, after, route):
    """(requests in the kernel, direct responses from either path) of
    `route` since `before`."""
    b, a = before[0]["routes"][route], after[0]["routes"][route]
    return a["requests_kernel"] - b["requests_kernel"], a["direct_responses"] - b["direct_responses"]


def handed(before, after, reason):
    return after[1].get("to_slow_path_" + reason, 0) - before[1].get("to_slow_path_" + reason, 0)


def raw_exchange(side, writes, expect_bytes, local=True):
    """Sends each element of `writes` with its own send(); reads until
    `expect_bytes` bytes came back, then whether the daemon closed: (bytes,
    closed)."""
    c = side.env.client(side.port, local)
    try:
        for i, w in enumerate(writes):
            if i:
                time.sleep(0.05)
            c.send(w)
        got = b""
        c.sock.settimeout(l7env.LIVENESS)
        while len(got) < expect_bytes:
            chunk = c.sock.recv(65536)
            if not chunk:
                break
            got += chunk
        c.sock.settimeout(0.3)
        try:
            tail = c.sock.recv(65536)
            closed = tail == b""
            got += tail
        except socket.timeout:
            closed = False
        return got, closed
    finally:
        c.close()


def both(pair, writes, expect_bytes, local=True):
    """The same writes to both daemons: the bytes back and the closing must
    be equal. Returns (bytes, closed, before, after) of the kernel side."""
    k, u = pair["kernel"], pair["user"]
    before = snapshot(k)
    got_k = raw_exchange(k, writes, expect_bytes, local)
    after = snapshot(k)
    got_u = raw_exchange(u, writes, expect_bytes, local)
    assert got_k == got_u
    return got_k[0], got_k[1], before, after


HELLO = (b'HTTP/1.1 200 OK\r\nx-direct: yes\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n'
         b'{"ok":true}')


def test_placement(pair):
    st = pair["kernel"].env.stats()["routes"]
    assert [st[n]["placement"] for n in ("hello", "gone", "empty", "moved", "long")] == \
        ["kernel"] * 4 + ["user"]


def test_a_direct_response_is_sent_by_the_kernel(pair):
    got, closed, before, after = both(pair, [make_request("GET", "/hello/x")], len(HELLO))
    assert got == HELLO and not closed
    assert moved(before, after, "hello") == (1, 1)
    codes = after[0]["routes"]["hello"]["kernel_codes"]
    assert dict(codes).get("200", 0) - dict(before[0]["routes"]["hello"]["kernel_codes"]).get("200", 0) == 1


def test_keepalive_answers_one_after_another_and_then_forwarding(pair):
    k = pair["kernel"]
    for side in (k, pair["user"]):
        with side.env.local():
            c = Conn(side.port)
        before = snapshot(side)
        got = []
        for path, head in [("/hello/1", False), ("/gone", False), ("/empty", False), ("/old/a", True),
                           ("/old/b", False), ("/app/x", False), ("/hello/2", False)]:
            c.request("HEAD" if head else "GET", path)
            r = c.read_response(head_request=head)
            got.append((r.raw_head, r.body))
        c.close()
        side.got = got
        after = snapshot(side)
        side.delta = moved(before, after, "hello"), moved(before, after, "moved")
    # the forwarded response carries the backend's Date: its status and body
    fwd_k, fwd_u = k.got.pop(5), pair["user"].got.pop(5)
    assert fwd_k[0].startswith(b"HTTP/1.1 200") and fwd_u[0].startswith(b"HTTP/1.1 200") and fwd_k[1] == fwd_u[1]
    assert k.got == pair["user"].got
    assert k.got[1][0] == b"HTTP/1.1 410 Gone\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n\r\n"
    assert k.got[2] == (b"HTTP/1.1 204 No Content\r\n\r\n", b"")
    assert k.got[3] == (b"HTTP/1.1 301 Moved Permanently\r\nlocation: /new\r\ncontent-type: text/plain\r\n"
                        b"content-length: 6\r\n\r\n", b"")
    assert k.got[4][1] == b"moved\n"
    assert k.delta == ((2, 2), (2, 2))
    assert pair["user"].delta == ((0, 2), (0, 2))


def test_a_request_with_a_body_is_answered_and_the_connection_kept(pair):
    req = make_request("POST", "/hello/b", {"Content-Type": "text/plain"}, b"0123456789")
    got, closed, before, after = both(pair, [req], len(HELLO))
    assert got == HELLO and not closed
    assert moved(before, after, "hello") == (1, 1)


def test_a_body_in_a_later_write_goes_to_the_slow_path(pair):
    req = make_request("POST", "/hello/b", {"Content-Type": "text/plain"}, b"0123456789")
    head, body = req[:-10], req[-10:]
    got, closed, before, after = both(pair, [head, body], len(HELLO))
    assert got == HELLO and not closed
    assert moved(before, after, "hello") == (0, 1)
    assert handed(before, after, "too_big") == 1


def test_connection_close_is_answered_by_the_slow_path_and_closes(pair):
    req = make_request("GET", "/hello/c", {"Connection": "close"})
    close_form = HELLO.replace(b"content-length: 11\r\n", b"content-length: 11\r\nconnection: close\r\n")
    got, closed, before, after = both(pair, [req], len(close_form))
    assert got == close_form and closed
    assert moved(before, after, "hello") == (0, 1)
    assert handed(before, after, "answer_close") == 1


def test_pipelined_requests_are_answered_in_order_by_the_slow_path(pair):
    two = make_request("GET", "/hello/1") + make_request("GET", "/gone")
    gone = b"HTTP/1.1 410 Gone\r\ncontent-type: text/plain\r\ncontent-length: 0\r\n\r\n"
    got, closed, before, after = both(pair, [two], len(HELLO) + len(gone))
    assert got == HELLO + gone and not closed
    assert handed(before, after, "pipelined") == 1
    assert moved(before, after, "hello") == (0, 1)


def test_a_response_over_the_kernel_limit_is_sent_by_the_slow_path(pair):
    got, closed, before, after = both(pair, [make_request("GET", "/long")], 1100 + 60)
    assert got.endswith(LONG_BODY.encode()) and not closed
    assert moved(before, after, "long") == (0, 1)
    assert handed(before, after, "route_user") == 1


def test_remote_clients_are_answered_by_the_kernel(pair):
    """SK_SKB cannot change an skb's length (ARCHITECTURE.md section 7), so
    the request goes unchanged to the egress of the client's own socket,
    where l7_remote_out_msg makes it the answer: the slow path's bytes, the
    head alone for HEAD, and the connection goes on."""
    k, u = pair["kernel"], pair["user"]
    for side in (k, u):
        side.before = snapshot(side)
        c = side.env.client(side.port, local=False)
        side.got = []
        for method, path in [("GET", "/old/x"), ("HEAD", "/old/y"), ("GET", "/empty")]:
            c.request(method, path)
            r = c.read_response(head_request=method == "HEAD")
            side.got.append((r.raw_head, r.body))
        c.close()
        side.after = snapshot(side)
    assert k.got == u.got
    assert k.got[1] == (k.got[0][0], b"")
    assert moved(k.before, k.after, "moved") == (2, 2)
    assert moved(k.before, k.after, "empty") == (1, 1)
    assert k.after[1].get("requests_user", 0) == k.before[1].get("requests_user", 0)


def test_a_remote_answer_and_the_request_behind_it_keep_their_order(pair):
    """A remote client writes a request the kernel answers and, in a second
    write before reading, one the upstream answers: the second arrives
    while the answer is staged on the socket's send path (the slow path
    takes it, pipelined, and waits for the answer to be queued) or after
    (the kernel forwards it). Either way the client reads the answer first,
    the same bytes as from the slow path. The first of each pair is the
    kernel's: the client sends a pair only after it has read the last."""
    k, u = pair["kernel"], pair["user"]
    for side in (k, u):
        side.before = snapshot(side)
        c = side.env.client(side.port, local=False)
        side.got = []
        try:
            for i in range(20):
                c.send(make_request("GET", f"/gone/{i}"))
                c.send(make_request("GET", f"/app/{i}"))
                r1 = c.read_response()
                r2 = c.read_response()
                side.got.append((r1.raw_head + r1.body, r2.status, r2.body))
        finally:
            c.close()
        side.after = snapshot(side)
    assert k.got == u.got
    assert all(g[0].startswith(b"HTTP/1.1 410 ") and g[1] == 200 for g in k.got), k.got[0]
    assert moved(k.before, k.after, "gone") == (20, 20)


def test_a_remote_request_with_connection_close(pair):
    req = make_request("GET", "/hello/c", {"Connection": "close"})
    close_form = HELLO.replace(b"content-length: 11\r\n", b"content-length: 11\r\nconnection: close\r\n")
    got, closed, before, after = both(pair, [req], len(close_form), local=False)
    assert got == close_form and closed
    assert handed(before, after, "answer_close") == 1


TEA = b"HTTP/1.1 418 \r\ncontent-type: text/plain\r\ncontent-length: 15\r\n\r\nno tea for you\n"
FORBIDDEN = b"HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: 10\r\n\r\nforbidden\n"
# (method, path, headers, body, the denial or None when allowed, deciding rule)
RBAC_CASES = [
    ("DELETE", "/guarded/x", None, None, TEA, "default"),
    ("POST", "/guarded/admin/1", None, b"abc", TEA, "admins-only"),
    ("GET", "/guarded/admin/2", None, None, None, None),   # the allow rule comes first
    ("HEAD", "/guarded/x", None, None, TEA[:-15], "default"),  # HEAD is not GET: the head alone
    ("GET", "/fenced/x", {"X-Block": "1"}, None, FORBIDDEN, "blocked"),
    ("GET", "/fenced/y", None, None, None, None),
    ("PUT", "/fenced/z", None, b"", None, None),           # no rule holds: default allow
]


def rbac_figures(side):
    st = side.env.stats()["routes"]
    return {r: (st[r]["requests_kernel"], st[r]["requests_user"], st[r]["rejected"]["rbac_denied"],
                dict(st[r]["rbac_denied_by_rule"])) for r in ("guarded", "fenced")}


def rbac_moved(before, after):
    out = {}
    for r in before:
        b, a = before[r], after[r]
        out[r] = (a[0] - b[0], a[1] - b[1], a[2] - b[2],
                  {k: v - b[3].get(k, 0) for k, v in a[3].items() if v != b[3].get(k, 0)})
    return out


def rbac_exchange(side, local):
    """RBAC_CASES on one keep-alive connection, each sent once the previous
    answer arrived: what came back (denials whole, allowed ones by status
    and the path the backend saw) and the figures that moved."""
    before_c = side.env.daemon.counters() if side.dataplane else {}
    before = rbac_figures(side)
    c = side.env.client(side.port, local)
    got = []
    try:
        for method, path, headers, body, _, _ in RBAC_CASES:
            c.request(method, path, headers=headers, body=body)
            r = c.read_response(head_request=method == "HEAD")
            got.append(r.raw_head + r.body if r.status != 200 else (r.status, r.json()["path"]))
    finally:
        c.close()
    after_c = side.env.daemon.counters() if side.dataplane else {}
    handed = {k: v - before_c.get(k, 0) for k, v in after_c.items()
              if k.startswith("to_slow_path_") and v != before_c.get(k, 0)}
    return got, rbac_moved(before, rbac_figures(side)), handed


class RbacRun:
    """RBAC_CASES through both daemons from a local or a remote client; what
    each saw, and what was expected: per route the cases, the denials, the
    denials by rule."""

    def __init__(self, pair, local):
        self.want = [d if d is not None else (200, p) for _, p, _, _, d, _ in RBAC_CASES]
        self.by_rule = {"guarded": {}, "fenced": {}}
        self.cases = {r: 0 for r in self.by_rule}
        for _, path, _, _, denial, rule in RBAC_CASES:
            route = path.split("/")[1]
            self.cases[route] += 1
            if denial is not None:
                self.by_rule[route][rule] = self.by_rule[route].get(rule, 0) + 1
        self.denied = {r: sum(self.by_rule[r].values()) for r in self.by_rule}
        k, u = pair["kernel"], pair["user"]
        self.got_k, self.moved_k, self.handed_k = rbac_exchange(k, local)
        self.got_u, self.moved_u, _ = rbac_exchange(u, local)
        assert self.got_k == self.want and self.got_u == self.want
        # the reference: every request the slow path's, the same counts
        assert self.moved_u == {r: (0, self.cases[r], self.denied[r], self.by_rule[r]) for r in self.by_rule}


def test_rbac_denials_are_sent_by_the_kernel(pair):
    """A local client's denials are the kernel's to send: the bytes of the
    slow path's answer (the route's deny_status and deny_body, the head
    alone for HEAD), counted as kernel requests of the route and under the
    rule that decided, as the slow path counts them; the connection goes on
    and its allowed requests are forwarded in the kernel. A reload keeps
    the counts (the kernel's by-rule counters are folded by name)."""
    x = RbacRun(pair, True)
    assert x.moved_k == {r: (x.cases[r], 0, x.denied[r], x.by_rule[r]) for r in x.by_rule}
    assert x.handed_k == {}
    k = pair["kernel"]
    before = rbac_figures(k)
    k.env.daemon.reload()
    assert rbac_figures(k) == before


def test_remote_clients_get_the_same_denials_from_the_kernel(pair):
    """A remote client's denials are the kernel's to send too, with the same
    bytes and counts."""
    x = RbacRun(pair, False)
    assert x.moved_k == {r: (x.cases[r], 0, x.denied[r], x.by_rule[r]) for r in x.by_rule}
    assert x.handed_k == {}


def test_a_denial_asking_to_close_is_sent_by_the_slow_path(pair):
    req = make_request("DELETE", "/guarded/c", {"Connection": "close"})
    close_form = TEA.replace(b"content-length: 15\r\n", b"content-length: 15\r\nconnection: close\r\n")
    got, closed, before, after = both(pair, [req], len(close_form))
    assert got == close_form and closed
    assert handed(before, after, "rbac_deny") == 1


# (Authorization or None, whether the 401 says invalid_token): no token,
# another scheme (no token either), tokens over the provider's 64 bytes
JWT_CASES = [
    (None, False),
    ("Basic dXNlcjpwYXNz", False),
    ("Bearer " + "a" * 65, True),
    ("bearer " + "b.c" * 40, True),
]


def jwt_figures(side):
    r = side.env.stats()["routes"]["locked"]
    return (r["requests_kernel"], r["requests_user"], r["rejected"]["jwt_missing"], r["rejected"]["jwt_invalid"])


def jwt_exchange(side, local):
    """JWT_CASES on one keep-alive connection: the answers, whole, and the
    figures of route locked that moved; the hand-overs by reason."""
    before_c = side.env.daemon.counters() if side.dataplane else {}
    before = jwt_figures(side)
    c = side.env.client(side.port, local)
    got = []
    try:
        for auth, _ in JWT_CASES:
            c.request("GET", "/locked/x", headers={"Authorization": auth} if auth else None)
            r = c.read_response()
            got.append(r.raw_head + r.body)
    finally:
        c.close()
    after = jwt_figures(side)
    after_c = side.env.daemon.counters() if side.dataplane else {}
    handed = {k: v - before_c.get(k, 0) for k, v in after_c.items()
              if k.startswith("to_slow_path_") and v != before_c.get(k, 0)}
    return got, tuple(a - b for a, b in zip(after, before)), handed


def jwt_run(pair, local):
    k, u = pair["kernel"], pair["user"]
    got_k, moved_k, handed_k = jwt_exchange(k, local)
    got_u, moved_u, _ = jwt_exchange(u, local)
    assert got_k == got_u
    for (_, invalid), answer in zip(JWT_CASES, got_k):
        assert answer.startswith(b"HTTP/1.1 401 Unauthorized\r\n"), answer
        assert (b'error="invalid_token"' in answer) == invalid, answer
        assert answer.endswith(b"\r\n\r\nunauthorized\n"), answer
    n, invalid = len(JWT_CASES), sum(1 for _, i in JWT_CASES if i)
    assert moved_u == (0, n, n - invalid, invalid)
    return moved_k, handed_k, (n, invalid)


def test_jwt_refusals_are_sent_by_the_kernel(pair):
    """A local client's 401s for no token, or one the provider refuses for
    its size: the kernel sends the slow path's bytes, counted as kernel
    requests of the route and as missing or invalid tokens."""
    moved_k, handed_k, (n, invalid) = jwt_run(pair, True)
    assert moved_k == (n, 0, n - invalid, invalid)
    assert handed_k == {}


def test_remote_clients_get_the_same_401s_from_the_kernel(pair):
    moved_k, handed_k, (n, invalid) = jwt_run(pair, False)
    assert moved_k == (n, 0, n - invalid, invalid)
    assert handed_k == {}


def test_a_401_asking_to_close_is_sent_by_the_slow_path(pair):
    for auth, reason in ((None, "jwt_none"), ("Bearer " + "a" * 65, "jwt_bad")):
        headers = {"Connection": "close"}
        if auth:
            headers["Authorization"] = auth
        req = make_request("GET", "/locked/c", headers)
        got, closed, before, after = both(pair, [req], 100)
        assert got.startswith(b"HTTP/1.1 401 Unauthorized\r\n") and b"connection: close\r\n" in got, got
        assert closed
        assert handed(before, after, reason) == 1


def test_kernel_answers_are_in_the_access_log_with_the_slow_paths_reasons(pair):
    """With access_log_sample = 1 every answer the kernel sends has its
    line (path=kernel, from the answer's ring event) with the route, the
    status, the bytes and the reason the slow path's line gives for the
    same request: direct_response, rbac_denied:<rule>, jwt_missing,
    jwt_too_large."""
    cases = [("GET", "/hello/log", None), ("POST", "/guarded/admin/log", None),
             ("DELETE", "/guarded/log", None), ("GET", "/fenced/log", {"X-Block": "1"}),
             ("GET", "/locked/log", None), ("GET", "/locked/log", {"Authorization": "Bearer " + "z" * 65})]
    want = ["route=hello status=200 reason=direct_response", "route=guarded status=418 reason=rbac_denied:admins-only",
            "route=guarded status=418 reason=rbac_denied:default", "route=fenced status=403 reason=rbac_denied:blocked",
            "route=locked status=401 reason=jwt_missing", "route=locked status=401 reason=jwt_too_large"]
    for side in (pair["kernel"], pair["user"]):
        mark = len(side.env.daemon.log().splitlines())
        c = side.env.client(side.port)
        port = c.sock.getsockname()[1]
        for method, path, headers in cases:
            c.request(method, path, headers=headers)
            r = c.read_response()
            assert r.status != 200 or path.startswith("/hello"), r
        c.close()
        mine = f"access client=127.0.0.1:{port} "

        def lines():
            return [l[l.index("access client="):] for l in side.env.daemon.log().splitlines()[mark:]
                    if mine in l]
        assert l7env.wait_until(lambda: len(lines()) == len(cases)), lines()
        plane = "kernel" if side.dataplane else "user"
        got = []
        for l in lines():
            m = re.search(r" route=(\S+) status=(\d+) in=\S+ out=(\d+) latency_us=\d+ path=(\w+) reason=(\S+) id=", l)
            assert m and m.group(4) == plane and int(m.group(3)) > 0, l
            got.append(f"route={m.group(1)} status={m.group(2)} reason={m.group(5)}")
        # kernel lines come from the ring, in the order the answers were sent
        assert got == want, (plane, got)
