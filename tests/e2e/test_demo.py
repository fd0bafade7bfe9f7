"""`make demo` (scripts/demo.sh) on the embedded default policy: every route
of the default policy, JWT and ring hash included, runs in the kernel and
answers as the policy says. The demo checks the kernel placement itself and
exits non-zero when a route did not run there; this test checks what it
printed."""
import os
import re
import socket
import subprocess

import pytest

import l7env

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def port_in_use(port):
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def test_demo_runs_the_default_policy_in_the_kernel():
    reason = l7env.skip_reason()
    if reason:
        if os.environ.get("L7FAST_REQUIRE_E2E") == "1":
            pytest.fail(f"end-to-end tests required but cannot run: {reason}")
        pytest.skip(reason)
    busy = [p for p in (8080, 9001, 9002) if port_in_use(p)]
    # the demo needs the default policy's ports; in CI (a clean machine) they are free
    assert not busy, f"ports {busy} are in use: the demo cannot run its default policy"
    env = dict(os.environ, BUILD=str(l7env.BUILD), DEMO_REQUESTS="300")
    env.pop("DBUS_SYSTEM_BUS_ADDRESS", None)
    p = subprocess.run([os.path.join(TOP, "scripts", "demo.sh")], env=env, capture_output=True,
                       text=True, timeout=180)
    out = p.stdout
    assert p.returncode == 0, out[-3000:] + p.stderr[-3000:]

    def status_of(label):
        m = re.search(re.escape(label) + r"[^\n]*? (\d{3}) ?(\S*)\n", out)
        assert m, f"no line for {label!r} in:\n{out}"
        return int(m.group(1)), m.group(2)

    assert status_of("GET /private/a, no token")[0] == 401
    assert status_of("GET /private/a, forged token")[0] == 401
    assert status_of("GET /private/a, expired token")[0] == 401
    assert status_of("GET /private/a, valid token")[0] == 200
    assert status_of("DELETE /private/a, RBAC deny")[0] == 403
    assert status_of("malformed: two Content-Lengths")[0] == 400
    assert re.search(r'(?i)www-authenticate: Bearer', out), out
    assert re.search(r'(?i)"x-l7fast-route": *"private"', out), out
    # sticky: each user's two requests reached the same backend
    for user in ("alice", "bob", "carol", "dave"):
        answers = set(re.findall(r"X-User: " + user + r" *\(session\) +200 (\S+)", out))
        assert len(answers) == 1, (user, answers, out)
    m = re.search(r"(\d+) of (\d+) routes in the kernel; ([\d,]+) of ([\d,]+) requests", out)
    assert m, out
    assert m.group(1) == m.group(2), out  # every route of the default policy
    assert "trusts the public demo secret" in out  # and the daemon says the secret is public
