"""Control-plane figures of l7fastd: start-up and reload time by route count,
failed requests while reloading under load, resident memory."""
import time
from dataclasses import replace

from .env import proc_status
from .load import read_wrk_result, start_wrk, write_request_file
from .scenarios import MAIN, Scenario


def reload_under_load(world, system, plan, log=print):
    """For each route count: start l7fastd, put wrk load on it, reload
    `plan.reload_count` times alternating between two policies that send the
    routes to different endpoints (so every reload changes the tables and the
    upstream pools), and time each SIGHUP → READY=1. wrk's non-2xx responses
    and socket errors are the failed requests."""
    results = []
    for i, n in enumerate(plan.reload_routes):
        policy = replace(MAIN, routes=n)
        sc = Scenario("reload", n, policy, 0, (plan.reload_conns,), 1)
        entry = {"routes": n, "conns": plan.reload_conns, "system": system.name}
        try:
            system.start(sc, 90 + i)
            entry["startup_ms"] = system.startup_s * 1e3
            eps = system.endpoints
            texts = [system.render(policy, [eps[0]] + eps[2:]),
                     system.render(policy, [eps[1]] + eps[2:])]
            req = write_request_file(sc, system.workdir / "request.txt")
            gap = 0.3
            duration = max(2, int(1.5 + plan.reload_count * (gap + 0.05 + n / 5000)) + 1)
            result_file = system.workdir / "wrk-reload.json"
            diag = system.workdir / "wrk-reload-failed.txt"
            wrk = start_wrk(world, system, plan.reload_conns, duration, req, result_file,
                            system.workdir / "wrk-reload.log", diag_file=diag)
            time.sleep(0.7)
            times, failed_reloads = [], 0
            for k in range(plan.reload_count):
                if wrk.poll() is not None:
                    break
                dt, msg = system.reload(texts[(k + 1) % 2])
                times.append(dt * 1e3)
                if "last reload failed" in msg:
                    failed_reloads += 1
                time.sleep(gap)
            wrk.wait(duration + 30)
            world.stop(wrk)
            r = read_wrk_result(result_file)
            st = proc_status(system.proc.pid)
            statuses = {}
            if diag.exists():
                for line in diag.read_text().splitlines():
                    code = line.split("\t")[0]
                    statuses[code] = statuses.get(code, 0) + 1
            entry.update({
                "reload_ms": times,
                "reload_ms_median": sorted(times)[len(times) // 2] if times else None,
                "reload_ms_max": max(times) if times else None,
                "reloads": len(times),
                "reloads_failed": failed_reloads,
                "requests": r["requests"],
                "failed_requests": r["failed"],
                "errors": r["errors"],
                "failed_statuses": statuses,
                "rss_bytes": st.get("VmRSS"),
                "hwm_bytes": st.get("VmHWM"),
            })
            log(f"  reload {n:>5} routes: median {entry['reload_ms_median']:.1f} ms, "
                f"max {entry['reload_ms_max']:.1f} ms over {len(times)} reloads; "
                f"{r['failed']} failed of {r['requests']} requests {statuses or ''}; "
                f"RSS {st.get('VmRSS', 0) / 2**20:.1f} MiB")
        except Exception as e:  # reported, the run goes on
            entry["error"] = str(e)
            log(f"  reload {n} routes: FAILED: {e}")
        finally:
            system.stop()
        results.append(entry)
    return results
