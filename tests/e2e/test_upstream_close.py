"""A backend that closes an idle pooled connection (its keep-alive timeout;
here at once, right after answering and without saying so) must not cost the
next request. sockops watches both ends of every pool slot
(BPF_SOCK_OPS_STATE_CB) and retires an idle slot as its connection leaves
ESTABLISHED - on loopback before the backend's close returns - so the next
request takes another pooled connection instead of being sent into one the
backend has given up (which would answer the client 502). ARCHITECTURE.md
§3, step 5."""
import threading

import pytest

from l7env import LIVENESS, Conn, RawBackend, free_port, wait_until

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
ROUNDS = 40

POLICY = """
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "b"
endpoints = [ {{ address = "{backend}" }} ]
[[route]]
name = "all"
cluster = "b"
"""


class Closes:
    """Counts the backend's connections that answered and were closed, and
    runs `then` (if set) in the backend's thread as soon as such a close
    returned, to send the next request with no delay."""

    def __init__(self):
        self.cv = threading.Condition()
        self.n = 0
        self.then = None

    def __call__(self, answers):
        if not answers:
            return
        then = self.then
        if then:
            then()
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
    env.start(POLICY.format(port=port, backend=backend.address()), daemon_settings="pool_min_idle = 1")
    env.backend_address = backend.address()
    yield env, port, closes
    backend.close()


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_backend_closing_a_pooled_connection_costs_no_request(world, local):
    """Pairs of requests, each pair with l7fastd stopped: nothing but the
    data plane can retire or replace a pooled connection, and the slow path
    cannot answer. The second request of a pair leaves as soon as the
    backend's close of the connection that answered the first has
    returned; the kernel would claim that connection again (its lowest
    idle one) unless sockops had retired it, and the client would wait for
    an answer that never comes (a failure at the LIVENESS read timeout).
    Pairs, not longer chains: a connection sockops retires keeps its idle
    hint bit until l7fastd empties the slot, and a claim tries only a few
    hinted slots (L7_CLAIM_TRIES), so while l7fastd is stopped a chain of
    retirements would end in a pool_miss."""
    env, port, closes = world
    d = env.daemon
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
            assert wait_until(lambda: set(d.pool_states(env.backend_address)) == {"IDLE"}), \
                d.pool_states(env.backend_address)
            d.wait_idle(env.backend_address, n=2)
            pending = [first + 1]

            def send_second():
                if pending:
                    i = pending.pop()
                    conns[i].request("GET", f"/r{i}")

            closed = closes.n
            with d.paused():
                closes.then = send_second
                conns[first].request("GET", f"/r{first}")
                for i in (first, first + 1):
                    r = conns[i].read_response()
                    assert r.status == 200, (i, r, r.body)
                assert closes.wait_for(closed + 2)
                closes.then = None
    finally:
        closes.then = None
        for c in conns:
            c.close()
    after = d.counters()
    moved = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    # each connection that answered was retired by sockops as the backend
    # closed it, idle (the kernel had completed the response before the FIN
    # came in on the daemon's end)
    assert moved == {"requests_kernel": ROUNDS, "responses_kernel": ROUNDS, "upstream_closed": ROUNDS}, moved
