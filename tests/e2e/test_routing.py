"""Routing by method, host, path and headers; weights; keep-alive; proof
that matched traffic takes the kernel path."""
import collections

import pytest

from l7env import Conn, cluster_toml, free_port, listener_toml


@pytest.fixture(scope="module")
def web(env):
    for name in "abcd":
        env.backend(name)
    b = env.backends
    port = free_port()
    env.start(listener_toml(port) + "".join(cluster_toml(n, b[n].address()) for n in "abcd") + f"""
[[cluster]]
name = "w"
lb = "weighted"
endpoints = [ {{ address = "{b['a'].address()}", weight = 3 }}, {{ address = "{b['b'].address()}", weight = 1 }} ]
[[cluster]]
name = "rr"
endpoints = [ {{ address = "{b['a'].address()}" }}, {{ address = "{b['b'].address()}" }} ]

[[route]]
name = "post-m"
cluster = "b"
match = {{ method = ["POST"], path_prefix = "/m/" }}
[[route]]
name = "m"
cluster = "a"
match = {{ path_prefix = "/m/" }}
[[route]]
name = "api-host"
cluster = "c"
match = {{ host = "api.example.com" }}
[[route]]
name = "tenant-gold"
cluster = "d"
match = {{ headers = [ {{ name = "X-Tenant", exact = "gold" }} ] }}
[[route]]
name = "debug"
cluster = "b"
match = {{ headers = [ {{ name = "x-debug", present = true }} ] }}
[[route]]
name = "exact"
cluster = "c"
match = {{ path_exact = "/exact" }}
[[route]]
name = "canary"
clusters = [ {{ name = "a", weight = 80 }}, {{ name = "b", weight = 20 }} ]
match = {{ path_prefix = "/canary" }}
[[route]]
name = "weighted-endpoints"
cluster = "w"
match = {{ path_prefix = "/wep" }}
[[route]]
name = "round-robin"
cluster = "rr"
match = {{ path_prefix = "/rr" }}
[[route]]
name = "default"
cluster = "a"
""")
    return port


def backend_of(conn, method, path, **kw):
    conn.request(method, path, **kw)
    r = conn.read_response()
    assert r.status == 200, r
    return r.json()["backend"]


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_method_path_host_header_routing(env, web, local):
    ctx = env.local() if local else _null()
    with ctx:
        c = Conn(web)
    try:
        assert backend_of(c, "POST", "/m/x", body=b"hi") == "b"
        assert backend_of(c, "GET", "/m/x") == "a"
        assert backend_of(c, "GET", "/", host="api.example.com") == "c"
        assert backend_of(c, "GET", "/", host="API.Example.COM:8080") == "c"
        assert backend_of(c, "GET", "/", host="other.example.com") == "a"
        assert backend_of(c, "GET", "/", headers={"x-tenant": "gold"}) == "d"
        assert backend_of(c, "GET", "/", headers={"X-Tenant": "silver"}) == "a"
        assert backend_of(c, "GET", "/", headers={"X-Debug": ""}) == "b"
        assert backend_of(c, "GET", "/exact") == "c"
        assert backend_of(c, "GET", "/exact?q=1") == "c"
        assert backend_of(c, "GET", "/exact/") == "a"
        assert backend_of(c, "GET", "/exactly") == "a"
    finally:
        c.close()


def in_the_kernel(env, port, path, n):
    """Backends of n requests to path/i on one local keep-alive connection,
    every one of them taken by the kernel: with a pooled connection idle to
    each backend first, a client that does not pipeline never finds none."""
    env.daemon.wait_idle(*(b.address() for b in env.backends.values()))
    before = env.daemon.counters()
    with env.local():
        c = Conn(port)
    seen = [backend_of(c, "GET", f"{path}/{i}") for i in range(n)]
    c.close()
    after = env.daemon.counters()
    moved = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    assert moved == {"requests_kernel": n, "responses_kernel": n}, moved
    return seen


def test_route_weights_are_statistically_right(env, web):
    # Binomial(2000, 0.2): the share of "b" leaves (0.13, 0.27) with
    # probability 2.9e-14 (exact tail sum); weights ignored (0.5), reversed
    # (0.8) or one cluster only (0 or 1) are far outside.
    n = 2000
    counts = collections.Counter(in_the_kernel(env, web, "/canary", n))
    assert counts["a"] + counts["b"] == n, counts
    assert abs(counts["b"] / n - 0.2) < 0.07, counts


def test_weighted_endpoints(env, web):
    # Binomial(2000, 0.75): the share of "a" leaves (0.67, 0.83) with
    # probability 6.8e-16 (exact tail sum); equal weights give 0.5.
    n = 2000
    counts = collections.Counter(in_the_kernel(env, web, "/wep", n))
    assert counts["a"] + counts["b"] == n, counts
    assert abs(counts["a"] / n - 0.75) < 0.08, counts


def test_round_robin_alternates(env, web):
    # one counter per cluster, taken atomically by every kernel request
    seen = in_the_kernel(env, web, "/rr", 40)
    assert all(x != y for x, y in zip(seen, seen[1:])), seen
    assert set(seen) == {"a", "b"}, seen


def test_keepalive_requests_take_the_kernel_path(env, web):
    assert in_the_kernel(env, web, "/m", 50) == ["a"] * 50


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False
