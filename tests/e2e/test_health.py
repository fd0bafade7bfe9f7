"""Upstream health: `l7fastctl drain`/`undrain`, active health checks and
outlier detection (proxy/UpstreamHealth.hpp), on both planes.

The backends are in-process servers whose answers a test switches (200 or
503, and whether they listen at all), and which count what they receive: a
test asserts exactly how many requests reached an endpoint once l7fastd
says (in `l7fastctl dump`) that it is out. When an endpoint goes out or
comes back is decided by thresholds and timers; the tests wait for the
state l7fastd reports and assert what follows from it, never a duration.
"""
import json
import re
import socket
import threading
import time

import pytest

from l7env import RawBackend, free_port, wait_until

# long enough for the checks and ejections below on a loaded machine; a
# wait that runs out is a failure with the state l7fastd reported
WAIT = 30.0


class Switchable:
    """A backend on a fixed port whose status (200 or 503) the test sets,
    which it can stop and start again (a dead endpoint: connection
    refused), and which counts the requests it answered, health checks
    apart."""

    def __init__(self, name, port=None):
        self.name = name
        self.port = port or free_port()
        self.status = 200
        self.lock = threading.Lock()
        self.requests = 0
        self.checks = 0
        self.sent_times = []  # of the load test's requests, when they were sent (ns)
        self.server = None
        self.start()

    def _answer(self, head, body):
        line = head.split(b"\r\n", 1)[0].decode()
        with self.lock:
            if " /health" in line:
                self.checks += 1
            else:
                self.requests += 1
                sent = re.search(r"[?&]sent=(\d+)", line)
                if sent:
                    self.sent_times.append(int(sent.group(1)))
            status = self.status
        payload = json.dumps({"backend": self.name, "request": line}).encode()
        reason = b"OK" if status == 200 else b"Service Unavailable"
        return (b"HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                % (status, reason, len(payload)) + payload)

    def start(self):
        # RawBackend binds port 0: bind this one on our fixed port instead
        srv = RawBackend.__new__(RawBackend)
        srv.answer, srv.on_bytes = self._answer, None
        srv.close_after_answer, srv.on_close = False, None
        srv.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.sock.bind(("127.0.0.1", self.port))
        srv.sock.listen(64)
        srv.port = self.port
        srv.lock, srv.conns, srv.threads, srv.closed = threading.Lock(), set(), [], False
        RawBackend.live.add(srv)
        srv._start(srv._accept)
        self.server = srv

    def stop(self):
        if self.server:
            self.server.close()
            self.server = None

    def address(self):
        return f"127.0.0.1:{self.port}"

    def taken(self):
        """Requests answered since the last call."""
        with self.lock:
            n, self.requests = self.requests, 0
        return n


def endpoint_dump(env, address):
    """The endpoint's object in `l7fastctl --json dump` (the first cluster
    listing it: health and connections are per address)."""
    rc, out, err = env.ctl("--json", "dump")
    assert rc == 0, err
    for c in json.loads(out)["clusters"]:
        for e in c["endpoints"]:
            if e["address"] == address:
                return e
    raise AssertionError(f"{address} is in no cluster of the dump")


def endpoint_health(env, address):
    return endpoint_dump(env, address).get("health", {})


def wait_state(env, address, state):
    seen = {}

    def reached():
        seen.update(endpoint_health(env, address))
        return seen.get("state") == state
    assert wait_until(reached, timeout=WAIT, interval=0.1), f"{address}: {seen}, want state {state}"
    return seen


def send(env, port, path, n, local=True, headers=None):
    """n requests on one keep-alive connection: the backends that answered."""
    c = env.client(port, local=local)
    got = []
    for i in range(n):
        c.request("GET", f"{path}{i}", headers=headers)
        r = c.read_response()
        got.append((r.status, r.json()["backend"] if r.body.startswith(b"{") else None))
    c.close()
    return got


@pytest.fixture(scope="module")
def hw(env):
    env.a, env.b, env.c = Switchable("a"), Switchable("b"), Switchable("c")
    env.hc = Switchable("hc")            # health-checked
    env.od_good, env.od_bad = Switchable("good"), Switchable("bad")
    port = free_port()
    env.metrics_port = free_port()
    env.start(f"""
[[listener]]
name = "web"
address = "127.0.0.1:{port}"

[[cluster]]
name = "rr"
endpoints = [ {{ address = "{env.a.address()}" }}, {{ address = "{env.b.address()}" }} ]

[[cluster]]
name = "mag"
lb = "maglev"
maglev_table_size = 251
hash_key = {{ header = "x-user" }}
endpoints = [ {{ address = "{env.a.address()}" }}, {{ address = "{env.b.address()}" }},
              {{ address = "{env.c.address()}" }} ]

[[cluster]]
name = "checked"
endpoints = [ {{ address = "{env.c.address()}" }}, {{ address = "{env.hc.address()}" }} ]
health_check = {{ path = "/health", interval_ms = 300, timeout_ms = 250, unhealthy_threshold = 2, healthy_threshold = 2 }}

[[cluster]]
name = "outlier"
endpoints = [ {{ address = "{env.od_good.address()}" }}, {{ address = "{env.od_bad.address()}" }} ]
outlier_detection = {{ consecutive_5xx = 3, base_ejection_ms = 1500, max_ejection_percent = 50 }}

[[route]]
name = "rr"
cluster = "rr"
match = {{ path_prefix = "/rr/" }}
[[route]]
name = "mag"
cluster = "mag"
match = {{ path_prefix = "/mag/" }}
[[route]]
name = "checked"
cluster = "checked"
match = {{ path_prefix = "/checked/" }}
[[route]]
name = "outlier"
cluster = "outlier"
match = {{ path_prefix = "/outlier/" }}
""", daemon_settings=f'metrics_address = "127.0.0.1:{env.metrics_port}"')
    yield port
    for s in (env.a, env.b, env.c, env.hc, env.od_good, env.od_bad):
        s.stop()


def test_drain_takes_an_endpoint_out_of_both_planes_and_undrain_brings_it_back(env, hw):
    a, b = env.a, env.b
    for local in (True, False):
        assert {x for _, x in send(env, hw, "/rr/warm", 8, local=local)} == {"a", "b"}
    a.taken(), b.taken()

    rc, out, err = env.ctl("--json", "drain", a.address())
    assert rc == 0, err
    assert json.loads(out) == {"endpoint": a.address(), "changed": True, "state": "drained"}
    assert endpoint_health(env, a.address())["state"] == "drained"
    rc, out, err = env.ctl("drain", a.address())
    assert (rc, out.strip()) == (0, f"{a.address()}: drained already; state drained"), err

    for local in (True, False):
        got = send(env, hw, "/rr/x", 100, local=local)
        assert got == [(200, "b")] * 100
    assert a.taken() == 0 and b.taken() == 200
    # a reload keeps the drain (the address is still in the policy)
    assert "last reload failed" not in env.daemon.reload()
    assert endpoint_health(env, a.address())["state"] == "drained"
    assert send(env, hw, "/rr/z", 20) == [(200, "b")] * 20
    assert a.taken() == 0

    rc, out, err = env.ctl("undrain", a.address())
    assert (rc, out.strip()) == (0, f"{a.address()}: undrained; state up"), err
    assert {x for _, x in send(env, hw, "/rr/y", 8)} == {"a", "b"}


def test_drain_errors_say_what_to_give(env, hw):
    rc, out, err = env.ctl("drain", "127.0.0.1:1")
    assert rc == 1
    assert err.strip() == ("l7fastctl: no cluster of the running policy lists the endpoint 127.0.0.1:1 "
                           "(`l7fastctl dump` lists the endpoints)"), err
    rc, out, err = env.ctl("undrain", "backend-a")
    assert rc == 1
    assert "\"backend-a\" is not an endpoint address" in err and "IP:PORT or [IPv6]:PORT" in err, err


def test_a_drained_hash_endpoints_keys_go_where_explain_says(env, hw):
    """Maglev: the keys of the drained endpoint leave the kernel (it cannot
    rebuild the table) and land where the slow path's table over the
    endpoints that are in sends them, which is what explain prints; every
    other key stays on its endpoint, in the kernel."""
    a, b, c = env.a, env.b, env.c
    users = [f"user{i}" for i in range(40)]
    a.taken(), b.taken(), c.taken()

    def where(user):
        got = send(env, hw, "/mag/", 1, headers={"X-User": user})
        assert got[0][0] == 200
        return got[0][1]
    home = {u: where(u) for u in users}
    assert set(home.values()) == {"a", "b", "c"}
    moved = sum(1 for u in users if home[u] == "b")
    assert b.taken() == moved

    assert env.ctl("drain", b.address())[0] == 0
    try:
        names = {a.address(): "a", b.address(): "b", c.address(): "c"}
        st0 = env.stats()
        down0 = st0["counters"].get("to_slow_path_endpoint_down", 0)
        for u in users:
            rc, out, err = env.ctl("--json", "explain", "GET", "/mag/x", "-H", f"X-User: {u}")
            assert rc == 0, err
            up = json.loads(out)["upstream"]
            assert up["endpoints_out"] == [{"endpoint": b.address(), "state": "drained"}]
            now = where(u)
            assert now == names[up["endpoint"]], (u, up)
            if home[u] == "b":
                assert now != "b" and up["hash"]["table_endpoint"] == b.address()
                assert json.loads(out)["plane"]["reason"] == "to_slow_path_endpoint_down"
            else:
                assert now == home[u], u
        # each moved key was handed over by the kernel for that reason
        st = env.stats()
        assert st["counters"].get("to_slow_path_endpoint_down", 0) - down0 == moved
        assert b.taken() == 0
    finally:
        assert env.ctl("undrain", b.address())[0] == 0


def test_health_check_takes_a_dead_endpoint_out_and_back(env, hw):
    c, hc = env.c, env.hc
    assert wait_until(lambda: endpoint_health(env, hc.address()).get("checks_passed", 0) >= 1, timeout=WAIT)
    h = endpoint_health(env, hc.address())
    assert (h["state"], h["last_check"]) == ("up", "status 200"), h

    hc.stop()
    h = wait_state(env, hc.address(), "unhealthy")
    assert h["last_check"].startswith("connect: "), h
    c.taken()
    for local in (True, False):
        assert send(env, hw, "/checked/x", 50, local=local) == [(200, "c")] * 50
    assert c.taken() == 100

    # back: listening again, and answering the check with 200 (twice)
    hc.start()
    wait_state(env, hc.address(), "up")
    assert {x for _, x in send(env, hw, "/checked/y", 8)} == {"c", "hc"}

    # a check answered 503 fails too
    hc.status = 503
    h = wait_state(env, hc.address(), "unhealthy")
    assert h["last_check"] == "status 503"
    assert send(env, hw, "/checked/z", 20) == [(200, "c")] * 20
    hc.status = 200
    wait_state(env, hc.address(), "up")


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_outlier_detection_ejects_a_5xx_endpoint_then_lets_it_back(env, hw, local):
    """Three 5xx in a row from one endpoint eject it, whichever plane
    forwarded them (the kernel and the daemon count on the same word); it
    comes back by itself after base_ejection_ms."""
    bad = env.od_bad
    wait_state(env, bad.address(), "up")
    before = endpoint_health(env, bad.address())["ejections_5xx"]
    bad.status = 503
    try:
        cl = env.client(hw, local=local)
        fives = 0
        for i in range(40):   # round robin: 3 in a row reach bad within 6
            cl.request("GET", f"/outlier/{i}")
            r = cl.read_response()
            fives += r.status == 503
            if endpoint_health(env, bad.address())["state"] == "ejected":
                break
        h = endpoint_health(env, bad.address())
        assert h["state"] == "ejected", (h, fives)
        # on the slow path exactly 3; the kernel's event reaches l7fastd
        # asynchronously, so one more 5xx may have gone out meanwhile
        assert h["ejections_5xx"] == before + 1 and fives >= 3
        bad.taken()
        for i in range(50):
            cl.request("GET", f"/outlier/after{i}")
            r = cl.read_response()
            assert (r.status, r.json()["backend"]) == (200, "good")
        assert bad.taken() == 0
        cl.close()
    finally:
        bad.status = 200
    wait_state(env, bad.address(), "up")
    assert {x for _, x in send(env, hw, "/outlier/back", 8, local=local)} == {"good", "bad"}


def test_outlier_detection_ejects_an_endpoint_that_refuses_connections(env, hw):
    """A dead endpoint: the connection attempts to it (the pools' and the
    slow path's) fail, five in a row eject it (consecutive_connect_failures'
    default); requests meanwhile are retried on the other endpoint."""
    bad = env.od_bad
    wait_state(env, bad.address(), "up")
    before = endpoint_health(env, bad.address())["ejections_connect_failure"]
    bad.stop()
    try:
        c = env.client(hw)
        for i in range(100):
            c.request("GET", f"/outlier/dead{i}")
            r = c.read_response()
            assert (r.status, r.json()["backend"]) == (200, "good"), r.body
            if endpoint_health(env, bad.address())["state"] == "ejected":
                break
        c.close()
        h = endpoint_health(env, bad.address())
        assert h["state"] == "ejected" and h["ejections_connect_failure"] == before + 1, h
        assert "connection attempts in a row failed" in env.daemon.log()
    finally:
        bad.start()
    wait_state(env, bad.address(), "up")


def test_max_ejection_percent_keeps_the_last_endpoint_in(env, hw):
    """Both endpoints answer 5xx: with max_ejection_percent = 50 of two,
    one is ejected and the other is not, whatever its 5xx; requests keep
    reaching an upstream (its 503, never l7fast's own 'no healthy
    upstream')."""
    good, bad = env.od_good, env.od_bad
    wait_state(env, good.address(), "up")
    wait_state(env, bad.address(), "up")
    refused = "not ejected after consecutive_5xx"
    seen = env.daemon.log().count(refused)
    good.status = bad.status = 503
    try:
        c = env.client(hw)
        for i in range(60):
            c.request("GET", f"/outlier/all{i}")
            r = c.read_response()
            assert r.status == 503 and r.json()["backend"] in ("good", "bad"), r.body
            if env.daemon.log().count(refused) > seen:
                break
        c.close()
        assert env.daemon.log().count(refused) > seen, "no ejection was refused"
        states = [endpoint_health(env, s.address())["state"] for s in (good, bad)]
        assert states.count("ejected") <= 1, states
    finally:
        good.status = bad.status = 200
    wait_state(env, good.address(), "up")
    wait_state(env, bad.address(), "up")


def test_health_metrics(env, hw):
    """The health families as the dashboard and the alert read them, and
    the stats D-Bus dictionary."""
    from test_metrics import scrape
    a, hc = env.a, env.hc
    assert wait_until(lambda: endpoint_health(env, hc.address()).get("checks_passed", 0) >= 2, timeout=WAIT)
    assert env.ctl("drain", a.address())[0] == 0
    try:
        ejections = endpoint_health(env, env.od_bad.address())["ejections_5xx"]
        m = scrape(env.metrics_port)
        assert m[("l7fast_endpoint_up", frozenset({("endpoint", a.address())}))] == 0
        assert m[("l7fast_endpoint_out", frozenset({("endpoint", a.address()), ("reason", "drained")}))] == 1
        assert m[("l7fast_endpoint_out", frozenset({("endpoint", a.address()), ("reason", "ejected")}))] == 0
        assert m[("l7fast_endpoint_up", frozenset({("endpoint", env.c.address())}))] == 1
        assert m[("l7fast_endpoint_health_checks_total",
                  frozenset({("endpoint", hc.address()), ("result", "passed")}))] >= 2
        assert m[("l7fast_endpoint_ejections_total",
                  frozenset({("endpoint", env.od_bad.address()), ("trigger", "5xx")}))] == ejections
        assert ("l7fast_endpoint_health_checks_total",
                frozenset({("endpoint", a.address()), ("result", "passed")})) not in m  # not checked
        eps = {e["address"]: e for e in env.stats()["endpoints"]}
        assert eps[a.address()]["state"] == "drained"
        assert eps[hc.address()]["checked"] is True and eps[a.address()]["checked"] is False
        rc, out, err = env.ctl("stats")
        assert rc == 0, err
        assert any(line.startswith(a.address()) and " drained " in line for line in out.splitlines()), out
    finally:
        assert env.ctl("undrain", a.address())[0] == 0


def test_a_backend_that_flaps_and_dies_under_load(env, hw):
    """Four clients (two local, two remote) keep sending to the
    health-checked cluster while its endpoint hc answers 503, comes back,
    dies (connection refused), comes back, and answers 503 again. Each
    request carries the time it was sent: none sent between the moment
    l7fastd reports hc out and the moment hc is repaired reaches it, and
    after each recovery hc gets requests again.

    hc dies with the load paused for that instant (no request in flight,
    its pooled connections retired), then the load resumes at once: a
    backend killed under kernel exchanges in flight is test_faults' case,
    and doing it here under load races the kernel's redirect into the
    closing socket (see the closing note of issue 15: the client can lose
    its 502, and 6.18 can WARN in inet_sock_destruct)."""
    hc = env.hc
    assert wait_until(lambda: endpoint_health(env, hc.address()).get("checks_passed", 0) >= 1, timeout=WAIT)
    wait_state(env, hc.address(), "up")
    with hc.lock:
        hc.sent_times.clear()
    stop = threading.Event()
    go = threading.Event()
    go.set()
    cond = threading.Condition()
    state = {"sent": 0, "ok": 0, "other": 0, "in_flight": 0}
    errors = []

    def worker(w, local):
        try:
            conn = env.client(hw, local=local)
            deadline = time.monotonic() + 120  # bounded whatever happens
            while not stop.is_set() and time.monotonic() < deadline:
                if not go.wait(1):
                    continue
                with cond:
                    state["in_flight"] += 1
                try:
                    conn.request("GET", f"/checked/load?w={w}&sent={time.monotonic_ns()}")
                    r = conn.read_response()
                finally:
                    with cond:
                        state["in_flight"] -= 1
                        cond.notify_all()
                with cond:
                    state["sent"] += 1
                    state["ok" if r.status == 200 else "other"] += 1
                if r.header("connection", "").lower() == "close":
                    conn.close()
                    conn = env.client(hw, local=local)
            conn.close()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"worker {w}: {e!r}")
    threads = [threading.Thread(target=worker, args=(w, w < 2), daemon=True) for w in range(4)]
    for t in threads:
        t.start()
    windows = []   # (reported out at, repaired at)
    try:
        for how in ("503", "dead", "503", "dead"):
            if how == "503":
                hc.status = 503
            else:
                go.clear()
                with cond:
                    assert cond.wait_for(lambda: state["in_flight"] == 0, timeout=WAIT)
                hc.stop()
                assert wait_until(lambda: sum(endpoint_dump(env, hc.address()).get("connections", {}).get(k, 0)
                                              for k in ("kernel_idle", "kernel_busy")) == 0, timeout=WAIT)
                go.set()
            wait_state(env, hc.address(), "unhealthy")
            out_at = time.monotonic_ns()
            time.sleep(0.5)           # load runs with hc out
            repaired_at = time.monotonic_ns()
            if how == "503":
                hc.status = 200
            else:
                hc.start()
            windows.append((out_at, repaired_at))
            wait_state(env, hc.address(), "up")
            back_at = time.monotonic_ns()
            assert wait_until(lambda: any(t >= back_at for t in list(hc.sent_times)), timeout=WAIT), \
                "hc got no request after it came back"
    finally:
        stop.set()
        go.set()
        for t in threads:
            t.join(30)
        hc.status = 200
        if hc.server is None:
            hc.start()
    assert not errors, errors
    with hc.lock:
        reached = list(hc.sent_times)
    late = [t for t in reached for (a, b) in windows if a <= t < b]
    print(f"[flap] {state['sent']} requests ({state['ok']} 200, {state['other']} other), "
          f"{len(reached)} reached hc, {len(late)} of them sent while it was out")
    assert late == []
    assert state["ok"] > 0
