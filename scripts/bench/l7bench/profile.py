"""Where the CPU goes: a system-wide perf profile during one load run.

This VM has no hardware PMU (`perf stat -e instructions` says "not
supported"), so profiles sample the cpu-clock software event. JIT-ed BPF
programs show up as bpf_prog_<tag>_<name> when net.core.bpf_jit_kallsyms=1.
The machine may be shared (other l7fastd instances, even their own wrk and
nginx): only samples of the benchmark's threads and of kernel threads count.
"""
import re
import subprocess
import tempfile
import time
from pathlib import Path

from .env import kthread_ticks
from .load import start_wrk

IDLE = re.compile(r"^(default_idle|cpu_idle|native_safe_halt|pv_native_safe_halt|"
                  r"acpi_idle|mwait_idle|intel_idle|poll_idle|do_idle|cpuidle|"
                  r"arch_cpu_idle|default_idle_call|__cpuidle)")

CATEGORIES = [
    ("BPF programs (l7fast data plane)", re.compile(r"^bpf_prog_")),
    ("sockmap / skmsg / strparser", re.compile(
        r"(sk_msg|sk_psock|psock|tcp_bpf|sock_map|sock_hash|sk_skb|bpf_sk_redirect|"
        r"bpf_msg_|bpf_skb_|skb_send_sock|strp_|__strp|sk_redirect|bpf_sock_ops|"
        r"__cgroup_bpf|bpf_map_|htab_|__htab|bpf_loop|bpf_|sockops)")),
    ("TCP/IP + loopback", re.compile(
        r"^(tcp|__tcp|ip_|__ip|ip6|inet|__inet|skb|__skb|kfree_skb|consume_skb|alloc_skb|"
        r"__alloc_skb|net_rx|__netif|netif|napi|__napi|process_backlog|loopback|dev_|__dev_|"
        r"sk_|__sk_|sock_|__sock|release_sock|lock_sock|validate_xmit|nf_|__nf|"
        r"ipv4|raw_local|__local_bh|do_softirq|__do_softirq|net_)")),
    ("syscalls, epoll, scheduler", re.compile(
        r"(epoll|^ep_|schedule|^sys_|^__sys|^__x64|entry_|syscall|pick_next|enqueue|dequeue|"
        r"finish_task|switch|futex|try_to_wake|wake_up|update_|psi_|select_task|ttwu|"
        r"rseq|fdget|fput|__fget|ksys_|vfs_|do_writev|do_readv|sock_read|sock_write|"
        r"_raw_spin|queued_spin|native_|irq|hrtimer|ktime|read_tsc)")),
    ("memory and copies", re.compile(
        r"(copy|memcpy|memset|memmove|kmalloc|kfree|__kmem|kmem_|alloc_pages|page_|"
        r"__page|folio|slab|___slab|mem_cgroup|__mod_|refill_|obj_cgroup)")),
]


def perf_usable():
    """perf can sample the cpu-clock event system-wide."""
    try:
        with tempfile.TemporaryDirectory() as d:
            r = subprocess.run(["perf", "record", "-q", "-a", "-e", "cpu-clock", "-o",
                                f"{d}/p.data", "--", "sleep", "0.05"],
                               capture_output=True, text=True, timeout=30)
            return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def parse_report(text):
    """Rows (percent, tid, comm, dso, symbol) of `perf report --sort
    pid,dso,sym` (tid None when the report has no pid column)."""
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(?:(\d+):)?(\S+(?: \S+)*?)\s{2,}(\S+)\s+\[(.)\]\s+(.*\S)",
                     line)
        if m:
            tid = int(m.group(2)) if m.group(2) is not None else None
            rows.append((float(m.group(1)), tid, m.group(3), m.group(4), m.group(6).strip()))
    return rows


def summarize(rows, ours=None):
    """Shares of non-idle samples; with `ours` (a set of thread ids), samples
    of other threads (other tenants of the machine) are left out and their
    share reported."""
    rows = [r for r in rows if not IDLE.match(r[4])]
    all_busy = sum(r[0] for r in rows) or 1.0
    if ours is not None:
        rows = [r for r in rows if r[1] is None or r[1] == 0 or r[1] in ours]
    busy = [(p, c, d, s) for p, _, c, d, s in rows]
    total = sum(r[0] for r in busy) or 1.0
    by_comm, by_cat, by_prog = {}, {}, {}
    for p, comm, dso, sym in busy:
        if sym.startswith("bpf_prog_"):
            name = sym.split("_", 3)[-1]  # bpf_prog_<tag>_<name>
            by_prog[name] = by_prog.get(name, 0) + p
        c = re.sub(r"[/:].*$", "", comm)  # kworker/0:1 -> kworker
        by_comm[c] = by_comm.get(c, 0) + p
        if dso != "[kernel.kallsyms]" and not sym.startswith("bpf_prog_"):
            cat = f"user space: {c}"
        else:
            cat = next((name for name, rx in CATEGORIES if rx.search(sym)), "other kernel")
        by_cat[cat] = by_cat.get(cat, 0) + p
    norm = lambda d: dict(sorted(((k, 100 * v / total) for k, v in d.items()),
                                 key=lambda kv: -kv[1]))
    top = sorted(busy, key=lambda r: -r[0])[:20]
    return {"foreign_share_of_busy": 100 * (1 - total / all_busy),
            "by_comm": norm(by_comm), "by_category": norm(by_cat),
            "bpf_programs": norm(by_prog),
            "top_symbols": [{"percent_of_busy": 100 * p / total, "comm": c, "dso": d, "symbol": s}
                            for p, c, d, s in top]}


def profile_system(world, system, sc, request_file, seconds, outdir, conns=32):
    outdir = Path(outdir)
    data = outdir / f"perf-{system.name}.data"
    result = outdir / f"perf-{system.name}-wrk.json"
    perf = subprocess.Popen(["perf", "record", "-q", "-a", "-e", "cpu-clock", "-F", "2000",
                             "-o", str(data), "--", "sleep", str(seconds)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wrk = start_wrk(world, system, conns, seconds, request_file, result,
                    outdir / f"perf-{system.name}-wrk.log")
    time.sleep(min(0.5, seconds / 4))
    ours = set(kthread_ticks())
    for d in [world.cgroup.path] + [p for p in world.cgroup.path.rglob("*") if p.is_dir()]:
        try:
            ours |= {int(t) for t in (d / "cgroup.threads").read_text().split()}
        except OSError:
            pass
    wrk.wait(seconds + 30)
    world.stop(wrk)
    perf.wait(seconds + 60)
    rep = subprocess.run(["perf", "report", "-i", str(data), "--stdio", "--no-children",
                          "--sort", "pid,dso,sym", "--percent-limit", "0.02"],
                         capture_output=True, text=True, timeout=300)
    (outdir / f"perf-{system.name}.txt").write_text(rep.stdout)
    data.unlink(missing_ok=True)
    return summarize(parse_report(rep.stdout), ours)
