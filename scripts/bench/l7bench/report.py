"""Aggregation (medians over interleaved rounds, paired ratios), the target
verdicts, and the outputs: CSV, JSON, summary.md and PNG plots."""
import csv
import json
import math
import statistics
from pathlib import Path

from .scenarios import SWEEP_AXES
from .systems import DESCRIPTIONS, L7fast

METRICS = ["rps", "p50_us", "p90_us", "p99_us", "p999_us", "mean_us", "cpu_us_per_req",
           "cpu_total_us_per_req", "ctxt_per_req", "foreign_cpu_share", "bpf_ns_per_req",
           "daemon_wakeups_per_kreq"]
RUN_COLUMNS = ["scenario", "group", "x", "system", "conns", "round", "duration_s", "requests",
               "ok_requests", "rps", "failed", "p50_us", "p90_us", "p99_us", "p999_us", "mean_us",
               "max_us", "cpu_busy_s", "cpu_own_s", "cpu_kthreads_s", "cpu_foreign_s",
               "cpu_us_per_req", "cpu_total_us_per_req", "ctxt", "ctxt_per_req",
               "foreign_cpu_share", "kernel_share", "kernel_share_note", "kernel_requests",
               "user_requests", "handovers", "bpf_ns_per_req", "bpf_progs", "daemon_wakeups_per_kreq",
               "rss_bytes", "errors",
               "counters", "cpu_per_core_s"]
L7 = ("l7fast-local", "l7fast-raw", "l7fast-proxied", "l7fast-remote", "l7fast-slow")
RAW = "l7fast-raw"
PROGRAMS = L7fast.PROGRAMS
NOISY = 0.10
# (reference system, its short name in the ratio keys, metrics compared)
REFS = (("direct", "direct", ("rps", "p50_us", "p99_us", "cpu_us_per_req")),
        ("haproxy", "haproxy", ("rps", "p50_us", "p99_us", "cpu_us_per_req")),
        (RAW, "raw", ("rps",)))
RATIO_NAMES = {"rps": "rps", "p50_us": "p50", "p99_us": "p99", "cpu_us_per_req": "cpu"}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def aggregate(rows):
    """{(scenario, system, conns): summary} with medians over rounds and
    ratios paired by round (same round, same connection count)."""
    by = {}
    for r in rows:
        by.setdefault((r["scenario"], r["system"], r["conns"]), []).append(r)
    by_round = {(r["scenario"], r["system"], r["conns"], r["round"]): r for r in rows}
    out = {}
    for (sc, system, conns), rs in by.items():
        a = {m: median(r.get(m) for r in rs) for m in METRICS}
        a["rounds"] = len(rs)
        a["failed"] = sum(r["failed"] for r in rs)
        a["requests"] = sum(r["requests"] for r in rs)
        a["noisy_rounds"] = sum(1 for r in rs if (r.get("foreign_cpu_share") or 0) > NOISY)
        ctr, hand = {}, {}
        for r in rs:
            for k, v in (r.get("counters") or {}).items():
                ctr[k] = ctr.get(k, 0) + v
            for k, v in (r.get("handovers") or {}).items():
                hand[k] = hand.get(k, 0) + v
        a["counters"] = ctr
        rss = [r["rss_bytes"] for r in rs if r.get("rss_bytes")]
        a["rss_max_bytes"] = max(rss) if rss else None
        if system.startswith("l7fast"):
            a["handovers"] = hand
            # the share of requests over all rounds: what each path served
            # (the daemon's metrics), summed, not a median of shares
            paths = [(r["kernel_requests"], r["user_requests"]) for r in rs
                     if r.get("kernel_requests") is not None]
            k, u = sum(x for x, _ in paths), sum(y for _, y in paths)
            a["kernel_requests"], a["user_requests"] = (k, u) if paths else (None, None)
            if paths:
                a["kernel_share"] = k / (k + u) if k + u else None
            else:  # results written before the metrics were scraped
                a["kernel_share"] = median(r.get("kernel_share") for r in rs)
            notes = sorted({r["kernel_share_note"] for r in rs if r.get("kernel_share_note")})
            if system == RAW:
                a["kernel_share"], a["kernel_share_note"] = None, "n/a (raw)"
            elif a["kernel_share"] is None and notes:
                a["kernel_share_note"] = notes[0]
            progs, ok = {}, 0
            for r in rs:
                if not r.get("bpf_progs"):
                    continue
                ok += max(1, r.get("ok_requests") or 0)
                for name, p in r["bpf_progs"].items():
                    q = progs.setdefault(name, {"run_time_ns": 0, "run_cnt": 0})
                    q["run_time_ns"] += p["run_time_ns"]
                    q["run_cnt"] += p["run_cnt"]
            for q in progs.values():
                q["ns_per_run"] = q["run_time_ns"] / q["run_cnt"] if q["run_cnt"] else None
                q["runs_per_req"] = q["run_cnt"] / ok if ok else None
            a["bpf_progs"] = progs or None
        for ref, short, metrics in REFS:
            for m in metrics:
                name = RATIO_NAMES[m]
                ratios = []
                for r in rs:
                    o = by_round.get((sc, ref, conns, r["round"]))
                    if o and o.get(m) and r.get(m) is not None:
                        ratios.append(r[m] / o[m])
                a[f"{name}_vs_{short}"] = median(ratios)
                a[f"{name}_vs_{short}_range"] = [min(ratios), max(ratios)] if ratios else None
        out[(sc, system, conns)] = a
    return out


# ---- formatting --------------------------------------------------------------

def f_num(x, digits=0):
    if x is None:
        return "–"
    return f"{x:,.{digits}f}"


def f_ratio(x, rng=None):
    if x is None:
        return "–"
    if rng and rng[1] - rng[0] >= 0.005:
        return f"{x:.2f}× ({rng[0]:.2f}–{rng[1]:.2f})"
    return f"{x:.2f}×"


def f_us(x):
    if x is None:
        return "–"
    return f"{x / 1000:.2f} ms" if x >= 10000 else f"{x:.0f} µs"


def f_pct(x):
    return "–" if x is None else f"{100 * x:.1f}%"


def f_share(x):
    """A kernel share, never rounded up to 100% while a request went to
    the slow path."""
    if x is None:
        return "–"
    if x >= 1:
        return "100%"
    if x <= 0:
        return "0%"
    return f"{math.floor(x * 10000) / 100:.2f}%"


def f_kshare(system, a):
    """The kernel share cell of an l7fast row ("" for other systems)."""
    if not system.startswith("l7fast"):
        return ""
    if a.get("kernel_share") is None and a.get("kernel_share_note"):
        return a["kernel_share_note"]
    return f_share(a.get("kernel_share"))


def f_handovers(system, a):
    """Non-zero hand-overs by reason, most first ("" for non-l7fast)."""
    if not system.startswith("l7fast"):
        return ""
    h = a.get("handovers") or {}
    h = {k: v for k, v in h.items() if v}
    if not h:
        return "none"
    return ", ".join(f"{k} {v:,}" for k, v in sorted(h.items(), key=lambda kv: -kv[1]))


def f_ns(x):
    return "–" if x is None else f"{x:,.0f} ns"


def run_line(row):
    """One measured run, as the harness prints it."""
    ks = row.get("kernel_share")
    hand = {k: v for k, v in (row.get("handovers") or {}).items() if v}
    out = (f"{row['rps']:9,.0f} req/s  p50 {row['p50_us']:6.0f} µs  p99 {row['p99_us']:7.0f} µs  "
           f"p99.9 {row['p999_us']:7.0f} µs  {row['cpu_us_per_req']:6.1f} µs CPU/req")
    if row["failed"]:
        out += f"  {row['failed']} failed"
    if ks is not None:
        out += f"  kernel {f_share(ks)}"
    elif row.get("kernel_share_note"):
        out += f"  kernel {row['kernel_share_note']}"
    if hand:
        out += "  hand-overs " + ", ".join(f"{k} {v}" for k, v in
                                           sorted(hand.items(), key=lambda kv: -kv[1]))
    if row.get("bpf_ns_per_req") is not None:
        out += f"  BPF {row['bpf_ns_per_req']:.0f} ns/req"
    if row.get("daemon_wakeups_per_kreq") is not None:
        out += f"  l7fastd {row['daemon_wakeups_per_kreq']:.1f} wake-ups/1k req"
    if row["foreign_cpu_share"] > NOISY:
        out += "  (noisy)"
    return out


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ---- targets -------------------------------------------------------------------

def verdict(ok):
    return "**met**" if ok else "**not met**"


def targets(results):
    """[(target, measured, verdict)] of the project's goals."""
    agg, cells, plan = results["aggregate"], results["cells"], results["plan"]
    main = "main=standard"
    conns_main = plan["main_conns"]
    systems = plan["systems"]
    out = []

    def get(sc, system, conns):
        return agg.get((sc, system, conns))

    def why(sc, system, conns=None):
        if system not in systems:
            return f"{system} not run"
        if conns is not None and conns not in conns_main:
            return f"c{conns} not run"
        return cells.get((sc, system), {}).get("reason", "not measured")

    def failed(a):
        return f", {a['failed']} failed" if a["failed"] else ""

    # 1. kernel share: every connection count, every head size up to 16 KiB,
    # the complexity levels, for the two kernel-path systems of the product
    groups = (("main", "standard policy, every connection count", lambda s, c: f"c{c}"),
              ("header_bytes", "request heads up to 16 KiB", lambda s, c: f"{s['x']} B"),
              ("complexity", "complexity levels", lambda s, c: f"level {str(s['x']).split()[0]}"))
    for system in ("l7fast-local", "l7fast-proxied"):
        for group, label, point in groups:
            scs = [s for s in plan["scenarios"] if s["group"] == group
                   and (group != "header_bytes" or s["x"] <= 16384)]
            if not scs:
                continue
            goal = f"{system}: kernel share ≥ 99%, {label}"
            vals = [(point(s, c), a["kernel_share"]) for s in scs for c in s["conns"]
                    if (a := get(s["key"], system, c)) and a.get("kernel_share") is not None]
            if not vals:
                out.append((goal, why(scs[0]["key"], system), "n/a"))
                continue
            worst = min(vals, key=lambda v: v[1])
            out.append((goal, f"lowest {f_share(worst[1])} ({worst[0]}); "
                        + ", ".join(f"{p} {f_share(v)}" for p, v in vals),
                        verdict(all(v >= 0.99 for _, v in vals))))

    def paired(goal, system, ref, c, key, bound, metric, fmt):
        """A ratio target on the standard policy: `key` (median of per-round
        ratios) within `bound`, the absolute medians beside it."""
        a, o = get(main, system, c), get(main, ref, c)
        if not a or a.get(key) is None:
            out.append((goal, why(main, system if not a else ref, c), "n/a"))
            return
        ok = (a[key] >= bound if key.startswith("rps") else a[key] <= bound) and a["failed"] == 0
        out.append((goal, f"{f_ratio(a[key], a.get(key + '_range'))}: {fmt(a[metric])} vs "
                    f"{fmt(o[metric]) if o else '–'}{failed(a)}", verdict(ok)))

    rps = lambda x: f"{f_num(x)} req/s"
    cpu = lambda x: f"{f_num(x, 1)} µs CPU/req"
    # 2. local→local against the floor
    for c in (1, 32):
        for what, key, bound, metric, fmt in (
                ("≥ 1.3× direct req/s", "rps_vs_direct", 1.3, "rps", rps),
                ("CPU per request ≤ 0.7× direct", "cpu_vs_direct", 0.7, "cpu_us_per_req", cpu),
                ("p50 ≤ 0.9× direct", "p50_vs_direct", 0.9, "p50_us", f_us),
                ("p99 ≤ direct", "p99_vs_direct", 1.0, "p99_us", f_us)):
            paired(f"l7fast-local, standard policy, c{c}: {what}", "l7fast-local", "direct", c,
                   key, bound, metric, fmt)
    # 3. proxied against HAProxy
    for what, key, bound, metric, fmt in (
            ("≥ 2× HAProxy req/s", "rps_vs_haproxy", 2.0, "rps", rps),
            ("CPU per request ≤ 0.6× HAProxy", "cpu_vs_haproxy", 0.6, "cpu_us_per_req", cpu),
            ("p99 ≤ HAProxy", "p99_vs_haproxy", 1.0, "p99_us", f_us)):
        paired(f"l7fast-proxied, standard policy, c32: {what}", "l7fast-proxied", "haproxy", 32,
               key, bound, metric, fmt)
    # 4. BPF cost of a local request
    goal = "BPF cost per local request (l7fast-local, standard policy) ≤ 1 µs"
    vals = [(c, a["bpf_ns_per_req"]) for c in conns_main
            if (a := get(main, "l7fast-local", c)) and a.get("bpf_ns_per_req") is not None]
    if vals:
        worst = max(vals, key=lambda v: v[1])
        out.append((goal, f"highest {f_ns(worst[1])} (c{worst[0]}); "
                    + ", ".join(f"c{c} {f_ns(v)}" for c, v in vals),
                    verdict(all(v <= 1000 for _, v in vals))))
    else:
        out.append((goal, why(main, "l7fast-local") if "l7fast-local" in systems
                    else "l7fast-local not run", "n/a"))
    # 5. the product against its ceiling
    for c in conns_main:
        goal = f"product ÷ l7fast-raw ≥ 0.85, standard policy, c{c}"
        a, r = get(main, "l7fast-local", c), get(main, RAW, c)
        if a and a.get("rps_vs_raw") is not None:
            out.append((goal, f"{f_ratio(a['rps_vs_raw'], a.get('rps_vs_raw_range'))}: "
                        f"{rps(a['rps'])} vs {rps(r['rps'])}{failed(a)}",
                        verdict(a["rps_vs_raw"] >= 0.85 and a["failed"] == 0)))
        else:
            out.append((goal, why(main, "l7fast-local" if not a else RAW), "n/a"))
    # 6. no regression: reload, memory
    for e in results.get("reload", []):
        if e.get("routes") == 1000:
            if "error" in e:
                out.append(("reload of 1,000 routes < 200 ms with 0 failed requests",
                            "error: " + e["error"][:200], "**not met**"))
            else:
                ok = e["reload_ms_max"] < 200 and e["failed_requests"] == 0 and not e["reloads_failed"]
                out.append(("reload of 1,000 routes < 200 ms with 0 failed requests",
                            f"median {e['reload_ms_median']:.0f} ms, max {e['reload_ms_max']:.0f} ms; "
                            f"{e['failed_requests']} failed of {e['requests']} requests "
                            f"(wrk -c{e['conns']})", verdict(ok)))
    per_c = rss_by_conns(results)
    if per_c:
        worst = max(per_c.items(), key=lambda kv: kv[1][0])
        out.append(("l7fastd RSS < 15 MiB at every connection count (standard policy, "
                    "every l7fast system but the raw ceiling)",
                    f"largest {worst[1][0] / 2**20:.1f} MiB ({worst[1][1]}, c{worst[0]}); "
                    + ", ".join(f"c{c} {v / 2**20:.1f}" for c, (v, _) in sorted(per_c.items()))
                    + " MiB (max per connection count)",
                    verdict(all(v < 15 * 2**20 for v, _ in per_c.values()))))
    else:
        rss = [(s, v) for s, v in results.get("rss", {}).items()
               if s.startswith("l7fast") and s != RAW]
        if rss:
            worst = max(rss, key=lambda kv: kv[1].get("VmRSS") or 0)
            cur = worst[1].get("VmRSS") or 0
            out.append(("l7fastd RSS < 15 MiB (under load, steady state)",
                        f"largest {cur / 2**20:.1f} MiB ({worst[0]})", verdict(cur < 15 * 2**20)))
    return out


def rss_by_conns(results):
    """{conns: (largest l7fastd RSS over the standard policy's runs, the
    system)} of the product's l7fast systems (not the raw ceiling)."""
    out = {}
    for r in results["rows"]:
        if r["scenario"] != "main=standard" or not r.get("rss_bytes"):
            continue
        if not r["system"].startswith("l7fast") or r["system"] == RAW:
            continue
        if r["rss_bytes"] > out.get(r["conns"], (0, ""))[0]:
            out[r["conns"]] = (r["rss_bytes"], r["system"])
    return out


def product_vs_raw(results):
    """l7fast-local ÷ l7fast-raw req/s on the standard policy, per
    connection count (median of per-round ratios)."""
    agg = results["aggregate"]
    out = []
    for c in results["plan"]["main_conns"]:
        a, r = agg.get(("main=standard", "l7fast-local", c)), agg.get(("main=standard", RAW, c))
        if a and r:
            out.append({"conns": c, "l7fast_local_rps": a["rps"], "l7fast_raw_rps": r["rps"],
                        "ratio": a.get("rps_vs_raw"), "range": a.get("rps_vs_raw_range"),
                        "failed_local": a["failed"], "failed_raw": r["failed"]})
    return out


def bpf_cost(results):
    """The standard policy's BPF cost per request and per program run, per
    l7fast system and connection count."""
    agg = results["aggregate"]
    out = []
    for c in results["plan"]["main_conns"]:
        for s in results["plan"]["systems"]:
            a = agg.get(("main=standard", s, c))
            if a and a.get("bpf_progs"):
                out.append({"conns": c, "system": s, "bpf_ns_per_req": a.get("bpf_ns_per_req"),
                            "programs": a["bpf_progs"]})
    return out


# ---- outputs -------------------------------------------------------------------

def write_csv(path, rows, columns):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow([json.dumps(r.get(c), sort_keys=True) if isinstance(r.get(c), (dict, list))
                        else r.get(c) for c in columns])


def write_outputs(results, outdir, plots=True):
    outdir = Path(outdir)
    write_csv(outdir / "runs.csv", results["rows"], RUN_COLUMNS)
    agg_rows = []
    for (sc, system, conns), a in sorted(results["aggregate"].items(), key=lambda kv: str(kv[0])):
        agg_rows.append(dict(scenario=sc, system=system, conns=conns, **a))
    agg_cols = ["scenario", "system", "conns", "rounds", "rps", "rps_vs_direct", "rps_vs_haproxy",
                "rps_vs_raw", "p50_us", "p50_vs_direct", "p99_us", "p99_vs_direct",
                "p99_vs_haproxy", "p999_us", "cpu_us_per_req", "cpu_vs_haproxy", "cpu_vs_direct",
                "cpu_total_us_per_req", "rps_vs_direct_range", "rps_vs_haproxy_range",
                "rps_vs_raw_range", "ctxt_per_req", "failed", "requests", "kernel_share",
                "kernel_share_note", "kernel_requests", "user_requests", "handovers",
                "bpf_ns_per_req", "bpf_progs", "rss_max_bytes", "noisy_rounds", "counters"]
    write_csv(outdir / "summary.csv", agg_rows, agg_cols)
    if results.get("reload"):
        write_csv(outdir / "reload.csv", results["reload"],
                  ["system", "routes", "conns", "startup_ms", "reloads", "reload_ms_median",
                   "reload_ms_max", "reload_ms", "reloads_failed", "requests", "failed_requests",
                   "errors", "failed_statuses", "rss_bytes", "hwm_bytes", "error"])
    js = dict(results)
    js["aggregate"] = agg_rows
    js["product_vs_raw"] = product_vs_raw(results)
    js["bpf_cost"] = bpf_cost(results)
    js["rss_by_conns"] = {c: {"rss_bytes": v, "system": sy}
                          for c, (v, sy) in sorted(rss_by_conns(results).items())}
    js["cells"] = [dict(scenario=k[0], system=k[1], **v) for k, v in results["cells"].items()]
    (outdir / "results.json").write_text(json.dumps(js, indent=1, default=str))
    plot_files = []
    if plots:
        try:
            plot_files = make_plots(results, outdir)
        except ImportError as e:
            results["notes"].append(f"no plots: {e} (apt install python3-matplotlib)")
    (outdir / "summary.md").write_text(summary_md(results, plot_files))


def summary_md(results, plot_files):
    env, plan, agg, cells = results["env"], results["plan"], results["aggregate"], results["cells"]
    systems = plan["systems"]
    L = []
    L.append(f"# l7fast benchmark — {plan['mode']} mode, {env['started']}\n")
    L.append(f"- commit `{env.get('commit')}`{' (dirty tree)' if env.get('dirty') else ''}, "
             f"l7fastd `{env.get('l7fastd')}` (sha256 {env.get('l7fastd_sha256')}); "
             f"kernel {env['kernel']}; {env['cpu_model']}, {env['ncpu']} CPUs; "
             f"{', '.join(f'{k} {v}' for k, v in env['versions'].items() if v)}")
    L.append(f"- load: wrk 1 thread, keep-alive, {plan['duration']} s per run of the standard "
             f"policy, {plan['sweep_duration']} s in the sweeps "
             f"(+{plan['warmup']} s warm-up per system and scenario), rounds interleaved "
             f"(every system once per round, in turn), medians over rounds; ratios are medians "
             f"of per-round ratios (same round, same connection count)")
    L.append(f"- pinning: {env['pinning']}")
    L.append("- CPU/request: CPU time over the run of every process of the benchmark (load "
             "generator, backend, proxy or l7fastd: cgroup `cpu.stat`) plus kernel threads "
             "(sockmap backlog kworkers, ksoftirqd), ÷ successful requests; that is /proc/stat's "
             "busy time without other tenants of the machine (`cpu_total_us_per_req` in "
             "runs.csv keeps the whole-machine figure). Context switches: /proc/stat `ctxt` "
             "(whole machine). req/s counts successful (2xx/3xx) responses only.")
    if env.get("bpf_stats"):
        L.append(f"- BPF cost: {env['bpf_stats']}; per-program run time and runs of each "
                 f"l7fastd's programs around every run")
    L.append(f"- wall time {results.get('elapsed_s', 0) / 60:.1f} min\n")
    noisy = sum(1 for r in results["rows"] if (r.get("foreign_cpu_share") or 0) > NOISY)
    if noisy:
        L.append(f"> **Noise:** {noisy} of {len(results['rows'])} runs had more than "
                 f"{int(NOISY * 100)}% of the machine busy with processes that are not part of "
                 f"the benchmark (column `foreign_cpu_share` in runs.csv). Treat their absolute "
                 f"numbers with care; ratios are paired per round.\n")
    L.append("## Systems\n")
    L += [f"- **{s}**: {DESCRIPTIONS[s]}" for s in systems]
    L.append("")

    L.append("## Targets\n")
    L.append(md_table(["target", "measured", "verdict"], results["targets"]))
    L.append("")

    main = "main=standard"
    pol = next((s["policy"] for s in plan["scenarios"] if s["key"] == main), "")
    L.append(f"## Standard policy ({pol})\n")
    with_raw = RAW in systems
    header = (["system", "req/s", "× direct", "× HAProxy"] + (["× raw"] if with_raw else [])
              + ["p50", "p50 × direct", "p99", "p99.9", "CPU µs/req", "CPU × HAProxy",
                 "ctx sw/req", "failed", "kernel share", "hand-overs", "BPF ns/req",
                 "l7fastd wake-ups/1k req", "noise"])
    for c in plan["main_conns"]:
        L.append(f"### {c} connection{'s' if c != 1 else ''}\n")
        rows = []
        for s in systems:
            a = agg.get((main, s, c))
            if not a:
                rows.append([s, cells.get((main, s), {}).get("reason", "–")]
                            + [""] * (len(header) - 2))
                continue
            rows.append([s, f_num(a["rps"]),
                         f_ratio(a["rps_vs_direct"], a.get("rps_vs_direct_range")),
                         f_ratio(a["rps_vs_haproxy"], a.get("rps_vs_haproxy_range"))]
                        + ([f_ratio(a.get("rps_vs_raw"), a.get("rps_vs_raw_range"))
                            if s != RAW else ""] if with_raw else [])
                        + [f_us(a["p50_us"]),
                           f_ratio(a["p50_vs_direct"], a.get("p50_vs_direct_range")),
                           f_us(a["p99_us"]), f_us(a["p999_us"]), f_num(a["cpu_us_per_req"], 1),
                           f_ratio(a["cpu_vs_haproxy"], a.get("cpu_vs_haproxy_range")),
                           f_num(a["ctxt_per_req"], 2), f_num(a["failed"]),
                           f_kshare(s, a), f_handovers(s, a),
                           f_ns(a.get("bpf_ns_per_req")) if a.get("bpf_progs") else "",
                           f_num(a.get("daemon_wakeups_per_kreq"), 1) if s.startswith("l7fast") else "",
                           f_pct(a.get("foreign_cpu_share"))])
        L.append(md_table(header, rows))
        L.append("\nRatios: median of the per-round ratios (in brackets: lowest–highest "
                 "round). noise: median share of the machine's CPU used by other tenants "
                 "during the runs.\n")
        L.append("")
    L.append("Kernel share: requests the kernel path served ÷ (those + requests the slow path "
             "served), from l7fastd's metrics (`l7fast_route_requests_total` by `plane`, "
             "scraped before and after each run). Hand-overs: the data plane's "
             "`to_slow_path_<reason>` counters over the runs (a hand-over is the first "
             "message given to the slow path since the kernel last took a request, not a "
             "request). l7fast-raw counts no requests: its share is n/a. BPF ns/req: the run "
             "time of all of that l7fastd's BPF programs ÷ successful requests. l7fastd wake-ups: its "
             "threads' voluntary context switches per 1,000 successful requests (the "
             "daemon sleeps while the kernel path serves; the two metrics scrapes per run "
             "add a few).\n")

    pvr = product_vs_raw(results)
    if pvr:
        L.append("## Product ÷ ceiling (l7fast-local ÷ l7fast-raw, standard policy)\n")
        L.append("l7fast-raw forwards every message without looking at it (no parsing, matching, "
                 "framing or statistics; no policy enforced) over the same sockets and "
                 "redirects: what the product costs over the bare sockmap path.\n")
        L.append(md_table(["connections", "l7fast-local req/s", "l7fast-raw req/s",
                           "product ÷ raw", "failed (local / raw)"],
                          [[e["conns"], f_num(e["l7fast_local_rps"]), f_num(e["l7fast_raw_rps"]),
                            f_ratio(e["ratio"], e["range"]),
                            f"{e['failed_local']} / {e['failed_raw']}"] for e in pvr]))
        L.append("\nMedian of the per-round ratios (same round, same connection count).\n")

    cost = bpf_cost(results)
    if cost:
        names = list(PROGRAMS) + sorted({n for e in cost for n in e["programs"]} - set(PROGRAMS))
        L.append("## BPF cost per request (standard policy)\n")
        L.append("Per l7fastd: the delta of each of its programs' `run_time_ns` and `run_cnt` "
                 "(`kernel.bpf_stats_enabled = 1`, `bpftool -j prog show`) over the runs. "
                 "Per program: ns per run × runs per request; BPF ns/req: the sum of all its "
                 "programs' run time ÷ successful requests (median over rounds). "
                 "`bpf_stats_enabled` itself adds two clock reads to every program run, the "
                 "same for every l7fast system.\n")
        rows = []
        for e in cost:
            cellv = []
            for n in names:
                p = e["programs"].get(n)
                if not p or not p.get("run_cnt"):
                    cellv.append("–")
                else:
                    # sockops runs per connection event: a few per thousand requests
                    cellv.append(f"{f_ns(p['ns_per_run'])} × {p['runs_per_req']:.3g}")
            rows.append([f"c{e['conns']}", e["system"], f_ns(e["bpf_ns_per_req"])] + cellv)
        L.append(md_table(["connections", "system", "BPF ns/req"] + names, rows))
        L.append("")
    if results.get("parse_cost"):
        L.append("The HTTP parser alone, per head, as this kernel runs it (`l7fast-parse-cost`: "
                 "`bpf/include/l7_http.h` in a `BPF_PROG_TYPE_SYSCALL` program, many parses per "
                 "clock read; \"fast\" is what the data plane runs, \"strict\" the stages it falls "
                 "back to):\n")
        L.append("```\n" + results["parse_cost"].rstrip() + "\n```\n")

    groups = [g for g in SWEEP_AXES if g != "main"
              and any(s["group"] == g for s in plan["scenarios"])]
    l7_systems = [sy for sy in systems if sy.startswith("l7fast")]
    for g in groups:
        scs = [s for s in plan["scenarios"] if s["group"] == g]
        c = scs[0]["conns"][-1]
        L.append(f"## Sweep: {SWEEP_AXES[g]} (c{c})\n")
        L.append("req/s (× HAProxy) · p99 · p99.9\n")
        rows = []
        for s in scs:
            row = [s["x"]]
            for sy in systems:
                a = agg.get((s["key"], sy, c))
                if a:
                    t = (f"{f_num(a['rps'])} ({f_ratio(a['rps_vs_haproxy'])}) · "
                         f"{f_us(a['p99_us'])} · {f_us(a['p999_us'])}")
                    if a["failed"]:
                        t += f" · **{a['failed']} failed**"
                    row.append(t)
                else:
                    row.append(cells.get((s["key"], sy), {}).get("reason", "–"))
            rows.append(row)
        L.append(md_table([SWEEP_AXES[g]] + list(systems), rows))
        L.append("")
        rows = []
        for s in scs:
            for sy in l7_systems:
                a = agg.get((s["key"], sy, c))
                if a:
                    rows.append([s["x"], sy, f_num(a["rps"]), f_us(a["p99_us"]),
                                 f_us(a["p999_us"]), f_kshare(sy, a), f_handovers(sy, a),
                                 f_ns(a.get("bpf_ns_per_req")) if a.get("bpf_progs") else "",
                                 f_num(a["failed"])])
        if rows:
            L.append("l7fast rows:\n")
            L.append(md_table([SWEEP_AXES[g], "system", "req/s", "p99", "p99.9", "kernel share",
                               "hand-overs", "BPF ns/req", "failed"], rows))
            L.append("")
        if g == "header_bytes":
            L.append("Request head sizes sent: " + ", ".join(
                f"{s['x']} → {s['head_bytes']} B" for s in scs) + "\n")

    if results.get("reload"):
        L.append("## Control plane: reload under load (SIGHUP → READY=1)\n")
        rows = []
        for e in results["reload"]:
            if "error" in e:
                rows.append([e["routes"], "error", e["error"][:120], "", "", "", ""])
                continue
            rows.append([f_num(e["routes"]), f"{e['startup_ms']:.0f} ms",
                         f"{e['reload_ms_median']:.1f} ms", f"{e['reload_ms_max']:.1f} ms",
                         f"{e['reloads']} ({e['reloads_failed']} refused)",
                         f"{e['failed_requests']} of {f_num(e['requests'])}"
                         + (f" (statuses {e['failed_statuses']})" if e.get("failed_statuses") else "")
                         + (f" (socket errors {e['errors']})"
                            if e["failed_requests"] > sum(e.get("failed_statuses", {}).values())
                            else ""),
                         f"{(e.get('rss_bytes') or 0) / 2**20:.1f} MiB"])
        L.append(md_table(["routes", "start-up", "reload median", "reload max", "reloads",
                           f"failed requests (wrk -c{plan['reload_conns']})", "RSS after"], rows))
        L.append("")
    if results.get("rss"):
        L.append("## Resident memory after the standard-policy runs\n")
        rows = [[s, f"{(v.get('VmRSS') or 0) / 2**20:.1f} MiB",
                 f"{(v.get('VmHWM') or 0) / 2**20:.1f} MiB"] for s, v in results["rss"].items()]
        L.append(md_table(["system (all its processes)", "RSS", "peak RSS"], rows))
        L.append("")
    by_c = [(s, [agg.get((main, s, c), {}).get("rss_max_bytes") for c in plan["main_conns"]])
            for s in systems]
    by_c = [(s, v) for s, v in by_c if any(v)]
    if by_c:
        L.append("Largest RSS after a run, per connection count (standard policy):\n")
        L.append(md_table(["system"] + [f"c{c}" for c in plan["main_conns"]],
                          [[s] + [f"{x / 2**20:.1f} MiB" if x else "–" for x in v]
                           for s, v in by_c]))
        L.append("")
    if results.get("profiles"):
        L.append("## Where the CPU goes (perf, cpu-clock, whole machine, standard policy, c32)\n")
        for s, p in results["profiles"].items():
            if "error" in p:
                L.append(f"- **{s}**: {p['error']}")
                continue
            cats = ", ".join(f"{k} {v:.0f}%" for k, v in list(p["by_category"].items())[:8])
            comms = ", ".join(f"{k} {v:.0f}%" for k, v in list(p["by_comm"].items())[:6])
            syms = ", ".join(f"{t['symbol']} ({t['comm']}) {t['percent_of_busy']:.1f}%"
                             for t in p["top_symbols"][:6])
            progs = ", ".join(f"{k} {v:.1f}%" for k, v in list(p.get("bpf_programs", {}).items())[:6])
            L.append(f"- **{s}** — by kind: {cats}. By process: {comms}. Top symbols: {syms}."
                     + (f" BPF programs: {progs}." if progs else "")
                     + f" (Other tenants' samples left out: {p.get('foreign_share_of_busy', 0):.0f}%"
                     f" of the machine's busy samples.)")
        L.append("\nFull reports: `perf-<system>.txt` (shares are of non-idle samples).\n")
    if results.get("kernel_warnings"):
        L.append("## Kernel warnings during the run\n")
        L.append("```")
        L += results["kernel_warnings"][:40]
        L.append("```\n")
    if results.get("diagnostics"):
        L.append("## Failed requests: what they were\n")
        L.append("For every system and connection count with failed requests, a short extra "
                 "wrk run recorded the failed responses (status and start of the body); "
                 "socket errors and timeouts (requests stuck for 2 s) are wrk's counts.\n")
        for k, d in results["diagnostics"].items():
            errs = {k2: v for k2, v in (d.get("errors") or {}).items() if v}
            if not errs and not d["statuses"]:
                L.append(f"- **{k}**: no failure in the {d['seconds']} s diagnosis run "
                         f"(intermittent; see what l7fastd logged below)")
                continue
            L.append(f"- **{k}**: in {d['seconds']} s, {d.get('requests', '?')} requests, "
                     f"errors {errs}, failed statuses {d['statuses'] or 'none'}"
                     + (f"; e.g. `{d['examples'][0]}`" if d["examples"] else ""))
        L.append("")
    if results.get("daemon_messages"):
        L.append("## What l7fastd logged (other than start, reload and stop)\n")
        L.append("Counts over the whole run (all scenarios, the reload and profile runs); "
                 "numbers and addresses blanked.\n")
        for s, msgs in results["daemon_messages"].items():
            L.append(f"- **{s}**:")
            L += [f"  - {n} × `{m}`" for m, n in msgs.items()]
        L.append("")
    na = {}
    for (sc, sy), v in cells.items():
        if v.get("status") in ("n/a", "failed"):
            na.setdefault((sy, v.get("reason")), []).append(sc)
    if na:
        L.append("## Not measured\n")
        L += [f"- **{sy}** — {why}: {', '.join(scs)}" for (sy, why), scs in sorted(na.items())]
        L.append("")
    if results.get("notes"):
        L.append("## Notes\n")
        L += [f"- {n}" for n in results["notes"]]
        L.append("")
    if plot_files:
        L.append("## Plots\n")
        L += [f"![{p}]({p})" for p in plot_files]
        L.append("")
    L.append("Raw data: runs.csv (one row per run), summary.csv (medians and ratios), "
             "reload.csv, results.json (everything, with the environment and the plan); "
             "configs/ has every system's configuration per scenario.")
    return "\n".join(L) + "\n"


def make_plots(results, outdir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    agg, plan = results["aggregate"], results["plan"]
    systems = plan["systems"]
    files = []
    colors = {s: plt.cm.tab10(i) for i, s in enumerate(systems)}

    # standard policy: bars per system for each connection count
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    width = 0.8 / max(1, len(plan["main_conns"]))
    for j, c in enumerate(plan["main_conns"]):
        for k, (metric, label) in enumerate((("rps", "req/s"), ("p99_us", "p99 latency (µs)"),
                                             ("cpu_us_per_req", "CPU µs per request"))):
            vals = [(agg.get(("main=standard", s, c)) or {}).get(metric) or 0 for s in systems]
            axes[k].bar([i + j * width for i in range(len(systems))], vals, width,
                        label=f"c{c}")
            axes[k].set_title(label)
    for ax in axes:
        ax.set_xticks([i + width * (len(plan["main_conns"]) - 1) / 2 for i in range(len(systems))])
        ax.set_xticklabels(systems, rotation=30, ha="right", fontsize=8)
        ax.legend(fontsize=8)
    fig.suptitle("standard policy")
    fig.tight_layout()
    fig.savefig(outdir / "standard.png", dpi=100)
    plt.close(fig)
    files.append("standard.png")

    # the concurrency sweep: the standard policy against the connection count
    if len(plan["main_conns"]) > 2:
        fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
        for s in systems:
            xs, rps, p99, cpu = [], [], [], []
            for c in plan["main_conns"]:
                a = agg.get(("main=standard", s, c))
                if a and a["rps"]:
                    xs.append(c)
                    rps.append(a["rps"])
                    p99.append(a["p99_us"] / 1000)
                    cpu.append(a["cpu_us_per_req"])
            if xs:
                for ax, ys in zip(axes, (rps, p99, cpu)):
                    ax.plot(xs, ys, "o-", label=s, color=colors[s])
        for ax, yl in zip(axes, ("req/s", "p99 latency (ms, log)", "CPU µs per request")):
            ax.set_xlabel("connections")
            ax.set_ylabel(yl)
            ax.set_xscale("log", base=2)
            ax.grid(alpha=0.3)
        axes[0].set_ylim(bottom=0)
        axes[1].set_yscale("log")
        axes[2].set_ylim(bottom=0)
        axes[0].legend(fontsize=8)
        fig.suptitle("standard policy: concurrency sweep")
        fig.tight_layout()
        fig.savefig(outdir / "concurrency.png", dpi=100)
        plt.close(fig)
        files.append("concurrency.png")

    for g, axis in SWEEP_AXES.items():
        scs = [s for s in plan["scenarios"] if s["group"] == g]
        if g == "main" or not scs:
            continue
        c = scs[0]["conns"][-1]
        categorical = g == "complexity"
        fig, axes = plt.subplots(1, 3, figsize=(18, 4.8))
        for s in systems:
            xs, rps, p99, rel = [], [], [], []
            for i, sc in enumerate(scs):
                a = agg.get((sc["key"], s, c))
                if a and a["rps"]:
                    xs.append(i if categorical else sc["x"])
                    rps.append(a["rps"])
                    p99.append(a["p99_us"] / 1000)
                    rel.append(a.get("rps_vs_direct"))
            if xs:
                axes[0].plot(xs, rps, "o-", label=s, color=colors[s])
                axes[1].plot(xs, p99, "o-", label=s, color=colors[s])
                if s != "direct" and all(r is not None for r in rel):
                    axes[2].plot(xs, rel, "o-", label=s, color=colors[s])
        for ax, yl in zip(axes, ("req/s", "p99 latency (ms, log)", "req/s ÷ direct (paired by round)")):
            ax.set_xlabel(axis)
            ax.set_ylabel(yl)
            ax.grid(alpha=0.3)
            if categorical:
                ax.set_xticks(range(len(scs)))
                ax.set_xticklabels([sc["x"] for sc in scs], rotation=20, ha="right", fontsize=7)
            elif g in ("routes", "rbac_rules") and all(sc["x"] > 0 for sc in scs):
                ax.set_xscale("log")
        axes[0].set_ylim(bottom=0)
        axes[1].set_yscale("log")
        axes[2].set_ylim(bottom=0)
        axes[2].axhline(1.0, color="grey", lw=0.8)
        axes[0].legend(fontsize=8)
        fig.suptitle(f"{axis} (wrk -c{c}; missing lines: n/a for that system)")
        fig.tight_layout()
        name = f"sweep-{g}.png"
        fig.savefig(outdir / name, dpi=100)
        plt.close(fig)
        files.append(name)
    return files
