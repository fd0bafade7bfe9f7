"""The policy suite on the slow path (the reference implementation): every
route is `offload = false`, so whatever the kernel can do, the daemon's
ClientSession runs each route's whole pipeline with real requests: match
(every condition kind, claims of a verified JWT), JWT (HS256 made here with
hmac; RS256/ES256 with keys from the openssl CLI, a JWKS file re-read when
it changes), RBAC, rate limits, direct responses, header mutation in both
directions, ring hash and Maglev, per-route timeouts and connect retries.

The module runs twice: with the kernel data plane loaded (it hands these
routes to the slow path, `route_user`) and with `kernel_dataplane = false`.
"""
import base64
import hmac
import json
import os
import select
import subprocess
import time
from pathlib import Path

import pytest

import l7env
from l7env import LIVENESS, Conn, b64u, free_port, wait_until
from l7env import jws_signing_input as signing_input

HS_SECRET = b"l7fast-e2e-hs256-secret-0123456789abcdef"  # >= 32 bytes
RL_RELOAD_BURST = 60  # at 1/s: test_rate_limit_budget_survives_a_reload
HS_SECRET_B64 = base64.urlsafe_b64encode(HS_SECRET).rstrip(b"=").decode()
ISSUER = "https://issuer.test"


# ---- JWTs ----------------------------------------------------------------------------

def hs256(payload, secret=HS_SECRET, header=None):
    return l7env.hs256(payload, secret, header)


def claims(**kw):
    """A payload the "hs" provider accepts, plus kw."""
    p = {"iss": ISSUER, "aud": "api", "sub": "alice", "exp": int(time.time()) + 600}
    p.update(kw)
    return {k: v for k, v in p.items() if v is not None}


def der_ecdsa_to_raw(der):
    """ECDSA-Sig-Value (DER) -> r || s, 32 bytes each (JWS form)."""
    assert der[0] == 0x30
    i = 2 if der[1] < 0x80 else 2 + (der[1] & 0x7f)
    out = b""
    for _ in range(2):
        assert der[i] == 0x02
        n = der[i + 1]
        v = der[i + 2:i + 2 + n].lstrip(b"\0")
        out += v.rjust(32, b"\0")
        i += 2 + n
    return out


class Keys:
    """RSA and EC P-256 keys made with the openssl CLI in a temp directory."""

    def __init__(self, workdir):
        self.dir = Path(workdir)

    def openssl(self, *args, data=None):
        return subprocess.run(["openssl", *args], input=data, capture_output=True, check=True).stdout

    def rsa(self, name):
        key = self.dir / f"{name}.pem"
        self.openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key))
        text = self.openssl("pkey", "-in", str(key), "-noout", "-text_pub").decode()
        modulus = text.split("Modulus:")[1].split("Exponent:")[0]
        n = bytes.fromhex("".join(modulus.split()).replace(":", ""))
        n = n.lstrip(b"\0")
        return key, {"kty": "RSA", "kid": name, "alg": "RS256", "use": "sig", "n": b64u(n), "e": b64u(b"\x01\x00\x01")}

    def ec(self, name):
        key = self.dir / f"{name}.pem"
        self.openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(key))
        pub = self.openssl("pkey", "-in", str(key), "-pubout").decode()
        return key, pub

    def sign(self, key, payload, alg, kid=None):
        header = {"alg": alg, "typ": "JWT"}
        if kid:
            header["kid"] = kid
        inp = signing_input(payload, header)
        sig = self.openssl("dgst", "-sha256", "-sign", str(key), data=inp.encode())
        if alg == "ES256":
            sig = der_ecdsa_to_raw(sig)
        return inp + "." + b64u(sig)


# ---- a backend that reports its request head byte for byte ----------------------------

def raw_answer(head, body):
    """{"head": <the request head as received>}, with response headers the
    response-mutation test rewrites."""
    out = json.dumps({"head": head.decode("latin-1")}).encode()
    return (b"HTTP/1.1 200 OK\r\nServer: raw-backend\r\nX-Frame-Options: SAMEORIGIN\r\n"
            b"X-Keep: kept\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(out)).encode() + b"\r\n\r\n" + out)


# ---- the policy ----------------------------------------------------------------------------

def mark(name):
    """request_headers that tell the backend which route took the request."""
    return f'request_headers = {{ set = [ {{ name = "x-route", value = "{name}" }} ] }}'


def render_policy(w):
    ring = ", ".join(f'{{ address = "{w.backends[n]}" }}' for n in w.ring_members)
    rl_burst = w.rl_burst
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{w.port}"
[[listener]]
name = "web6"
address = "[::1]:{w.port6}"

[[cluster]]
name = "one"
endpoints = [ {{ address = "{w.backends['one']}" }} ]
[[cluster]]
name = "raw"
endpoints = [ {{ address = "{w.raw.address()}" }} ]
[[cluster]]
name = "ring"
lb = "ring_hash"
hash_key = {{ header = "X-User" }}
endpoints = [ {ring} ]
[[cluster]]
name = "maglev"
lb = "maglev"
hash_key = {{ cookie = "session" }}
maglev_table_size = 251
endpoints = [ {ring} ]
[[cluster]]
name = "flaky"
endpoints = [ {{ address = "127.0.0.1:{w.dead_port}" }}, {{ address = "{w.backends['one']}" }} ]

[[jwt_provider]]
name = "hs"
issuer = "{ISSUER}"
audiences = ["api"]
algorithms = ["HS256"]
keys = [ {{ alg = "HS256", secret_base64url = "{HS_SECRET_B64}" }} ]
forward_claims = [ {{ claim = "sub", header = "X-User-Id" }}, {{ claim = "groups", header = "x-groups" }} ]

[[jwt_provider]]
name = "pk"
algorithms = ["RS256", "ES256"]
jwks_file = "{w.jwks}"
keys = [ {{ kid = "ec1", alg = "ES256", pem = '''
{w.ec_pub}''' }} ]

[[jwt_provider]]
name = "ck"
algorithms = ["HS256"]
keys = [ {{ alg = "HS256", secret_base64url = "{HS_SECRET_B64}" }} ]
from = {{ cookie = "token" }}
require_exp = false

# RBAC the kernel evaluates (placed in the kernel when the data plane is
# loaded): the same semantics as rbac-first / rbac-deny below, the denials
# answered by the kernel for local clients (by the slow path for remote
# ones), byte for byte the slow path's. First,
# so that no user-space route with a condition the kernel tables hold as
# "any" is a candidate before them.
[[route]]
name = "rbac-k-first"
cluster = "one"
match = {{ path_prefix = "/rbac/kfirst" }}
[route.rbac]
mode = "first_match"
default = "deny"
deny_status = 418
deny_body = "no tea for you\\n"
rules = [
  {{ action = "allow", method = ["GET"] }},
  {{ action = "deny", path_prefix = "/rbac/kfirst/admin" }},
  {{ action = "allow", headers = [ {{ name = "x-role", exact = "admin" }} ] }},
]

[[route]]
name = "rbac-k-deny"
cluster = "one"
match = {{ path_prefix = "/rbac/kdeny" }}
[route.rbac]
mode = "deny_overrides"
default = "allow"
rules = [
  {{ action = "allow", method = ["GET"] }},
  {{ action = "deny", path_prefix = "/rbac/kdeny/admin" }},
  {{ action = "deny", headers = [ {{ name = "x-block", present = true }} ] }},
]

# ---- every condition kind ----
[[route]]
name = "m-method"
offload = false
cluster = "one"
{mark("m-method")}
match = {{ path_prefix = "/match/method", method = ["PATCH", "PUT"] }}

[[route]]
name = "m-host"
offload = false
cluster = "one"
{mark("m-host")}
match = {{ path_prefix = "/match/host", host = "api.example.com" }}

[[route]]
name = "m-exact"
offload = false
cluster = "one"
{mark("m-exact")}
match = {{ path_exact = "/match/exact" }}

[[route]]
name = "m-regex"
offload = false
cluster = "one"
{mark("m-regex")}
match = {{ path_regex = "/match/re/[a-z]+/[0-9]+" }}

[[route]]
name = "m-present"
offload = false
cluster = "one"
{mark("m-present")}
match = {{ path_prefix = "/match/hdr", headers = [ {{ name = "X-P", present = true }} ] }}

[[route]]
name = "m-absent"
offload = false
cluster = "one"
{mark("m-absent")}
match = {{ path_prefix = "/match/absent", headers = [ {{ name = "X-A", absent = true }} ] }}

[[route]]
name = "m-hexact"
offload = false
cluster = "one"
{mark("m-hexact")}
match = {{ path_prefix = "/match/hdr", headers = [ {{ name = "X-E", exact = "v1, v2" }} ] }}

[[route]]
name = "m-hprefix"
offload = false
cluster = "one"
{mark("m-hprefix")}
match = {{ path_prefix = "/match/hdr", headers = [ {{ name = "X-Pre", prefix = "abc" }} ] }}

[[route]]
name = "m-qexact"
offload = false
cluster = "one"
{mark("m-qexact")}
match = {{ path_prefix = "/match/q", query = [ {{ name = "v", exact = "2" }} ] }}

[[route]]
name = "m-qpresent"
offload = false
cluster = "one"
{mark("m-qpresent")}
match = {{ path_prefix = "/match/q", query = [ {{ name = "debug", present = true }} ] }}

[[route]]
name = "m-src-out"
offload = false
cluster = "one"
{mark("m-src-out")}
match = {{ path_prefix = "/match/src", source = ["10.0.0.0/8", "fd00::/8"] }}

[[route]]
name = "m-src6"
offload = false
listeners = ["web6"]
cluster = "one"
{mark("m-src6")}
match = {{ path_prefix = "/match/src", source = ["::1"] }}

[[route]]
name = "m-src4"
offload = false
cluster = "one"
{mark("m-src4")}
match = {{ path_prefix = "/match/src", source = ["127.0.0.0/8"] }}

[[route]]
name = "m-claims"
offload = false
jwt = "hs"
cluster = "one"
{mark("m-claims")}
match = {{ path_prefix = "/match/claims", claims = [ {{ name = "role", exact = "admin" }}, {{ name = "sub", present = true }} ] }}

# ---- JWT ----
[[route]]
name = "jwt-hs"
offload = false
jwt = "hs"
cluster = "one"
match = {{ path_prefix = "/jwt/hs" }}

[[route]]
name = "jwt-pk"
offload = false
jwt = "pk"
cluster = "one"
match = {{ path_prefix = "/jwt/pk" }}

[[route]]
name = "jwt-cookie"
offload = false
jwt = "ck"
cluster = "one"
match = {{ path_prefix = "/jwt/cookie" }}

# ---- RBAC ----
[[route]]
name = "rbac-first"
offload = false
cluster = "one"
match = {{ path_prefix = "/rbac/first" }}
[route.rbac]
mode = "first_match"
default = "deny"
deny_status = 418
deny_body = "no tea for you\\n"
rules = [
  {{ action = "allow", method = ["GET"] }},
  {{ action = "deny", path_prefix = "/rbac/first/admin" }},
]

[[route]]
name = "rbac-deny"
offload = false
cluster = "one"
match = {{ path_prefix = "/rbac/deny" }}
[route.rbac]
mode = "deny_overrides"
default = "allow"
rules = [
  {{ action = "allow", method = ["GET"] }},
  {{ action = "deny", path_prefix = "/rbac/deny/admin" }},
  {{ name = "blocked", action = "deny", source = "127.0.0.0/8", headers = [ {{ name = "x-block", present = true }} ] }},
]

[[route]]
name = "rbac-claims"
offload = false
jwt = "hs"
cluster = "one"
match = {{ path_prefix = "/rbac/claims" }}
[route.rbac]
default = "deny"
deny_status = 403
deny_body = "write scope required\\n"
rules = [ {{ action = "allow", claims = [ {{ name = "scope", exact = "write" }} ] }} ]

# ---- rate limits ----
[[route]]
name = "rl"
offload = false
cluster = "one"
match = {{ path_prefix = "/rl/shared" }}
rate_limit = {{ rate = 1, burst = {rl_burst} }}

[[route]]
name = "rl-key"
offload = false
cluster = "one"
match = {{ path_prefix = "/rl/key" }}
rate_limit = {{ rate = 1, burst = 1, key = {{ header = "X-Key" }} }}

[[route]]
name = "rl-reload"
offload = false
cluster = "one"
match = {{ path_prefix = "/rl/reload" }}
rate_limit = {{ rate = 1, burst = {RL_RELOAD_BURST} }}

# ---- direct responses ----
[[route]]
name = "direct"
offload = false
match = {{ path_exact = "/direct" }}
direct_response = {{ status = 200, headers = [ {{ name = "X-Direct", value = "yes" }}, {{ name = "Content-Type", value = "application/json" }} ], body = '{{"ok":true}}' }}

[[route]]
name = "gone"
offload = false
match = {{ path_prefix = "/gone" }}
direct_response = {{ status = 410 }}

# ---- header mutation ----
[[route]]
name = "mut"
offload = false
cluster = "raw"
match = {{ path_prefix = "/mut" }}
[route.request_headers]
remove = ["X-Internal"]
set = [ {{ name = "X-Env", value = "prod" }} ]
add = [ {{ name = "x-tag", value = "a" }}, {{ name = "X-Tag", value = "b" }} ]
[route.response_headers]
remove = ["server"]
set = [ {{ name = "X-Frame-Options", value = "DENY" }} ]

[[route]]
name = "mut-claims"
offload = false
jwt = "hs"
cluster = "raw"
match = {{ path_prefix = "/fwd" }}
request_headers = {{ add = [ {{ name = "x-after", value = "1" }} ] }}

# ---- upstream choice ----
[[route]]
name = "ring"
offload = false
cluster = "ring"
match = {{ path_prefix = "/ring" }}

[[route]]
name = "maglev"
offload = false
cluster = "maglev"
match = {{ path_prefix = "/maglev" }}

[[route]]
name = "timeout"
offload = false
cluster = "one"
timeout_ms = 600
match = {{ path_prefix = "/timeout" }}

[[route]]
name = "retry"
offload = false
cluster = "flaky"
connect_retries = 1
match = {{ path_prefix = "/retry" }}

[[route]]
name = "noretry"
offload = false
cluster = "flaky"
match = {{ path_prefix = "/noretry" }}

[[route]]
name = "fallback"
offload = false
cluster = "one"
{mark("fallback")}
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
    if subprocess.run(["openssl", "version"], capture_output=True).returncode != 0:
        pytest.skip("openssl CLI missing")
    env = l7env.Env("policies" + ("" if request.param == "with-dataplane" else "-nodp"))
    w = World()
    w.env = env
    try:
        w.backends = {}
        for name in ["one", "h1", "h2", "h3"]:
            w.backends[name] = env.backend(name).address()
        w.raw = l7env.RawBackend(raw_answer)
        w.port, w.port6, w.dead_port = free_port(), free_port("::1"), free_port()
        w.keys = Keys(env.tmp.name)
        w.rsa_key, jwk = w.keys.rsa("rs1")
        w.rsa2_key, w.jwk2 = w.keys.rsa("rs2")
        w.ec_key, w.ec_pub = w.keys.ec("ec1")
        w.jwks = Path(env.tmp.name) / "idp.jwks"
        w.jwks.write_text(json.dumps({"keys": [jwk]}))
        w.jwk1 = jwk
        w.ring_members = ["h1", "h2", "h3"]
        w.rl_burst = 2
        # the daemon's request timeout bounds every exchange of the module,
        # and must be far from the route timeout test_route_timeout_replaces_
        # the_daemon_default tells it apart from
        settings = f"request_timeout_ms = {int(LIVENESS * 1000)}\nconnect_timeout_ms = 500"
        if request.param == "without-dataplane":
            settings += "\nkernel_dataplane = false"
        w.settings = settings
        env.start(render_policy(w), daemon_settings=settings)
        w.dataplane = request.param == "with-dataplane"
        yield w
    finally:
        warnings = env.kernel_warnings()
        env.close()
        if getattr(w, "raw", None):
            w.raw.close()
    assert not warnings, "kernel warnings during the test:\n" + "\n".join(warnings)


def reload(w):
    w.env.daemon.write_policy(render_policy(w))
    ready = w.env.daemon.reload()
    assert "last reload failed" not in ready, w.env.daemon.log()[-3000:]


def req(w, method="GET", path="/", headers=None, body=None, host="test", port=None, family_host="127.0.0.1",
        head=False):
    c = Conn(port or w.port, host=family_host)
    try:
        c.request(method, path, headers=headers, body=body, host=host)
        return c.read_response(head_request=head)
    finally:
        c.close()


def route_of(r):
    assert r.status == 200, (r, r.body[:300])
    return r.json()["headers"].get("x-route")


# ---- match ------------------------------------------------------------------------------

def test_the_routes_run_in_the_slow_path(w):
    before = w.env.stats()["routes"]["fallback"]["requests_user"]
    c = connect(w, True)
    for i in range(3):
        c.request("GET", f"/anything/{i}")
        assert route_of(c.read_response()) == "fallback"
    c.close()
    st = w.env.stats()
    assert st["routes"]["fallback"]["requests_user"] - before == 3
    assert st["routes"]["fallback"]["placement"] == "user"


def test_method_host_exact_and_regex(w):
    assert route_of(req(w, "PATCH", "/match/method")) == "m-method"
    assert route_of(req(w, "PUT", "/match/method", body=b"x")) == "m-method"
    assert route_of(req(w, "GET", "/match/method")) == "fallback"
    assert route_of(req(w, "GET", "/match/host/x", host="API.example.com:8443")) == "m-host"
    assert route_of(req(w, "GET", "/match/host/x", host="web.example.com")) == "fallback"
    assert route_of(req(w, "GET", "/match/exact")) == "m-exact"
    assert route_of(req(w, "GET", "/match/exact/")) == "fallback"
    assert route_of(req(w, "GET", "/match/exact?x=1")) == "m-exact"
    assert route_of(req(w, "GET", "/match/re/abc/123")) == "m-regex"
    assert route_of(req(w, "GET", "/match/re/abc/123?q")) == "m-regex"
    assert route_of(req(w, "GET", "/match/re/ABC/123")) == "fallback"
    assert route_of(req(w, "GET", "/match/re/abc/123/x")) == "fallback"


def test_header_present_absent_exact_prefix(w):
    assert route_of(req(w, path="/match/hdr", headers={"x-p": ""})) == "m-present"
    assert route_of(req(w, path="/match/hdr")) == "fallback"
    assert route_of(req(w, path="/match/absent")) == "m-absent"
    assert route_of(req(w, path="/match/absent", headers={"X-A": "1"})) == "fallback"
    # several field lines are one value joined with ", "
    c = Conn(w.port)
    c.send(b"GET /match/hdr HTTP/1.1\r\nHost: t\r\nX-E: v1\r\nX-E: v2\r\n\r\n")
    assert route_of(c.read_response()) == "m-hexact"
    c.send(b"GET /match/hdr HTTP/1.1\r\nHost: t\r\nX-E: v1\r\n\r\n")
    assert route_of(c.read_response()) == "fallback"
    c.close()
    assert route_of(req(w, path="/match/hdr", headers={"x-pre": "abcdef"})) == "m-hprefix"
    assert route_of(req(w, path="/match/hdr", headers={"x-pre": "ab"})) == "fallback"


def test_query_conditions(w):
    assert route_of(req(w, path="/match/q?a=1&v=2")) == "m-qexact"
    assert route_of(req(w, path="/match/q?v=22")) == "fallback"
    assert route_of(req(w, path="/match/q?v=3&debug")) == "m-qpresent"
    assert route_of(req(w, path="/match/q?debug=")) == "m-qpresent"
    assert route_of(req(w, path="/match/q")) == "fallback"
    # the first pair with the name counts, bytes as sent
    assert route_of(req(w, path="/match/q?v=1&v=2")) == "fallback"
    assert route_of(req(w, path="/match/q?v=%32")) == "fallback"


def test_source_cidrs_from_the_client_address(w):
    assert route_of(req(w, path="/match/src")) == "m-src4"
    r = req(w, path="/match/src", port=w.port6, family_host="::1")
    assert route_of(r) == "m-src6"
    # a local client (its socket in the data plane's cgroup) too
    c = connect(w, True)
    c.request("GET", "/match/src")
    assert route_of(c.read_response()) == "m-src4"
    c.close()


def test_claim_conditions_need_a_verified_token(w):
    admin = hs256(claims(role="admin"))
    assert route_of(req(w, path="/match/claims", headers={"Authorization": "Bearer " + admin})) == "m-claims"
    user = hs256(claims(role="user"))
    assert route_of(req(w, path="/match/claims", headers={"Authorization": "Bearer " + user})) == "fallback"
    forged = hs256(claims(role="admin"), secret=b"x" * 40)
    assert route_of(req(w, path="/match/claims", headers={"Authorization": "Bearer " + forged})) == "fallback"
    assert route_of(req(w, path="/match/claims")) == "fallback"
    arr = hs256(claims(role=["user", "admin"]))
    assert route_of(req(w, path="/match/claims", headers={"Authorization": "Bearer " + arr})) == "m-claims"


# ---- JWT -------------------------------------------------------------------------------------

def auth_of(r):
    return r.header("www-authenticate")


def test_jwt_missing_and_invalid_shapes(w):
    before = w.env.stats()["routes"]["jwt-hs"]
    r = req(w, path="/jwt/hs/x")
    assert r.status == 401
    assert auth_of(r) == 'Bearer realm="l7fast"'
    assert r.body == b"unauthorized\n"
    # another scheme is "no bearer token"
    r = req(w, path="/jwt/hs/x", headers={"Authorization": "Basic dXNlcjpwYXNz"})
    assert r.status == 401 and auth_of(r) == 'Bearer realm="l7fast"'

    invalid = {
        "garbage": "Bearer not.a.jwt",
        "expired": "Bearer " + hs256(claims(exp=int(time.time()) - 3600)),
        "alg-none": "Bearer " + signing_input(claims(), {"alg": "none", "typ": "JWT"}) + ".",
        "alg-none-signed": "Bearer " + hs256(claims(), header={"alg": "none"}),
        "wrong-aud": "Bearer " + hs256(claims(aud="other")),
        "wrong-iss": "Bearer " + hs256(claims(iss="https://evil.test")),
        "no-exp": "Bearer " + hs256(claims(exp=None)),
        "bad-signature": "Bearer " + hs256(claims(), secret=b"y" * 40),
        "not-yet": "Bearer " + hs256(claims(nbf=int(time.time()) + 3600)),
        "bare-scheme": "Bearer",
    }
    for name, value in invalid.items():
        r = req(w, path="/jwt/hs/x", headers={"Authorization": value})
        assert r.status == 401, name
        assert auth_of(r) == 'Bearer realm="l7fast", error="invalid_token"', name
    after = w.env.stats()["routes"]["jwt-hs"]
    assert after["rejected"]["jwt_missing"] - before["rejected"]["jwt_missing"] == 2
    assert after["rejected"]["jwt_invalid"] - before["rejected"]["jwt_invalid"] == len(invalid)
    assert after["responses"]["4xx"] - before["responses"]["4xx"] == 2 + len(invalid)


def test_jwt_valid_forwards_claims_and_drops_client_copies(w):
    tok = hs256(claims(groups=["eng", "ops"]))
    r = req(w, path="/jwt/hs/ok", headers={"Authorization": "bearer " + tok, "X-User-Id": "mallory"})
    assert r.status == 200, r.body
    h = r.json()["headers"]
    assert h["x-user-id"] == "alice"
    assert h["x-groups"] == "eng, ops"
    # no "groups" claim: no header, and the client's copy is still dropped
    tok = hs256(claims())
    r = req(w, path="/jwt/hs/ok", headers={"Authorization": "Bearer " + tok, "X-Groups": "admins"})
    h = r.json()["headers"]
    assert "x-groups" not in h and h["x-user-id"] == "alice"


def test_forwarded_claims_are_byte_exact(w):
    tok = hs256(claims(sub="bob"))
    c = Conn(w.port)
    c.send(("GET /fwd/1 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + tok +
            "\r\nx-user-id: forged\r\nAccept: */*\r\n\r\n").encode())
    r = c.read_response()
    c.close()
    assert r.json()["head"] == ("GET /fwd/1 HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer " + tok +
                                "\r\nAccept: */*\r\nx-user-id: bob\r\nx-after: 1\r\n\r\n")


def test_rs256_from_jwks_and_es256_inline(w):
    tok = w.keys.sign(w.rsa_key, {"sub": "rs", "exp": int(time.time()) + 600}, "RS256", kid="rs1")
    r = req(w, path="/jwt/pk/a", headers={"Authorization": "Bearer " + tok})
    assert r.status == 200, r.body
    tok = w.keys.sign(w.ec_key, {"sub": "ec", "exp": int(time.time()) + 600}, "ES256", kid="ec1")
    assert req(w, path="/jwt/pk/a", headers={"Authorization": "Bearer " + tok}).status == 200
    # a key of another algorithm, an unknown kid, an HS256 token with the RSA key's kid
    tok = w.keys.sign(w.ec_key, {"sub": "ec", "exp": int(time.time()) + 600}, "ES256", kid="rs1")
    assert req(w, path="/jwt/pk/a", headers={"Authorization": "Bearer " + tok}).status == 401
    tok = w.keys.sign(w.rsa2_key, {"sub": "rs", "exp": int(time.time()) + 600}, "RS256", kid="rs2")
    assert req(w, path="/jwt/pk/a", headers={"Authorization": "Bearer " + tok}).status == 401
    hs = hs256({"sub": "x", "exp": int(time.time()) + 600}, header={"alg": "HS256", "kid": "rs1"})
    assert req(w, path="/jwt/pk/a", headers={"Authorization": "Bearer " + hs}).status == 401


def jwks_log_lines(w, what):
    return sum(1 for l in w.env.daemon.log().splitlines() if f"JWKS {w.jwks}: " in l and what in l)


def test_jwks_file_is_reread_when_it_changes(w):
    tok2 = w.keys.sign(w.rsa2_key, {"sub": "rs", "exp": int(time.time()) + 600}, "RS256", kid="rs2")
    assert req(w, path="/jwt/pk/b", headers={"Authorization": "Bearer " + tok2}).status == 401
    tmp = w.jwks.with_suffix(".new")
    reloaded = jwks_log_lines(w, "reloaded")
    tmp.write_text(json.dumps({"keys": [w.jwk1, w.jwk2]}))
    os.rename(tmp, w.jwks)
    # the daemon looks at the file every 0.5 s: its log line is waited for
    assert wait_until(lambda: jwks_log_lines(w, "reloaded") > reloaded), "the new JWKS was not read"
    assert req(w, path="/jwt/pk/b", headers={"Authorization": "Bearer " + tok2}).status == 200
    # a broken file keeps the keys in use (once the daemon has read it)
    kept = jwks_log_lines(w, "keeping the previous keys")
    tmp.write_text("{not json")
    os.rename(tmp, w.jwks)
    assert wait_until(lambda: jwks_log_lines(w, "keeping the previous keys") > kept), "the broken JWKS was not read"
    assert req(w, path="/jwt/pk/b", headers={"Authorization": "Bearer " + tok2}).status == 200
    tmp.write_text(json.dumps({"keys": [w.jwk1]}))
    os.rename(tmp, w.jwks)


def test_jwt_from_a_cookie(w):
    tok = hs256({"sub": "cookie-user"})
    r = req(w, path="/jwt/cookie/x", headers={"Cookie": "a=1; token=" + tok + "; b=2"})
    assert r.status == 200, r.body
    assert req(w, path="/jwt/cookie/x", headers={"Cookie": "a=1"}).status == 401


def test_bad_jwks_fails_the_reload_with_a_precise_error(w):
    good = w.jwks.read_text()
    saved = w.jwks
    try:
        w.jwks = Path(w.env.tmp.name) / "missing.jwks"
        w.env.daemon.write_policy(render_policy(w))
        rc, out, err = w.env.ctl("reload")
        assert "last reload failed" in w.env.daemon.wait_notify("READY=1")
        assert rc != 0
        assert "jwt_provider \"pk\"" in err and "missing.jwks" in err, err
    finally:
        w.jwks = saved
        assert w.jwks.read_text() == good
        reload(w)
    tok = w.keys.sign(w.rsa_key, {"sub": "rs", "exp": int(time.time()) + 600}, "RS256", kid="rs1")
    assert req(w, path="/jwt/pk/a", headers={"Authorization": "Bearer " + tok}).status == 200


# ---- RBAC --------------------------------------------------------------------------------------

def test_rbac_first_match_with_custom_denial(w):
    assert req(w, "GET", "/rbac/first/admin").status == 200  # the allow rule comes first
    r = req(w, "DELETE", "/rbac/first/x")                      # no rule: default deny
    assert r.status == 418
    assert r.body == b"no tea for you\n"
    assert r.header("content-type") == "text/plain"
    r = req(w, "HEAD", "/rbac/first/x", head=True)   # HEAD is not GET
    assert r.status == 418 and r.body == b""
    assert r.header("content-length") == str(len(b"no tea for you\n"))
    r = req(w, "POST", "/rbac/first/admin", body=b"abc")
    assert r.status == 418


def connect(w, local):
    """A client connection to the world's listener: from the test cgroup
    (a local client, SK_MSG) or from outside it (a remote one, SK_SKB).
    With the data plane, once the upstream has an idle pooled connection
    (and a remote one is in the data plane): whatever the kernel can take
    of it is the kernel's."""
    if w.dataplane:
        w.env.daemon.wait_idle(w.backends["one"])
    return w.env.client(w.port, local)


def moved_counters(before, after):
    """The data-plane counters that moved between two GetStats snapshots."""
    return {k: v - before["counters"].get(k, 0) for k, v in after["counters"].items()
            if v != before["counters"].get(k, 0)}


def kernel_rbac(w, route, cases, local):
    """Each case on a fresh connection (so the kernel decides each one):
    (method, path, headers, body, status, response body or None). Allowed
    requests must be forwarded by the kernel, and denied ones answered by
    it: for a local client the message becomes the denial (SK_MSG); a
    remote client's request goes to the egress of its own socket, whose
    send path makes it the denial (l7_remote_out_msg)."""
    st0 = w.env.stats()
    for method, path, headers, body, status, rbody in cases:
        c = connect(w, local)
        try:
            c.request(method, path, headers=headers, body=body)
            r = c.read_response(head_request=method == "HEAD")
        finally:
            c.close()
        assert r.status == status, (method, path, headers, r)
        if rbody is not None:
            assert r.body == rbody, (method, path, r.body)
        if status != 200:
            assert r.header("content-type") == "text/plain"
    st1 = w.env.stats()
    allowed = sum(1 for c in cases if c[4] == 200)
    denied = len(cases) - allowed
    d = {k: st1["routes"][route][k] - st0["routes"][route][k] for k in ("requests_kernel", "requests_user")}
    rejected = st1["routes"][route]["rejected"]["rbac_denied"] - st0["routes"][route]["rejected"]["rbac_denied"]
    assert rejected == denied, (rejected, denied)
    if w.dataplane:
        assert st1["routes"][route]["placement"] == "kernel"
        why = moved_counters(st0, st1)
        assert d == {"requests_kernel": len(cases), "requests_user": 0}, (d, why)
        assert "to_slow_path_rbac_deny" not in why and "to_slow_path_answer_remote" not in why, why
    else:
        assert d == {"requests_kernel": 0, "requests_user": len(cases)}, d


def kernel_share_of(statuses, pipelined, local):
    """How many of one connection's requests (their statuses, in order) the
    kernel takes, connect() having made the pool warm. One by one: every
    one, local or remote (the kernel answers denials). In one write: a
    local client's first, if allowed (SK_MSG limits the verdict to it; the
    rest is pipelined, the slow path's), none of a remote client's (an skb
    cannot be split: ARCHITECTURE.md section 7.5)."""
    if not pipelined:
        return len(statuses)
    return 1 if local and statuses[0] == 200 else 0


def assert_kernel_took(w, route, before, kernel):
    after = w.env.stats()
    took = after["routes"][route]["requests_kernel"] - before["routes"][route]["requests_kernel"]
    assert took == kernel, \
        f"kernel forwarded {took}, not {kernel}; counters moved: {json.dumps(moved_counters(before, after), sort_keys=True)}"


def one_connection(w, local, requests, pipelined):
    """Several requests on one connection, written one by one (each after
    the previous response) or all in one write; returns the responses."""
    c = connect(w, local)
    out = []
    try:
        if pipelined:
            c.send(b"".join(l7env.make_request(m, p, headers=h) for m, p, h in requests))
            for m, _, _ in requests:
                out.append(c.read_response(head_request=m == "HEAD"))
        else:
            for m, p, h in requests:
                c.request(m, p, headers=h)
                out.append(c.read_response(head_request=m == "HEAD"))
    finally:
        c.close()
    return out


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_rbac_first_match_in_the_kernel(w, local):
    tea = b"no tea for you\n"
    kernel_rbac(w, "rbac-k-first", [
        ("GET", "/rbac/kfirst/admin", None, None, 200, None),        # rule 0 allows before rule 1 denies
        ("DELETE", "/rbac/kfirst/x", None, None, 418, tea),          # no rule: default deny
        ("HEAD", "/rbac/kfirst/x", None, None, 418, b""),            # HEAD is not GET
        ("POST", "/rbac/kfirst/admin", None, b"abc", 418, tea),      # rule 1 denies before rule 2
        ("PUT", "/rbac/kfirst/x", {"X-Role": "admin"}, b"", 200, None),  # rule 2
        ("PUT", "/rbac/kfirst/x", {"x-role": "Admin"}, b"", 418, tea),   # values are case-sensitive
        ("get", "/rbac/kfirst/x", None, None, 418, tea),             # methods too
    ], local)
    for pipelined in (False, True):
        before = w.env.stats()
        rs = one_connection(w, local, [("GET", "/rbac/kfirst/a", None), ("DELETE", "/rbac/kfirst/b", None),
                                       ("GET", "/rbac/kfirst/c", None), ("DELETE", "/rbac/kfirst/d", None)],
                            pipelined)
        assert [r.status for r in rs] == [200, 418, 200, 418]
        assert [r.json()["path"] for r in (rs[0], rs[2])] == ["/rbac/kfirst/a", "/rbac/kfirst/c"]
        assert rs[1].body == tea and rs[3].body == tea
        if w.dataplane:
            assert_kernel_took(w, "rbac-k-first", before, kernel_share_of([r.status for r in rs], pipelined, local))


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_rbac_deny_overrides_in_the_kernel(w, local):
    forbidden = b"forbidden\n"
    kernel_rbac(w, "rbac-k-deny", [
        ("GET", "/rbac/kdeny/admin", None, None, 403, forbidden),    # allow and deny both hold: deny wins
        ("GET", "/rbac/kdeny/x", None, None, 200, None),
        ("DELETE", "/rbac/kdeny/x", None, None, 200, None),          # no rule: default allow
        ("GET", "/rbac/kdeny/x", {"X-Block": ""}, None, 403, forbidden),  # present, even empty
        ("POST", "/rbac/kdeny/adminx", None, b"", 403, forbidden),   # a prefix, not a segment
        ("GET", "/rbac/kdeny/Admin", None, None, 200, None),         # paths are case-sensitive
    ], local)
    for pipelined in (False, True):
        before = w.env.stats()
        rs = one_connection(w, local, [("GET", "/rbac/kdeny/a", None), ("GET", "/rbac/kdeny/b", {"x-block": "1"}),
                                       ("DELETE", "/rbac/kdeny/c", None)], pipelined)
        assert [r.status for r in rs] == [200, 403, 200]
        assert rs[1].body == forbidden
        assert [r.json()["path"] for r in (rs[0], rs[2])] == ["/rbac/kdeny/a", "/rbac/kdeny/c"]
        if w.dataplane:
            assert_kernel_took(w, "rbac-k-deny", before, kernel_share_of([r.status for r in rs], pipelined, local))


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_back_in_the_kernel_after_a_slow_path_answer(w, local):
    """A keep-alive connection alternating a request the slow path answers
    (an RBAC denial of a user-space route) with one the kernel may forward:
    the daemon publishes what
    it consumed and is about to write before it writes its answer
    (l7_conn_sync), and the kernel compares that with the client socket's
    own sequence numbers. A client that reads each answer before it sends
    its next request therefore has every allowed request taken by the
    kernel, whatever the scheduling: none is handed over as user_pending."""
    if not w.dataplane:
        pytest.skip("the kernel data plane is off in this world")
    pairs = 200
    before = w.env.stats()
    c = connect(w, local)
    try:
        for i in range(pairs):
            c.request("GET", f"/rbac/deny/admin/{i}")
            assert c.read_response().status == 403
            c.request("GET", f"/rbac/kdeny/ok/{i}")
            r = c.read_response()
            assert r.status == 200 and r.json()["path"] == f"/rbac/kdeny/ok/{i}"
    finally:
        c.close()
    after = w.env.stats()
    moved = moved_counters(before, after)
    kernel = after["routes"]["rbac-k-deny"]["requests_kernel"] - before["routes"]["rbac-k-deny"]["requests_kernel"]
    rejected = (after["routes"]["rbac-deny"]["rejected"]["rbac_denied"]
                - before["routes"]["rbac-deny"]["rejected"]["rbac_denied"])
    assert rejected == pairs, json.dumps(moved, sort_keys=True)
    assert kernel == pairs, \
        f"{kernel} of {pairs} allowed requests in the kernel; counters moved: {json.dumps(moved, sort_keys=True)}"
    assert moved.get("to_slow_path_route_user") == pairs and "to_slow_path_user_pending" not in moved, moved


def route_stats(w, route="rbac-k-deny"):
    return w.env.stats()["routes"][route]


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
@pytest.mark.parametrize("first", ["slow-path answer", "relayed response"])
def test_response_order_when_the_client_reads_late(w, local, first):
    """A client that sends its next request before reading the previous
    answer, which the daemon wrote (a slow-path answer, or a kernel response
    too big for the socket-to-socket budget that the daemon relays): the
    answers arrive in request order. A local client reads the kernel's
    socket-to-socket responses before the daemon's TCP bytes, so the kernel
    must leave such a request to the slow path until the client has read
    them (it did not: the second response overtook the first)."""
    big = 200_000  # over daemon.ingress_budget (64 KiB): the daemon relays it
    c = connect(w, local)
    try:
        for i in range(3):
            st = route_stats(w)
            # the next request leaves once the answer is written (and so
            # published), and before the client read it
            if first == "slow-path answer":
                denied = route_stats(w, "rbac-deny")["rejected"]["rbac_denied"]
                c.request("GET", f"/rbac/deny/admin/{i}")
                assert wait_until(lambda: route_stats(w, "rbac-deny")["rejected"]["rbac_denied"] > denied,
                                  interval=0.02), "the denial was not answered"
                # nothing else is due: readable means the denial's bytes are here
                assert select.select([c.sock], [], [], LIVENESS)[0], "the denial did not arrive"
            else:
                c.request("GET", f"/rbac/kdeny/big/{i}?size={big}")
                # counted once the relay wrote the last byte, in the step
                # that also publishes it and ends the kernel exchange
                assert wait_until(lambda: route_stats(w)["responses"]["2xx"] > st["responses"]["2xx"],
                                  interval=0.02), "the relayed response did not end"
            c.request("GET", f"/rbac/kdeny/next/{i}")
            r1, r2 = c.read_response(), c.read_response()
            if first == "slow-path answer":
                assert (r1.status, r1.body) == (403, b"forbidden\n"), (i, r1, r2)
            else:
                assert (r1.status, len(r1.body)) == (200, big), (i, r1.status, r1.body[:80], r2)
            assert r2.status == 200 and r2.json()["path"] == f"/rbac/kdeny/next/{i}", (i, r1, r2)
    finally:
        c.close()


def test_rbac_deny_overrides(w):
    st0 = w.env.stats()["routes"]["rbac-deny"]
    r = req(w, "GET", "/rbac/deny/admin")       # allow and deny both hold: deny wins
    assert r.status == 403 and r.body == b"forbidden\n"
    assert req(w, "GET", "/rbac/deny/x").status == 200
    assert req(w, "DELETE", "/rbac/deny/x").status == 200   # no rule: default allow
    assert req(w, "GET", "/rbac/deny/x", headers={"X-Block": "1"}).status == 403  # source + header
    st1 = w.env.stats()["routes"]["rbac-deny"]
    assert st1["rejected"]["rbac_denied"] - st0["rejected"]["rbac_denied"] == 2
    # the deciding rules by name (a rule without one is "rule<N>"), in the
    # stats and in the debug log
    by_rule = {k: v - st0["rbac_denied_by_rule"].get(k, 0) for k, v in st1["rbac_denied_by_rule"].items()}
    assert {k: v for k, v in by_rule.items() if v} == {"rule1": 1, "blocked": 1}, by_rule
    assert "route rbac-deny: rbac_denied:blocked" in w.env.daemon.log()


def test_rbac_on_claims_runs_after_jwt(w):
    assert req(w, path="/rbac/claims").status == 401
    r = req(w, path="/rbac/claims", headers={"Authorization": "Bearer " + hs256(claims(scope="read"))})
    assert r.status == 403 and r.body == b"write scope required\n"
    r = req(w, path="/rbac/claims", headers={"Authorization": "Bearer " + hs256(claims(scope=["read", "write"]))})
    assert r.status == 200


# ---- rate limits ------------------------------------------------------------------------------

# A token bucket admits its first `burst` requests whatever the time (it was
# full: at least burst / rate seconds without a take, which the tests wait),
# and at most burst + rate * T requests in T seconds: the tests assert these
# bounds with T as they measured it, never that a request comes within some
# time of another.

def until_429(c, path, headers=None):
    """Requests on keep-alive connection c until one is refused: a client
    faster than the rate gets there (LIVENESS at most). The statuses, and
    the 429."""
    statuses = []
    deadline = time.monotonic() + LIVENESS
    while time.monotonic() < deadline:
        c.request("GET", path, headers=headers)
        r = c.read_response()
        statuses.append(r.status)
        if r.status == 429:
            return statuses, r
    pytest.fail(f"no 429 in {LIVENESS:.0f} s on {path}: {statuses[-5:]}")


def test_rate_limit_429_with_retry_after_then_recovery(w):
    time.sleep(w.rl_burst + 0.2)  # a full bucket
    before = w.env.stats()["routes"]["rl"]["rejected"]["rate_limited"]
    t0 = time.monotonic()
    c = Conn(w.port)
    statuses, r = until_429(c, "/rl/shared")
    took = time.monotonic() - t0
    assert statuses[:w.rl_burst] == [200] * w.rl_burst, statuses
    assert statuses.count(200) <= w.rl_burst + took, (statuses, took)
    assert r.header("retry-after") == "1"
    assert r.body == b"too many requests\n"
    # keep-alive is kept after a 429: the next request is answered
    c.request("GET", "/rl/shared")
    again = c.read_response().status
    assert again in (200, 429), again
    c.close()
    time.sleep(1.1)  # at least a token back
    assert req(w, path="/rl/shared").status == 200
    refused = 1 + (again == 429)
    assert w.env.stats()["routes"]["rl"]["rejected"]["rate_limited"] - before == refused


def test_rate_limit_keys_have_their_own_buckets(w):
    time.sleep(1.1)  # the bucket of the requests without the key is full
    t0 = time.monotonic()
    c = Conn(w.port)
    statuses, _ = until_429(c, "/rl/key", {"X-Key": "a"})
    assert statuses[0] == 200, statuses   # a new key's bucket starts full
    # so does every other key's, whatever key "a" has left
    keys = [f"k{i}" for i in range(30)]
    assert [req(w, path="/rl/key", headers={"X-Key": k}).status for k in keys] == [200] * len(keys)
    took = time.monotonic() - t0
    # one bucket (burst 1, 1/s) would have admitted at most 1 + took of them
    admitted = statuses.count(200) + len(keys)
    assert admitted > 1 + took, f"{admitted} admitted in {took:.1f} s: cannot tell the buckets apart"
    # the requests without the key share one bucket: limited too
    t0 = time.monotonic()
    statuses, _ = until_429(c, "/rl/key")
    took = time.monotonic() - t0
    assert statuses[0] == 200 and statuses.count(200) <= 1 + took, (statuses, took)
    c.close()


def test_rate_limit_budget_survives_a_reload(w):
    """A bucket of RL_RELOAD_BURST tokens at 1/s, emptied, then the policy
    reloaded: the requests until the next 429 are admitted only by what
    refilled. One bucket admits at most RL_RELOAD_BURST + T requests in the
    T seconds of the test; a bucket the reload reset would admit
    RL_RELOAD_BURST more, which is more than that while T < RL_RELOAD_BURST
    (a minute: only a hang takes that long)."""
    t0 = time.monotonic()
    c = Conn(w.port)
    before, _ = until_429(c, "/rl/reload")   # the route's first use: a full bucket
    assert before[:RL_RELOAD_BURST] == [200] * RL_RELOAD_BURST
    reload(w)  # same route, same limit: same buckets
    after, _ = until_429(c, "/rl/reload")
    took = time.monotonic() - t0
    c.close()
    assert took < RL_RELOAD_BURST, f"{took:.1f} s: too slow to tell a kept bucket from a reset one"
    admitted = before.count(200) + after.count(200)
    assert admitted <= RL_RELOAD_BURST + took, f"{admitted} admitted in {took:.1f} s: the reload reset the bucket"
    # a changed limit starts a fresh bucket: full, whatever the time
    w.rl_burst = 5
    try:
        reload(w)
        statuses = [req(w, path="/rl/shared").status for _ in range(5)]
        assert statuses == [200] * 5
    finally:
        w.rl_burst = 2
        reload(w)


# ---- direct responses ------------------------------------------------------------------------

def test_direct_response_bytes_head_and_keepalive(w):
    before = w.env.stats()["routes"]["direct"]["direct_responses"]
    c = Conn(w.port)
    c.request("GET", "/direct")
    r = c.read_response()
    assert r.raw_head == (b"HTTP/1.1 200 OK\r\nx-direct: yes\r\ncontent-type: application/json\r\n"
                          b"content-length: 11\r\n\r\n")
    assert r.body == b'{"ok":true}'
    c.request("HEAD", "/direct")
    r = c.read_response(head_request=True)
    assert r.status == 200 and r.header("content-length") == "11"
    # nothing followed the HEAD answer's head: the next response is intact
    c.request("POST", "/direct", body=b"dropped body")
    r = c.read_response()
    assert r.body == b'{"ok":true}'
    c.request("GET", "/gone/x")
    r = c.read_response()
    assert r.status == 410 and r.body == b""
    assert r.header("content-length") == "0"
    c.close()
    assert w.env.stats()["routes"]["direct"]["direct_responses"] - before == 3


def test_direct_response_with_connection_close(w):
    c = Conn(w.port)
    c.request("GET", "/direct", headers={"Connection": "close"})
    r = c.read_response()
    assert r.status == 200 and r.header("connection") == "close"
    assert c.closed_by_peer()
    c.close()


# ---- header mutation -----------------------------------------------------------------------

def test_request_mutation_arrives_byte_exact(w):
    c = Conn(w.port)
    c.send(b"GET /mut/x?y=1 HTTP/1.1\r\nHost: t\r\nX-Keep:  1 \r\nX-Internal: secret\r\nx-env: client\r\n"
           b"X-Tag: c\r\nx-internal: again\r\n\r\n")
    r = c.read_response()
    assert r.json()["head"] == ("GET /mut/x?y=1 HTTP/1.1\r\nHost: t\r\nX-Keep:  1 \r\nX-Tag: c\r\n"
                                "x-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n")
    # with a body: the body follows the rewritten head intact
    c.request("POST", "/mut/y", body=b"0123456789")
    r = c.read_response()
    assert r.json()["head"].endswith("x-env: prod\r\nx-tag: a\r\nx-tag: b\r\n\r\n")
    assert "Content-Length: 10\r\n" in r.json()["head"]
    c.close()


def test_response_mutation_arrives_at_the_client(w):
    r = req(w, path="/mut/resp")
    names = [k.lower() for k, _ in r.headers]
    assert "server" not in names
    assert [v for k, v in r.headers if k.lower() == "x-frame-options"] == ["DENY"]
    assert r.header("x-keep") == "kept"
    assert r.raw_head.startswith(b"HTTP/1.1 200 OK\r\nX-Keep: kept\r\nContent-Type: application/json\r\n"
                                 b"Content-Length: ")
    assert r.raw_head.endswith(b"\r\nx-frame-options: DENY\r\n\r\n")
    assert json.loads(r.body)["head"].startswith("GET /mut/resp HTTP/1.1\r\n")
    r = req(w, "HEAD", "/mut/resp", head=True)
    assert r.status == 200 and r.header("x-frame-options") == "DENY" and r.body == b""


# ---- upstream choice ---------------------------------------------------------------------------

def backend_of(w, path, headers):
    r = req(w, path=path, headers=headers)
    assert r.status == 200, r
    return r.json()["backend"]


def key_header(u, as_cookie):
    return ("Cookie", f"session={u}") if as_cookie else ("X-User", u)


def placements(w, path, users, as_cookie=False):
    """The backend each user's request reached."""
    return {u: backend_of(w, path, dict([key_header(u, as_cookie)])) for u in users}


def reference_placements(w, path, users, as_cookie=False):
    """The endpoint the reference chooses for each user: `l7fastctl explain`
    on the running policy runs proxy::choose_endpoint over the same table."""
    by_address = {a: n for n, a in w.backends.items()}
    out = {}
    for u in users:
        rc, doc, err = w.env.ctl("--json", "explain", "GET", path, "-H", ": ".join(key_header(u, as_cookie)))
        assert rc == 0, err
        out[u] = by_address[json.loads(doc)["upstream"]["endpoint"]]
    return out


def check_consistent_hash(w, path, users, as_cookie):
    """Each key reaches the endpoint the reference table gives it (lb::RingHash,
    lb::Maglev), on both paths, before and after h3 leaves the cluster and
    again when it is back; keys are sticky across requests. The endpoints are
    127.0.0.1 at ports chosen per run and the tables hash the addresses, so how
    many keys move is a property of the draw: the share that moves is the
    unit tests' (ConsistentHash.RemovingOneOfTenMovesAboutATenth, fixed names),
    here every key's endpoint is asserted exactly."""
    first = placements(w, path, users, as_cookie)
    assert first == reference_placements(w, path, users, as_cookie)
    assert placements(w, path.replace("/x", "/y"), users, as_cookie) == first
    assert set(first.values()) <= {"h1", "h2", "h3"}
    w.ring_members = ["h1", "h2"]
    try:
        reload(w)
        after = placements(w, path, users, as_cookie)
        assert after == reference_placements(w, path, users, as_cookie)
    finally:
        w.ring_members = ["h1", "h2", "h3"]
        reload(w)
    assert set(after.values()) <= {"h1", "h2"}
    assert placements(w, path, users, as_cookie) == first


def test_ring_hash_is_sticky_and_follows_the_reference_table(w):
    check_consistent_hash(w, "/ring/x", [f"user-{i}" for i in range(90)], as_cookie=False)


def test_maglev_is_sticky_and_follows_the_reference_table(w):
    check_consistent_hash(w, "/maglev/x", [f"s{i}" for i in range(60)], as_cookie=True)


def test_route_timeout_replaces_the_daemon_default(w):
    # The backend answers after 20 s: a 504 is a timeout that fired before,
    # so the route's 600 ms, not the daemon's LIVENESS (30 s), and never
    # before 600 ms (less its timer's rounding).
    t0 = time.monotonic()
    r = req(w, path="/timeout?delay=20000")
    assert r.status == 504
    assert time.monotonic() - t0 > 0.5
    # the daemon default applies to other routes: a 1 s answer arrives
    assert route_of(req(w, path="/slow?delay=1000")) == "fallback"


def test_connect_retries_try_another_endpoint(w):
    statuses = [req(w, path=f"/retry/{i}").status for i in range(8)]
    assert statuses == [200] * 8
    statuses = [req(w, path=f"/noretry/{i}").status for i in range(8)]
    assert 502 in statuses and 200 in statuses


def test_stats_name_the_rejections(w):
    # counts of its own requests (was: at least what earlier tests had sent,
    # which depended on which of them ran)
    before = w.env.stats()
    assert req(w, "DELETE", "/rbac/first/x").status == 418
    assert req(w, path="/direct").status == 200
    rc, out, err = w.env.ctl("stats")
    assert rc == 0, err
    assert "ANSWERED BY POLICY" in out
    st = w.env.stats()
    for name in ["jwt-hs", "rbac-first", "rl", "direct"]:
        rej = st["routes"][name]["rejected"]
        assert set(rej) == {"jwt_missing", "jwt_invalid", "rbac_denied", "rate_limited"}
    assert st["routes"]["rbac-first"]["rejected"]["rbac_denied"] - \
        before["routes"]["rbac-first"]["rejected"]["rbac_denied"] == 1
    assert st["routes"]["direct"]["direct_responses"] - before["routes"]["direct"]["direct_responses"] == 1
