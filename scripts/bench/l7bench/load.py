"""One measured wrk run: the request, the load, CPU and context switches over
the run, and for l7fast systems the requests each path served (the daemon's
metrics), the data plane's hand-overs by reason (its counters) and the CPU
time of its BPF programs (kernel.bpf_stats_enabled)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

from .env import CpuSample
from .scenarios import request_for

WRK_LUA = Path(__file__).resolve().parent / "wrk.lua"


def write_request_file(sc, path):
    method, target, headers = request_for(sc)
    lines = [method, target] + [f"{k}: {v}" for k, v in headers]
    Path(path).write_text("\n".join(lines) + "\n")
    return path


def request_head_bytes(sc):
    method, target, headers = request_for(sc)
    return len(f"{method} {target} HTTP/1.1\r\n") + sum(len(k) + len(v) + 4 for k, v in headers) + 2


def wrk_argv(url, conns, duration, request_file):
    return [shutil.which("wrk") or "wrk", "-t1", f"-c{conns}", f"-d{duration}s", "--timeout", "2s",
            "-s", str(WRK_LUA), url, "--", str(request_file)]


def start_wrk(world, system, conns, duration, request_file, result_file, log, diag_file=None):
    env = dict(os.environ, L7BENCH_RESULT=str(result_file))
    if diag_file:
        env["L7BENCH_DIAG"] = str(diag_file)
    return world.spawn(wrk_argv(system.url, conns, duration, request_file),
                       system.client_cgroup, world.client_cpus, log, env=env)


def read_wrk_result(result_file):
    d = json.loads(Path(result_file).read_text())
    dur = d["duration_us"] / 1e6
    errs = d["errors"]
    failed = errs["status"] + errs["connect"] + errs["read"] + errs["write"] + errs["timeout"]
    ok = max(0, d["requests"] - errs["status"])
    pct = d["latency_us"]["percentiles"]
    return {
        "duration_s": dur,
        "requests": d["requests"],
        "ok_requests": ok,
        "rps": ok / dur if dur else 0.0,
        "errors": errs,
        "failed": failed,
        "p50_us": pct["50"], "p90_us": pct["90"], "p99_us": pct["99"], "p999_us": pct["99.9"],
        "mean_us": d["latency_us"]["mean"], "max_us": d["latency_us"]["max"],
    }


def snapshot_before(system):
    """What is read of an l7fast system before a run; the metrics scrape
    (a connection to the daemon) comes first so that its BPF work falls
    outside the programs' window."""
    return {"metrics": getattr(system, "metrics", lambda: None)(),
            "counters": system.counters(),
            "wakeups": getattr(system, "wakeups", lambda: None)(),
            "bpf": getattr(system, "bpf_programs", lambda: None)()}


def snapshot_after(system):
    bpf = getattr(system, "bpf_programs", lambda: None)()
    return {"bpf": bpf, "counters": system.counters(),
            "wakeups": getattr(system, "wakeups", lambda: None)(),
            "metrics": getattr(system, "metrics", lambda: None)()}


def bpf_delta(before, after, ok):
    """Per program name: runs, run time and ns per run over the run, and
    the sum of all programs' run time per successful request."""
    if before is None or after is None:
        return None, None
    progs = {}
    for pid, (name, t, n) in after.items():
        t0, n0 = before.get(pid, (name, 0, 0))[1:]
        p = progs.setdefault(name, {"run_time_ns": 0, "run_cnt": 0})
        p["run_time_ns"] += max(0, t - t0)
        p["run_cnt"] += max(0, n - n0)
    for p in progs.values():
        p["ns_per_run"] = p["run_time_ns"] / p["run_cnt"] if p["run_cnt"] else None
        p["runs_per_req"] = p["run_cnt"] / ok
    total = sum(p["run_time_ns"] for p in progs.values())
    return progs, (total / ok if progs else None)


def measure(world, system, sc, conns, duration, request_file, workdir, tag):
    """Runs wrk against `system` and returns one row of raw data."""
    result_file = Path(workdir) / f"wrk-{tag}.json"
    log = Path(workdir) / f"wrk-{tag}.log"
    result_file.unlink(missing_ok=True)
    snap0 = snapshot_before(system)
    before = CpuSample(world.cgroup)
    p = start_wrk(world, system, conns, duration, request_file, result_file, log)
    try:
        rc = p.wait(duration + 30)
    except subprocess.TimeoutExpired:
        world.stop(p)
        raise RuntimeError(f"wrk against {system.name} did not finish")
    after = CpuSample(world.cgroup)
    world.stop(p)
    snap1 = snapshot_after(system)
    if rc != 0 or not result_file.exists():
        raise RuntimeError(f"wrk against {system.name} failed ({rc}): {log.read_text()[-500:]}")
    row = read_wrk_result(result_file)
    cpu = after.since(before)
    ok = max(1, row["ok_requests"])
    row.update(cpu)
    # The machine may be shared: CPU per request counts the benchmark's own
    # processes (cgroup cpu.stat) and kernel threads (the sockmap backlog
    # workers, ksoftirqd), i.e. /proc/stat's busy time without other tenants.
    row["cpu_us_per_req"] = (cpu["cpu_own_s"] + cpu["cpu_kthreads_s"]) * 1e6 / ok
    row["cpu_total_us_per_req"] = cpu["cpu_busy_s"] * 1e6 / ok
    row["ctxt_per_req"] = cpu["ctxt"] / ok
    row["foreign_cpu_share"] = cpu["cpu_foreign_s"] / max(1e-9, cpu["wall_s"] * (len(cpu["cpu_per_core_s"]) or 1))
    if system.kind != "l7fast":
        return row
    c0, c1 = snap0["counters"], snap1["counters"]
    if c0 is not None and c1 is not None:
        delta = {k: c1.get(k, 0) - c0.get(k, 0) for k in c1}
        row["counters"] = {k: v for k, v in delta.items() if v}
    else:
        row["counters"] = {}
    # requests_user counts hand-overs (the first message given to the slow
    # path since the kernel last took a request), so the reasons are kept
    # as hand-overs and the request share comes from the daemon's metrics
    row["handovers"] = {k[len("to_slow_path_"):]: v for k, v in row["counters"].items()
                        if k.startswith("to_slow_path_")}
    m0, m1 = snap0["metrics"], snap1["metrics"]
    if m0 is not None and m1 is not None:
        k, u = m1["kernel"] - m0["kernel"], m1["user"] - m0["user"]
        row["kernel_requests"], row["user_requests"] = k, u
        row["kernel_share"] = k / (k + u) if k + u else None
    else:
        row["kernel_share"] = None
        row["kernel_share_note"] = "metrics unavailable"
    if system.variant == "raw":
        # the ceiling mode counts nothing: no request share to speak of
        row["kernel_share"] = None
        row["kernel_share_note"] = "n/a (raw)"
    row["bpf_progs"], row["bpf_ns_per_req"] = bpf_delta(snap0["bpf"], snap1["bpf"], ok)
    # the daemon should sleep while the kernel path serves: its wake-ups
    # per 1,000 successful requests (the metrics scrapes add a few)
    w0, w1 = snap0["wakeups"], snap1["wakeups"]
    row["daemon_wakeups_per_kreq"] = (w1 - w0) * 1000 / ok if w0 is not None and w1 is not None else None
    return row


def diagnose(world, system, conns, seconds, request_file, workdir, tag):
    """A short extra run recording what the failed responses were."""
    workdir = Path(workdir)
    diag = workdir / f"diag-{tag}.txt"
    result = workdir / f"diag-{tag}.json"
    diag.unlink(missing_ok=True)
    p = start_wrk(world, system, conns, seconds, request_file, result,
                  workdir / f"diag-{tag}.log", diag_file=diag)
    p.wait(seconds + 30)
    world.stop(p)
    out = {"conns": conns, "seconds": seconds, "statuses": {}, "examples": []}
    if result.exists():
        r = read_wrk_result(result)
        out.update(requests=r["requests"], errors=r["errors"])
    if diag.exists():
        for line in diag.read_text().splitlines():
            status, _, body = line.partition("\t")
            out["statuses"][status] = out["statuses"].get(status, 0) + 1
            if body and body not in out["examples"] and len(out["examples"]) < 3:
                out["examples"].append(body)
    return out
