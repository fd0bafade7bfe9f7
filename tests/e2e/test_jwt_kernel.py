"""JWT routes admitted in the kernel from the verified-token cache: the slow
path verifies a token once (the reference verifier) and stores its bytes;
the kernel admits later requests carrying the very same bytes on routes of
the same provider until exp (+ clock skew). The kernel itself answers the
401s it can decide exactly (no token, another scheme, an empty or too large
token) to local clients, and hands everything else to the slow path
(to_slow_path_jwt_* counters), which answers 401 or verifies.

Runs twice: with the data plane (kernel admission is proved by the route's
requests_kernel counter) and with `kernel_dataplane = false` (the same
answers, all from the slow path).
"""
import base64
import json
import os
import subprocess
import time

import pytest

import l7env
from l7env import Conn, b64u, free_port

SECRET = b"l7fast-e2e-kernel-jwt-secret-0123456789"
OTHER_SECRET = b"l7fast-e2e-kernel-jwt-other-9876543210"
ISSUER = "https://issuer.test"


_serial = [0]


def token(secret=SECRET, ttl=600, **kw):
    """A fresh token (a new jti each time, so no test sees another's cache entry)."""
    _serial[0] += 1
    p = {"iss": ISSUER, "aud": "api", "sub": "alice", "exp": int(time.time()) + ttl,
         "jti": f"{os.getpid()}-{_serial[0]}-{time.time()}"}
    p.update(kw)
    return l7env.hs256(p, secret)


def render_policy(w):
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{w.port}"

[[cluster]]
name = "one"
endpoints = [ {{ address = "{w.backend}" }} ]

[[jwt_provider]]
name = "hs"
issuer = "{ISSUER}"
audiences = ["api"]
algorithms = ["HS256"]
clock_skew_s = 0
keys = [ {{ alg = "HS256", secret_base64url = "{b64u(SECRET)}" }} ]

[[jwt_provider]]
name = "other"
issuer = "{ISSUER}"
audiences = ["api"]
algorithms = ["HS256"]
keys = [ {{ alg = "HS256", secret_base64url = "{b64u(OTHER_SECRET)}" }} ]

[[jwt_provider]]
name = "fwd"
issuer = "{ISSUER}"
audiences = ["api"]
algorithms = ["HS256"]
keys = [ {{ alg = "HS256", secret_base64url = "{b64u(SECRET)}" }} ]
forward_claims = [ {{ claim = "sub", header = "x-user" }} ]

[[route]]
name = "k-hs"
jwt = "hs"
cluster = "one"
match = {{ path_prefix = "/k/hs" }}

[[route]]
name = "k-hs2"
jwt = "hs"
cluster = "one"
match = {{ path_prefix = "/k/same-provider" }}

[[route]]
name = "k-other"
jwt = "other"
cluster = "one"
match = {{ path_prefix = "/k/other" }}

[[route]]
name = "k-fwd"
jwt = "fwd"
cluster = "one"
match = {{ path_prefix = "/k/fwd" }}

[[route]]
name = "k-rbac"
jwt = "hs"
cluster = "one"
match = {{ path_prefix = "/k/rbac" }}
[route.rbac]
mode = "deny_overrides"
default = "allow"
rules = [
  {{ action = "deny", headers = [ {{ name = "x-block", present = true }} ] }},
]

[[route]]
name = "open"
cluster = "one"
"""


class World:
    pass


@pytest.fixture(scope="module", params=["with-dataplane", "without-dataplane"])
def w(request):
    reason = l7env.skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        pytest.skip(reason)
    env = l7env.Env("jwtk" + ("" if request.param == "with-dataplane" else "-nodp"))
    w = World()
    w.env = env
    try:
        w.backend = env.backend("one").address()
        w.port = free_port()
        settings = "request_timeout_ms = 5000"
        if request.param == "without-dataplane":
            settings += "\nkernel_dataplane = false"
        env.start(render_policy(w), daemon_settings=settings)
        w.dataplane = request.param == "with-dataplane"
        yield w
    finally:
        warnings = env.kernel_warnings()
        env.close()
    assert not warnings, "kernel warnings during the test:\n" + "\n".join(warnings)


def req(w, path, auth=None, headers=None):
    """One request on a new local connection (the kernel path's client),
    once a pooled connection is idle: what the kernel admits, it forwards."""
    h = dict(headers or {})
    if auth is not None:
        h["Authorization"] = auth
    if w.dataplane:
        w.env.daemon.wait_idle(w.backend)
    with w.env.local():
        c = Conn(w.port)
    try:
        c.request("GET", path, headers=h)
        return c.read_response()
    finally:
        c.close()


class Delta:
    """Route counters and slow-path reasons before/after a block."""

    def __init__(self, w):
        self.w = w
        self.before = self._take()

    def _take(self):
        st = self.w.env.stats()
        routes = {n: (r["requests_kernel"], r["requests_user"]) for n, r in st["routes"].items()}
        counters = self.w.env.daemon.counters() if self.w.dataplane else {}
        return routes, counters

    def done(self):
        self.after = self._take()
        return self

    def kernel(self, route):
        return self.after[0][route][0] - self.before[0][route][0]

    def user(self, route):
        return self.after[0][route][1] - self.before[0][route][1]

    def reason(self, name):
        key = "to_slow_path_" + name
        return self.after[1].get(key, 0) - self.before[1].get(key, 0)


def test_placement(w):
    rc, out, err = w.env.ctl("--json", "routes")
    assert rc == 0, err
    routes = {r["name"]: r for r in json.loads(out)["routes"]}
    if not w.dataplane:
        assert all(r["placement"] == "user" for r in routes.values())
        return
    for name in ("k-hs", "k-hs2", "k-other", "k-rbac", "open"):
        assert routes[name]["placement"] == "kernel", routes[name]
    assert routes["k-fwd"]["placement"] == "user"
    assert "forwarded claims" in routes["k-fwd"]["reason"], routes["k-fwd"]


def test_status_says_how_the_kernel_decides_jwts(w):
    """l7fastctl status, feature "JWT in the kernel": on this kernel (no
    l7fast.ko) the verified-token cache only, and why."""
    rc, out, err = w.env.ctl("--json", "status")
    assert rc == 0, err
    line = json.loads(out)["features"]["JWT in the kernel"]
    if not w.dataplane:
        assert line == "the verified-token cache only (l7fastd verifies each token once): no kernel data plane"
        return
    assert line == ("the verified-token cache only (l7fastd verifies each token once): l7fast.ko's kfuncs are "
                    "not callable from socket programs here (feature l7fast.ko)"), line


def test_verified_once_then_admitted_by_the_kernel(w):
    tok = token()
    d = Delta(w)
    r = req(w, "/k/hs/a", "Bearer " + tok)
    assert r.status == 200, r
    # the backend sees the request as sent (no claims forwarded)
    assert r.json()["headers"]["authorization"] == "Bearer " + tok
    d.done()
    assert d.user("k-hs") == 1 and d.kernel("k-hs") == 0
    if w.dataplane:
        assert d.reason("jwt_miss") == 1

    d = Delta(w)
    for i in range(5):
        r = req(w, f"/k/hs/b{i}", "Bearer " + tok)
        assert r.status == 200, r
        assert r.json()["headers"]["authorization"] == "Bearer " + tok
    d.done()
    if w.dataplane:
        assert d.kernel("k-hs") == 5, (d.before, d.after)
        assert d.user("k-hs") == 0
    else:
        assert d.user("k-hs") == 5

    # another route of the same provider: the same verification holds
    d = Delta(w)
    assert req(w, "/k/same-provider/x", "Bearer " + tok).status == 200
    d.done()
    assert d.kernel("k-hs2") == (1 if w.dataplane else 0)


def test_scheme_prefix_is_case_insensitive_like_the_reference(w):
    tok = token()
    assert req(w, "/k/hs/p", "Bearer " + tok).status == 200
    d = Delta(w)
    for scheme in ("bearer ", "BEARER ", "bEaReR "):
        r = req(w, "/k/hs/p", scheme + tok)
        assert r.status == 200, (scheme, r)
    d.done()
    if w.dataplane:
        assert d.kernel("k-hs") == 3
    # extra spaces after the scheme: the reference skips them; the kernel
    # leaves that to it
    d = Delta(w)
    assert req(w, "/k/hs/p", "Bearer  " + tok).status == 200
    # another scheme, or the token alone: no token, 401 without an error
    # code, which the kernel sends
    for value in ("Basic " + tok, tok):
        r = req(w, "/k/hs/p", value)
        assert r.status == 401, (value, r)
        assert "error=" not in r.header("WWW-Authenticate", ""), r.headers
    # the scheme alone: a malformed token, the slow path's to read
    r = req(w, "/k/hs/p", "Bearer")
    assert r.status == 401, r
    assert 'error="invalid_token"' in r.header("WWW-Authenticate", ""), r.headers
    d.done()
    assert d.kernel("k-hs") == (2 if w.dataplane else 0)
    if w.dataplane:
        assert d.reason("jwt_other") == 2
        assert d.reason("jwt_none") == 0


def test_missing_token_is_401_with_www_authenticate(w):
    d = Delta(w)
    r = req(w, "/k/hs/none")
    d.done()
    assert r.status == 401
    assert r.header("WWW-Authenticate", "").startswith("Bearer realm="), r.headers
    # the kernel sends it
    assert d.kernel("k-hs") == (1 if w.dataplane else 0)
    assert d.user("k-hs") == (0 if w.dataplane else 1)
    if w.dataplane:
        assert d.reason("jwt_none") == 0


def test_tampered_token_is_refused(w):
    tok = token()
    assert req(w, "/k/hs/t", "Bearer " + tok).status == 200
    head, payload, sig = tok.split(".")
    # one byte of the signature, one of the payload
    i = len(sig) // 2
    bad_sig = sig[:i] + ("A" if sig[i] != "A" else "B") + sig[i + 1:]
    j = len(payload) // 2
    bad_payload = payload[:j] + ("A" if payload[j] != "A" else "B") + payload[j + 1:]
    d = Delta(w)
    for bad in (f"{head}.{payload}.{bad_sig}", f"{head}.{bad_payload}.{sig}", tok[:-1], tok + "A"):
        r = req(w, "/k/hs/t", "Bearer " + bad)
        assert r.status == 401, (bad, r)
        assert 'error="invalid_token"' in r.header("WWW-Authenticate", ""), r.headers
    d.done()
    assert d.kernel("k-hs") == 0
    if w.dataplane:
        assert d.reason("jwt_miss") == 4
    # the genuine token still passes
    assert req(w, "/k/hs/t", "Bearer " + tok).status == 200


def test_token_of_another_provider_is_refused(w):
    tok = token()  # valid for "hs", not for "other" (another key)
    assert req(w, "/k/hs/o", "Bearer " + tok).status == 200
    assert req(w, "/k/hs/o", "Bearer " + tok).status == 200  # cached for hs
    d = Delta(w)
    r = req(w, "/k/other/o", "Bearer " + tok)
    d.done()
    assert r.status == 401, r
    assert d.kernel("k-other") == 0
    if w.dataplane:
        assert d.reason("jwt_miss") == 1
    # and the other way round: a token of "other" does not open "hs"
    tok2 = token(OTHER_SECRET)
    assert req(w, "/k/other/o", "Bearer " + tok2).status == 200
    d = Delta(w)
    assert req(w, "/k/other/o", "Bearer " + tok2).status == 200
    assert req(w, "/k/hs/o", "Bearer " + tok2).status == 401
    d.done()
    assert d.kernel("k-hs") == 0
    if w.dataplane:
        assert d.kernel("k-other") == 1


def test_expired_token_is_no_longer_admitted(w):
    # the "hs" provider has clock_skew = 0; exp is whole seconds, so the token
    # lives at least 7 s: the two requests before it expires need no haste
    tok = token(ttl=8)
    exp = json.loads(base64.urlsafe_b64decode(tok.split(".")[1] + "=="))["exp"]
    assert req(w, "/k/hs/e", "Bearer " + tok).status == 200
    d = Delta(w)
    assert req(w, "/k/hs/e", "Bearer " + tok).status == 200
    d.done()
    if w.dataplane:
        assert d.kernel("k-hs") == 1
    time.sleep(max(0.0, exp - time.time()) + 0.3)  # a lower bound: expired by then
    log_before = len(w.env.daemon.log())
    d = Delta(w)
    r = req(w, "/k/hs/e", "Bearer " + tok)
    d.done()
    assert r.status == 401, r
    assert 'error="invalid_token"' in r.header("WWW-Authenticate", ""), r.headers
    assert "route k-hs: jwt_expired" in w.env.daemon.log()[log_before:]
    assert d.kernel("k-hs") == 0
    if w.dataplane:
        assert d.reason("jwt_expired") == 1


def test_claims_forwarding_provider_stays_in_user_space(w):
    tok = token()
    d = Delta(w)
    for _ in range(3):
        r = req(w, "/k/fwd/x", "Bearer " + tok, headers={"X-User": "mallory"})
        assert r.status == 200, r
        assert r.json()["headers"]["x-user"] == "alice"
    d.done()
    assert d.user("k-fwd") == 3 and d.kernel("k-fwd") == 0


def cache_tag(w):
    """l7_config.cache_tag: the tag a verified-token cache entry must carry
    to be admitted."""
    (entry,) = w.env.daemon.map_dump("l7_config")
    return entry.get("formatted", entry)["value"]["cache_tag"]


def cached_tags(w):
    """The tags of the verified-token cache's entries."""
    return {e.get("formatted", e)["value"]["tag"] for e in w.env.daemon.map_dump("l7_jwt_cache")}


def test_reload_clears_admission(w):
    """A reload admits no token from the cache filled under the policy
    before it: stage() empties the slot's entries, and every activation
    gives l7_config a cache tag no entry carries (an entry stored by a
    program that read the old tag is never admitted)."""
    tok = token()
    assert req(w, "/k/hs/r", "Bearer " + tok).status == 200
    d = Delta(w)
    assert req(w, "/k/hs/r", "Bearer " + tok).status == 200
    d.done()
    if w.dataplane:
        assert d.kernel("k-hs") == 1
        assert cache_tag(w) in cached_tags(w)
    for _ in range(2):  # both generation slots
        tag = cache_tag(w) if w.dataplane else None
        w.env.daemon.write_policy(render_policy(w))
        ready = w.env.daemon.reload()
        assert "last reload failed" not in ready
        if w.dataplane:
            assert cache_tag(w) != tag
        d = Delta(w)
        assert req(w, "/k/hs/r", "Bearer " + tok).status == 200
        d.done()
        assert d.kernel("k-hs") == 0 and d.user("k-hs") == 1, (d.before, d.after)
        if w.dataplane:
            assert d.reason("jwt_miss") == 1
        d = Delta(w)
        assert req(w, "/k/hs/r", "Bearer " + tok).status == 200
        d.done()
        if w.dataplane:
            assert d.kernel("k-hs") == 1
            assert cache_tag(w) in cached_tags(w)


def test_jwt_then_rbac_in_the_kernel(w):
    """The pipeline's order: a token first (401), then the RBAC rules (403);
    both in the kernel once the token is cached: the kernel forwards what
    the rules allow and sends their denial itself."""
    tok = token()
    assert req(w, "/k/rbac/x", headers={"X-Block": "1"}).status == 401
    assert req(w, "/k/rbac/x", "Bearer " + tok, headers={"X-Block": "1"}).status == 403
    d = Delta(w)
    for _ in range(3):
        assert req(w, "/k/rbac/x", "Bearer " + tok).status == 200
    r = req(w, "/k/rbac/x", "Bearer " + tok, headers={"X-Block": "1"})
    assert r.status == 403, r
    d.done()
    if w.dataplane:
        assert d.kernel("k-rbac") == 4 and d.user("k-rbac") == 0
        assert d.reason("rbac_deny") == 0
