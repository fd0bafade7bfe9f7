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

from l7env import Conn, RawBackend, free_port

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
ROUNDS = 30

POLICY = """
[daemon]
pool_min_idle = 2
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
    """Counts the backend's connections that answered and were closed."""

    def __init__(self):
        self.cv = threading.Condition()
        self.n = 0

    def __call__(self, answers):
        if answers:
            with self.cv:
                self.n += 1
                self.cv.notify_all()

    def wait_for(self, n, timeout=5):
        with self.cv:
            return self.cv.wait_for(lambda: self.n >= n, timeout)


@pytest.fixture(scope="module")
def world(env):
    closes = Closes()
    # not in the test cgroup: the daemon's pooled connections are real TCP
    # connections to it, as to a backend on another host
    backend = RawBackend(lambda head, body: OK, close_after_answer=True, on_close=closes)
    port = free_port()
    env.start(POLICY.format(port=port, backend=backend.address()))
    yield env, port, closes
    backend.close()


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_backend_closing_a_pooled_connection_costs_no_request(world, local):
    env, port, closes = world
    st0 = env.stats()
    for i in range(ROUNDS):
        if local:
            with env.local():
                c = Conn(port)
        else:
            c = Conn(port)
        try:
            before = closes.n
            c.request("GET", f"/r{i}")
            r = c.read_response()
            assert r.status == 200, (i, r, r.body)
            # the backend closed the connection it answered on; the next
            # request goes out at once
            assert closes.wait_for(before + 1), "the backend did not close its connection"
        finally:
            c.close()
    st1 = env.stats()
    d = {k: v - st0["counters"].get(k, 0) for k, v in st1["counters"].items() if v != st0["counters"].get(k, 0)}
    kernel = st1["routes"]["all"]["requests_kernel"] - st0["routes"]["all"]["requests_kernel"]
    print(f"{ROUNDS} requests, {kernel} on the kernel path; counters moved: {d}")
    assert kernel > ROUNDS // 2, d  # the kernel path was taken, not the slow path
    # the connections the kernel used were retired by sockops as they closed
    # (one whose response the kernel was still completing when the FIN came
    # is the daemon's to retire)
    assert d.get("upstream_closed", 0) >= kernel // 2, d
