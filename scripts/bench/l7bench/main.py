"""make bench: l7fast against a direct connection, HAProxy and nginx.

Usage: scripts/bench/run.sh [--short|--full|--smoke] [options]   (see --help)
"""
import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from . import control, policies, profile, report, scenarios, systems
from .env import World
from .load import diagnose, measure, request_head_bytes, start_wrk, write_request_file

ROOT = Path(__file__).resolve().parents[3]
DEFAULT_SYSTEMS = {
    "short": ["direct", "l7fast-local", "l7fast-raw", "l7fast-proxied", "l7fast-slow", "haproxy",
              "nginx"],
    "full": ["direct", "l7fast-local", "l7fast-raw", "l7fast-proxied", "l7fast-remote",
             "l7fast-slow", "haproxy", "nginx"],
    "smoke": ["direct", "l7fast-local", "l7fast-raw"],
}
PROFILED = ["l7fast-local", "l7fast-raw", "l7fast-proxied", "l7fast-remote", "l7fast-slow",
            "haproxy"]


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="scripts/bench/run.sh", description=__doc__.splitlines()[0])
    m = ap.add_mutually_exclusive_group()
    m.add_argument("--short", dest="mode", action="store_const", const="short",
                   help="a quick check, about 5 minutes (the default)")
    m.add_argument("--full", dest="mode", action="store_const", const="full",
                   help="every sweep, 5 rounds, perf profiles: about 50-60 minutes")
    m.add_argument("--smoke", dest="mode", action="store_const", const="smoke",
                   help="tiny durations, for the test suite")
    ap.add_argument("--out", help="results directory (default build/bench/<timestamp>)")
    ap.add_argument("--systems", help="comma-separated, from: " + ", ".join(systems.ALL))
    ap.add_argument("--sweeps", help="comma-separated sweeps to run (header_bytes, routes, "
                    "rbac_rules, jwt_bytes, complexity), or 'none'")
    ap.add_argument("--duration", type=int, help="seconds per measured run")
    ap.add_argument("--rounds", type=int, help="interleaved rounds per scenario")
    ap.add_argument("--conns", help="connection counts of the standard policy, e.g. 1,32 "
                    "(default: 1,8,32,128,512 full, 1,32,128 short)")
    ap.add_argument("--no-reload", action="store_true", help="skip the reload measurements")
    ap.add_argument("--profile", dest="profile", action="store_true", default=None,
                    help="perf profiles (default in --full)")
    ap.add_argument("--no-profile", dest="profile", action="store_false")
    ap.add_argument("--no-plots", action="store_true")
    ap.add_argument("--server-cpus", help="CPUs of backends, proxies and l7fastd (default 0)")
    ap.add_argument("--client-cpus", help="CPUs of wrk (default 1)")
    a = ap.parse_args(argv)
    a.mode = a.mode or "short"
    return a


def cpus(spec, default):
    if spec is None:
        return default
    return {int(x) for x in spec.split(",") if x != ""}


def environment(server, client):
    def git(*args):
        r = subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)
        return r.stdout.strip() if r.returncode == 0 else None
    model = ""
    try:
        model = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
                     if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    if server and client:
        pin = (f"backend and proxy / l7fastd on CPU {','.join(map(str, sorted(server)))}, wrk on "
               f"CPU {','.join(map(str, sorted(client)))} (taskset-style affinity set before "
               f"exec); kernel work runs where the kernel puts it (SK_MSG in the sender's "
               f"context, the psock backlog in kworkers)")
    else:
        pin = "none (fewer than 2 CPUs)"
    return {
        "started": datetime.datetime.now().isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "kernel": platform.release(),
        "cpu_model": model,
        "ncpu": os.cpu_count(),
        "versions": systems.versions(),
        "pinning": pin,
        "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "l7fastd": str(systems.l7fastd_path()),
        "l7fastd_sha256": file_sha256(systems.l7fastd_path()),
    }


def file_sha256(path):
    import hashlib
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]
    except OSError:
        return None


def dmesg_lines():
    r = subprocess.run(["dmesg"], capture_output=True, text=True)
    return r.stdout.splitlines()


def preflight(names):
    problems = []
    if os.geteuid() != 0:
        problems.append("needs root (BPF, cgroups)")
    need = {"wrk", "nginx", "bpftool"}
    if "haproxy" in names:
        need.add("haproxy")
    for tool in sorted(need):
        if shutil.which(tool) is None and not os.path.exists(f"/usr/sbin/{tool}"):
            problems.append(f"{tool} missing")
    if any(n.startswith("l7fast") for n in names) and not systems.l7fastd_path().exists():
        problems.append(f"{systems.l7fastd_path()} not built (make build)")
    return problems


def plan_dict(plan):
    return {
        "mode": plan.mode, "duration": plan.duration, "sweep_duration": plan.sweep_duration,
        "warmup": plan.warmup,
        "systems": list(plan.systems),
        "main_conns": list(next(s.conns for s in plan.scenarios if s.group == "main")),
        "sweep_conns": list(plan.sweep_conns),
        "reload_routes": list(plan.reload_routes), "reload_count": plan.reload_count,
        "reload_conns": plan.reload_conns, "profile_seconds": plan.profile_seconds,
        "scenarios": [{"key": s.key, "group": s.group, "x": s.x, "policy": s.policy.describe(),
                       "features": s.policy.features(), "header_bytes": s.header_bytes,
                       "head_bytes": request_head_bytes(s), "conns": list(s.conns),
                       "rounds": s.rounds} for s in plan.scenarios],
    }


def unavailable(name, policy):
    kind = name.split("-")[0]
    module = {"l7fast": policies.l7fast, "haproxy": policies.haproxy,
              "nginx": policies.nginx}.get(kind)
    return policies.unavailable(module, policy) if module else None


def estimate_s(plan):
    t = 0
    for s in plan.scenarios:
        n = sum(1 for sy in plan.systems if not unavailable(sy, s.policy))
        d = plan.duration if s.group == "main" else plan.sweep_duration
        # + the snapshots around each l7fast run (metrics, bpftool)
        t += s.rounds * len(s.conns) * n * (d + 0.5) + plan.warmup + 2.5
    t += len(plan.reload_routes) * (plan.reload_count * 0.5 + 4)
    t += len([s for s in PROFILED if s in plan.systems]) * (plan.profile_seconds + 8) \
        if plan.profile_seconds else 0
    return t


def parse_cost():
    """The parser's own cost per head as this kernel runs it (the build's
    l7fast-parse-cost), as printed; None when it is not built or fails."""
    tool = systems.l7fastd_path().parent.parent / "tests" / "l7fast-parse-cost"
    if not tool.exists():
        return None
    r = subprocess.run([str(tool)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None
    return r.stdout


def run(args):
    names = (args.systems.split(",") if args.systems else DEFAULT_SYSTEMS[args.mode])
    for n in names:
        if n not in systems.ALL:
            raise SystemExit(f"unknown system {n!r}; known: {', '.join(systems.ALL)}")
    problems = preflight(names)
    if problems:
        raise SystemExit("cannot run the benchmark: " + "; ".join(problems))
    sweeps = None
    if args.sweeps:
        sweeps = [] if args.sweeps == "none" else args.sweeps.split(",")
    conns = [int(c) for c in args.conns.split(",")] if args.conns else None
    plan = scenarios.build_plan(args.mode, names, args.duration, args.rounds, conns, sweeps)
    if args.no_reload:
        plan.reload_routes = ()
    if args.profile is False:
        plan.profile_seconds = 0
    elif args.profile and not plan.profile_seconds:
        plan.profile_seconds = max(3, plan.duration)

    ncpu = os.cpu_count() or 1
    server = cpus(args.server_cpus, {0} if ncpu >= 2 else set())
    client = cpus(args.client_cpus, {1} if ncpu >= 2 else set())
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    build = Path(os.environ.get("L7FAST_BUILD", ROOT / "build"))
    outdir = Path(args.out) if args.out else build / "bench" / stamp
    outdir.mkdir(parents=True, exist_ok=True)
    dmesg_start = dmesg_lines()
    results = {"env": environment(server, client), "plan": plan_dict(plan), "rows": [],
               "cells": {}, "notes": [], "reload": [], "rss": {}, "profiles": {}, "diagnostics": {},
               "daemon_messages": {}}
    (outdir / "environment.json").write_text(json.dumps(results["env"], indent=1))

    def log(msg):
        print(msg, flush=True)

    log(f"l7fast bench, {plan.mode} mode: {len(plan.scenarios)} scenarios × "
        f"{len(plan.systems)} systems, about {estimate_s(plan) / 60:.1f} min; results in {outdir}")
    t0 = time.monotonic()
    configs = outdir / "configs"
    total = sum(s.rounds * len(s.conns) * len(plan.systems) for s in plan.scenarios)
    done = 0
    diagnosed = set()

    def start_failed(s, e):
        nonlocal done
        results["cells"][(sc.key, s.name)] = {"status": "failed",
                                              "reason": f"failed to start: {e}"[:400]}
        log(f"  {s.name}: failed to start: {e}")
        s.stop()
        done += sc.rounds * len(sc.conns)

    aborted = None
    try:
        with World(outdir / "work", server, client) as world:
            results["env"]["run_tag"] = world.tag
            results["env"]["nofile"] = world.nofile[0]
            if any(n.startswith("l7fast") for n in plan.systems):
                # the binary whose sha256 the environment records, for the whole run
                frozen = systems.freeze_l7fastd(world.runtime_dir)
                results["env"]["l7fastd_sha256"] = file_sha256(frozen)
                # per-program run time for the BPF cost; restored by world.close()
                was = world.enable_bpf_stats()
                results["env"]["bpf_stats"] = (
                    f"kernel.bpf_stats_enabled = 1 during the run (was {was})" if was is not None
                    else "kernel.bpf_stats_enabled could not be set: no BPF cost figures")
                if was is None:
                    results["notes"].append("kernel.bpf_stats_enabled could not be set: "
                                            "no BPF cost figures")
                results["parse_cost"] = parse_cost()
            (outdir / "environment.json").write_text(json.dumps(results["env"], indent=1))
            backend = systems.Backend(world, "outside", world.child_cgroup("outside"))
            objs = [systems.make(world, n, backend) for n in plan.systems]
            for s in objs:
                s.setup()
            for idx, sc in enumerate(plan.scenarios):
                log(f"[{sc.key}] {sc.policy.describe()}"
                    + (f", request head {request_head_bytes(sc)} B" if sc.header_bytes else ""))
                req = write_request_file(sc, world.workdir / f"request-{idx:02d}.txt")
                active, launched = [], []
                for s in objs:
                    why = s.unavailable(sc.policy)
                    if why:
                        results["cells"][(sc.key, s.name)] = {"status": "n/a", "reason": why}
                        done += sc.rounds * len(sc.conns)
                        continue
                    try:
                        s.launch(sc, idx)
                        launched.append(s)
                    except Exception as e:
                        start_failed(s, e)
                for s in launched:
                    try:
                        s.wait_ready()
                    except Exception as e:
                        start_failed(s, e)
                        continue
                    if s.config_text:
                        d = configs / systems.safe_name(sc.key)
                        d.mkdir(parents=True, exist_ok=True)
                        (d / f"{s.name}.conf").write_text(s.config_text)
                    results["cells"][(sc.key, s.name)] = {"status": "ok"}
                    # measured all the same (the slow path serves), but said loudly
                    why = s.degraded() if hasattr(s, "degraded") else None
                    if why:
                        results["notes"].append(f"{sc.key} {s.name}: l7fastd {why[:300]}")
                        log(f"  {s.name}: l7fastd {why[:200]}")
                    active.append(s)
                if plan.warmup:
                    # not measured: all systems at once (pools filled, caches warm)
                    warm = [start_wrk(world, s, max(sc.conns), plan.warmup, req,
                                      world.workdir / f"warmup-{s.name}.json",
                                      world.workdir / "warmup.log") for s in active]
                    for w in warm:
                        w.wait(plan.warmup + 30)
                        world.stop(w)
                duration = plan.duration if sc.group == "main" else plan.sweep_duration
                for rnd in range(sc.rounds):
                    for c in sc.conns:
                        for s in active:
                            done += 1
                            tag = f"{idx:02d}-{s.name}-c{c}-r{rnd}"
                            try:
                                row = measure(world, s, sc, c, duration, req, world.workdir, tag)
                            except Exception as e:
                                results["notes"].append(f"{sc.key} {s.name} c{c} round {rnd}: {e}"[:400])
                                log(f"  {done}/{total} {s.name} c{c} r{rnd}: FAILED: {e}")
                                continue
                            row.update(scenario=sc.key, group=sc.group, x=sc.x, system=s.name,
                                       conns=c, round=rnd)
                            # l7fastd's memory at every connection count (target < 15 MiB)
                            rss = s.rss()
                            if rss:
                                row["rss_bytes"] = sum(v.get("VmRSS", 0) for v in rss.values())
                            results["rows"].append(row)
                            log(f"  {done}/{total} {s.name:15} c{c:<3} r{rnd}: " + report.run_line(row))
                # what the failures were: once per sweep, system and connection count
                failing = sorted({(r["system"], r["conns"]) for r in results["rows"]
                                  if r["scenario"] == sc.key and r["failed"]
                                  and (sc.group, r["system"], r["conns"]) not in diagnosed})
                for name, c in failing:
                    diagnosed.add((sc.group, name, c))
                    s = next(o for o in active if o.name == name)
                    try:
                        d = diagnose(world, s, c, 1, req, world.workdir, f"{idx:02d}-{name}-c{c}")
                        results["diagnostics"][f"{sc.key} {name} c{c}"] = d
                        log(f"  {name} c{c} failures: {d}")
                    except Exception as e:
                        results["notes"].append(f"diagnosis of {sc.key} {name} c{c} failed: {e}")
                if sc.group == "main":
                    for s in active:
                        rss = s.rss()
                        if rss:
                            results["rss"][s.name] = {
                                "VmRSS": sum(v.get("VmRSS", 0) for v in rss.values()),
                                "VmHWM": sum(v.get("VmHWM", 0) for v in rss.values()),
                                "processes": len(rss)}
                for s in active:
                    s.stop()

            l7 = [s for s in objs if s.kind == "l7fast"]
            target = next((s for s in l7 if s.name == "l7fast-local"), l7[0] if l7 else None)
            if plan.reload_routes and target is not None:
                log(f"[reload] {target.name}, wrk -c{plan.reload_conns}, "
                    f"{plan.reload_count} reloads per route count")
                results["reload"] = control.reload_under_load(world, target, plan, log)

            if plan.profile_seconds:
                if not profile.perf_usable():
                    results["notes"].append("perf profiles skipped: perf cannot sample here")
                else:
                    main_sc = plan.scenarios[0]
                    req = write_request_file(main_sc, world.workdir / "request-profile.txt")
                    for s in objs:
                        if s.name not in PROFILED:
                            continue
                        log(f"[profile] {s.name}, {plan.profile_seconds} s")
                        try:
                            s.start(main_sc, 99)
                            w = start_wrk(world, s, 32, 1, req, world.workdir / "warmup.json",
                                          world.workdir / "warmup.log")
                            w.wait(30)
                            world.stop(w)
                            results["profiles"][s.name] = profile.profile_system(
                                world, s, main_sc, req, plan.profile_seconds, outdir)
                        except Exception as e:
                            results["profiles"][s.name] = {"error": str(e)[:300]}
                        finally:
                            s.stop()
            for s in objs:
                s.teardown()
                if getattr(s, "messages", None):
                    results["daemon_messages"][s.name] = dict(
                        sorted(s.messages.items(), key=lambda kv: -kv[1])[:12])
            backend.stop()

    except BaseException as e:  # write what was measured, then fail
        aborted = e
        results["notes"].append(f"run aborted: {e!r}")
        log(f"run aborted: {e!r}")
    results["elapsed_s"] = time.monotonic() - t0
    results["kernel_warnings"] = [l for l in dmesg_lines()[len(dmesg_start):]
                                  if re.search(r"WARNING|BUG|Oops|general protection|refcount_t|"
                                               r"RIP:|hung_task|soft lockup", l)]
    results["aggregate"] = report.aggregate(results["rows"])
    results["targets"] = report.targets(results)
    report.write_outputs(results, outdir, plots=not args.no_plots)
    latest = outdir.parent / "latest"
    if not args.out:
        try:
            if latest.is_symlink() or not latest.exists():
                latest.unlink(missing_ok=True)
                latest.symlink_to(outdir.name)
        except OSError:
            pass
    if aborted is not None:
        log(f"partial results: {outdir / 'summary.md'}")
        raise aborted
    log(f"done in {results['elapsed_s'] / 60:.1f} min: {outdir / 'summary.md'}")
    return outdir


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    run(args)


if __name__ == "__main__":
    main()
