"""What is measured: policies (the same policy for every system), the request
that exercises them, and the plans of the short, full and smoke modes.

A policy is a set of features with sizes. Each system's template module
(l7bench/policies/) says which features it can express; a scenario whose
policy needs a feature a system lacks is reported "n/a" for that system with
the template's reason. The request always takes the *last* route (the worst
case for a matcher that tries routes in order) and passes every RBAC rule
(all of them are evaluated).
"""
import base64
import hashlib
import hmac
import json
from dataclasses import dataclass, field, replace

JWT_SECRET = "l7fast-bench-hs256-secret-0123456789abcdef"
JWT_ISSUER = "https://issuer.bench.example"
HOST = "bench.example"
TENANT = "gold"
USER = "alice"


@dataclass(frozen=True)
class Policy:
    routes: int = 10          # path-prefix routes /svc0000/ .. ; the request takes the last
    match: str = "path"       # "path": path prefix; "full": method + host + path + header
    header_add: bool = False  # add a request header towards the upstream
    rbac_rules: int = 0       # deny rules on x-user (none matches the request)
    jwt_bytes: int = 0        # 0: no JWT; else HS256 token of about this many bytes
    hash_lb: bool = False     # consistent hash on x-user over 4 endpoints

    def features(self):
        f = ["routing"]
        if self.match == "full":
            f.append("match_full")
        if self.header_add:
            f.append("header_add")
        if self.rbac_rules:
            f.append("rbac")
        if self.jwt_bytes:
            f.append("jwt")
        if self.hash_lb:
            f.append("hash_lb")
        return f

    def describe(self):
        parts = [f"{self.routes} route{'s' if self.routes != 1 else ''}"
                 f" ({'method+host+path+header' if self.match == 'full' else 'path prefix'})"]
        if self.header_add:
            parts.append("header add")
        if self.rbac_rules:
            parts.append(f"RBAC {self.rbac_rules} deny rule{'s' if self.rbac_rules != 1 else ''}")
        if self.jwt_bytes:
            parts.append(f"JWT HS256 {self.jwt_bytes} B")
        if self.hash_lb:
            parts.append("consistent hash on x-user")
        return ", ".join(parts)


@dataclass(frozen=True)
class Scenario:
    group: str                # "main" or the sweep's name
    x: object                 # the sweep's value (plots and tables)
    policy: Policy
    header_bytes: int = 0     # pad the request head to about this size (0: no padding)
    conns: tuple = (32,)
    rounds: int = 3

    @property
    def key(self):
        return f"{self.group}={self.x}"


def route_prefix(i):
    return f"/svc{i:04d}/"


def jwt_token(size):
    """An HS256 JWT of about `size` bytes (padding in a claim)."""
    def b64(b):
        return base64.urlsafe_b64encode(b).rstrip(b"=")
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    claims = {"iss": JWT_ISSUER, "sub": USER, "aud": "bench", "exp": 4102444800, "pad": ""}
    base = len(header) + 1 + len(b64(json.dumps(claims, separators=(",", ":")).encode())) + 44
    pad = max(0, (size - base) * 3 // 4)
    claims["pad"] = "p" * pad
    payload = b64(json.dumps(claims, separators=(",", ":")).encode())
    signing = header + b"." + payload
    sig = b64(hmac.new(JWT_SECRET.encode(), signing, hashlib.sha256).digest())
    return (signing + b"." + sig).decode()


def request_for(sc):
    """(method, path, [(name, value)]) of the request a scenario sends."""
    p = sc.policy
    path = route_prefix(p.routes - 1) + "item"
    headers = [("Host", HOST), ("User-Agent", "wrk"), ("Accept", "*/*"),
               ("X-Tenant", TENANT), ("X-User", USER)]
    if p.jwt_bytes:
        headers.append(("Authorization", "Bearer " + jwt_token(p.jwt_bytes)))
    head = len(f"GET {path} HTTP/1.1\r\n") + sum(len(k) + len(v) + 4 for k, v in headers) + 2
    i = 0
    while sc.header_bytes and head < sc.header_bytes:
        # values of at most 1000 bytes: the size of a large cookie, and under
        # every proxy's per-line limit
        name = f"X-Pad-{i:02d}"
        n = min(1000, sc.header_bytes - head - len(name) - 4)
        if n < 1:
            break
        headers.append((name, "v" * n))
        head += len(name) + n + 4
        i += 1
    return "GET", path, headers


MAIN = Policy(routes=10, match="path")

# Policy complexity levels, each adding one feature to the one before.
COMPLEXITY = [
    ("1 path", Policy(routes=10)),
    ("2 +method/host/header match", Policy(routes=10, match="full")),
    ("3 +header add", Policy(routes=10, match="full", header_add=True)),
    ("4 +RBAC 10 rules", Policy(routes=10, match="full", header_add=True, rbac_rules=10)),
    ("5 +JWT HS256", Policy(routes=10, match="full", header_add=True, rbac_rules=10,
                            jwt_bytes=512)),
    ("6 +consistent hash", Policy(routes=10, match="full", header_add=True, rbac_rules=10,
                                  jwt_bytes=512, hash_lb=True)),
]

SWEEP_AXES = {
    "header_bytes": "request header size (bytes)",
    "routes": "number of routes",
    "rbac_rules": "RBAC deny rules",
    "jwt_bytes": "JWT size (bytes)",
    "complexity": "policy complexity level",
    "main": "",
}


@dataclass
class Plan:
    mode: str
    duration: int             # seconds per measured run of the standard policy
    sweep_duration: int       # seconds per measured run of the sweeps
    warmup: int               # seconds of warm-up per system and scenario
    scenarios: list = field(default_factory=list)
    reload_routes: tuple = (1, 100, 1000)
    reload_count: int = 10    # reloads under load per route count
    reload_conns: int = 8
    profile_seconds: int = 0  # 0: no perf profiles
    systems: tuple = ()
    sweep_conns: tuple = (32,)  # connection count of every sweep but the standard policy's


def build_plan(mode, systems, duration=None, rounds=None, conns=None, sweeps=None):
    if mode == "full":
        plan = Plan(mode, duration or 5, duration or 4, 1, profile_seconds=5)
        main_rounds, sweep_rounds = rounds or 5, rounds or 3
        # the concurrency sweep of the standard policy
        main_conns = tuple(conns or (1, 8, 32, 128, 512))
        hdr = [512, 1024, 2048, 4096, 8192, 16384]
        routes = [1, 10, 100, 1000]
        rbac = [1, 10, 50, 100]
        jwt = [256, 512, 1024, 1536]
        levels = COMPLEXITY
    elif mode == "short":
        plan = Plan(mode, duration or 2, duration or 2, 1, reload_routes=(1, 1000),
                    reload_count=5)
        main_rounds, sweep_rounds = rounds or 3, rounds or 1
        main_conns = tuple(conns or (1, 32, 128))
        hdr = [2048, 16384]
        routes = [1, 1000]
        rbac = [100]
        jwt = [1536]
        levels = [COMPLEXITY[-1]]
    elif mode == "smoke":
        plan = Plan(mode, duration or 1, duration or 1, 0, reload_routes=(10,), reload_count=2,
                    reload_conns=2)
        main_rounds, sweep_rounds = rounds or 1, rounds or 1
        main_conns = tuple(conns or (1, 4))
        hdr, routes, rbac, jwt, levels = [2048], [1, 100], [], [], [COMPLEXITY[1]]
        plan.sweep_conns = (max(main_conns),)
    else:
        raise ValueError(f"unknown mode {mode!r}")
    sweep_conns = plan.sweep_conns
    sc = [Scenario("main", "standard", MAIN, 0, main_conns, main_rounds)]
    sc += [Scenario("header_bytes", v, MAIN, v, sweep_conns, sweep_rounds) for v in hdr]
    sc += [Scenario("routes", v, replace(MAIN, routes=v), 0, sweep_conns, sweep_rounds)
           for v in routes]
    sc += [Scenario("rbac_rules", v, replace(MAIN, rbac_rules=v), 0, sweep_conns, sweep_rounds)
           for v in rbac]
    sc += [Scenario("jwt_bytes", v, replace(MAIN, jwt_bytes=v), 0, sweep_conns, sweep_rounds)
           for v in jwt]
    sc += [Scenario("complexity", name, pol, 0, sweep_conns, sweep_rounds) for name, pol in levels]
    if sweeps is not None:
        sc = [s for s in sc if s.group == "main" or s.group in sweeps]
    plan.scenarios = sc
    plan.systems = tuple(systems)
    return plan
