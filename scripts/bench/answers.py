#!/usr/bin/python3
"""What the kernel's own answers save: a route with a direct response
(`direct`, the default), an RBAC denial (`deny`: every request denied by
a rule), a JWT route's 401 (`unauth`: every request without a token) or
a rate limit's 429 (`limited`: a bucket of one token at 1/s; `keyed`: the
same bucket per X-User value, every request with one value), or, for
what the data plane costs a request it passes on, a direct response over
the kernel's answer limit that the slow path sends either way (`long`)
under wrk (32 connections, 2 threads; local clients in the test cgroup,
or with `remote` clients from outside it, whose answers the kernel makes
on the client socket's send path), answered by l7fastd with the data plane and by one with
kernel_dataplane = false, in interleaved rounds; per round the requests per
second, wrk's mean latency and l7fastd's CPU time (utime + stime from
/proc) per request. Compare the rounds' ratios, not absolute figures
(shared machines).

    scripts/bench/answers.py [ROUNDS] [SECONDS] [direct|deny|unauth|limited|keyed|long] [local|remote]   (root; make build first)
"""
import os
import re
import subprocess
import sys
from pathlib import Path

TOP = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(TOP / "tests" / "e2e"))
os.environ.setdefault("L7FAST_BUILD", str(TOP / "build"))

import l7env  # noqa: E402
import test_kernel_answers  # noqa: E402  (its policy: "hello", a direct response; "fenced", RBAC; "locked", JWT;
#                                          "throttled", a rate limit; "throttled-by-user", keyed)

# what wrk asks for, and the route that answers: the kind of answer
CASES = {
    "direct": ("hello", "/hello/x", []),
    "deny": ("fenced", "/fenced/x", ["-H", "X-Block: 1"]),  # rule "blocked": 403
    "unauth": ("locked", "/locked/x", []),  # no token: 401
    "limited": ("throttled", "/throttled/x", []),  # 1/s, burst 1: 429
    "keyed": ("throttled-by-user", "/per-user/x", ["-H", "X-User: flood"]),  # the same, per X-User value
    "long": ("long", "/long/x", []),  # 1,100 bytes: the slow path's on both sides
}


def cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    seconds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    kind = sys.argv[3] if len(sys.argv) > 3 else "direct"
    where = sys.argv[4] if len(sys.argv) > 4 else "local"
    if kind not in CASES:
        sys.exit(f"answers: unknown case {kind!r} ({', '.join(CASES)})")
    if where not in ("local", "remote"):
        sys.exit(f"answers: clients are local or remote, not {where!r}")
    route, path, extra = CASES[kind]
    reason = l7env.skip_reason()
    if reason:
        sys.exit(f"answers: cannot run: {reason}")
    sides = {}
    try:
        for name, settings in (("kernel", ""), ("user", "kernel_dataplane = false")):
            env = l7env.Env("answers-" + name)
            port = l7env.free_port()
            env.start(test_kernel_answers.policy(port, env.backend("app")), daemon_settings=settings)
            sides[name] = (env, port)
        rps = {n: [] for n in sides}
        cpu = {n: [] for n in sides}
        for r in range(rounds):
            for name, (env, port) in sides.items():
                pid = env.daemon.proc.pid
                c0 = cpu_seconds(pid)
                cmd = ["wrk", "-t2", "-c32", f"-d{seconds}s", *extra, f"http://127.0.0.1:{port}{path}"]
                if where == "local":
                    with env.local():
                        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60).stdout
                else:
                    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 60).stdout
                used = cpu_seconds(pid) - c0
                got = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
                lat = re.search(r"Latency\s+(\S+)", out).group(1)
                rps[name].append(got)
                cpu[name].append(used / (got * seconds) * 1e6)
                print(f"round {r} {name:6s} {got:9.0f} req/s  mean latency {lat:>8s}  "
                      f"l7fastd {used:5.2f} s CPU ({cpu[name][-1]:.2f} us/req)", flush=True)
        ratios = sorted(k / u for k, u in zip(rps["kernel"], rps["user"]))
        print(f"kernel / user req/s per round: {', '.join(f'{x:.2f}' for x in ratios)}")
        print(f"l7fastd CPU per request, kernel: {max(cpu['kernel']):.2f} us at most; "
              f"user: {min(cpu['user']):.2f} us at least")
        st = sides["kernel"][0].stats()["routes"][route]
        print(f"kernel side, route {route}: requests_kernel {st['requests_kernel']}, "
              f"requests_user {st['requests_user']}, answered {dict(st['responses'])}")
    finally:
        for env, _ in sides.values():
            env.close()


if __name__ == "__main__":
    main()
