"""Aggregation (medians over interleaved rounds, paired ratios), the target
verdicts, and the outputs: CSV, JSON, summary.md and PNG plots."""
import csv
import json
import statistics
from pathlib import Path

from .scenarios import COMPLEXITY, SWEEP_AXES
from .systems import DESCRIPTIONS

METRICS = ["rps", "p50_us", "p90_us", "p99_us", "p999_us", "mean_us", "cpu_us_per_req",
           "cpu_total_us_per_req", "ctxt_per_req", "foreign_cpu_share"]
RUN_COLUMNS = ["scenario", "group", "x", "system", "conns", "round", "duration_s", "requests",
               "ok_requests", "rps", "failed", "p50_us", "p90_us", "p99_us", "p999_us", "mean_us",
               "max_us", "cpu_busy_s", "cpu_own_s", "cpu_kthreads_s", "cpu_foreign_s",
               "cpu_us_per_req", "cpu_total_us_per_req", "ctxt", "ctxt_per_req",
               "foreign_cpu_share", "kernel_share", "errors", "counters", "cpu_per_core_s"]
L7 = ("l7fast-local", "l7fast-proxied", "l7fast-remote", "l7fast-slow")
NOISY = 0.10


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
        ctr = {}
        for r in rs:
            for k, v in (r.get("counters") or {}).items():
                ctr[k] = ctr.get(k, 0) + v
        a["counters"] = ctr
        if system.startswith("l7fast"):
            k, u = ctr.get("requests_kernel", 0), ctr.get("requests_user", 0)
            a["kernel_share"] = (k / (k + u)) if k + u else (0.0 if system == "l7fast-slow"
                                                             else None)
        for ref in ("direct", "haproxy"):
            for m, name in (("rps", "rps"), ("p50_us", "p50"), ("p99_us", "p99"),
                            ("cpu_us_per_req", "cpu")):
                ratios = []
                for r in rs:
                    o = by_round.get((sc, ref, conns, r["round"]))
                    if o and o.get(m) and r.get(m) is not None:
                        ratios.append(r[m] / o[m])
                a[f"{name}_vs_{ref}"] = median(ratios)
                a[f"{name}_vs_{ref}_range"] = [min(ratios), max(ratios)] if ratios else None
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


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


# ---- targets -------------------------------------------------------------------

def verdict(ok):
    return "**met**" if ok else "**not met**"


def targets(results):
    agg, cells, plan = results["aggregate"], results["cells"], results["plan"]
    main = "main=standard"
    conns_main = plan["main_conns"]
    top = max(plan["main_conns"])
    out = []

    def get(sc, system, conns):
        return agg.get((sc, system, conns))

    def cell(sc, system):
        return cells.get((sc, system), {})

    # 1. local→local vs direct
    for c in conns_main:
        a = get(main, "l7fast-local", c)
        if a and a.get("rps_vs_direct") is not None:
            ok = a["rps_vs_direct"] >= 1.2 and (a["p50_vs_direct"] or 9) <= 1.0 and a["failed"] == 0
            out.append((f"local→local, standard policy, c{c}: ≥ 1.2× direct req/s, p50 ≤ direct",
                        f"{f_ratio(a['rps_vs_direct'], a.get('rps_vs_direct_range'))} req/s, "
                        f"p50 {f_ratio(a['p50_vs_direct'], a.get('p50_vs_direct_range'))}"
                        f", {a['failed']} failed", verdict(ok)))
        else:
            out.append((f"local→local, standard policy, c{c}: ≥ 1.2× direct req/s, p50 ≤ direct",
                        cell(main, "l7fast-local").get("reason", "not measured"), "n/a"))
    # 2. proxied vs HAProxy
    for c in conns_main:
        a = get(main, "l7fast-proxied", c)
        if a and a.get("rps_vs_haproxy") is not None:
            ok = a["rps_vs_haproxy"] >= 2.5 and (a["cpu_vs_haproxy"] or 9) <= 0.5 and a["failed"] == 0
            out.append((f"proxied, c{c}: ≥ 2.5× HAProxy req/s at ≤ 0.5× its CPU/request",
                        f"{f_ratio(a['rps_vs_haproxy'], a.get('rps_vs_haproxy_range'))} req/s, "
                        f"{f_ratio(a['cpu_vs_haproxy'], a.get('cpu_vs_haproxy_range'))} "
                        f"CPU/req, {a['failed']} failed", verdict(ok)))
        else:
            out.append((f"proxied, c{c}: ≥ 2.5× HAProxy req/s at ≤ 0.5× its CPU/request",
                        "not measured", "n/a"))
    # 3. top of the complexity sweep (its last level: every feature)
    levels = [s for s in plan["scenarios"] if s["group"] == "complexity"]
    top_name = COMPLEXITY[-1][0]
    if levels:
        topk = f"complexity={top_name}"
        for system in ("l7fast-local", "l7fast-proxied"):
            if system not in plan["systems"]:
                continue
            goal = f"{system}, top of the complexity sweep ({top_name}): ≥ 1.4× HAProxy"
            a = get(topk, system, top)
            if a and a.get("rps_vs_haproxy") is not None:
                out.append((goal, f_ratio(a["rps_vs_haproxy"], a.get("rps_vs_haproxy_range")),
                            verdict(a["rps_vs_haproxy"] >= 1.4 and a["failed"] == 0)))
                continue
            # the highest level l7fast can run, for information
            best = None
            for lv in levels:
                b = get(lv["key"], system, top)
                if b and b.get("rps_vs_haproxy") is not None:
                    best = (lv["x"], b["rps_vs_haproxy"])
            if not any(lv["key"] == topk for lv in levels):
                why = "the top level is not run in this mode"
            else:
                why = cell(topk, system).get("reason", "not measured")
            extra = f"; highest level it runs: {best[0]} at {f_ratio(best[1])} HAProxy" if best else ""
            out.append((goal, why + extra, "n/a"))
    # 4. 1,000 routes vs 1 route. The two scenarios run minutes apart, so on
    # a shared machine each is first normalised by direct in its own rounds.
    for system in ("l7fast-local", "l7fast-proxied"):
        a1 = get("routes=1", system, top)
        a1000 = get("routes=1000", system, top)
        if a1 and a1000 and a1["rps"] and a1000["rps"]:
            raw = a1000["rps"] / a1["rps"]
            if a1.get("rps_vs_direct") and a1000.get("rps_vs_direct"):
                r = a1000["rps_vs_direct"] / a1["rps_vs_direct"]
                how = (f"{f_ratio(r)} (each ÷ direct in its rounds; raw "
                       f"{f_num(a1000['rps'])} vs {f_num(a1['rps'])} req/s = {f_ratio(raw)})")
            else:
                r = raw
                how = f"{f_ratio(r)} ({f_num(a1000['rps'])} vs {f_num(a1['rps'])} req/s)"
            out.append((f"{system}: 1,000 routes ≥ 0.95× of 1 route (c{top})", how,
                        verdict(r >= 0.95 and a1000["failed"] == 0)))
    # 5. reload
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
    # 6. RSS
    rss = [(s, v) for s, v in results.get("rss", {}).items() if s.startswith("l7fast")]
    rss += [(f"l7fast-local, {e['routes']} routes (reload test)", {"VmRSS": e.get("rss_bytes"),
                                                                   "VmHWM": e.get("hwm_bytes")})
            for e in results.get("reload", []) if e.get("rss_bytes")]
    if rss:
        worst = max(rss, key=lambda kv: kv[1].get("VmRSS") or 0)
        cur = worst[1].get("VmRSS") or 0
        peak = max(v.get("VmHWM") or 0 for _, v in rss)
        out.append(("l7fastd RSS < 15 MiB (under load, steady state)",
                    f"largest {cur / 2**20:.1f} MiB ({worst[0]}); "
                    + ", ".join(f"{s}: {(v.get('VmRSS') or 0) / 2**20:.1f}" for s, v in rss)
                    + f" MiB; peak (VmHWM, at start-up) {peak / 2**20:.1f} MiB",
                    verdict(cur < 15 * 2**20)))
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
                "p50_us", "p50_vs_direct", "p99_us", "p99_vs_haproxy", "p999_us",
                "cpu_us_per_req", "cpu_vs_haproxy", "cpu_vs_direct", "cpu_total_us_per_req",
                "rps_vs_direct_range", "rps_vs_haproxy_range",
                "ctxt_per_req", "failed", "requests", "kernel_share", "noisy_rounds", "counters"]
    write_csv(outdir / "summary.csv", agg_rows, agg_cols)
    if results.get("reload"):
        write_csv(outdir / "reload.csv", results["reload"],
                  ["system", "routes", "conns", "startup_ms", "reloads", "reload_ms_median",
                   "reload_ms_max", "reload_ms", "reloads_failed", "requests", "failed_requests",
                   "errors", "failed_statuses", "rss_bytes", "hwm_bytes", "error"])
    js = dict(results)
    js["aggregate"] = agg_rows
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
    for c in plan["main_conns"]:
        L.append(f"### {c} connection{'s' if c != 1 else ''}\n")
        rows = []
        for s in systems:
            a = agg.get((main, s, c))
            if not a:
                rows.append([s, cells.get((main, s), {}).get("reason", "–")] + [""] * 10)
                continue
            rows.append([s, f_num(a["rps"]),
                         f_ratio(a["rps_vs_direct"], a.get("rps_vs_direct_range")),
                         f_ratio(a["rps_vs_haproxy"], a.get("rps_vs_haproxy_range")),
                         f_us(a["p50_us"]),
                         f_ratio(a["p50_vs_direct"], a.get("p50_vs_direct_range")),
                         f_us(a["p99_us"]), f_num(a["cpu_us_per_req"], 1),
                         f_ratio(a["cpu_vs_haproxy"], a.get("cpu_vs_haproxy_range")),
                         f_num(a["ctxt_per_req"], 2), f_num(a["failed"]),
                         f_pct(a.get("kernel_share")) if s.startswith("l7fast") else "",
                         f_pct(a.get("foreign_cpu_share"))])
        L.append(md_table(["system", "req/s", "× direct", "× HAProxy", "p50", "p50 × direct",
                           "p99", "CPU µs/req", "CPU × HAProxy", "ctx sw/req", "failed",
                           "kernel path", "noise"], rows))
        L.append("\nRatios: median of the per-round ratios (in brackets: lowest–highest "
                 "round). noise: median share of the machine's CPU used by other tenants "
                 "during the runs.\n")
        L.append("")

    groups = [g for g in SWEEP_AXES if g != "main"
              and any(s["group"] == g for s in plan["scenarios"])]
    for g in groups:
        scs = [s for s in plan["scenarios"] if s["group"] == g]
        c = scs[0]["conns"][-1]
        L.append(f"## Sweep: {SWEEP_AXES[g]} (c{c})\n")
        L.append("req/s (× HAProxy) · p99 · kernel path share for l7fast\n")
        rows = []
        for s in scs:
            row = [s["x"]]
            for sy in systems:
                a = agg.get((s["key"], sy, c))
                if a:
                    t = f"{f_num(a['rps'])} ({f_ratio(a['rps_vs_haproxy'])}) · {f_us(a['p99_us'])}"
                    if sy.startswith("l7fast") and sy != "l7fast-slow":
                        t += f" · {f_pct(a.get('kernel_share'))}"
                    if a["failed"]:
                        t += f" · **{a['failed']} failed**"
                    row.append(t)
                else:
                    row.append(cells.get((s["key"], sy), {}).get("reason", "–"))
            rows.append(row)
        L.append(md_table([SWEEP_AXES[g]] + list(systems), rows))
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
