"""A bounded soak: keep-alive clients at full rate through the kernel path
(one request in ten through the slow path), a reload every few seconds with
a policy that really changes, and the daemon's RSS, descriptors, map
occupancy and busy pool slots sampled throughout. Zero failed requests;
every request on the path its route says; everything flat.

L7FAST_SOAK_SECONDS sets the duration (default 60; long mode e.g. 600).
The figures are printed (pytest -s shows them) for the closing notes; none
of them is judged, since they depend on how fast the machine is."""
import os
import threading
import time

import pytest

from l7env import LIVENESS, Conn, cluster_toml, free_port, listener_toml, wait_until

SECONDS = int(os.environ.get("L7FAST_SOAK_SECONDS", "60"))
CLIENTS = 4             # client threads, one keep-alive connection each
RECONNECT_EVERY = 500   # requests per connection before a new one (map churn)
RELOAD_EVERY = 3.0      # seconds
SAMPLE_EVERY = 2.0
RSS_GROWTH_KIB = 4096   # allowed growth after the warm-up third
# Descriptors that come and go with the load, at most: each client's session
# and the one it is replacing (a reconnect: the daemon ends the old session
# when it reads the EOF), the pools growing from the CLIENTS idle connections
# the test waits for to CLIENTS + pool_min_idle (2) each, and the slow
# path's own connections (one per client at a time, to backend "a" only).
FD_SPREAD = 2 * CLIENTS + 2 * 2 + CLIENTS


def policy(env, port, gen):
    # every reload changes the weights and adds/removes a route
    extra = f"""
[[route]]
name = "extra{gen % 2}"
cluster = "a"
match = {{ path_prefix = "/extra{gen % 2}" }}
"""
    return listener_toml(port) + "".join(cluster_toml(n, env.backends[n].address()) for n in "ab") + f"""
{extra}
[[route]]
name = "slow"
cluster = "a"
offload = false
match = {{ path_prefix = "/slow" }}
[[route]]
name = "main"
clusters = [ {{ name = "a", weight = {1 + gen % 3} }}, {{ name = "b", weight = 1 }} ]
match = {{ path_prefix = "/" }}
"""


class Load:
    def __init__(self, env, port):
        self.env, self.port = env, port
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.ok = 0
        self.done = 0        # requests answered so far, all clients
        self.slow = 0        # of them, to the slow-path route
        self.failures = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(CLIENTS)]
        # connected before the threads start: accepting them grows the pools
        self.first = [self.connect() for _ in range(CLIENTS)]

    def connect(self):
        with self.env.local():
            return Conn(self.port)

    def run(self, idx):
        c, n, ok = self.first[idx], 0, 0
        try:
            while not self.stop.is_set():
                if c is None or n >= RECONNECT_EVERY:
                    if c:
                        c.close()
                    c, n = self.connect(), 0
                # one request in ten through the slow path
                path = f"/slow/{idx}/{n}" if n % 10 == 9 else f"/k/{idx}/{n}"
                c.request("GET", path)
                r = c.read_response()
                with self.lock:
                    if r.status != 200 or r.json()["path"] != path:
                        self.failures.append((path, r.status, r.body[:200]))
                    self.done += 1
                    self.slow += path.startswith("/slow/")
                ok += 1
                n += 1
        except Exception as e:  # noqa: BLE001 - any exception is a failed request
            with self.lock:
                self.failures.append((f"client {idx}", type(e).__name__, str(e)))
        finally:
            if c:
                c.close()
            with self.lock:
                self.ok += ok


@pytest.fixture(scope="module")
def soak(env):
    env.backend("a")
    env.backend("b")
    port = free_port()
    env.start(policy(env, port, 0), daemon_settings="pool_max = 8\n")
    return port


def sample(d):
    slots = d.slot_states()
    return {
        "t": time.time(),
        "rss": d.rss_kib(),
        "fds": len(d.fds()),
        "conns": d.conn_entries(),
        "busy": sum(v for k, v in slots.items() if k in ("KBUSY", "RELAY", "DEAD")),
        "slots": sum(slots.values()),
    }


def test_soak_flat_and_no_failed_requests(env, soak):
    d = env.daemon
    load = Load(env, soak)
    # one idle pooled connection per client to each backend (the pools grow
    # as the clients are accepted): no request is ever a pool_miss, so every
    # one takes the path its route says
    d.wait_idle(*(b.address() for b in env.backends.values()), n=CLIENTS)
    before = env.stats()
    t0 = time.monotonic()
    for t in load.threads:
        t.start()
    # the duration is wall time, but reloads and samples are counts: a slow
    # machine runs longer rather than reloading less
    want_reloads = max(1, int(SECONDS / RELOAD_EVERY))
    samples, reloads, gen = [], 0, 0
    next_reload, next_sample = t0 + RELOAD_EVERY, t0 + 1.0
    while (time.monotonic() - t0 < SECONDS or reloads < want_reloads or len(samples) < 3) \
            and not load.failures:
        now = time.monotonic()
        if now >= next_reload:
            # under load: requests were answered since the last reload
            done = load.done
            assert wait_until(lambda: load.done > done or load.failures), "the load stopped"
            gen += 1
            d.write_policy(policy(env, soak, gen))
            assert "last reload failed" not in d.reload()
            reloads += 1
            next_reload = time.monotonic() + RELOAD_EVERY
        if now >= next_sample:
            samples.append(sample(d))
            next_sample = now + SAMPLE_EVERY
        time.sleep(0.05)
    load.stop.set()
    for t in load.threads:
        t.join(LIVENESS)
    assert not any(t.is_alive() for t in load.threads), "a client hangs"
    elapsed = time.monotonic() - t0
    after = env.stats()
    # once the clients are gone: no connection state left
    wait_until(lambda: (lambda f: f["conns"] == 0 and f["busy"] == 0)(sample(d)), interval=0.25)
    final = sample(d)

    warm = samples[len(samples) // 3:] or samples
    rss_all = [s["rss"] for s in samples]
    fig = {
        "seconds": round(elapsed, 1),
        "requests": load.ok,
        "req_per_s": round(load.ok / elapsed),
        "kernel_requests": after["requests_kernel"] - before["requests_kernel"],
        "user_requests": after["requests_user"] - before["requests_user"],
        "reloads": reloads,
        "failed": len(load.failures),
        "rss_kib_min_max": (min(rss_all), max(rss_all)),
        "rss_kib_after_warmup_min_max": (min(s["rss"] for s in warm), max(s["rss"] for s in warm)),
        "fds_min_max": (min(s["fds"] for s in samples), max(s["fds"] for s in samples)),
        "connections_min_max": (min(s["conns"] for s in samples), max(s["conns"] for s in samples)),
        "pool_slots_used_min_max": (min(s["slots"] for s in samples), max(s["slots"] for s in samples)),
        "busy_slots_max": max(s["busy"] for s in samples),
        "after_stop": {k: final[k] for k in ("rss", "fds", "conns", "busy")},
    }
    print("\nSOAK " + " ".join(f"{k}={v}" for k, v in fig.items()))

    assert not load.failures, load.failures[:5]
    # the kernel path carried the load: every request to the kernel route,
    # every request to the slow-path route in user space, through every
    # reload (was: more than half in the kernel)
    assert load.done == load.ok, (load.done, load.ok)
    assert (fig["kernel_requests"], fig["user_requests"]) == (load.ok - load.slow, load.slow), fig
    # flat: after the first third, RSS grows by at most RSS_GROWTH_KIB
    assert max(s["rss"] for s in warm) - warm[0]["rss"] <= RSS_GROWTH_KIB, fig
    assert fig["fds_min_max"][1] - fig["fds_min_max"][0] <= FD_SPREAD, fig
    # each client's connection, and the one it is replacing
    assert fig["connections_min_max"][1] <= 2 * CLIENTS, fig
    assert final["conns"] == 0 and final["busy"] == 0, final
    assert env.daemon.proc.poll() is None
