"""Per-route telemetry as `l7fastctl --json stats` reports it: every request
counted once, on the path that handled it, and every response counted once,
whoever finished it: the kernel, the daemon relaying a response past the
budget, a close-delimited body, a kernel exchange that timed out, the slow
path. Counts survive reloads (generation tables are reused)."""
import pytest

from l7env import LIVENESS, free_port

# bounds every exchange of the module: long enough that only a stall ends one
REQUEST_TIMEOUT = 5.0


@pytest.fixture(scope="module")
def web(env):
    b = env.backend("b")
    port = free_port()
    policy = f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "b"
endpoints = [ {{ address = "{b.address()}" }} ]
[[route]]
name = "user"
cluster = "b"
offload = false
match = {{ path_prefix = "/user" }}
[[route]]
name = "kern"
cluster = "b"
match = {{ path_prefix = "/kern" }}
"""
    env.start(policy, daemon_settings=f"request_timeout_ms = {int(REQUEST_TIMEOUT * 1000)}")
    env.policy_text = policy
    env.backend_address = b.address()
    return port


def exchange(env, port, path, n=1, local=True):
    """n requests on one keep-alive connection, once a pooled connection is
    idle: each request to the kernel route is then the kernel's."""
    env.daemon.wait_idle(env.backend_address)
    c = env.client(port, local)
    statuses = []
    for _ in range(n):
        c.request("GET", path)
        r = c.read_response()
        statuses.append(r.status)
        if r.header("connection", "").lower() == "close":
            break
    c.close()
    return statuses


def route(env, name):
    return env.stats()["routes"][name]


def responses_total(r):
    return sum(r["responses"].values())


def delta(before, after):
    out = {k: after[k] - before[k] for k in ("requests_kernel", "requests_user", "bytes_in", "bytes_out")}
    out["responses"] = {k: after["responses"][k] - before["responses"][k] for k in after["responses"]}
    out["latency"] = sum(after["latency_buckets"]) - sum(before["latency_buckets"])
    return out


def test_kernel_requests_and_responses_are_counted_once(env, web):
    b0 = route(env, "kern")
    assert exchange(env, web, "/kern/a", n=20) == [200] * 20
    d = delta(b0, route(env, "kern"))
    assert d["requests_kernel"] == 20 and d["requests_user"] == 0
    assert d["responses"]["2xx"] == 20 and sum(d["responses"].values()) == 20
    assert d["latency"] == 20
    assert d["bytes_in"] > 0 and d["bytes_out"] > 0


def test_slow_path_route_counts_status_bytes_and_latency(env, web):
    b0 = route(env, "user")
    assert exchange(env, web, "/user/a?status=404", n=3) == [404] * 3
    assert exchange(env, web, "/user/a", n=2) == [200] * 2
    d = delta(b0, route(env, "user"))
    assert d["requests_user"] == 5 and d["requests_kernel"] == 0
    assert d["responses"]["4xx"] == 3 and d["responses"]["2xx"] == 2
    assert d["latency"] == 5


def test_relayed_response_counts_its_status_and_all_its_bytes(env, web):
    b0 = route(env, "kern")
    size = 300_000  # past the 64 KiB budget: the daemon relays the rest
    assert exchange(env, web, f"/kern/big?size={size}", n=2) == [200, 200]
    d = delta(b0, route(env, "kern"))
    assert d["requests_kernel"] == 2
    assert d["responses"]["2xx"] == 2 and d["latency"] == 2
    assert d["bytes_out"] >= 2 * size


def test_close_delimited_response_is_counted(env, web):
    b0 = route(env, "kern")
    assert exchange(env, web, "/kern/old?http10=1&size=1000") == [200]
    d = delta(b0, route(env, "kern"))
    assert d["requests_kernel"] == 1 and d["responses"]["2xx"] == 1
    assert d["bytes_out"] >= 1000


def test_timed_out_kernel_exchange_counts_the_504(env, web):
    # the backend answers only after LIVENESS: the timeout ends the exchange
    b0 = route(env, "kern")
    assert exchange(env, web, f"/kern/slow?delay={int(LIVENESS * 1000)}") == [504]
    d = delta(b0, route(env, "kern"))
    assert d["requests_kernel"] == 1
    assert d["responses"]["5xx"] == 1 and sum(d["responses"].values()) == 1


def test_remote_clients_are_counted_like_local_ones(env, web):
    b0 = route(env, "kern")
    assert exchange(env, web, "/kern/r", n=5, local=False) == [200] * 5
    d = delta(b0, route(env, "kern"))
    assert d["requests_kernel"] == 5 and d["requests_user"] == 0
    assert d["responses"]["2xx"] == 5


def test_no_route_is_counted_apart(env, web):
    n0 = env.stats()["no_route"]
    assert exchange(env, web, "/elsewhere") == [404]
    assert env.stats()["no_route"] == n0 + 1


def test_counts_survive_reloads(env, web):
    before = route(env, "kern")
    exchange(env, web, "/kern/x", n=3)
    for _ in range(3):  # each generation's tables are rewritten at least once
        env.daemon.reload()
        exchange(env, web, "/kern/x", n=1)
    after = route(env, "kern")
    d = delta(before, after)
    assert d["requests_kernel"] == 6
    assert d["responses"]["2xx"] == 6 and d["latency"] == 6
    assert responses_total(after) == after["requests_kernel"] + after["requests_user"]
