"""One measured wrk run: the request, the load, CPU and context switches over
the run, and the data-plane counters of l7fast systems."""
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


def measure(world, system, sc, conns, duration, request_file, workdir, tag):
    """Runs wrk against `system` and returns one row of raw data."""
    result_file = Path(workdir) / f"wrk-{tag}.json"
    log = Path(workdir) / f"wrk-{tag}.log"
    result_file.unlink(missing_ok=True)
    before_ctr = system.counters()
    before = CpuSample(world.cgroup)
    p = start_wrk(world, system, conns, duration, request_file, result_file, log)
    try:
        rc = p.wait(duration + 30)
    except subprocess.TimeoutExpired:
        world.stop(p)
        raise RuntimeError(f"wrk against {system.name} did not finish")
    after = CpuSample(world.cgroup)
    world.stop(p)
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
    after_ctr = system.counters()
    if before_ctr is not None and after_ctr is not None:
        delta = {k: after_ctr.get(k, 0) - before_ctr.get(k, 0) for k in after_ctr}
        row["counters"] = {k: v for k, v in delta.items() if v}
        k, u = delta.get("requests_kernel", 0), delta.get("requests_user", 0)
        row["kernel_share"] = k / (k + u) if k + u else None
    elif system.kind == "l7fast":
        row["counters"] = {}
        row["kernel_share"] = 0.0
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
