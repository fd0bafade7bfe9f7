"""Access control around a running l7fastd: wrongly typed D-Bus calls get
errors and change nothing, and policy files others could write are reported
(log, l7fastctl status and check).

Refusing Reload to unprivileged callers (the shipped bus policy, and the
daemon's own check without it) is tested in test_dbus_api.py and
test_cli.py; this module's bus is open and private. The kernel module's
control interface (CAP_NET_ADMIN for every key operation) is tested by the
kmod harness (tests/kmod/kfunc_test.c, t_unprivileged)."""
import json
import os
import sys

import pytest

from l7env import ROOT, Conn, catch_all_toml, free_port

sys.path.insert(0, str(ROOT / "scripts" / "dbus"))
from l7fast_bus import NOBODY, busctl, call  # noqa: E402

INVALID_ARGS = "org.freedesktop.DBus.Error.InvalidArgs"


@pytest.fixture(scope="module")
def web(env):
    env.backend("a")
    port = free_port()
    env.start(catch_all_toml(port, env.backends["a"].address()))
    env.daemon.policy_dir.mkdir(exist_ok=True)
    return port


def status(env):
    rc, out, err = env.ctl("--json", "status")
    assert rc == 0, err
    return json.loads(out)


def still_serving(env, port):
    with env.local():
        c = Conn(port)
    c.request("GET", "/x")
    assert c.read_response().status == 200
    c.close()
    assert env.daemon.proc.poll() is None


@pytest.mark.parametrize("method,args", [
    ("Reload", ["s", "now"]),
    ("Reload", ["b", "true"]),
    ("GetStatus", ["i", "1"]),
    ("GetStats", ["as", "2", "a", "b"]),
    ("ListRoutes", ["u", "7"]),
    ("CheckPolicy", []),
    ("CheckPolicy", ["ss", "/etc/l7fast/policy.toml", "x"]),
    ("CheckPolicy", ["ay", "3", "1", "2", "3"]),
    ("CheckPolicy", ["a{sv}", "1", "path", "s", "/etc/l7fast/policy.toml"]),
])
def test_wrongly_typed_calls_are_invalid_args_and_change_nothing(env, web, method, args):
    before = status(env)
    out = call(env.bus, method, *args)
    assert out.returncode != 0
    assert "Invalid arguments" in out.stderr or INVALID_ARGS in out.stderr, out.stderr
    after = status(env)
    assert after["generation"] == before["generation"]
    assert after["last_reload_error"] == before["last_reload_error"]
    still_serving(env, web)


def test_unknown_interface_and_property_errors(env, web):
    out = busctl(env.bus, "call", "org.l7fast.Manager1", "/org/l7fast/Manager1", "org.l7fast.Nope", "Reload")
    assert out.returncode != 0
    out = busctl(env.bus, "get-property", "org.l7fast.Manager1", "/org/l7fast/Manager1",
                 "org.l7fast.Manager1", "NoSuchProperty")
    assert out.returncode != 0
    out = busctl(env.bus, "set-property", "org.l7fast.Manager1", "/org/l7fast/Manager1",
                 "org.l7fast.Manager1", "State", "s", "stopped")
    assert out.returncode != 0
    assert status(env)["state"] == "running"
    still_serving(env, web)


def warnings_of(env):
    return status(env).get("warnings", [])


def test_world_writable_policy_file_is_reported(env, web):
    d = env.daemon
    assert warnings_of(env) == []
    os.chmod(d.policy, 0o666)
    try:
        rc, out, err = env.ctl("reload")
        assert rc == 0, err
        w = warnings_of(env)
        assert len(w) == 1 and w[0].startswith(f"{d.policy}: the policy file is writable by every user "
                                               "(mode 0666)"), w
        assert f"unsafe permissions: {d.policy}: the policy file is writable by every user" in d.log()
        rc, out, _ = env.ctl("status")
        assert "Warnings:" in out and str(d.policy) in out, out
        rc, out, _ = env.ctl("check", str(d.policy), "--policy-dir", str(d.policy_dir))
        assert rc == 0 and f"Warning: {d.policy}: the policy file is writable by every user" in out, out
        rc, out, _ = env.ctl("--json", "check", str(d.policy), "--policy-dir", str(d.policy_dir))
        assert any("writable by every user" in x for x in json.loads(out)["warnings"]), out
    finally:
        os.chmod(d.policy, 0o644)
    assert env.ctl("reload")[0] == 0
    assert warnings_of(env) == []


def test_writable_drop_in_directory_and_foreign_drop_in_are_reported(env, web):
    d = env.daemon
    drop = d.policy_dir / "10-extra.toml"
    drop.write_text("")
    os.chmod(d.policy_dir, 0o1777)  # sticky does not help: anyone may add a drop-in
    os.chown(drop, NOBODY, NOBODY)
    try:
        assert env.ctl("reload")[0] == 0
        w = warnings_of(env)
        assert any(x.startswith(f"{d.policy_dir}: the drop-in directory is writable by every user (mode 1777)")
                   for x in w), w
        assert any(x.startswith(f"{drop}: the drop-in is owned by uid {NOBODY}") for x in w), w
        still_serving(env, web)
    finally:
        drop.unlink()
        os.chmod(d.policy_dir, 0o755)
    assert env.ctl("reload")[0] == 0
    assert warnings_of(env) == []
