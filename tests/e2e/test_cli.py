"""l7fastctl against the real l7fastd on a private system bus: every
subcommand in text and --json, the exit statuses (0 ok, 1 failed, 2 usage,
3 not reachable, 4 permission denied), and who may reload.

Run as root: /usr/bin/python3 -m pytest tests/e2e/test_cli.py
(scripts/dbus/l7fast_bus.py says what is needed)."""
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from l7env import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts" / "dbus"))
from l7fast_bus import (ADMIN_GID, L7FASTCTL, NOBODY, PrivateBus, Daemon, bus, ctl, ctl_json, free_port,  # noqa: E402,F401,E501
                        daemon, daemon_log_on_failure, policy_body, require_environment, run, workdir)

STATUS_KEYS = {"version", "state", "degraded_reason", "generation", "policy_files", "features", "uptime_sec",
               "listeners", "routes", "routes_kernel", "connections", "upstream_connections",
               "parked_connections",
               "last_reload_error", "reloads_ok", "reloads_failed", "applied_unix", "last_reload_unix",
               "log_level", "log_level_source", "warnings"}
ROUTE_KEYS = {"name", "listeners", "match", "clusters", "placement", "reason", "where"}
STATS_KEYS = {"generation", "requests_kernel", "requests_user", "no_route", "routes", "endpoints", "counters",
              "refused"}
ENDPOINT_STATS_KEYS = {"address", "clusters", "requests_kernel", "requests_user", "responses", "bytes_out",
                       "latency_buckets", "kernel_idle", "kernel_busy", "user_idle", "user_busy", "state",
                       "checked", "checks_passed", "checks_failed", "last_check", "ejections_5xx",
                       "ejections_connect_failure", "ejected_for_ms"}
ROUTE_STATS_KEYS = {"name", "placement", "requests_kernel", "requests_user", "responses", "bytes_in",
                    "bytes_out", "latency_buckets", "rejected", "rbac_denied_by_rule", "direct_responses",
                    "user_latency_buckets", "user_latency_sum_ns", "user_codes", "kernel_codes"}
NOT_RUNNING = ("l7fastd is not running (no org.l7fast.Manager1 on the system bus): "
               "start it with systemctl start l7fast")


@pytest.fixture(autouse=True)
def _log(daemon_log_on_failure):
    yield


def generation(bus):
    return ctl_json(bus, "status")["generation"]


def write(path, text, mode=0o644):
    path = Path(path)
    path.write_text(text)
    os.chmod(path, mode)
    return path


# ---- usage ----------------------------------------------------------------------------

def test_help_and_version_need_no_daemon(bus):
    out = run(dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS="unix:path=/nonexistent"), [L7FASTCTL, "--help"])
    assert out.returncode == 0
    for word in ("status", "reload", "stats", "routes", "check FILE", "--json"):
        assert word in out.stdout
    out = ctl(bus, "--version")
    assert out.returncode == 0
    assert re.fullmatch(r"l7fastctl \d+\.\d+\.\d+\n", out.stdout)


@pytest.mark.parametrize("args,message", [
    ([], "no command given"),
    (["restart"], 'unknown command "restart"'),
    (["check"], "check needs a policy file"),
    (["status", "extra"], 'status takes no arguments, got "extra"'),
    (["--frobnicate", "status"], "unknown option --frobnicate"),
    (["reload", "--policy-dir", "/tmp"], "--policy-dir applies to check, and to explain with --policy"),
])
def test_usage_errors_exit_2(bus, args, message):
    out = ctl(bus, *args)
    assert out.returncode == 2, out
    assert out.stderr == f"l7fastctl: {message}\nTry 'l7fastctl --help'.\n"
    assert out.stdout == ""


# ---- read-only commands ---------------------------------------------------------------------

def test_status_text(bus, daemon):
    out = ctl(bus, "status")
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert re.fullmatch(r"l7fastd \d+\.\d+\.\d+: (running|degraded.*)", first), first
    for label in ("Generation:", "Uptime:", "Policy:", "Listeners:      1", "Routes:         4, ",
                  "Requests:", "Connections:", "Last reload:", "Features:"):
        assert label in out.stdout, label
    assert str(daemon.policy) in out.stdout


def test_status_json(bus, daemon):
    st = ctl_json(bus, "status")
    assert set(st) == STATUS_KEYS
    assert st["state"] in ("running", "degraded")
    assert st["policy_files"][0] == str(daemon.policy)
    assert st["routes"] == 4 and st["listeners"] == 1
    assert isinstance(st["generation"], int) and st["generation"] >= 1
    assert isinstance(st["features"], dict) and st["features"]


def test_dump_shows_the_policy_in_force_to_everyone(bus, daemon):
    """l7fastctl dump (DumpConfig): the routes as ListRoutes places them,
    each with its match and actions, the clusters with their endpoints;
    open to every user like the other read-only commands."""
    d = ctl_json(bus, "dump", uid=NOBODY)
    st = ctl_json(bus, "status")
    assert d["generation"] == st["generation"]
    assert d["applied_unix"] == st["applied_unix"] > 0
    assert d["policy_files"] == st["policy_files"]
    assert [listener["name"] for listener in d["listeners"]] == ["web"]
    placed = {r["name"]: r for r in ctl_json(bus, "routes")["routes"]}
    assert [r["name"] for r in d["routes"]] == ["api", "health", "admin", "default"]
    for r in d["routes"]:
        assert r["placement"] == placed[r["name"]]["placement"]
        assert r["match"]["summary"] == placed[r["name"]]["match"]
        assert r["where"] == placed[r["name"]]["where"]
    admin = d["routes"][2]
    assert (admin["offload"], admin["placement"]) == (False, "user") and admin["reason"]
    assert d["routes"][1]["match"]["methods"] == ["GET", "HEAD"]
    assert d["routes"][1]["match"]["path"] == {"kind": "exact", "value": "/healthz"}
    assert d["routes"][0]["actions"] == [{"step": "forward", "clusters": [{"cluster": "app", "weight": 90},
                                                                         {"cluster": "canary", "weight": 10}],
                                          "connect_retries": 0}]
    assert [c["name"] for c in d["clusters"]] == ["app", "canary"]
    ep = d["clusters"][0]["endpoints"][0]
    assert set(ep["connections"]) == {"kernel_idle", "kernel_busy", "user_idle", "user_busy"}
    assert d["daemon"]["log_level"] == "info" and d["jwt_providers"] == []

    out = ctl(bus, "dump")
    assert out.returncode == 0, out.stderr
    assert f"generation: {d['generation']}\n" in out.stdout
    assert "routes:\n  -\n    name: api\n" in out.stdout, out.stdout


def test_explain_on_the_running_policy_and_offline(bus, daemon):
    """l7fastctl explain (Explain): every route tried up to the one a request
    takes, each condition and whether it held, the cluster choice, the
    answer and the plane; open to every user; the same answer offline on
    the policy file (--policy); a request that cannot be built is exit 1."""
    ex = ctl_json(bus, "explain", "HEAD", "http://h/healthz", uid=NOBODY)
    assert ex["policy"]["source"] == "running" and ex["policy"]["generation"] == ctl_json(bus, "status")["generation"]
    assert ex["route"] == "health"
    assert [(r["route"], r["matched"]) for r in ex["routes"]] == [("api", False), ("health", True)]
    assert ex["routes"][1]["conditions"] == [{"condition": "method=GET|HEAD", "held": True},
                                             {"condition": "path=/healthz", "held": True}]
    assert ex["upstream"]["cluster"] == "app" and ex["response"] == {"status": None, "by": "upstream",
                                                                      "reason": None}
    assert ex["plane"]["plane"] == "kernel", ex["plane"]

    admin = ctl_json(bus, "explain", "GET", "/admin/x")
    assert admin["route"] == "admin" and admin["plane"]["reason"] == "to_slow_path_route_user"
    assert "offload = false" in admin["plane"]["why"]
    api = ctl_json(bus, "explain", "GET", "/api/v1")
    assert api["upstream"]["cluster"] is None
    assert api["upstream"]["clusters"] == [{"cluster": "app", "weight": 90}, {"cluster": "canary", "weight": 10}]

    offline = ctl_json(bus, "explain", "--policy", str(daemon.policy), "HEAD", "http://h/healthz")
    for key in ("request", "routes", "route", "stages", "upstream", "response"):
        assert offline[key] == ex[key], key
    assert offline["policy"]["source"] == str(daemon.policy) and offline["policy"]["generation"] is None

    out = ctl(bus, "explain", "POST", "/healthz?x=1", "-H", "X-A: 1")
    assert out.returncode == 0, out.stderr
    assert "Request:   POST /healthz?x=1  (listener web, client 127.0.0.1)\n" in out.stdout, out.stdout
    assert "  1 health: no  [kernel]\n      FAILED method=GET|HEAD\n      held   path=/healthz\n" in out.stdout
    assert "Route:     default\n" in out.stdout

    bad = ctl(bus, "explain", "GET", "/", "--source", "nowhere")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "--source: \"nowhere\" is not an IPv4 or IPv6 address" in bad.stderr, bad.stderr
    bad = ctl(bus, "explain", "GET", "/", "--listener", "wbe")
    assert bad.returncode == 1 and "no listener named \"wbe\" (did you mean \"web\"?)" in bad.stderr, bad.stderr


def test_routes_text_and_json(bus, daemon):
    out = ctl(bus, "routes")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split() == ["#", "ROUTE", "PLACEMENT", "LISTENERS", "MATCH", "CLUSTERS", "WHERE", "REASON"]
    names = [line.split()[1] for line in lines[1:5]]
    assert names == ["api", "health", "admin", "default"]
    assert re.search(r"^3\s+admin\s+user\s", out.stdout, re.M), out.stdout
    assert "4 routes, " in out.stdout

    routes = ctl_json(bus, "routes")["routes"]
    assert [r["name"] for r in routes] == ["api", "health", "admin", "default"]
    for r in routes:
        assert set(r) == ROUTE_KEYS
        assert r["placement"] in ("kernel", "user")
        assert r["where"].startswith(f"{daemon.policy}:")
    assert routes[0]["clusters"] == "app:90,canary:10"
    assert routes[0]["match"] == "prefix=/api"
    admin = routes[2]
    assert admin["placement"] == "user" and admin["reason"], admin


def test_stats_text_and_json(bus, daemon):
    out = ctl(bus, "stats")
    assert out.returncode == 0, out.stderr
    assert ("ROUTE    PLACEMENT  REQ KERNEL  REQ USER  2XX  3XX  4XX  5XX  BYTES IN  BYTES OUT"
            in out.stdout), out.stdout
    for name in ("api", "health", "admin", "default", "total"):
        assert re.search(rf"^{name}\s", out.stdout, re.M), name
    assert "Requests that matched no route (slow path):" in out.stdout

    st = ctl_json(bus, "stats")
    assert set(st) == STATS_KEYS
    assert [r["name"] for r in st["routes"]] == ["api", "health", "admin", "default"]
    for r in st["routes"]:
        assert set(r) == ROUTE_STATS_KEYS
        assert set(r["responses"]) == {"1xx", "2xx", "3xx", "4xx", "5xx", "other"}
    assert st["endpoints"] and all(set(e) == ENDPOINT_STATS_KEYS for e in st["endpoints"])
    assert "Per endpoint" in out.stdout
    assert isinstance(st["counters"], dict)
    if st["counters"]:  # the kernel data plane is in use
        assert "to_slow_path_no_route" in st["counters"]
        assert "TO SLOW PATH, BECAUSE" in out.stdout


def test_read_only_commands_are_open_to_everyone(bus, daemon):
    for cmd in ("status", "routes", "stats"):
        out = ctl(bus, cmd, uid=NOBODY)
        assert out.returncode == 0, (cmd, out.stderr)


# ---- reload -------------------------------------------------------------------------------

def test_reload_as_root(bus, daemon):
    before = generation(bus)
    out = ctl(bus, "reload")
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"Reloaded: policy generation {before + 1} is in force.\n"
    res = ctl_json(bus, "reload")
    assert res == {"ok": True, "generation": before + 2, "error": ""}
    assert generation(bus) == before + 2


def test_reload_of_a_broken_policy_keeps_the_running_one(bus, daemon):
    good = daemon.policy.read_text()
    before = generation(bus)
    try:
        daemon.write_policy(policy_body() + '\n[[route]]\nname = "bad"\ncluster = "nowhere"\n')
        line = daemon.policy.read_text().splitlines().index('cluster = "nowhere"') + 1
        out = ctl(bus, "reload")
        assert out.returncode == 1, out
        assert out.stdout == ""
        assert out.stderr.startswith(f"l7fastctl: reload rejected; generation {before} stays in force:\n")
        assert re.search(rf"^{re.escape(str(daemon.policy))}:{line}:\d+: route \"bad\"\.cluster: ", out.stderr,
                         re.M), out.stderr

        res = json.loads(ctl(bus, "--json", "reload").stdout)
        assert res["ok"] is False and res["generation"] == before
        assert f"{daemon.policy}:{line}:" in res["error"]

        st = ctl_json(bus, "status")
        assert st["generation"] == before
        assert f"{daemon.policy}:{line}:" in st["last_reload_error"]
        assert "Last reload:    failed: " in ctl(bus, "status").stdout
        assert [r["name"] for r in ctl_json(bus, "routes")["routes"]] == ["api", "health", "admin", "default"]
    finally:
        daemon.policy.write_text(good)
    out = ctl(bus, "reload")
    assert out.returncode == 0, out.stderr
    assert ctl_json(bus, "status")["last_reload_error"] == ""


def test_reload_as_unprivileged_user_is_denied_with_exit_4(bus, daemon):
    before = generation(bus)
    out = ctl(bus, "reload", uid=NOBODY)
    assert out.returncode == 4, out
    assert out.stderr.startswith("l7fastctl: permission denied: reloading the policy needs root or membership "
                                 'of the group "l7fast": run `sudo l7fastctl reload`')
    assert generation(bus) == before


def test_reload_as_member_of_the_l7fast_group(bus, daemon):
    before = generation(bus)
    out = ctl(bus, "reload", uid=NOBODY, groups=[ADMIN_GID])
    assert out.returncode == 0, out.stderr
    assert generation(bus) == before + 1


# ---- check --------------------------------------------------------------------------------

def test_check_valid_file_shows_placement_from_the_daemon(bus, daemon, workdir):
    f = write(workdir / "candidate.toml", daemon.header + policy_body())
    out = ctl(bus, "check", f, "--policy-dir=")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"{f}: OK (4 routes, 1 listener)\n")
    assert "Where the routes would run on this node (as l7fastd sees it):" in out.stdout
    assert re.search(r"^3\s+admin\s+user\s", out.stdout, re.M), out.stdout

    res = ctl_json(bus, "check", f, "--policy-dir=")
    assert res["ok"] is True and res["errors"] == [] and res["placement_note"] == ""
    assert [r["name"] for r in res["placement"]] == ["api", "health", "admin", "default"]
    assert all(set(r) == {"name", "listeners", "match", "clusters", "placement", "reason", "where"}
               for r in res["placement"])


def test_check_reads_the_drop_ins_next_to_the_file(bus, daemon, workdir):
    d = workdir / "withdropins"
    (d / "policy.d").mkdir(parents=True, exist_ok=True)
    f = write(d / "policy.toml", daemon.header + policy_body())
    write(d / "policy.d" / "10-extra.toml", '[[route]]\nname = "extra"\ncluster = "missing"\n')
    out = ctl(bus, "check", f)
    assert out.returncode == 1, out
    assert f"{d}/policy.d/10-extra.toml:3:" in out.stderr
    out = ctl(bus, "check", f, "--policy-dir", "")
    assert out.returncode == 0, out.stderr


def test_check_errors_exit_1_with_positions(bus, workdir):
    f = write(workdir / "broken.toml", '[[listener]]\nname = "web"\naddress = "127.0.0.1:1"\ncolour = "blue"\n')
    out = ctl(bus, "check", f, "--policy-dir=")
    assert out.returncode == 1
    assert out.stdout == ""
    assert re.search(rf"^{re.escape(str(f))}:4:1: listener \"web\"\.colour: unknown key", out.stderr, re.M), \
        out.stderr
    res = json.loads(ctl(bus, "--json", "check", f, "--policy-dir=").stdout)
    assert res["ok"] is False and res["placement"] is None
    err = next(e for e in res["errors"] if e["key"] == 'listener "web".colour')
    assert (err["file"], err["line"], err["column"]) == (str(f), 4, 1)
    assert err["text"].startswith(f"{f}:4:1: ")


def test_check_works_without_the_daemon(workdir):
    require_environment()
    lonely = PrivateBus(workdir / "lonely")
    try:
        f = write(workdir / "offline.toml", policy_body())
        out = ctl(lonely, "check", f, "--policy-dir=")
        assert out.returncode == 0, out.stderr
        assert out.stdout == f"{f}: OK (4 routes, 1 listener)\nPlacement not shown: {NOT_RUNNING}\n"
        res = ctl_json(lonely, "check", f, "--policy-dir=")
        assert res["ok"] is True and res["placement"] is None and res["placement_note"] == NOT_RUNNING
    finally:
        lonely.stop()


def test_check_as_a_user_reads_the_file_as_that_user(bus, daemon, workdir):
    secret = write(workdir / "secret.toml", daemon.header + policy_body(), mode=0o600)
    out = ctl(bus, "check", secret, "--policy-dir=", uid=NOBODY)
    assert out.returncode == 1
    assert out.stderr == f"{secret}: cannot read: Permission denied\n"

    readable = write(workdir / "readable.toml", daemon.header + policy_body())
    res = ctl_json(bus, "check", readable, "--policy-dir=", uid=NOBODY)
    assert res["ok"] is True, res
    assert res["placement"] is not None, res["placement_note"]
    # the daemon read it through a descriptor, but reports the caller's path
    assert all(r["where"].startswith(f"{readable}:") for r in res["placement"]), res["placement"]


JWT_ROUTE = """
[[route]]
name = "private"
cluster = "app"
jwt = "idp"
[route.match]
path_prefix = "/private"
"""


def jwt_provider(jwks):
    return f"""[[jwt_provider]]
name = "idp"
issuer = "https://idp.example.com"
jwks_file = "{jwks}"
algorithms = ["RS256"]

"""


def test_check_refuses_what_a_reload_refuses(bus, daemon, workdir):
    """check runs the step a reload runs after the loader (proxy/Prepare):
    it once printed OK for a JWKS file that does not exist and for a key
    whose "n" is not base64url, which a reload refuses."""
    bad_n = write(workdir / "bad-n.jwks", '{"keys":[{"kty":"RSA","kid":"x","n":"not*base64url","e":"AQAB"}]}')
    for jwks, why in ((workdir / "absent.jwks", "No such file or directory"),
                      (bad_n, 'key 0 (kid "x"): n is not base64url')):
        f = write(workdir / "jwt.toml", jwt_provider(jwks) + daemon.header + policy_body(extra_routes=JWT_ROUTE))
        out = ctl(bus, "check", f, "--policy-dir=")
        assert out.returncode == 1, out.stdout
        assert out.stdout == ""
        assert out.stderr.startswith(f'{f}:1:1: jwt_provider "idp": JWKS {jwks}: '), out.stderr
        assert why in out.stderr, out.stderr
        # a reload of the same policy is refused with the same words
        good = daemon.policy.read_text()
        before = generation(bus)
        try:
            daemon.policy.write_text(f.read_text())
            r = ctl(bus, "reload")
            assert r.returncode == 1, r.stdout
            assert f'{daemon.policy}:1:1: jwt_provider "idp": JWKS {jwks}: ' in r.stderr, r.stderr
            assert why in r.stderr and generation(bus) == before, r.stderr
        finally:
            daemon.policy.write_text(good)
        assert ctl(bus, "reload").returncode == 0


def test_check_as_a_user_who_may_not_read_a_jwks_file_warns(bus, daemon, workdir):
    jwks = write(workdir / "private.jwks", '{"keys":[]}', mode=0o600)
    f = write(workdir / "jwt-user.toml", jwt_provider(jwks) + daemon.header + policy_body(extra_routes=JWT_ROUTE))
    res = ctl_json(bus, "check", f, "--policy-dir=", uid=NOBODY)
    assert res["ok"] is True, res
    assert any("sudo l7fastctl check" in w and str(jwks) in w for w in res["warnings"]), res["warnings"]
    # the daemon placed the routes without reading the file for the caller
    # (root reading files named by anyone's policy would describe them)
    assert res["placement"] is not None, res["placement_note"]
    # root reads it, and refuses an empty key set
    out = ctl(bus, "check", f, "--policy-dir=")
    assert out.returncode == 1 and "jwt_provider \"idp\"" in out.stderr, out.stderr


def test_the_policys_log_level_applies_at_start_and_on_reload(workdir):
    """daemon.log_level was once read and checked, then ignored. Without
    --log-level it sets l7fastd's level from the first line on, and a reload
    changes it."""
    require_environment()
    own_bus = PrivateBus(workdir / "loglevel-bus")
    port = free_port()
    d = None
    try:
        d = Daemon(own_bus, workdir / "loglevel", policy_body(port=port), tag="loglevel", log_level=None,
                   daemon_settings='log_level = "warning"')
        # not even the first info line ("l7fastd VERSION: policy from ...")
        lines = d.log().splitlines()
        assert all(line.startswith(("warning:", "error:")) for line in lines), lines
        d.header = d.header.replace('log_level = "warning"', 'log_level = "debug"')
        d.write_policy(policy_body(port=port))
        out = ctl(own_bus, "reload")
        assert out.returncode == 0, out.stderr
        assert "notice: log level debug (daemon.log_level)" in d.log(), d.log()
        # a connection that ends is a debug line now
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
        assert wait_until(lambda: "session ends" in d.log()), d.log()
    finally:
        if d:
            d.stop()
        own_bus.stop()


def test_check_relative_path(bus, daemon, workdir):
    write(workdir / "relative.toml", daemon.header + policy_body())
    out = subprocess.run([str(L7FASTCTL), "check", "relative.toml", "--policy-dir="], cwd=workdir,
                         capture_output=True, text=True, env=bus.env(), timeout=60)
    assert out.returncode == 0, out.stderr
    assert "Where the routes would run" in out.stdout


# ---- unreachable --------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["status", "reload", "stats", "routes", "explain GET /"])
def test_no_daemon_exit_3(workdir, cmd):
    require_environment()
    lonely = PrivateBus(workdir / f"lonely-{cmd.split()[0]}")
    try:
        out = ctl(lonely, *cmd.split())
        assert out.returncode == 3, out
        assert out.stderr == f"l7fastctl: {NOT_RUNNING}\n"
        assert out.stdout == ""
    finally:
        lonely.stop()


def test_no_bus_exit_3(workdir):
    out = run(dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=f"unix:path={workdir}/nobus"), [L7FASTCTL, "status"])
    assert out.returncode == 3
    assert out.stderr.startswith(f"l7fastctl: cannot connect to the system bus at unix:path={workdir}/nobus "
                                 "(No such file or directory)")


def test_the_name_goes_when_the_daemon_stops(workdir):
    require_environment()
    b = PrivateBus(workdir / "stopbus")
    try:
        d = Daemon(b, workdir / "stopping", policy_body(), tag="stop")
        assert ctl(b, "status").returncode == 0
        d.stop()
        assert "D-Bus: serving org.l7fast.Manager1" in d.log_path.read_text()
        out = ctl(b, "status")
        assert out.returncode == 3, out
    finally:
        b.stop()


# ---- bash completion ------------------------------------------------------------------------

COMPLETION = Path(__file__).resolve().parents[2] / "daemon" / "completion" / "l7fastctl.bash"


def complete(words, workdir=None):
    script = f"""
[ -r /usr/share/bash-completion/bash_completion ] && . /usr/share/bash-completion/bash_completion
. {COMPLETION}
COMP_WORDS=({' '.join(repr(w) if w else "''" for w in words)})
COMP_CWORD={len(words) - 1}
COMP_LINE="{' '.join(words)}"
COMP_POINT=${{#COMP_LINE}}
_l7fastctl l7fastctl "${{COMP_WORDS[COMP_CWORD]}}" "${{COMP_WORDS[COMP_CWORD-1]}}"
printf '%s\\n' "${{COMPREPLY[@]}}"
"""
    out = run(dict(os.environ), ["bash", "-c", script])
    assert out.returncode == 0, out.stderr
    return sorted(filter(None, out.stdout.splitlines()))


def test_bash_completion(workdir):
    assert complete(["l7fastctl", ""]) == ["check", "drain", "dump", "explain", "log-level", "reload", "routes",
                                         "stats", "status", "undrain"]
    assert complete(["l7fastctl", "explain", "P"]) == ["PATCH", "POST", "PUT"]
    assert "--source" in complete(["l7fastctl", "explain", "--"])
    assert complete(["l7fastctl", "log-level", ""]) == ["debug", "error", "info", "notice", "reset", "warning"]
    assert complete(["l7fastctl", "log-level", "debug", ""]) == []
    assert complete(["l7fastctl", "st"]) == ["stats", "status"]
    assert "--json" in complete(["l7fastctl", "status", "--"])
    assert "--policy-dir" in complete(["l7fastctl", "check", "--"])
    assert complete(["l7fastctl", "status", ""]) == []
