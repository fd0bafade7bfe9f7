"""Reloads: applied under load with zero failed requests, routes switch
atomically, listeners come and go, and a bad policy keeps the running one."""
import re
import threading

import pytest

from l7env import LIVENESS, Conn, free_port, wait_until

POLICY = """
[[listener]]
name = "web"
address = "127.0.0.1:{port}"
{extra_listener}
[[cluster]]
name = "a"
endpoints = [ {{ address = "{a}" }} ]
[[cluster]]
name = "b"
endpoints = [ {{ address = "{b}" }} ]
[[route]]
name = "main"
cluster = "{target}"
"""


@pytest.fixture(scope="module")
def web(env):
    env.backend("a")
    env.backend("b")
    port = free_port()

    def render(target, extra_listener=""):
        return POLICY.format(port=port, a=env.backends["a"].address(),
                             b=env.backends["b"].address(), target=target,
                             extra_listener=extra_listener)
    env.start(render("a"))
    return port, render


def load(port, local_env, stop, results):
    """Keep-alive clients sending requests until `stop`; records failures."""
    with local_env.local():
        c = Conn(port)
    n = 0
    while not stop.is_set() and n < 20000:
        try:
            c.request("GET", f"/load/{n}")
            r = c.read_response()
            results.append((r.status, r.json()["backend"]))
        except Exception as e:  # a failed request is what the test counts
            results.append((0, repr(e)))
            c.close()
            with local_env.local():
                c = Conn(port)
        n += 1
    c.close()


def test_reload_under_load_has_zero_failed_requests(env, web):
    """Four keep-alive clients keep sending while the route flips between
    two clusters six times. Each reload comes once the clients are served
    under the previous policy, and the next once they are under the new one
    (waited for, not given a while): traffic runs through every reload, and
    not one request fails."""
    port, render = web
    stop, results, threads = threading.Event(), [], []
    for _ in range(4):
        t = threading.Thread(target=load, args=(port, env, stop, results))
        t.start()
        threads.append(t)
    try:
        current = "a"
        for i in range(6):
            mark = len(results)
            assert wait_until(lambda: any(r[1] == current for r in results[mark:])), \
                f"no request served by {current} since the reload"
            current = "b" if i % 2 == 0 else "a"
            env.daemon.write_policy(render(current))
            ready = env.daemon.reload()
            assert "last reload failed" not in ready
        mark = len(results)
        assert wait_until(lambda: any(r[1] == current for r in results[mark:])), \
            f"no request served by {current} since the last reload"
    finally:
        stop.set()
        for t in threads:
            t.join(LIVENESS)
    assert not any(t.is_alive() for t in threads), "a client hangs"
    failures = [r for r in results if r[0] != 200]
    assert failures == []


def test_routes_switch_after_reload(env, web):
    port, render = web
    for target in ("b", "a"):
        env.daemon.write_policy(render(target))
        env.daemon.reload()
        with env.local():
            c = Conn(port)
        for i in range(5):
            c.request("GET", f"/switch/{i}")
            assert c.read_response().json()["backend"] == target
        c.close()


def test_bad_reload_keeps_the_running_policy(env, web):
    port, render = web
    env.daemon.write_policy(render("a"))
    env.daemon.reload()
    good = env.daemon.policy.read_text()
    env.daemon.policy.write_text(good.replace('cluster = "a"', 'cluster = "nope"'))
    ready = env.daemon.reload()
    assert "last reload failed" in ready
    log = env.daemon.log()
    assert "reload failed" in log and "nope" in log
    # the error names the file, line and column
    assert f"{env.daemon.policy}:" in log
    with env.local():
        c = Conn(port)
    c.request("GET", "/still")
    assert c.read_response().json()["backend"] == "a"
    c.close()
    env.daemon.policy.write_text(good)
    ready = env.daemon.reload()
    assert "last reload failed" not in ready


def test_listeners_added_and_removed_by_reload(env, web):
    port, render = web
    port2 = free_port()
    extra = f'[[listener]]\nname = "web2"\naddress = "127.0.0.1:{port2}"\n'
    env.daemon.write_policy(render("a", extra))
    env.daemon.reload()
    with env.local():
        kept = Conn(port2)
    kept.request("GET", "/l2")
    assert kept.read_response().status == 200
    env.daemon.write_policy(render("a"))
    env.daemon.reload()
    # a removed listener stops accepting; its connections carry on
    with pytest.raises(OSError):
        Conn(port2, timeout=1)
    kept.request("GET", "/l2-after")
    assert kept.read_response().status == 200
    kept.close()


def test_reload_that_cannot_listen_keeps_the_old_listeners(env, web):
    port, render = web
    import socket
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    busy = squatter.getsockname()[1]
    extra = f'[[listener]]\nname = "busy"\naddress = "127.0.0.1:{busy}"\n'
    env.daemon.write_policy(render("b", extra))
    ready = env.daemon.reload()
    assert "last reload failed" in ready
    # where the listener is written and its name, as every other policy error
    line = env.daemon.policy.read_text().splitlines().index('name = "busy"')
    assert re.search(rf'{re.escape(str(env.daemon.policy))}:{line}:\d+: listener "busy": '
                     rf'cannot listen on 127\.0\.0\.1:{busy}', env.daemon.log()), env.daemon.log()[-2000:]
    with env.local():
        c = Conn(port)
    c.request("GET", "/after-busy")
    assert c.read_response().json()["backend"] == "a"   # old policy still routes
    c.close()
    squatter.close()
