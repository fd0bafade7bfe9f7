"""Path normalisation: matching cannot be bypassed by encoding.

The kernel matches raw path bytes and takes only paths in normal form; the
parser flags any other path (percent-escape, backslash, "//", "." or ".."
segment) and the slow path normalises it, matches the normal form and
forwards it (ARCHITECTURE.md, "Path normalisation"). A route for /admin and
an RBAC deny on /private must catch every spelling, on the kernel path and
with `kernel_dataplane = false`, from local and remote clients.
"""
import os

import pytest

import l7env
from l7env import free_port


@pytest.fixture(scope="module", params=["with-dataplane", "without-dataplane"])
def env(request):
    reason = l7env.skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        pytest.skip(reason)
    e = l7env.Env("pathnorm" + ("" if request.param == "with-dataplane" else "-nodp"))
    try:
        admin = e.backend("admin").address()
        public = e.backend("public").address()
        e.upstreams = (admin, public)
        e.port = free_port()
        settings = "" if request.param == "with-dataplane" else "kernel_dataplane = false"
        e.start(f"""
[[listener]]
name = "web"
address = "127.0.0.1:{e.port}"
[[cluster]]
name = "admin"
endpoints = [ {{ address = "{admin}" }} ]
[[cluster]]
name = "public"
endpoints = [ {{ address = "{public}" }} ]
[[route]]
name = "admin"
cluster = "admin"
match = {{ path_prefix = "/admin" }}
[[route]]
name = "private"
cluster = "public"
match = {{ path_prefix = "/private" }}
[route.rbac]
default = "deny"
rules = [ {{ action = "allow", headers = [ {{ name = "x-key", exact = "k" }} ] }} ]
[[route]]
name = "public"
cluster = "public"
match = {{ path_prefix = "/" }}
""", daemon_settings=settings)
        e.dataplane = request.param == "with-dataplane"
        yield e
    finally:
        e.close()


def get(env, target, local, headers=None):
    """One request on a new connection; with the data plane, once the
    upstreams have idle pooled connections (and a remote client is in the
    data plane): a request in normal form is then the kernel's."""
    if env.dataplane:
        env.daemon.wait_idle(*env.upstreams)
    c = env.client(env.port, local)
    try:
        c.request("GET", target, headers=headers)
        return c.read_response()
    finally:
        c.close()


SPELLINGS = ["/admin/x", "/public/../admin/x", "/%61dmin/x", "/%61%64%6D%69%6E/x", "//admin/x", "/./admin/x",
             "/a/b/../../admin/x", "/%2e%2e/admin/x", "/admin/./x", "/admin//x", "/admin/y/../x"]


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_every_spelling_of_a_path_reaches_the_same_route(env, local):
    before = env.stats()["counters"]
    for target in SPELLINGS:
        r = get(env, target, local)
        assert r.status == 200, (target, r.status, r.body)
        j = r.json()
        assert j["backend"] == "admin", (target, j)
        # the backend sees the path that was matched
        assert j["path"] == "/admin/x", (target, j["path"])
    if env.dataplane:
        after = env.stats()["counters"]
        # the normal spelling ran in the kernel, the others were handed over
        assert after["to_slow_path_path_not_normal"] - before["to_slow_path_path_not_normal"] == \
            len(SPELLINGS) - 1, after
        assert after["requests_kernel"] - before["requests_kernel"] == 1


@pytest.mark.parametrize("local", [True, False], ids=["local", "remote"])
def test_a_deny_cannot_be_evaded_by_encoding(env, local):
    for target in ["/private/doc", "/x/../private/doc", "/%70rivate/doc", "//private/doc", "/private/./doc",
                   "/public/%2E%2E/private/doc"]:
        r = get(env, target, local)
        assert r.status == 403, (target, r.status, r.body)
        r = get(env, target, local, headers={"x-key": "k"})
        assert r.status == 200 and r.json()["backend"] == "public", (target, r.status)


@pytest.mark.parametrize("target", ["/admin%2Fx", "/admin%2fx", "/admin%5Cx", "/admin\\x", "/a%zz", "/a%4"])
def test_ambiguous_paths_are_rejected(env, target):
    r = get(env, target, True)
    assert r.status == 400, (target, r.status, r.body)
    assert r.header("connection", "").lower() == "close"


def test_query_is_forwarded_as_received(env):
    r = get(env, "/public/../admin/x?next=/../%2F&a=%41", True)
    assert r.status == 200
    assert r.json()["path"] == "/admin/x?next=/../%2F&a=%41"
    r = get(env, "/admin/x?next=/../y", True)  # a normal path with any query stays on the kernel path
    assert r.json()["path"] == "/admin/x?next=/../y"
