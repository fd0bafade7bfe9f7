"""A backend that closes an idle pooled connection (its keep-alive timeout;
here at once, right after answering and without saying so) must not cost the
next request. sockops watches both ends of every pool slot
(BPF_SOCK_OPS_STATE_CB) and retires an idle slot as its connection leaves
ESTABLISHED - as the backend's FIN comes in, without l7fastd - so the next
request takes another pooled connection instead of being sent into one the
backend has given up (which would answer the client 502). ARCHITECTURE.md
§3, step 5."""
import threading

import pytest

from l7env import LIVENESS, Conn, RawBackend, catch_all_toml, free_port, wait_until

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
ROUNDS = 40



class Closes:
    """Counts the backend's connections that answered and were closed."""

    def __init__(self):
        self.cv = threading.Condition()
        self.n = 0

    def __call__(self, answers):
        if not answers:
            return
        with self.cv:
            self.n += 1
            self.cv.notify_all()

    def wait_for(self, n, timeout=LIVENESS):
        with self.cv:
            return self.cv.wait_for(lambda: self.n >= n, timeout)


@pytest.fixture(scope="module")
def world(env):
    closes = Closes()
    # not in the test cgroup: the daemon's pooled connections are real TCP
    # connections to it, as to a backend on another host. Without sockops'
    # state callback some of these requests were sent into a connection the
    # backend had just closed, and got 502 (seen with it disabled).
    backend = RawBackend(lambda head, body: OK, close_after_answer=True, on_close=closes)
    port = free_port()
    env.start(catch_all_toml(port, backend.address(), cluster="b"), daemon_settings="pool_min_idle = 1")
    env.backend_address = backend.address()
    yield env, port, closes
    backend.close()


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_backend_closing_a_pooled_connection_costs_no_request(world, local):
    """Pairs of requests, each pair with l7fastd stopped: nothing but the
    data plane can retire or replace a pooled connection, and the slow path
    cannot answer. The second request of a pair leaves once the backend's
    FIN for the connection that answered the first has arrived (the slot
    turned DEAD: only sockops can have done that); the kernel would claim
    that connection again (its lowest idle one) unless sockops had retired
    it, and the client would wait for an answer that never comes. (A
    request that leaves while the FIN is still on the wire meets a closed
    connection whoever retires it: that race is HTTP keep-alive's own, RFC
    9112 section 9.3.1, and is not what this test is about.) Pairs, not
    longer chains: a connection sockops retires keeps its idle hint bit
    until l7fastd empties the slot, and a claim tries only a few hinted
    slots (L7_CLAIM_TRIES), so while l7fastd is stopped a chain of
    retirements would end in a pool_miss."""
    env, port, closes = world
    d = env.daemon
    addr = env.backend_address
    # every client connection is open and known to the data plane (a remote
    # one once l7fastd accepted it) before the first request
    if local:
        with env.local():
            conns = [Conn(port) for _ in range(ROUNDS)]
    else:
        conns = [Conn(port) for _ in range(ROUNDS)]
    socks = [c.sock for c in conns]
    assert wait_until(lambda: not d.untracked(socks)), f"{len(d.untracked(socks))} connections unknown"
    before = d.counters()
    try:
        for first in range(0, ROUNDS, 2):
            # l7fastd replaced the connections retired so far: every one
            # open is idle, so every idle hint is right
            assert wait_until(lambda: set(d.pool_states(addr)) == {"IDLE"}), d.pool_states(addr)
            d.wait_idle(addr, n=2)
            closed = closes.n
            with d.paused():
                for i in (first, first + 1):
                    conns[i].request("GET", f"/r{i}")
                    r = conns[i].read_response()
                    assert r.status == 200, (i, r, r.body)
                    assert closes.wait_for(closed + 1 + i - first)
                    # sockops retired the connection as the FIN came in
                    assert wait_until(lambda: d.pool_states(addr).get("DEAD", 0) == 1 + i - first), \
                        d.pool_states(addr)
    finally:
        for c in conns:
            c.close()
    after = d.counters()
    moved = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    # each connection that answered was retired by sockops as the backend
    # closed it, idle (the kernel had completed the response before the FIN
    # came in on the daemon's end)
    assert moved == {"requests_kernel": ROUNDS, "responses_kernel": ROUNDS, "upstream_closed": ROUNDS}, moved
