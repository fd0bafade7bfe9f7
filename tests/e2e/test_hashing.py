"""Ring hash and Maglev in the kernel data plane.

Two daemons run side by side on the same backends: one with the kernel data
plane, one with `kernel_dataplane = false` (the slow path, the reference).
For keys taken from a header and from the client's source address, the
kernel must serve the requests itself (route counters: requests_kernel
grows, requests_user does not) and pick the very backend the slow path
picks for the same key; removing one of three endpoints must move about a
third of the keys, in the kernel too.
"""
import collections
import os

import pytest

import l7env
from l7env import free_port

MEMBERS = ["h1", "h2", "h3"]


def render(w, port, port6, members):
    eps = ", ".join(f'{{ address = "{w.backends[n]}" }}' for n in members)
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[listener]]
name = "web6"
address = "[::1]:{port6}"

[[cluster]]
name = "ring"
lb = "ring_hash"
hash_key = {{ header = "X-User" }}
endpoints = [ {eps} ]
[[cluster]]
name = "maglev"
lb = "maglev"
hash_key = {{ header = "x-session" }}
endpoints = [ {eps} ]
[[cluster]]
name = "ring-ip"
lb = "ring_hash"
hash_key = {{ source_ip = true }}
endpoints = [ {eps} ]
[[cluster]]
name = "maglev-ip"
lb = "maglev"
maglev_table_size = 251
hash_key = {{ source_ip = true }}
endpoints = [ {eps} ]

[[route]]
name = "ring"
cluster = "ring"
match = {{ path_prefix = "/ring/" }}
[[route]]
name = "maglev"
cluster = "maglev"
match = {{ path_prefix = "/maglev/" }}
[[route]]
name = "ring-ip"
cluster = "ring-ip"
match = {{ path_prefix = "/ring-ip/" }}
[[route]]
name = "maglev-ip"
cluster = "maglev-ip"
match = {{ path_prefix = "/maglev-ip/" }}
"""


class World:
    pass


@pytest.fixture(scope="module")
def w():
    reason = l7env.skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        pytest.skip(reason)
    w = World()
    w.kern = l7env.Env("hashing")
    w.slow = l7env.Env("hashing-slow")
    try:
        w.backends = {n: w.kern.backend(n).address() for n in MEMBERS}
        w.port, w.port6 = free_port(), free_port("::1")
        w.slow_port, w.slow_port6 = free_port(), free_port("::1")
        w.members = MEMBERS
        w.kern.start(render(w, w.port, w.port6, MEMBERS))
        w.slow.start(render(w, w.slow_port, w.slow_port6, MEMBERS), daemon_settings="kernel_dataplane = false")
        yield w
    finally:
        warnings = w.kern.kernel_warnings()
        w.slow.close()
        w.kern.close()
    assert not warnings, "kernel warnings during the test:\n" + "\n".join(warnings)


def set_members(w, members):
    w.members = members
    for env, port, port6 in ((w.kern, w.port, w.port6), (w.slow, w.slow_port, w.slow_port6)):
        env.daemon.write_policy(render(w, port, port6, members))
        ready = env.daemon.reload()
        assert "last reload failed" not in ready, env.daemon.log()[-3000:]


def connect(w, env, port, local, host="127.0.0.1", source=None):
    """A client of `env`'s daemon; with the kernel data plane, once every
    current member has an idle pooled connection, so that each request the
    kernel places is the kernel's."""
    if env is w.kern:
        env.daemon.wait_idle(*(w.backends[n] for n in w.members))
    return env.client(port, local, host, source)


def backend_of(conn, path, headers=None):
    conn.request("GET", path, headers=headers)
    r = conn.read_response()
    assert r.status == 200, (r, r.body[:300])
    return r.json()["backend"]


def route(env, name):
    return env.stats()["routes"][name]


def counted(env, name, before):
    after = route(env, name)
    return (after["requests_kernel"] - before["requests_kernel"],
            after["requests_user"] - before["requests_user"])


def header_placements(w, env, port, path, header, keys, local):
    """Backend per key, one keep-alive connection for all of them."""
    c = connect(w, env, port, local)
    try:
        return {k: backend_of(c, path, {header: k}) for k in keys}
    finally:
        c.close()


HEADER_CASES = [("ring", "/ring/x", "X-User"), ("maglev", "/maglev/x", "X-Session")]


@pytest.mark.parametrize("name,path,header", HEADER_CASES, ids=[c[0] for c in HEADER_CASES])
def test_header_keys_are_chosen_in_the_kernel_like_the_slow_path(w, name, path, header):
    keys = [f"user-{i}" for i in range(60)] + ["", "x" * 300, "a b", "31-bytes-long-key-0123456789abc"]
    before = route(w.kern, name)
    kernel = header_placements(w, w.kern, w.port, path, header, keys, local=True)
    assert counted(w.kern, name, before) == (len(keys), 0)
    slow = header_placements(w, w.slow, w.slow_port, path, header, keys, local=False)
    assert kernel == slow
    assert set(kernel.values()) == set(MEMBERS)
    # a request without the key lands anywhere (random, as in the slow path),
    # in the kernel too: on one endpoint only with probability at most
    # 3 * (1/2)^60 < 3e-18 (no endpoint of the three holds half the table)
    before = route(w.kern, name)
    c = connect(w, w.kern, w.port, True)
    seen = collections.Counter(backend_of(c, path) for _ in range(60))
    c.close()
    assert counted(w.kern, name, before) == (60, 0)
    assert len(seen) >= 2, seen


@pytest.mark.parametrize("name,path,header", HEADER_CASES, ids=[c[0] for c in HEADER_CASES])
def test_a_repeated_key_header_is_left_to_the_slow_path(w, name, path, header):
    """The slow path hashes the first field line; the kernel does not pick
    among several, it passes the request on."""
    before = route(w.kern, name)
    c = connect(w, w.kern, w.port, True)
    try:
        c.send(f"GET {path} HTTP/1.1\r\nHost: t\r\n{header}: first\r\n{header}: second\r\n\r\n".encode())
        r = c.read_response()
    finally:
        c.close()
    assert r.status == 200
    assert counted(w.kern, name, before) == (0, 1)
    alone = header_placements(w, w.slow, w.slow_port, path, header, ["first"], local=False)
    assert r.json()["backend"] == alone["first"]


def source_placements(w, env, port, path, sources, local, host="127.0.0.1", per_conn=3):
    out = {}
    for src in sources:
        c = connect(w, env, port, local, host, source=src)
        try:
            got = {backend_of(c, path) for _ in range(per_conn)}
        finally:
            c.close()
        assert len(got) == 1, (src, got)
        out[src] = got.pop()
    return out


IP_CASES = [("ring-ip", "/ring-ip/x"), ("maglev-ip", "/maglev-ip/x")]


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
@pytest.mark.parametrize("name,path", IP_CASES, ids=[c[0] for c in IP_CASES])
def test_source_ip_keys_are_chosen_in_the_kernel_like_the_slow_path(w, name, path, local):
    sources = [f"127.0.0.{i}" for i in range(2, 42)]
    before = route(w.kern, name)
    kernel = source_placements(w, w.kern, w.port, path, sources, local)
    # a remote client's first request too: connect() returns once l7fastd
    # has put the connection in the data plane
    assert counted(w.kern, name, before) == (3 * len(sources), 0)
    slow = source_placements(w, w.slow, w.slow_port, path, sources, local=False, per_conn=1)
    assert kernel == slow
    assert set(kernel.values()) == set(MEMBERS)

    # IPv6: the 16 address bytes are the key
    before = route(w.kern, name)
    kernel6 = source_placements(w, w.kern, w.port6, path, ["::1"], local, host="::1")
    assert counted(w.kern, name, before) == (3, 0)
    assert kernel6 == source_placements(w, w.slow, w.slow_port6, path, ["::1"], local=False, host="::1", per_conn=1)


@pytest.mark.parametrize("name,path,header", [
    ("ring", "/ring/x", "X-User"),
    ("maglev", "/maglev/x", "X-Session"),
], ids=["ring", "maglev"])
def test_removing_an_endpoint_moves_keys_in_the_kernel_as_in_the_slow_path(w, name, path, header):
    """The kernel's table after a reload that removes h3 places every key
    where the slow path's does. How many keys move depends on the endpoints'
    addresses (ports chosen per run), so the share is the unit tests'
    (ConsistentHash.RemovingOneOfTenMovesAboutATenth), not asserted here."""
    keys = [f"user-{i}" for i in range(90)]
    first = header_placements(w, w.kern, w.port, path, header, keys, local=True)
    assert first == header_placements(w, w.slow, w.slow_port, path, header, keys, local=False)
    set_members(w, ["h1", "h2"])
    try:
        before = route(w.kern, name)
        after = header_placements(w, w.kern, w.port, path, header, keys, local=True)
        assert counted(w.kern, name, before) == (len(keys), 0)
        assert after == header_placements(w, w.slow, w.slow_port, path, header, keys, local=False)
    finally:
        set_members(w, MEMBERS)
    assert set(after.values()) <= {"h1", "h2"}
    assert header_placements(w, w.kern, w.port, path, header, keys, local=True) == first
