"""A bounded soak: keep-alive clients at full rate through the kernel path
(plus a share through the slow path), a reload every few seconds with a
policy that really changes, and the daemon's RSS, descriptors, map
occupancy and busy pool slots sampled throughout. Zero failed requests;
everything flat.

L7FAST_SOAK_SECONDS sets the duration (default 60; long mode e.g. 600).
The figures are printed (pytest -s shows them) for the closing notes."""
import os
import threading
import time

import pytest

from l7env import Conn, free_port

SECONDS = int(os.environ.get("L7FAST_SOAK_SECONDS", "60"))
CLIENTS = 4             # client threads, one keep-alive connection each
RECONNECT_EVERY = 500   # requests per connection before a new one (map churn)
RELOAD_EVERY = 3.0      # seconds
SAMPLE_EVERY = 2.0
RSS_GROWTH_KIB = 4096   # allowed growth after the warm-up third
FD_SPREAD = 2 * CLIENTS + 8


def policy(env, port, gen):
    # every reload changes the weights and adds/removes a route
    extra = f"""
[[route]]
name = "extra{gen % 2}"
cluster = "a"
match = {{ path_prefix = "/extra{gen % 2}" }}
"""
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "a"
endpoints = [ {{ address = "{env.backends['a'].address()}" }} ]
[[cluster]]
name = "b"
endpoints = [ {{ address = "{env.backends['b'].address()}" }} ]
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
        self.failures = []
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(CLIENTS)]

    def connect(self):
        with self.env.local():
            return Conn(self.port, timeout=10)

    def run(self, idx):
        c, n, ok = None, 0, 0
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
                if r.status != 200 or r.json()["path"] != path:
                    with self.lock:
                        self.failures.append((path, r.status, r.body[:200]))
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
        "busy": sum(v for k, v in slots.items() if k in ("KBUSY", "UBUSY", "RELAY", "DEAD")),
        "slots": sum(slots.values()),
    }


def test_soak_flat_and_no_failed_requests(env, soak):
    d = env.daemon
    load = Load(env, soak)
    before = env.stats()
    t0 = time.time()
    for t in load.threads:
        t.start()
    samples, reloads, gen = [], 0, 0
    next_reload, next_sample = t0 + RELOAD_EVERY, t0 + 1.0
    while time.time() - t0 < SECONDS and not load.failures:
        now = time.time()
        if now >= next_reload:
            gen += 1
            d.write_policy(policy(env, soak, gen))
            d.reload()
            reloads += 1
            next_reload = now + RELOAD_EVERY
        if now >= next_sample:
            samples.append(sample(d))
            next_sample = now + SAMPLE_EVERY
        time.sleep(0.05)
    load.stop.set()
    for t in load.threads:
        t.join(30)
    elapsed = time.time() - t0
    after = env.stats()
    time.sleep(1.0)
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
    assert reloads >= max(1, int(SECONDS / RELOAD_EVERY) - 2)
    assert fig["kernel_requests"] > load.ok // 2, fig   # the kernel path carried the load
    assert len(samples) >= 3
    # flat: after the first third, RSS grows by at most RSS_GROWTH_KIB
    assert max(s["rss"] for s in warm) - warm[0]["rss"] <= RSS_GROWTH_KIB, fig
    assert fig["fds_min_max"][1] - fig["fds_min_max"][0] <= FD_SPREAD, fig
    assert fig["connections_min_max"][1] <= CLIENTS + 2, fig
    # once the clients are gone: no connection state left
    assert final["conns"] == 0 and final["busy"] == 0, final
    assert env.daemon.proc.poll() is None
