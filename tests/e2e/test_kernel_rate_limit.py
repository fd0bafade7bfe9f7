"""Rate limits of kernel routes: the kernel takes a request's token from the
route's bucket (l7_buckets) and answers 429 itself when there is none, and
the slow path's requests of the same route take from the same bucket
(RateLimiter's SharedBucket, mmapped), so a request counts once whichever
path serves it. Exact, never timed: the tests set the bucket's state in the
map themselves (bpftool) and count what each request took from it, which a
bucket far from its capacity shows exactly (1000 milli-tokens per token;
bpf/include/l7_bucket.h), whatever the time the test takes."""
import json
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
rate_limit = {{ rate = 1, burst = 5, key = {{ header = "X-Key" }} }}
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


def figures(side, route):
    st = side.env.stats()["routes"][route]
    return st["requests_kernel"], st["requests_user"], st["rejected"]["rate_limited"]


def delta(a, b):
    return tuple(y - x for x, y in zip(a, b))


def test_keyless_rate_limits_are_placed_in_the_kernel_and_keyed_ones_are_not(k):
    rc, out, err = k.env.ctl("--json", "routes")
    assert rc == 0, err
    routes = {r["name"]: r for r in json.loads(out)["routes"]}
    assert routes["limited"]["placement"] == "kernel"
    assert routes["limited-direct"]["placement"] == "kernel"
    assert routes["keyed"]["placement"] == "user"
    assert "keyed rate limits run in user space" in routes["keyed"]["reason"]


def test_explain_says_whose_bucket_it_is(k):
    """l7fastctl explain: a kernel route's limit is on the kernel's bucket,
    whose 429 the kernel sends; a keyed one is user space's."""
    stages = {}
    for path in ("/limited/x", "/keyed/x"):
        rc, out, err = k.env.ctl("--json", "explain", "GET", path, "-H", "X-Key: a")
        assert rc == 0, err
        stages[path] = [s for s in json.loads(out)["stages"] if s["stage"] == "rate_limit"]
    assert [s["bucket"] for s in stages["/limited/x"]] == ["kernel (shared with the slow path)"]
    assert "the kernel sends it" in stages["/limited/x"][0]["note"]
    assert [s["bucket"] for s in stages["/keyed/x"]] == ["user space"]


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
        c.request("GET", "/keyed/x", {"X-Key": "ref"})
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
