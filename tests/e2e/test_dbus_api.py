"""org.l7fast.Manager1 as any D-Bus client sees it (busctl, dbus-monitor),
served by the real l7fastd on a private system bus: introspection, the
methods' signatures and answers, properties, the Reloaded signal and
PropertiesChanged, argument errors, and the access rules both of the bus
policy (systemd/org.l7fast.Manager1.conf) and of the daemon itself (on an
open bus without that policy).

Run as root: /usr/bin/python3 -m pytest tests/e2e/test_dbus_api.py"""
import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from l7env import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "dbus"))
from l7fast_bus import (ADMIN_GID, BUS_NAME, IFACE, NOBODY, OBJECT, Daemon, PrivateBus, bus, busctl,  # noqa: E402,F401
                        call, call_json, ctl, ctl_json, daemon, daemon_log_on_failure, policy_body, workdir)

INVALID_ARGS = "org.freedesktop.DBus.Error.InvalidArgs"


@pytest.fixture(autouse=True)
def _log(daemon_log_on_failure):
    yield


@pytest.fixture(scope="module")
def open_bus(workdir):
    b = PrivateBus(workdir, open=True)
    yield b
    b.stop()


@pytest.fixture(scope="module")
def open_daemon(open_bus, workdir):
    d = Daemon(open_bus, workdir / "open-daemon", policy_body(), tag="open")
    yield d
    d.stop()


def get_property(bus, name):
    out = busctl(bus, "--json=short", "get-property", BUS_NAME, OBJECT, IFACE, name)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def dbus_send(bus, method, *args, uid=None):
    """dbus-send, which reports the error name and message verbatim."""
    cmd = ["dbus-send", "--system", "--print-reply", "--reply-timeout=10000", f"--dest={BUS_NAME}", OBJECT,
           f"{IFACE}.{method}", *args]
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if uid is not None else []
    return subprocess.run(prefix + cmd, capture_output=True, text=True, env=bus.env(), timeout=60)


def write(path, text, mode=0o644):
    path = Path(path)
    path.write_text(text)
    os.chmod(path, mode)
    return path


# ---- shape of the API -----------------------------------------------------------------------

def test_explain_refuses_what_is_not_a_request(bus, daemon):
    """Explain's argument is hostile input: what is not a request it can
    build is InvalidArgs with the reason, and nothing changes."""
    for arg, why in (("{", "the request is not JSON"),
                     ('{"method":"GET","evil":1}', 'unknown member "evil"'),
                     ('{"method":"GET","headers":[["a"]]}', "each header must be [name, value]"),
                     ('{"method":"GET","url":"nope"}', "the URL must be a path"),
                     ('{"method":"GET","url":"/","source":"10.1"}', "is not an IPv4 or IPv6 address")):
        out = call(bus, "Explain", "s", arg)
        assert out.returncode != 0, arg
        assert why in out.stderr, (arg, out.stderr)
    ok = call(bus, "Explain", "s", '{"method":"GET","url":"/api/x"}')
    assert ok.returncode == 0, ok.stderr
    assert json.loads(json.loads(ok.stdout)["data"][0])["route"] == "api"


def test_introspection_shows_methods_properties_and_signal(bus, daemon):
    out = busctl(bus, "introspect", BUS_NAME, OBJECT, IFACE)
    assert out.returncode == 0, out.stderr
    rows = {}
    for line in out.stdout.splitlines()[1:]:
        f = line.split()
        rows[f[0]] = f[1:4]
    assert rows[".Reload"] == ["method", "-", "bts"]
    assert rows[".GetStatus"] == ["method", "-", "a{sv}"]
    assert rows[".GetStats"] == ["method", "-", "a{sv}"]
    assert rows[".ListRoutes"] == ["method", "-", "aa{sv}"]
    assert rows[".CheckPolicy"] == ["method", "s", "bsaa{sv}"]
    assert rows[".SetLogLevel"] == ["method", "s", "ss"]
    assert rows[".Drain"] == ["method", "s", "bs"]
    assert rows[".Undrain"] == ["method", "s", "bs"]
    assert rows[".DumpConfig"] == ["method", "-", "s"]
    assert rows[".Explain"] == ["method", "s", "s"]
    assert rows[".Reloaded"][:2] == ["signal", "bts"]
    assert rows[".Version"][:2] == ["property", "s"]
    assert rows[".Generation"][:2] == ["property", "t"]
    assert rows[".State"][:2] == ["property", "s"]
    assert rows[".Features"][:2] == ["property", "a{ss}"]

    xml = busctl(bus, "introspect", "--xml-interface", BUS_NAME, OBJECT).stdout
    for arg in ('<arg type="s" name="path" direction="in"/>', '<arg type="b" name="ok" direction="out"/>',
                '<arg type="t" name="generation" direction="out"/>', '<arg type="s" name="error" direction="out"/>',
                '<arg type="aa{sv}" name="placement" direction="out"/>'):
        assert arg in xml, arg
    assert "org.freedesktop.DBus.Properties" in xml and "org.freedesktop.DBus.Introspectable" in xml


def test_properties(bus, daemon):
    status = call_json(bus, "GetStatus")["data"][0]
    assert get_property(bus, "Version") == {"type": "s", "data": status["version"]["data"]}
    assert get_property(bus, "Generation") == {"type": "t", "data": status["generation"]["data"]}
    assert get_property(bus, "State")["data"] in ("running", "degraded")
    features = get_property(bus, "Features")
    assert features["type"] == "a{ss}" and features["data"]
    assert features["data"] == status["features"]["data"]


def test_properties_are_read_only(bus, daemon):
    out = busctl(bus, "set-property", BUS_NAME, OBJECT, IFACE, "Generation", "t", "99")
    assert out.returncode != 0
    assert get_property(bus, "Generation")["data"] != 99


def test_get_status_get_stats_list_routes(bus, daemon):
    st = call_json(bus, "GetStatus")
    assert st["type"] == "a{sv}"
    d = st["data"][0]
    assert d["version"]["type"] == "s" and d["generation"]["type"] == "t"
    assert d["policy_files"] == {"type": "as", "data": [str(daemon.policy)]}
    assert d["routes"] == {"type": "u", "data": 4}

    stats = call_json(bus, "GetStats")
    s = stats["data"][0]
    assert s["routes"]["type"] == "aa{sv}" and s["counters"]["type"] == "a{st}"
    assert [r["name"]["data"] for r in s["routes"]["data"]] == ["api", "health", "admin", "default"]
    assert s["routes"]["data"][0]["responses"]["type"] == "a{st}"

    routes = call_json(bus, "ListRoutes")
    assert routes["type"] == "aa{sv}"
    r = routes["data"][0]
    assert [x["name"]["data"] for x in r] == ["api", "health", "admin", "default"]
    assert r[2]["placement"]["data"] == "user"
    assert r[0]["where"]["data"].startswith(f"{daemon.policy}:")


# ---- Reload, the signal and PropertiesChanged -----------------------------------------------------

def test_reload_emits_reloaded_and_properties_changed(bus, daemon):
    mon = subprocess.Popen(["dbus-monitor", "--system", f"type='signal',sender='{BUS_NAME}'"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=bus.env())
    out = []
    reader = threading.Thread(target=lambda: out.extend(iter(mon.stdout.readline, "")), daemon=True)
    reader.start()

    def reloaded(gen):
        return re.search(r"member=Reloaded\s+boolean true\s+uint64 %d\s+string \"\"" % gen, "".join(out))

    def changed(gen):
        blocks = re.findall(r"member=PropertiesChanged\s+string \"org.l7fast.Manager1\"(.*?)(?=signal time|\Z)",
                            "".join(out), re.S)
        return any(re.search(r'string "Generation"\s+variant\s+uint64 %d' % gen, b) for b in blocks)

    try:
        # dbus-monitor is a monitor once it shows a signal: reloads until it
        # shows one (instead of giving it half a second)
        assert wait_until(lambda: call_json(bus, "Reload") and "member=Reloaded" in "".join(out), interval=0.2), \
            "".join(out)
        before = get_property(bus, "Generation")["data"]
        res = call_json(bus, "Reload")
        assert res == {"type": "bts", "data": [True, before + 1, ""]}
        # both signals of this reload, waited for
        assert wait_until(lambda: reloaded(before + 1) and changed(before + 1)), "".join(out)
    finally:
        mon.terminate()
        mon.wait(timeout=10)
        reader.join(10)
    assert get_property(bus, "Generation")["data"] == before + 1


def test_failed_reload_keeps_the_generation_and_says_why(bus, daemon):
    good = daemon.policy.read_text()
    before = get_property(bus, "Generation")["data"]
    try:
        daemon.write_policy(policy_body() + "\n[[route]]\nname = 5\n")
        ok, gen, err = call_json(bus, "Reload")["data"]
        assert ok is False and gen == before
        assert re.search(rf"^{re.escape(str(daemon.policy))}:\d+:\d+: ", err, re.M), err
        assert get_property(bus, "Generation")["data"] == before
    finally:
        daemon.policy.write_text(good)
    assert call_json(bus, "Reload")["data"][0] is True


# ---- argument errors -----------------------------------------------------------------------------

@pytest.mark.parametrize("args,message", [
    (["i", "3"], "Invalid arguments 'i' to call org.l7fast.Manager1.CheckPolicy(), expecting 's'."),
    (["s", ""], "CheckPolicy needs the absolute path of a policy file; got an empty string."),
    (["s", "policy.toml"], "The policy path must be absolute (the daemon does not share your working "
                           'directory); got "policy.toml".'),
    (["s", "/nonexistent/policy.toml"], "Cannot check /nonexistent/policy.toml: no such file or directory."),
    (["s", "/dev/null"], "Cannot check /dev/null: it is a character device, not a regular file."),
    (["s", "/etc"], "Cannot check /etc: it is a directory, not a regular file."),
    (["s", "/proc/self/environ"], "Cannot check /proc/self/environ: it is on the proc pseudo file system; a "
                                  "policy must be a regular file."),
    (["s", "/proc/1/status"], "Cannot check /proc/1/status: it is on the proc pseudo file system; a policy "
                              "must be a regular file."),
])
def test_check_policy_argument_errors(bus, daemon, args, message):
    out = call(bus, "CheckPolicy", *args)
    assert out.returncode != 0
    assert out.stderr.strip() == f"Call failed: {message}"
    sent = dbus_send(bus, "CheckPolicy", f"{'string' if args[0] == 's' else 'int32'}:{args[1]}")
    assert f"Error {INVALID_ARGS}: {message}" in sent.stderr, sent.stderr


def test_check_policy_fifo_does_not_block_the_daemon(bus, daemon, workdir):
    fifo = workdir / "policy.fifo"
    if not fifo.exists():
        os.mkfifo(fifo)
    out = call(bus, "CheckPolicy", "s", str(fifo))
    assert out.stderr.strip() == f"Call failed: Cannot check {fifo}: it is a FIFO, not a regular file."
    assert call(bus, "GetStatus").returncode == 0


def test_check_policy_as_root(bus, daemon, workdir):
    good = write(workdir / "api-good.toml", daemon.header + policy_body())
    ok, errors, placement = call_json(bus, "CheckPolicy", "s", str(good))["data"]
    assert ok is True and errors == ""
    assert [r["name"]["data"] for r in placement] == ["api", "health", "admin", "default"]

    bad = write(workdir / "api-bad.toml", daemon.header + policy_body() + '\n[[route]]\nname = "x"\n')
    ok, errors, placement = call_json(bus, "CheckPolicy", "s", str(bad))["data"]
    assert ok is False and placement == []
    assert re.search(rf"^{re.escape(str(bad))}:\d+:\d+: route \"x\"", errors, re.M), errors


def test_check_policy_for_others_only_reads_what_they_could(bus, daemon, workdir):
    mine = write(workdir / "api-readable.toml", daemon.header + policy_body())
    out = call(bus, "CheckPolicy", "s", str(mine), uid=NOBODY)
    assert out.returncode == 0, out.stderr
    ok, errors, placement = json.loads(out.stdout)["data"]
    assert ok is True and placement
    assert all(r["where"]["data"].startswith(f"{mine}:") for r in placement)

    secret = write(workdir / "api-secret.toml", 'password = "hunter2"\n', mode=0o600)
    for path in (secret, "/etc/shadow", "/root/.bashrc"):
        out = call(bus, "CheckPolicy", "s", str(path), uid=NOBODY)
        assert out.returncode != 0
        assert f"Cannot check {path}: permission denied for uid 65534" in out.stderr, out.stderr
        assert "hunter2" not in out.stderr and "root:" not in out.stderr

    # a broken file the caller can read: errors name the caller's path, not
    # the descriptor the daemon read it through
    broken = write(workdir / "api-broken.toml", "[[listener\n")
    ok, errors, _ = call_json(bus, "CheckPolicy", "s", str(broken), uid=NOBODY)["data"]
    assert ok is False and errors.startswith(f"{broken}:1:"), errors
    assert "/proc/self/fd" not in errors


def test_unknown_method(bus, daemon):
    out = call(bus, "Shutdown")
    assert out.returncode != 0


# ---- access: the bus policy, then the daemon's own check ------------------------------------------

def test_bus_policy_denies_reload_to_others(bus, daemon):
    before = get_property(bus, "Generation")["data"]
    out = dbus_send(bus, "Reload", uid=NOBODY)
    assert "org.freedesktop.DBus.Error.AccessDenied" in out.stderr
    assert get_property(bus, "Generation")["data"] == before
    for method in ("GetStatus", "GetStats", "ListRoutes"):
        assert call(bus, method, uid=NOBODY).returncode == 0, method
    assert busctl(bus, "introspect", BUS_NAME, OBJECT, uid=NOBODY).returncode == 0


def test_daemon_denies_reload_to_others_without_the_bus_policy(open_bus, open_daemon):
    before = get_property(open_bus, "Generation")["data"]
    out = dbus_send(open_bus, "Reload", uid=NOBODY)
    assert ("Error org.freedesktop.DBus.Error.AccessDenied: Reloading the l7fast policy needs root or "
            'membership of the group "l7fast" (you are uid 65534): run `sudo l7fastctl reload`') in out.stderr, out.stderr
    assert get_property(open_bus, "Generation")["data"] == before
    assert ctl(open_bus, "reload", uid=NOBODY).returncode == 4
    assert "refused Reload from uid 65534" in open_daemon.log()


def test_daemon_allows_reload_to_the_l7fast_group_without_the_bus_policy(open_bus, open_daemon):
    before = get_property(open_bus, "Generation")["data"]
    out = call(open_bus, "Reload", uid=NOBODY, groups=[ADMIN_GID])
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["data"] == [True, before + 1, ""]


def test_bus_policy_lets_the_l7fast_group_not_others_set_the_log_level(bus, daemon):
    out = ctl(bus, "log-level", "notice", uid=NOBODY)
    assert out.returncode == 4, out
    assert "changing the log level needs root" in out.stderr, out.stderr
    assert ctl_json(bus, "status")["log_level"] == "debug"   # the fixture's --log-level
    assert ctl(bus, "log-level", uid=NOBODY).returncode == 0  # reading it is open
    out = ctl(bus, "log-level", "info", uid=NOBODY, groups=[ADMIN_GID])
    assert out.returncode == 0, out.stderr
    assert ctl(bus, "log-level", "reset").returncode == 0
    assert ctl_json(bus, "status")["log_level"] == "debug"


def test_daemon_denies_setting_the_log_level_to_others_without_the_bus_policy(open_bus, open_daemon):
    out = dbus_send(open_bus, "SetLogLevel", "string:error", uid=NOBODY)
    assert ("Error org.freedesktop.DBus.Error.AccessDenied: Changing l7fastd's log level needs root or "
            'membership of the group "l7fast" (you are uid 65534): run `sudo l7fastctl log-level`') in out.stderr, \
        out.stderr
    assert ctl_json(open_bus, "status")["log_level"] == "debug"
    assert "refused SetLogLevel from uid 65534" in open_daemon.log()


def test_daemon_denies_draining_to_others_without_the_bus_policy(open_bus, open_daemon):
    """The daemon's own check, behind the bus policy: an unprivileged caller
    drains nothing, whatever the endpoint."""
    for method in ("Drain", "Undrain"):
        out = dbus_send(open_bus, method, "string:127.0.0.1:9", uid=NOBODY)
        assert "Error org.freedesktop.DBus.Error.AccessDenied: " in out.stderr, out.stderr
        assert f"sudo l7fastctl {method.lower()} ENDPOINT" in out.stderr, out.stderr
        assert f"refused {method} from uid 65534" in open_daemon.log()
    # root gets the daemon's answer: not an endpoint of the policy
    out = dbus_send(open_bus, "Drain", "string:127.0.0.1:9")
    assert "Error org.freedesktop.DBus.Error.InvalidArgs: no cluster of the running policy lists the endpoint " \
           "127.0.0.1:9" in out.stderr, out.stderr


def test_log_level_set_at_run_time_holds_over_reloads_until_reset(workdir):
    """`l7fastctl log-level LEVEL` wins over daemon.log_level (and over
    --log-level) until `l7fastctl log-level reset` or a restart; a reload
    in between keeps it and says so."""
    b = PrivateBus(workdir / "loglevel")
    try:
        d = Daemon(b, workdir / "loglevel-daemon", policy_body(), tag="loglevel", log_level=None,
                   daemon_settings='log_level = "notice"')
        try:
            out = ctl(b, "log-level")
            assert out.returncode == 0, out.stderr
            assert out.stdout == "Log level: notice (daemon.log_level)\n"
            out = ctl(b, "log-level", "debug")
            assert out.returncode == 0, out.stderr
            assert out.stdout == ("Log level: debug (set with l7fastctl log-level; `l7fastctl log-level reset` "
                                  "returns to the configured one)\n")
            assert ctl_json(b, "log-level") == {"level": "debug", "source": "l7fastctl"}
            assert "notice: D-Bus: log level debug (l7fastctl) set by uid 0" in d.log()
            # a reload applies the policy but not its log level; at debug,
            # the daemon says why
            d.header = d.header.replace('log_level = "notice"', 'log_level = "error"')
            d.write_policy(policy_body())
            out = ctl(b, "reload")
            assert out.returncode == 0, out.stderr
            assert ('info: daemon.log_level = "error" waits: the level set with l7fastctl log-level (debug) '
                    "holds until `l7fastctl log-level reset`") in d.log()
            status = ctl_json(b, "status")
            assert (status["log_level"], status["log_level_source"]) == ("debug", "l7fastctl")
            out = ctl(b, "log-level", "reset")
            assert out.returncode == 0, out.stderr
            assert out.stdout == "Log level: error (daemon.log_level)\n"
            before = d.log()
            assert ctl(b, "reload").returncode == 0
            assert "info:" not in d.log()[len(before):]
            # an unknown level changes nothing and says what would do
            out = ctl(b, "log-level", "debgu")
            assert out.returncode == 1
            assert out.stderr == ('l7fastctl: unknown log level "debgu": use error, warning, notice, info, '
                                  'debug, or reset (did you mean "debug"?)\n')
            assert ctl_json(b, "log-level") == {"level": "error", "source": "policy"}
        finally:
            d.stop()
    finally:
        b.stop()


def test_daemon_serves_again_after_the_bus_restarts(workdir):
    b = PrivateBus(workdir / "restarting")
    try:
        d = Daemon(b, workdir / "restarting-daemon", policy_body(), tag="restart")
        try:
            b.stop()
            b2 = PrivateBus(workdir / "restarting")  # same socket path
            assert b2.address == b.address
            assert wait_until(b2.has_owner, interval=0.2), d.log()
            assert ctl(b2, "status").returncode == 0
            assert "D-Bus: reconnected" in d.log()
            assert d.proc.poll() is None
        finally:
            d.stop()
    finally:
        b.stop()
