"""daemon.metrics_address and daemon.access_log_sample: the Prometheus
endpoint serves the snapshot `l7fastctl stats` shows (kernel and slow-path
figures, cumulative latency buckets), refuses other paths, moves on a
reload (a bind failure fails the reload and keeps the old one); the sampled
access log writes one line per request (kernel and slow path) with sample 1
and none with 0; the shipped Grafana dashboard and alert rules query only
what l7fastd serves."""
import importlib.util
import json
import os
import re
import resource
import socket
import time
from pathlib import Path

import pytest

from l7env import LIVENESS, Cgroup, Daemon, free_port, make_request, wait_until

PROM_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def policy(port, backend, backend2):
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "b"
endpoints = [ {{ address = "{backend.address()}" }} ]
[[cluster]]
name = "pair"
endpoints = [ {{ address = "{backend.address()}" }}, {{ address = "{backend2.address()}" }} ]
[[route]]
name = "two-user"
cluster = "pair"
offload = false
match = {{ path_prefix = "/twouser" }}
[[route]]
name = "two"
cluster = "pair"
match = {{ path_prefix = "/two" }}
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


@pytest.fixture(scope="module")
def web(env):
    b = env.backend("b")
    b2 = env.backend("b2")
    port = free_port()
    mport = free_port()
    env.start(policy(port, b, b2), daemon_settings=f'metrics_address = "127.0.0.1:{mport}"')
    env.web_policy = policy(port, b, b2)
    env.endpoints = (b.address(), b2.address())
    env.metrics_port = mport
    return port


def http(port, raw, timeout=5.0):
    """Sends raw bytes, returns (status, headers, body) of the one response."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers, body


def scrape_text(port):
    status, headers, body = http(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200
    assert headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert int(headers["content-length"]) == len(body)
    return body.decode()


def scrape(port):
    return parse(scrape_text(port))


def parse(text):
    """{(name, frozenset(labels)): value}, checking the line grammar, and
    that every sample's family has HELP and TYPE first."""
    samples, typed = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            typed[name] = kind
            continue
        m = PROM_LINE.match(line)
        assert m, line
        name, labels, value = m.groups()
        family = re.sub(r"_(bucket|count|sum)$", "", name) if re.sub(
            r"_(bucket|count|sum)$", "", name) in typed else name
        assert family in typed, line
        lab = frozenset(LABEL.findall(labels or ""))
        samples[(name, lab)] = float(value)
    return samples


def get(samples, name, **labels):
    return samples[(name, frozenset(labels.items()))]


def send(env, port, path, n, local=True):
    """n requests on one keep-alive connection, after the pooled connections
    of every backend are idle: each request to a kernel route is then the
    kernel's."""
    env.daemon.wait_idle(*env.endpoints)
    c = env.client(port, local)
    for _ in range(n):
        c.request("GET", path)
        assert c.read_response().status == 200
    c.close()


def test_metrics_match_stats_and_the_requests_sent(env, web):
    send(env, web, "/kern/a", 12)
    send(env, web, "/user/a", 5)
    m = scrape(env.metrics_port)
    st = env.stats()
    assert get(m, "l7fast_policy_generation") == st["generation"]
    assert get(m, "l7fast_route_info", route="kern", placement="kernel") == 1
    assert get(m, "l7fast_route_info", route="user", placement="user") == 1
    kern, user = st["routes"]["kern"], st["routes"]["user"]
    # what was sent (the daemon is fresh): kernel requests on the kernel path
    assert get(m, "l7fast_route_requests_total", route="kern", plane="kernel") == 12
    assert get(m, "l7fast_route_requests_total", route="kern", plane="user") == 0
    assert get(m, "l7fast_route_requests_total", route="user", plane="user") == 5
    assert get(m, "l7fast_route_responses_total", route="kern", **{"class": "2xx"}) == 12
    assert get(m, "l7fast_route_responses_total", route="user", **{"class": "2xx"}) == 5
    # the slow path's own histogram (with _sum) and codes: its 5 exchanges
    assert get(m, "l7fast_route_user_latency_seconds_count", route="user") == 5
    assert get(m, "l7fast_route_user_latency_seconds_bucket", route="user", le="+Inf") == 5
    assert 0 < get(m, "l7fast_route_user_latency_seconds_sum", route="user") < 5 * 60
    assert get(m, "l7fast_route_user_responses_total", route="user", code="200") == 5
    assert get(m, "l7fast_route_user_latency_seconds_count", route="kern") == 0
    assert ("l7fast_route_user_responses_total", frozenset({("route", "kern"), ("code", "200")})) not in m
    for name, r in (("kern", kern), ("user", user)):
        assert get(m, "l7fast_route_requests_total", route=name, plane="kernel") == r["requests_kernel"]
        assert get(m, "l7fast_route_requests_total", route=name, plane="user") == r["requests_user"]
        for cls, v in r["responses"].items():
            assert get(m, "l7fast_route_responses_total", route=name, **{"class": cls}) == v
        assert get(m, "l7fast_route_request_bytes_total", route=name) == r["bytes_in"] > 0
        assert get(m, "l7fast_route_response_bytes_total", route=name) == r["bytes_out"] > 0
        cum = 0
        buckets = [(lab, v) for (n, lab), v in m.items()
                   if n == "l7fast_route_response_latency_seconds_bucket" and ("route", name) in lab]
        assert len(buckets) == len(r["latency_buckets"])
        les = sorted(buckets, key=lambda b: float(dict(b[0])["le"]))
        for (lab, v), n in zip(les, r["latency_buckets"]):
            cum += n
            assert v == cum, (dict(lab), v, cum)
        assert dict(les[-1][0])["le"] == "+Inf"
        assert get(m, "l7fast_route_response_latency_seconds_count", route=name) == cum == sum(r["responses"].values())
        for reason, v in r["rejected"].items():
            assert get(m, "l7fast_route_rejections_total", route=name, reason=reason) == v
        assert get(m, "l7fast_route_direct_responses_total", route=name) == r["direct_responses"]
    assert get(m, "l7fast_requests_no_route_total") == st["no_route"]
    for k, v in st["counters"].items():
        if k.startswith("to_slow_path_"):
            assert get(m, "l7fast_dataplane_to_slow_path_total", reason=k[len("to_slow_path_"):]) == v
        else:
            assert get(m, "l7fast_dataplane_events_total", event=k) == v
    # each of the 5 slow-path requests was handed over on its own (the
    # kernel decides again once the slow path answered the previous one)
    handed = {dict(lab)["reason"]: v for (n, lab), v in m.items() if n == "l7fast_dataplane_to_slow_path_total" and v}
    assert handed == {"route_user": 5}, handed
    assert get(m, "l7fast_dataplane_events_total", event="requests_kernel") == 12


def kernel_codes(m, route):
    return {dict(lab)["code"]: v for (n, lab), v in m.items()
            if n == "l7fast_route_kernel_responses_total" and ("route", route) in lab}


def test_kernel_responses_by_code(env, web):
    """The data plane counts 200, 204, 404 (among L7_KERNEL_CODES) one by
    one and 418 under its class; `l7fastctl stats` and /metrics agree."""
    before = kernel_codes(scrape(env.metrics_port), "kern")
    kernel_before = env.stats()["routes"]["kern"]["requests_kernel"]
    env.daemon.wait_idle(*env.endpoints)
    c = env.client(web, True)
    sent = {200: 3, 204: 1, 404: 2, 418: 2}
    for status, n in sent.items():
        for _ in range(n):
            c.request("GET", f"/kern/codes?status={status}")
            assert c.read_response().status == status
    c.close()
    m = scrape(env.metrics_port)
    st = env.stats()["routes"]["kern"]
    assert st["requests_kernel"] - kernel_before == sum(sent.values()), "every request on the kernel path"
    after = kernel_codes(m, "kern")
    delta = {k: v - before.get(k, 0) for k, v in after.items() if v != before.get(k, 0)}
    assert delta == {"200": 3, "204": 1, "404": 2, "4xx": 2}, delta
    assert {k: float(v) for k, v in st["kernel_codes"].items()} == after
    # the slow path's own family is not where they are
    assert not any(n == "l7fast_route_user_responses_total" and ("route", "kern") in lab for (n, lab) in m)


def process_start_time(pid):
    """/proc/PID/stat's start time as Unix seconds (process_start_time_seconds)."""
    stat = open(f"/proc/{pid}/stat").read()
    fields = stat[stat.rindex(")") + 2:].split()   # from field 3 on
    start_ticks = int(fields[22 - 3])
    btime = next(int(line.split()[1]) for line in open("/proc/stat") if line.startswith("btime "))
    return btime + start_ticks // os.sysconf("SC_CLK_TCK")


def test_daemon_state_reloads_pools_and_process_figures(env, web):
    """The daemon's own families agree with GetStatus, the pool gauges with
    the data plane's slot states, process_* with /proc."""
    env.daemon.wait_idle(*env.endpoints)
    pools = lambda: {a: env.daemon.pool_states(a) for a in env.endpoints}  # noqa: E731
    before = pools()
    m = scrape(env.metrics_port)
    rc, out, err = env.ctl("--json", "status")
    assert rc == 0, err
    status = json.loads(out)
    assert get(m, "l7fast_daemon_state", state=status["state"]) == 1
    assert get(m, "l7fast_daemon_state", state={"running": "degraded", "degraded": "running"}[status["state"]]) == 0
    assert get(m, "l7fast_policy_applied_timestamp_seconds") == status["applied_unix"] > 0
    assert get(m, "l7fast_reloads_total", result="ok") == status["reloads_ok"]
    assert get(m, "l7fast_reloads_total", result="failed") == status["reloads_failed"]
    assert get(m, "l7fast_reload_last_success") == (status["last_reload_error"] == "")
    assert ("l7fast_slow_path_connections", frozenset()) in m
    assert get(m, "l7fast_parked_connections") == status["parked_connections"]
    # no traffic meanwhile: the pools did not move, and the gauges say what
    # the data plane's slot states said
    if pools() == before:
        for a in env.endpoints:
            assert get(m, "l7fast_endpoint_connections", endpoint=a, pool="kernel", state="idle") == \
                before[a].get("IDLE", 0) >= 1
    pid = env.daemon.proc.pid
    assert get(m, "process_start_time_seconds") == process_start_time(pid)
    assert get(m, "process_max_fds") == resource.prlimit(pid, resource.RLIMIT_NOFILE)[0]
    assert 0 < get(m, "process_open_fds") <= get(m, "process_max_fds")
    assert get(m, "process_resident_memory_bytes") > 0
    assert get(m, "process_cpu_seconds_total") > 0


def test_per_endpoint_figures_add_up_to_the_routes_and_match_metrics(env, web):
    before = {e["address"]: e for e in env.stats()["endpoints"]}
    send(env, web, "/two/a", 10)
    send(env, web, "/twouser/a", 4)
    send(env, web, "/two/r", 4, local=False)
    st = env.stats()
    m = scrape(env.metrics_port)
    eps = {e["address"]: e for e in st["endpoints"]}
    b, b2 = env.endpoints
    assert set(eps) == {b, b2}
    assert eps[b]["clusters"] == "b,pair" and eps[b2]["clusters"] == "pair"
    # every exchange has ended: the endpoints' figures are the routes'
    for key in ("requests_kernel", "requests_user", "bytes_out"):
        assert sum(e[key] for e in eps.values()) == sum(r[key] for r in st["routes"].values()), key
    for cls in ("2xx", "5xx", "other"):
        assert sum(e["responses"][cls] for e in eps.values()) == \
            sum(r["responses"][cls] for r in st["routes"].values()), cls
    assert sum(sum(e["latency_buckets"]) for e in eps.values()) == \
        sum(sum(r["latency_buckets"]) for r in st["routes"].values())
    # round robin over the pair, one counter per path, every request in
    # turn: each endpoint took half of the 14 kernel requests (10 + 4, both
    # even) and half of the 4 slow-path ones
    for addr in (b, b2):
        moved = {k: eps[addr][k] - before.get(addr, {}).get(k, 0) for k in ("requests_kernel", "requests_user")}
        assert moved == {"requests_kernel": 7, "requests_user": 2}, (addr, moved)
    for addr, e in eps.items():
        assert get(m, "l7fast_endpoint_requests_total", endpoint=addr, plane="kernel") == e["requests_kernel"]
        assert get(m, "l7fast_endpoint_requests_total", endpoint=addr, plane="user") == e["requests_user"]
        assert get(m, "l7fast_endpoint_response_bytes_total", endpoint=addr) == e["bytes_out"]
        for cls, v in e["responses"].items():
            assert get(m, "l7fast_endpoint_responses_total", endpoint=addr, **{"class": cls}) == v
        assert get(m, "l7fast_endpoint_response_latency_seconds_count", endpoint=addr) == sum(e["latency_buckets"])
    assert get(m, "l7fast_endpoint_info", endpoint=b, cluster="pair") == 1
    rc, out, err = env.ctl("stats")
    assert rc == 0 and b2 in out and "Per endpoint" in out, out


def test_metrics_endpoint_refuses_other_paths_and_methods(env, web):
    port = env.metrics_port
    status, headers, body = http(port, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0
    assert http(port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 404
    assert http(port, b"GET /metricsx HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 404
    status, headers, _ = http(port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert http(port, b"GET /metrics HTTP/9\r\n\r\n")[0] == 400
    assert http(port, b"\x00\x01 nonsense\r\n\r\n")[0] == 400
    assert http(port, b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n")[0] == 431
    # a client that sends nothing does not hold the daemon: others are served,
    # and it is closed after the read timeout (5 s from its accept, so never
    # before; a connection never closed fails the LIVENESS read timeout)
    t0 = time.monotonic()
    idle = socket.create_connection(("127.0.0.1", port))
    try:
        assert scrape(port)
        idle.settimeout(LIVENESS)
        assert idle.recv(100) == b""
        assert time.monotonic() - t0 > 4.5
    finally:
        idle.close()


def test_reload_moves_the_metrics_listener_and_a_bind_failure_keeps_the_old_one(env, web):
    d = env.daemon
    old = env.metrics_port
    new = free_port()
    gen = env.stats()["generation"]
    d.header = d.header.replace(f'metrics_address = "127.0.0.1:{old}"', f'metrics_address = "127.0.0.1:{new}"')
    d.write_policy(env.web_policy)
    assert "READY=1" in d.reload()
    assert get(scrape(new), "l7fast_policy_generation") == gen + 1
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", old), timeout=2).close()
    env.metrics_port = new

    # an address something else holds: the reload fails, nothing changes
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    busy = squatter.getsockname()[1]
    try:
        d.header = d.header.replace(f'metrics_address = "127.0.0.1:{new}"', f'metrics_address = "127.0.0.1:{busy}"')
        d.write_policy(env.web_policy)
        rc, out, err = env.ctl("reload")
        assert "last reload failed" in d.wait_notify("READY=1")
        assert rc != 0
        assert f"daemon.metrics_address: cannot serve metrics on 127.0.0.1:{busy}" in err, err
        assert get(scrape(new), "l7fast_policy_generation") == gen + 1
        assert env.stats()["generation"] == gen + 1
    finally:
        squatter.close()
        d.header = d.header.replace(f'metrics_address = "127.0.0.1:{busy}"', f'metrics_address = "127.0.0.1:{new}"')
        d.write_policy(env.web_policy)
        assert "last reload failed" not in d.reload()


def access_lines(env, since):
    return [l for l in env.daemon.log().splitlines()[since:] if " access client=" in l or l.startswith("access ")]


def set_sample(env, n):
    d = env.daemon
    d.header = re.sub(r"\naccess_log_sample = \d+", "", d.header).rstrip("\n") + f"\naccess_log_sample = {n}\n"
    d.write_policy(env.web_policy)
    assert "last reload failed" not in d.reload()


def test_dataplane_connections_by_plane_and_side(env, web):
    """l7fast_dataplane_connections counts the data plane's table of client
    connections: a local client served in the kernel is kernel/local, one
    that pipelined is the slow path's (user/local) for good, a remote one
    served in the kernel is kernel/remote; each goes once its session ends."""
    def conns():
        m = scrape(env.metrics_port)
        return {(p, side): get(m, "l7fast_dataplane_connections", plane=p, side=side)
                for p in ("kernel", "user") for side in ("local", "remote")}
    zero = {(p, side): 0 for p in ("kernel", "user") for side in ("local", "remote")}
    assert wait_until(lambda: conns() == zero), conns()
    env.daemon.wait_idle(*env.endpoints)
    k = env.client(web)
    k.request("GET", "/kern/conn")
    assert k.read_response().status == 200
    u = env.client(web)
    u.send(make_request("GET", "/kern/p1") + make_request("GET", "/kern/p2"))
    assert u.read_response().status == 200 and u.read_response().status == 200
    env.daemon.wait_idle(*env.endpoints)
    r = env.client(web, local=False)
    r.request("GET", "/kern/remote")
    assert r.read_response().status == 200
    want = dict(zero)
    want.update({("kernel", "local"): 1, ("user", "local"): 1, ("kernel", "remote"): 1})
    assert wait_until(lambda: conns() == want), conns()
    for c in (k, u, r):
        c.close()
    assert wait_until(lambda: conns() == zero), conns()


def test_access_log_one_line_per_request_on_both_paths_with_sample_1(env, web):
    set_sample(env, 1)
    mark = len(env.daemon.log().splitlines())
    k0 = env.stats()["routes"]["kern"]["requests_kernel"]
    send(env, web, "/kern/logged?x=1", 4)
    send(env, web, "/user/logged?y=2", 3)
    assert env.stats()["routes"]["kern"]["requests_kernel"] - k0 == 4
    # kernel exchanges are logged from ring buffer events, after the response
    wait_until(lambda: len(access_lines(env, mark)) >= 7)
    lines = access_lines(env, mark)
    kern = [l for l in lines if "path=kernel" in l]
    user = [l for l in lines if "path=user" in l]
    assert len(kern) == 4 and len(user) == 3, "\n".join(lines)
    for l in kern:
        assert re.search(r"access client=127\.0\.0\.1:\d+ method=- target=- route=kern status=200 in=- "
                         r"out=\d+ latency_us=\d+ path=kernel id=[0-9a-f]{16}$", l), l
    for l in user:
        assert re.search(r'access client=127\.0\.0\.1:\d+ method=GET target="/user/logged\?y=2" route=user '
                         r"status=200 in=\d+ out=\d+ latency_us=\d+ path=user id=[0-9a-f]{16}$", l), l


def test_access_log_sample_0_logs_nothing(env, web):
    set_sample(env, 0)
    mark = len(env.daemon.log().splitlines())
    send(env, web, "/kern/quiet", 3)
    send(env, web, "/user/quiet", 3)
    send(env, web, "/kern/quiet-remote", 2, local=False)
    # A barrier instead of a wait: with sample 1 again, a kernel exchange
    # and a slow-path one are logged; the kernel's event comes through the
    # ring buffer after any event of the exchanges above, so once its line
    # (its client port) is there, so would be theirs.
    set_sample(env, 1)
    env.daemon.wait_idle(*env.endpoints)
    c = env.client(web)
    marker = f"client=127.0.0.1:{c.sock.getsockname()[1]} "
    for path in ("/kern/marker", "/user/marker"):
        c.request("GET", path)
        assert c.read_response().status == 200
    c.close()
    assert wait_until(lambda: sum(marker in l for l in access_lines(env, mark)) == 2), access_lines(env, mark)
    lines = access_lines(env, mark)
    assert len(lines) == 2 and any("path=kernel" in l for l in lines), "\n".join(lines)


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_requests_l7fast_refuses_itself_are_logged_and_counted(env, web, local):
    """A 400 l7fast sends itself (an encoded slash in the path, two
    Content-Length fields: what smuggling attempts look like) once left no
    access-log line and no Prometheus series. Each is counted by reason in
    l7fast_requests_refused_total and GetStats "refused", and logged with
    sample 1, reason included. A local client's request is refused the
    same way: the kernel hands what it cannot parse to the slow path."""
    set_sample(env, 1)
    cases = [
        (b"GET /kern/a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n", "bad_request:encoded_slash",
         'method=GET target="/kern/a%2Fb"'),
        (b"POST /kern/x HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
         "bad_request:duplicate_content_length", "method=- target=-"),
    ]
    before = scrape(env.metrics_port)
    stats0 = dict(env.stats().get("refused", {}))
    mark = len(env.daemon.log().splitlines())
    for raw, reason, request in cases:
        c = env.client(web, local)
        marker = f"client=127.0.0.1:{c.sock.getsockname()[1]} "
        c.send(raw)
        assert c.read_response().status == 400
        assert c.closed_by_peer()
        c.close()
        lines = [l for l in access_lines(env, mark) if marker in l]
        assert len(lines) == 1, access_lines(env, mark)
        assert re.search(rf"{request} route=- status=400 in=- out=\d+ latency_us=\d+ path=user "
                         rf"reason={re.escape(reason)} id=[0-9a-f]{{16}}$", lines[0]), lines[0]
    after = scrape(env.metrics_port)
    stats1 = env.stats()["refused"]
    for _, reason, _ in cases:
        was = before.get(("l7fast_requests_refused_total", frozenset({("reason", reason)})), 0)
        assert get(after, "l7fast_requests_refused_total", reason=reason) - was == 1, reason
        assert stats1[reason] - stats0.get(reason, 0) == 1, stats1


def test_access_log_as_json_lines(env, web):
    """daemon.access_log_format = "json": one JSON object per line, with the
    authority, the cluster and the endpoint as far as the path knows them (the
    kernel keeps neither method, authority, target nor request size)."""
    d = env.daemon
    d.header = re.sub(r"\naccess_log_format = \"\w+\"", "", d.header).rstrip("\n") + '\naccess_log_format = "json"\n'
    set_sample(env, 1)
    try:
        mark = len(d.log().splitlines())
        env.daemon.wait_idle(*env.endpoints)
        c = env.client(web)
        port = c.sock.getsockname()[1]
        for path in ("/kern/json", "/user/json?a=1"):
            # the client's request id is the line's; the kernel never sees
            # it, and its line gets one made up
            c.request("GET", path, headers={"X-Request-Id": "trace-42"})
            assert c.read_response().status == 200
        # a request no route takes: the same line, by the same code, as any
        # other exchange the slow path ends
        c.request("GET", "/nowhere/json", headers={"X-Request-Id": "trace-43"})
        assert c.read_response().status == 404
        c.close()

        def lines():
            return d.access_json(mark, f"127.0.0.1:{port}")
        assert wait_until(lambda: len(lines()) == 3), d.log().splitlines()[mark:]
        by_status = {o["status"]: o for o in lines()}
        assert {k: v for k, v in by_status[404].items() if k not in ("time", "bytes_out", "duration_us")} == {
            "type": "access", "request_id": "trace-43", "client": f"127.0.0.1:{port}", "method": "GET",
            "authority": "test", "target": "/nowhere/json", "route": None, "cluster": None, "endpoint": None,
            "status": 404, "reason": "no_route",
            "bytes_in": len(make_request("GET", "/nowhere/json", {"X-Request-Id": "trace-43"}, None, "test")),
            "path": "user"}
        by_path = {o["path"]: o for o in lines() if o["status"] == 200}
        b = env.endpoints[0]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", by_path["user"]["time"])
        assert re.fullmatch(r"[0-9a-f]{16}", by_path["kernel"].pop("request_id"))
        assert {k: v for k, v in by_path["user"].items() if k not in ("time", "bytes_in", "bytes_out",
                                                                       "duration_us")} == {
            "type": "access", "request_id": "trace-42", "client": f"127.0.0.1:{port}", "method": "GET",
            "authority": "test",
            "target": "/user/json?a=1", "route": "user", "cluster": "b", "endpoint": b, "status": 200,
            "reason": None, "path": "user"}
        assert {k: v for k, v in by_path["kernel"].items() if k not in ("time", "bytes_out", "duration_us")} == {
            "type": "access", "client": f"127.0.0.1:{port}", "method": None, "authority": None, "target": None,
            "route": "kern", "cluster": "b", "endpoint": b, "status": 200, "reason": None, "bytes_in": None,
            "path": "kernel"}
        assert by_path["user"]["bytes_in"] > 0 and by_path["kernel"]["bytes_out"] > 0
    finally:
        d.header = re.sub(r"\naccess_log_format = \"\w+\"", "", d.header)
        set_sample(env, 0)


def monitoring_check():
    """tests/monitoring/check.py as a module: how it reads the dashboard, the
    alert rules and Metrics.cpp."""
    path = Path(__file__).resolve().parents[1] / "monitoring" / "check.py"
    spec = importlib.util.spec_from_file_location("monitoring_check", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def degraded_policy(port, backend):
    return f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
[[cluster]]
name = "b"
endpoints = [ {{ address = "{backend.address()}" }} ]
health_check = {{ path = "/health" }}
[[route]]
name = "guarded"
cluster = "b"
match = {{ path_prefix = "/" }}
[route.rbac]
rules = [ {{ name = "no-admin", action = "deny", path_prefix = "/admin" }} ]
"""


def test_the_dashboard_and_the_alert_rules_query_only_what_l7fastd_serves(env, web):
    """Every series packaging/monitoring's dashboard and alert rules select
    is in l7fastd's exposition, with the labels they use, and
    tests/monitoring/check.py's reading of Metrics.cpp (which the ctest test
    checks the assets against) is what l7fastd serves: families, types,
    series and label names. Some families have samples only after an event:
    this daemon gets requests on both planes and a reload; a second one,
    degraded (L7FAST_TEST_FAULT=memlock, no D-Bus, a cgroup of its own),
    gets an RBAC denial and a refused request, and health-checks its
    endpoint."""
    mc = monitoring_check()
    send(env, web, "/kern/monitoring", 3)
    send(env, web, "/user/monitoring", 2)
    assert "last reload failed" not in env.daemon.reload()
    running = scrape_text(env.metrics_port)

    cgroup = Cgroup(f"l7fast-test-{os.getpid()}-metrics-degraded")
    work = Path(env.tmp.name) / "degraded"
    work.mkdir(exist_ok=True)
    port, mport = free_port(), free_port()
    d = None
    try:
        d = Daemon(degraded_policy(port, env.backends["b"]), cgroup, work, extra_args=("--no-dbus",),
                   daemon_settings=f'metrics_address = "127.0.0.1:{mport}"',
                   extra_env={"L7FAST_TEST_FAULT": "memlock"})
        assert http(port, b"GET /admin/x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[0] == 403
        assert http(port, b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[0] == 200
        assert http(port, b"GET /a%2Fb HTTP/1.1\r\nHost: x\r\n\r\n")[0] == 400
        degraded = scrape_text(mport)
    finally:
        if d:
            d.stop()
        cgroup.remove()
    assert get(parse(degraded), "l7fast_daemon_state", state="degraded") == 1
    assert get(parse(running), "l7fast_daemon_state", state="running") == 1

    source = mc.load_source_families()
    referenced = mc.references()
    assert len(referenced) > 30, referenced
    # a running daemon serves every family the assets query but the reason
    # it would be degraded for (families of events, such as refusals, with
    # no sample until one happens); the two serve samples of every series
    index = mc.series_index(source)
    assert not referenced - set(index), f"not written by Metrics.cpp: {referenced - set(index)}"
    families = {index[s][0].name for s in referenced}
    assert families - set(mc.families_from_exposition(running)) == {"l7fast_daemon_degraded_info"}
    served = {name for name, _ in parse(running)} | {name for name, _ in parse(degraded)}
    assert not referenced - served, referenced - served
    live = mc.families_from_exposition(running + degraded)
    problems = mc.check_queries_against(live)
    assert not problems, "\n".join(problems)

    assert {n: f.type for n, f in source.items()} == {n: f.type for n, f in live.items()}
    assert {s: labels for f in source.values() for s, labels in f.series.items()} == \
        {s: labels for f in live.values() for s, labels in f.series.items()}
