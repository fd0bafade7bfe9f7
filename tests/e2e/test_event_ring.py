"""The data plane tells l7fastd what it must do through a ring buffer
(l7_events). A daemon that does not read it for a while (stopped, or starved
of CPU) leaves it full, and bpf_ringbuf_reserve then fails: the event is
lost. The kernel counts each loss (events_lost), l7fastd warns, and the
pool's sweep does what a lost hand-over (L7_EV_RELAY) would have asked, so
the client still gets its answers. ARCHITECTURE.md §2. Before the sweep did
this, a pipelining client whose hand-over event was lost waited forever
(seen under `scripts/run-tests.sh --under-load 2`)."""
import pytest

from l7env import catch_all_toml, free_port, make_request, wait_until

# Every kernel response is a sampled access-log event; the ring (256 KiB of
# 40-byte records) holds about 6,500 of them. Bounded: never more requests.
MAX_FILL = 20000
BATCH = 1000


@pytest.fixture(scope="module")
def world(env):
    b = env.backend("b")
    port = free_port()
    env.start(catch_all_toml(port, b.address(), cluster="b"), daemon_settings="access_log_sample = 1")
    env.daemon.wait_idle(b.address(), n=2)
    return env, port


def fill_the_ring(env, port):
    """Kernel requests on one keep-alive connection until the kernel counts
    a lost event; returns how many were sent."""
    d = env.daemon
    c = env.client(port)
    sent = 0
    try:
        while sent < MAX_FILL:
            for _ in range(BATCH):
                c.request("GET", "/fill")
                assert c.read_response().status == 200
            sent += BATCH
            if d.counters()["events_lost"] > 0:
                return sent
    finally:
        c.close()
    pytest.fail(f"{MAX_FILL} sampled kernel responses did not fill the event ring")


def test_a_lost_hand_over_is_taken_up_and_counted(world):
    """With l7fastd stopped, sampled kernel responses fill the ring. Then a
    client pipelines two requests: the first goes to the backend in the
    kernel (answered after 200 ms), the second, arriving while the first is
    in flight, is the slow path's; so the kernel hands the first response
    to the daemon (responses_relayed), and the event saying so finds the
    ring full. After SIGCONT no event will ever name that slot: the sweep
    relays it, and both answers arrive, in order. The sweep can come before
    l7fastd accepts the client (it connected while l7fastd was stopped): the
    response then waits for the client's session (it was dropped before)."""
    env, port = world
    d = env.daemon
    before = d.counters()
    mark = len(d.log().splitlines())
    with d.paused():
        fill_the_ring(env, port)
        lost = d.counters()["events_lost"]
        c = env.client(port)
        c.send(make_request("GET", "/first?delay=200") + make_request("GET", "/second"))
        # the hand-over happened, and its event was lost
        assert wait_until(lambda: d.counters()["responses_relayed"] == before["responses_relayed"] + 1), \
            d.counters()
        assert d.counters()["events_lost"] > lost
    try:
        first = c.read_response()
        second = c.read_response()
        assert (first.status, first.json()["path"]) == (200, "/first?delay=200"), first
        assert (second.status, second.json()["path"]) == (200, "/second"), second
    finally:
        c.close()
    after = d.counters()
    assert after["requests_user"] == before["requests_user"] + 1
    assert after["to_slow_path_pipelined"] == before["to_slow_path_pipelined"] + 1
    assert wait_until(lambda: any("events lost: the event ring was full" in l
                                  for l in d.log().splitlines()[mark:])), "no warning in l7fastd's log"
