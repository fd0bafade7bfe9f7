"""Rate limits of kernel routes: the kernel takes a request's token from the
route's bucket (l7_buckets; a keyed limit's key from its key's bucket in
l7_rate_keys) and answers 429 itself when there is none, and the slow
path's requests of the same route take from the same bucket (RateLimiter's
SharedBucket: mmapped, or by l7_rate_take_user for a key), so a request
counts once whichever path serves it. Exact, never timed: the tests set the bucket's state in the
map themselves (bpftool) and count what each request took from it, which a
bucket far from its capacity shows exactly (1000 milli-tokens per token;
bpf/include/l7_bucket.h), whatever the time the test takes."""
import json
import os
import re
import socket
import subprocess
import time

import pytest

import l7env
from l7env import Conn, make_request

# a bucket of a million tokens refilled at 1/s: never full again within a test
RATE, BURST = 1, 1_000_000
MILLI = 1000
ORIGIN = 1 << 62

LIMITED_429 = (b"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\ncontent-type: text/plain\r\n"
               b"content-length: 18\r\n\r\ntoo many requests\n")
DIRECT_OK = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 3\r\n\r\nok\n"


def policy(port, backend):
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "app"
endpoints = [ {{ address = "{backend.address()}" }} ]

[[route]]
name = "limited"
cluster = "app"
match = {{ path_prefix = "/limited" }}
rate_limit = {{ rate = {RATE}, burst = {BURST} }}
[[route]]
name = "limited-direct"
match = {{ path_prefix = "/ld" }}
direct_response = {{ status = 200, body = "ok\\n" }}
rate_limit = {{ rate = {RATE}, burst = {BURST} }}
[[route]]
name = "keyed"
cluster = "app"
match = {{ path_prefix = "/keyed" }}
rate_limit = {{ rate = {RATE}, burst = {BURST}, key = {{ header = "X-Key" }} }}
[[route]]
name = "by-address"
match = {{ path_prefix = "/addr" }}
direct_response = {{ status = 200, body = "ok\\n" }}
rate_limit = {{ rate = {RATE}, burst = {BURST}, key = {{ source_ip = true }} }}
[[route]]
name = "small"
cluster = "app"
match = {{ path_prefix = "/small" }}
rate_limit = {{ rate = 1, burst = 5, key = {{ header = "X-Key" }} }}
[[route]]
name = "cookied"
cluster = "app"
match = {{ path_prefix = "/cookied" }}
rate_limit = {{ rate = 1, burst = 5, key = {{ cookie = "s" }} }}
[[route]]
name = "app"
cluster = "app"
match = {{ path_prefix = "/" }}
"""


@pytest.fixture(scope="module")
def pair():
    with l7env.answering_pair("krl", policy) as sides:
        yield sides


@pytest.fixture(scope="module")
def k(pair):
    return pair["kernel"]


def clock(rate=RATE):
    """The bucket clock V(now) of l7_bucket_clock() (CLOCK_MONOTONIC)."""
    now = time.monotonic_ns()
    return ORIGIN + now // 1_000_000 * rate + now % 1_000_000 * rate // 1_000_000


def buckets(side):
    return {e["formatted"]["key"]: e["formatted"]["value"] for e in side.env.daemon.map_dump("l7_buckets")}


def set_bucket(side, bid, mark):
    value = [str(b) for b in mark.to_bytes(8, "little")]
    key = [str(b) for b in bid.to_bytes(4, "little")]
    subprocess.run(["bpftool", "map", "update", "pinned", f"{side.env.daemon.bpffs}/maps/l7_buckets",
                    "key", *key, "value", *value], check=True, capture_output=True)


def one(side, path, local=True, extra=None, writes=None):
    """One request on its own connection: (response bytes, closed)."""
    c = side.env.client(side.port, local)
    try:
        for i, w in enumerate(writes or [make_request("GET", path, extra)]):
            if i:
                time.sleep(0.05)
            c.send(w)
        c.sock.settimeout(l7env.LIVENESS)
        r = c.read_response()
        c.sock.settimeout(0.3)
        try:
            closed = c.sock.recv(1) == b""
        except socket.timeout:
            closed = False
        return r.raw_head + r.body, closed, r
    finally:
        c.close()


_ids = {}


def bucket_id(side, path):
    """The l7_buckets entry of the route serving `path`: the one entry a
    request there moves."""
    if path not in _ids:
        before = buckets(side)
        one(side, path)
        after = buckets(side)
        moved = [i for i in after if after[i] != before.get(i)]
        assert len(moved) == 1, (before, after)
        _ids[path] = moved[0]
    return _ids[path]


def with_tokens(side, path, tokens):
    """Gives the route's bucket `tokens` tokens (plus what refills while the
    test runs); returns (bucket id, its mark)."""
    bid = bucket_id(side, path)
    mark = clock() - tokens * MILLI
    set_bucket(side, bid, mark)
    return bid, mark


def key_tables(side):
    """{l7_buckets id: map id of its keyed table}: l7_rate_keys, which the
    daemon holds (the one array of maps among its descriptors; not
    pinned)."""
    pid = side.env.daemon.proc.pid
    outer = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = f.read()
        except FileNotFoundError:
            continue
        if re.search(r"^map_type:\s+12$", info, re.M):  # BPF_MAP_TYPE_ARRAY_OF_MAPS
            outer.add(int(re.search(r"^map_id:\s+(\d+)$", info, re.M).group(1)))
    assert len(outer) == 1, outer
    out = subprocess.run(["bpftool", "-j", "map", "dump", "id", str(outer.pop())],
                         capture_output=True, text=True, check=True).stdout

    def num(bs):
        return int.from_bytes(bytes(int(b, 16) for b in bs), "little")
    return {num(e["key"]): num(e["value"]) for e in json.loads(out)}


def key_table(side, bid):
    return key_tables(side)[bid]


def key_bytes(key):
    """struct l7_rate_key for `key` (bytes): the bytes zero-padded to 64,
    their length, padding."""
    assert len(key) <= 64
    return [str(b) for b in key.ljust(64, b"\0") + len(key).to_bytes(4, "little") + bytes(4)]


def key_bucket(side, bid, key):
    """The mark of `key`'s bucket in route bucket bid's table, None if absent."""
    out = subprocess.run(["bpftool", "-j", "map", "lookup", "id", str(key_table(side, bid)),
                          "key", *key_bytes(key)], capture_output=True, text=True)
    if out.returncode:
        return None
    return int.from_bytes(bytes(int(b, 16) for b in json.loads(out.stdout)["value"]), "little")


def set_key_bucket(side, bid, key, mark):
    subprocess.run(["bpftool", "map", "update", "id", str(key_table(side, bid)), "key", *key_bytes(key),
                    "value", *[str(b) for b in mark.to_bytes(8, "little")]], check=True, capture_output=True)


def figures(side, route):
    st = side.env.stats()["routes"][route]
    return st["requests_kernel"], st["requests_user"], st["rejected"]["rate_limited"]


def delta(a, b):
    return tuple(y - x for x, y in zip(a, b))


def test_rate_limits_keyed_by_a_header_or_address_are_placed_in_the_kernel_cookies_are_not(k):
    rc, out, err = k.env.ctl("--json", "routes")
    assert rc == 0, err
    routes = {r["name"]: r for r in json.loads(out)["routes"]}
    for name in ("limited", "limited-direct", "keyed", "by-address", "small"):
        assert routes[name]["placement"] == "kernel", routes[name]
    assert routes["cookied"]["placement"] == "user"
    assert "rate limits keyed by a cookie run in user space" in routes["cookied"]["reason"]


def test_explain_says_whose_bucket_it_is(k):
    """l7fastctl explain: a kernel route's limit is on the kernel's bucket,
    whose 429 the kernel sends, a key's too unless it is longer than the
    kernel keeps; a cookie's is user space's."""
    stages = {}
    for path, key in (("/limited/x", "a"), ("/keyed/x", "a"), ("/keyed/y", "k" * 65), ("/cookied/x", "a")):
        rc, out, err = k.env.ctl("--json", "explain", "GET", path, "-H", f"X-Key: {key}", "-H", f"Cookie: s={key}")
        assert rc == 0, err
        stages[path] = [s for s in json.loads(out)["stages"] if s["stage"] == "rate_limit"]
    assert [s["bucket"] for s in stages["/limited/x"]] == ["kernel (shared with the slow path)"]
    assert "the kernel sends it" in stages["/limited/x"][0]["note"]
    assert [s["bucket"] for s in stages["/keyed/x"]] == ["kernel (shared with the slow path)"]
    assert [s["bucket"] for s in stages["/keyed/y"]] == ["user space"]
    assert [s["bucket"] for s in stages["/cookied/x"]] == ["user space"]


def test_both_paths_take_from_one_bucket(k):
    """Three local requests and a remote one in the kernel, two the slow path
    serves (a path it normalises, an absolute-form target): six tokens
    leave the one bucket, exactly."""
    bid, mark = with_tokens(k, "/limited/probe", 100)
    before = figures(k, "limited")
    outs = [one(k, "/limited/a"), one(k, "/limited/b"), one(k, "/limited/c"),
            one(k, "/limited/d", local=False),
            one(k, "/limited/x/../e"),
            one(k, None, writes=[b"GET http://test/limited/f HTTP/1.1\r\nHost: test\r\n\r\n"])]
    assert [o[2].status for o in outs] == [200] * 6
    assert buckets(k)[bid] - mark == 6 * MILLI
    assert delta(before, figures(k, "limited")) == (4, 2, 0)


def test_a_request_the_kernel_hands_over_after_its_take_gives_the_token_back(k):
    """A direct response whose body comes in a later write: the kernel took
    a token, cannot answer the message, and hands it to the slow path,
    which takes its own. One token in all."""
    bid, mark = with_tokens(k, "/ld/probe", 100)
    before = figures(k, "limited-direct")
    c0 = k.env.daemon.counters()
    req = make_request("POST", "/ld/x", {"Content-Type": "text/plain"}, b"0123456789")
    got, closed, _ = one(k, None, writes=[req[:-10], req[-10:]])
    assert (got, closed) == (DIRECT_OK, False)
    assert buckets(k)[bid] - mark == MILLI
    assert delta(before, figures(k, "limited-direct")) == (0, 1, 0)
    assert k.env.daemon.counters().get("to_slow_path_too_big", 0) - c0.get("to_slow_path_too_big", 0) == 1
    # and one the kernel answers itself: one token too
    got, closed, _ = one(k, "/ld/y")
    assert (got, closed) == (DIRECT_OK, False)
    assert buckets(k)[bid] - mark == 2 * MILLI
    assert delta(before, figures(k, "limited-direct")) == (1, 1, 0)


def test_an_empty_bucket_is_answered_429_by_the_kernel_and_the_same_by_the_slow_path(k):
    """The bucket's mark an hour ahead of the clock: empty for an hour. A
    keep-alive request gets the kernel's 429, local or remote; one that
    asks to close gets the slow path's, the same bytes with connection:
    close; no request takes anything."""
    bid = bucket_id(k, "/limited/probe")
    mark = clock() + 3600 * MILLI
    set_bucket(k, bid, mark)
    try:
        before = figures(k, "limited")
        c0 = k.env.daemon.counters()
        local = one(k, "/limited/a")
        remote = one(k, "/limited/b", local=False)
        closing = one(k, "/limited/c", extra={"Connection": "close"})
        assert local[:2] == (LIMITED_429, False)
        assert remote[:2] == (LIMITED_429, False)
        assert closing[:2] == (LIMITED_429.replace(b"content-length: 18\r\n",
                                                   b"content-length: 18\r\nconnection: close\r\n"), True)
        assert buckets(k)[bid] == mark
        assert delta(before, figures(k, "limited")) == (2, 1, 3)
        c1 = k.env.daemon.counters()
        assert c1.get("to_slow_path_answer_remote", 0) == c0.get("to_slow_path_answer_remote", 0)
        assert c1.get("to_slow_path_rate_limited", 0) - c0.get("to_slow_path_rate_limited", 0) == 1
        # keep-alive after the kernel's 429: the next request on the
        # connection is decided again (and refused again)
        with k.env.local():
            c = Conn(k.port)
        for _ in range(2):
            c.request("GET", "/limited/again")
            r = c.read_response()
            assert r.raw_head + r.body == LIMITED_429
        c.close()
        assert delta(before, figures(k, "limited")) == (4, 1, 5)
    finally:
        set_bucket(k, bid, 0)  # full again


def test_the_kernels_429_is_the_reference_one(pair):
    """The reference daemon (no data plane) sends the same 429 bytes once its
    bucket is empty: a route with burst 5 at 1/s, asked until the first 429
    (bounded)."""
    u = pair["user"]
    with u.env.local():
        c = Conn(u.port)
    got = None
    for _ in range(200):
        c.request("GET", "/small/x", {"X-Key": "ref"})
        r = c.read_response()
        if r.status == 429:
            got = r.raw_head + r.body
            break
    c.close()
    assert got == LIMITED_429


def test_the_kernels_429s_are_in_the_access_log_as_rate_limited(k):
    """The kernel's 429 has its access-log line (path=kernel) with the
    reason the slow path gives the same refusal (rate_limited)."""
    bid = bucket_id(k, "/limited/probe")
    set_bucket(k, bid, clock() + 3600 * MILLI)
    try:
        mark = len(k.env.daemon.log().splitlines())
        c = k.env.client(k.port)
        mine = f"access client=127.0.0.1:{c.sock.getsockname()[1]} "
        c.request("GET", "/limited/logged")
        assert c.read_response().status == 429
        c.close()

        def lines():
            return [l[l.index("access client="):] for l in k.env.daemon.log().splitlines()[mark:] if mine in l]
        assert l7env.wait_until(lambda: len(lines()) == 1), lines()
        assert re.search(r" route=limited status=429 in=\S+ out=\d+ latency_us=\d+ path=kernel "
                         r"reason=rate_limited id=", lines()[0]), lines()
    finally:
        set_bucket(k, bid, 0)


def keyed_bucket_id(side, path, extra=None, key=None):
    """The l7_buckets id of a keyed route: the one whose table has `key`'s
    bucket after a request to `path` (with `extra` header lines)."""
    if path not in _ids:
        one(side, path, extra=extra)
        has = [b for b in key_tables(side) if key_bucket(side, b, key) is not None]
        assert len(has) == 1, has
        _ids[path] = has[0]
    return _ids[path]


def test_a_keys_bucket_is_shared_by_both_paths_and_apart_from_other_keys(k):
    """A key's bucket in the kernel's table: two kernel requests (local,
    remote) and one the slow path serves (a path it normalises) take three
    tokens from alice's, one kernel request one from bob's, and a request
    without the key one from the keyless bucket, exactly."""
    bid = keyed_bucket_id(k, "/keyed/probe", {"X-Key": "probe"}, b"probe")
    alice, bob = clock() - 100 * MILLI, clock() - 100 * MILLI
    set_key_bucket(k, bid, b"alice", alice)
    set_key_bucket(k, bid, b"bob", bob)
    keyless = clock() - 100 * MILLI
    set_bucket(k, bid, keyless)
    before = figures(k, "keyed")
    outs = [one(k, "/keyed/a", extra={"X-Key": "alice"}),
            one(k, "/keyed/b", local=False, extra={"X-Key": "alice"}),
            one(k, "/keyed/x/../c", extra={"X-Key": "alice"}),
            one(k, "/keyed/d", extra={"X-Key": "bob"}),
            one(k, "/keyed/e")]
    assert [o[2].status for o in outs] == [200] * 5
    assert key_bucket(k, bid, b"alice") - alice == 3 * MILLI
    assert key_bucket(k, bid, b"bob") - bob == MILLI
    assert buckets(k)[bid] - keyless == MILLI
    assert delta(before, figures(k, "keyed")) == (4, 1, 0)
    # a key seen for the first time gets its own bucket, made by the kernel
    assert key_bucket(k, bid, b"carol") is None
    assert one(k, "/keyed/f", extra={"X-Key": "carol"})[2].status == 200
    assert key_bucket(k, bid, b"carol") is not None
    assert delta(before, figures(k, "keyed")) == (5, 1, 0)


def test_an_empty_keys_bucket_gets_the_kernels_429_other_keys_pass(k):
    """alice's bucket empty for an hour: the kernel's 429 to her, local and
    remote, the slow path's (the same bytes, closing) when she asks to
    close; bob and requests without the key pass; nothing is taken from
    alice's bucket."""
    bid = keyed_bucket_id(k, "/keyed/probe", {"X-Key": "probe"}, b"probe")
    mark = clock() + 3600 * MILLI
    set_key_bucket(k, bid, b"alice", mark)
    set_key_bucket(k, bid, b"bob", clock() - 100 * MILLI)
    before = figures(k, "keyed")
    c0 = k.env.daemon.counters()
    local = one(k, "/keyed/a", extra={"X-Key": "alice"})
    remote = one(k, "/keyed/b", local=False, extra={"X-Key": "alice"})
    closing = one(k, "/keyed/c", extra={"X-Key": "alice", "Connection": "close"})
    assert local[:2] == (LIMITED_429, False)
    assert remote[:2] == (LIMITED_429, False)
    assert closing[:2] == (LIMITED_429.replace(b"content-length: 18\r\n",
                                               b"content-length: 18\r\nconnection: close\r\n"), True)
    assert one(k, "/keyed/d", extra={"X-Key": "bob"})[2].status == 200
    assert one(k, "/keyed/e")[2].status == 200
    assert key_bucket(k, bid, b"alice") == mark
    assert delta(before, figures(k, "keyed")) == (4, 1, 3)
    c1 = k.env.daemon.counters()
    assert c1.get("to_slow_path_rate_limited", 0) - c0.get("to_slow_path_rate_limited", 0) == 1


def test_the_source_address_is_a_key_the_kernel_keeps(k):
    """A limit keyed by the client's address: 127.0.0.1's bucket (4 bytes)
    gives the kernel's direct responses their tokens, and its 429 once
    empty."""
    me = bytes([127, 0, 0, 1])
    bid = keyed_bucket_id(k, "/addr/probe", key=me)
    mark = clock() - 100 * MILLI
    set_key_bucket(k, bid, me, mark)
    before = figures(k, "by-address")
    assert [one(k, f"/addr/{i}")[:2] for i in range(3)] == [(DIRECT_OK, False)] * 3
    assert key_bucket(k, bid, me) - mark == 3 * MILLI
    set_key_bucket(k, bid, me, clock() + 3600 * MILLI)
    assert one(k, "/addr/x")[:2] == (LIMITED_429, False)
    assert delta(before, figures(k, "by-address")) == (4, 0, 1)


def test_a_key_longer_than_the_kernel_keeps_is_the_slow_paths(k):
    """A 64-byte key is the kernel's; a 65-byte one goes to the slow path
    (rate_key), which keeps its bucket, and the kernel's table has none."""
    bid = keyed_bucket_id(k, "/keyed/probe", {"X-Key": "probe"}, b"probe")
    before = figures(k, "keyed")
    c0 = k.env.daemon.counters()
    assert one(k, "/keyed/a", extra={"X-Key": "k" * 64})[2].status == 200
    assert one(k, "/keyed/b", extra={"X-Key": "k" * 65})[2].status == 200
    assert key_bucket(k, bid, b"k" * 64) is not None
    assert delta(before, figures(k, "keyed")) == (1, 1, 0)
    c1 = k.env.daemon.counters()
    assert c1.get("to_slow_path_rate_key", 0) - c0.get("to_slow_path_rate_key", 0) == 1
