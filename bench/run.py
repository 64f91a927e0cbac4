#!/usr/bin/env python3
"""make bench: the agent side by side with the peers a user would pick
instead, on the same workload, in the same run.

Workload: every CPU busy (cpu_split, one thread per CPU) plus N light
processes (bench/many.c). For each profiler, over the same span:
  - user-space CPU (user + sys of its own processes) per sample,
  - BPF run time per sample (kernel.bpf_stats_enabled, read with bpftool),
  - peak RSS.
Peers: `perf record -e cpu-clock -F 100 -g -a` followed by `perf script`,
and bpftrace `profile:hz:100 { @[pid, ustack, kstack] = count(); }`.
Each is run REPS times; the report gives medians and ratios.

    python3 bench/run.py [--seconds S] [--reps R] [--procs N]
"""
import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
AGENT = os.path.join(B, "codexray-node-agent")


def proc_cpu(pid):
    """CPU seconds of every thread of pid, to the nanosecond (schedstat), not
    in the 10 ms ticks of /proc/PID/stat."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total / 1e9


def thread_cpu(pid):
    """CPU seconds by thread name (the agent names its threads: cx-worker,
    cx-ship, cx-unwind, cx-debuginfod; the main thread has the program's)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[name] = out.get(name, 0) + int(f.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            pass
    return out


def proc_hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return 0


def bpf_prog_stats(prog_id):
    out = subprocess.run(["bpftool", "prog", "show", "id", str(prog_id), "--json"],
                         capture_output=True, text=True, check=True).stdout
    j = json.loads(out)
    return j.get("run_time_ns", 0), j.get("run_cnt", 0)


def perf_event_progs():
    out = subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return {p["id"] for p in json.loads(out) if p.get("type") == "perf_event"}


def run_measured(argv, **kw):
    """Runs argv to its end; its own CPU seconds and peak RSS (KiB), from
    wait4 on that one child, not the sum over every child ever run."""
    p = subprocess.Popen(argv, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def start_workload(seconds, procs):
    ncpu = os.cpu_count()
    busy = subprocess.Popen([os.path.join(B, "workloads", "cpu_split"), str(seconds + 5),
                             str(ncpu)], stdout=subprocess.DEVNULL)
    many = subprocess.Popen([os.path.join(B, "bench", "many"), str(procs), str(seconds + 5)])
    time.sleep(2)  # let the processes start
    return [busy, many]


def stop_workload(ws):
    for w in ws:
        w.kill()
    for w in ws:
        w.wait()
    subprocess.run(["pkill", "-f", os.path.join(B, "bench", "many")], check=False)


def run_agent(seconds, tmp, ship=False):
    """Measures one whole window after a first one (measure_agent): the
    first names every binary (a one-time cost); steady state is what follows. The agent writes
    pprof files to a directory, or with ship, uploads them to a
    codexray-server on loopback, as a fleet runs it (the server's CPU is not
    counted)."""
    outdir = os.path.join(tmp, "agent-out")
    os.makedirs(outdir, exist_ok=True)
    srv = None
    if ship:
        import socket
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            port = so.getsockname()[1]
        data = tempfile.mkdtemp(prefix="srv-", dir=tmp)
        srv = subprocess.Popen([os.path.join(B, "codexray-server"), "--listen",
                                f"127.0.0.1:{port}", "--data-dir", data],
                               stderr=subprocess.DEVNULL)
        out = ["--endpoint", f"http://127.0.0.1:{port}", "--data-dir",
               tempfile.mkdtemp(prefix="agent-", dir=tmp), "--debuginfod", "none"]
    else:
        out = ["--output-dir", outdir]
    try:
        return measure_agent(seconds, out)
    finally:
        if srv:
            srv.terminate()
            srv.wait()


def run_agent_ship(seconds, tmp):
    return run_agent(seconds, tmp, ship=True)


def measure_agent(seconds, out):
    a = subprocess.Popen([AGENT, "--interval", str(seconds), *out],
                         stderr=subprocess.PIPE, text=True)
    m = None
    while not m:  # log lines (tables built at start) come before the start line
        line = a.stderr.readline()
        if not line:
            raise RuntimeError("the agent ended before it started")
        m = re.search(r" started: .*bpf_prog_id=(\d+)", line)
    prog = int(m.group(1))
    start = time.monotonic()
    # One whole window's work, the second: its collection (from the first
    # window's end to its own) and its writing (until its log line). The
    # first window's writing, which names every binary once and on this
    # loaded machine can run many seconds into the second window, is taken
    # out by its own CPU (cpu_ms in its log line). Measuring a fixed span
    # after a fixed sleep caught part of it whenever it ran late.
    windows = threading.Semaphore(0)
    rest = []

    def drain():  # the log goes on being written: drained, or the agent would block on it
        for line in a.stderr:
            rest.append(line)
            if " window: processes=" in line:
                windows.release()

    threading.Thread(target=drain, daemon=True).start()
    time.sleep(max(0, start + seconds - 0.2 - time.monotonic()))
    c0 = proc_cpu(a.pid)
    th0 = thread_cpu(a.pid)
    t0, n0 = bpf_prog_stats(prog)
    time.sleep(max(0, start + 2 * seconds - 0.2 - time.monotonic()))
    t1, n1 = bpf_prog_stats(prog)
    for which in ("first", "second"):
        if not windows.acquire(timeout=seconds * 10):
            raise RuntimeError(f"no {which} window")
    c1 = proc_cpu(a.pid)
    th1 = thread_cpu(a.pid)
    first = [x for x in rest if " window: processes=" in x][0]
    first_ms = int(re.search(r"cpu_ms=(\d+)", first).group(1))
    c1 -= first_ms / 1000
    # The first window's writing is the worker's (cpu_ms is its thread's).
    threads = {k: v - th0.get(k, 0) for k, v in th1.items()}
    threads["cx-worker"] = threads.get("cx-worker", 0) - first_ms / 1000
    hwm = proc_hwm_kib(a.pid)
    a.send_signal(signal.SIGTERM)
    a.wait(timeout=300)  # the last window is named and sent first
    log = "".join(rest)
    nprocs = max((int(x) for x in re.findall(r"window: processes=(\d+)", log)), default=0)
    samples = n1 - n0  # every run of the program is a sample (idle ones return at once)
    return {"cpu_s": c1 - c0, "samples": samples, "bpf_ns": (t1 - t0) / max(samples, 1),
            "rss_mib": hwm / 1024, "procs": nprocs,
            "threads_us": {k: round(1e6 * v / max(samples, 1), 2) for k, v in threads.items()}}


def run_perf(seconds, tmp):
    data = os.path.join(tmp, "perf.data")
    script = os.path.join(tmp, "perf.script")
    _, c_rec, rss1 = run_measured(["perf", "record", "-q", "-e", "cpu-clock", "-F", "100", "-g",
                                   "-a", "-o", data, "--", "sleep", str(seconds)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(script, "w") as out:
        _, c_scr, rss2 = run_measured(["perf", "script", "-i", data], stdout=out,
                                      stderr=subprocess.DEVNULL)
    with open(script) as f:
        samples = sum(1 for line in f if line.strip() and not line[0].isspace())
    return {"cpu_s": c_rec + c_scr, "record_cpu_s": c_rec, "script_cpu_s": c_scr,
            "samples": samples, "bpf_ns": None, "rss_mib": max(rss1, rss2) / 1024}


def run_bpftrace(seconds, tmp):
    before = perf_event_progs()
    b = subprocess.Popen(["bpftrace", "-e", "profile:hz:100 { @[pid, ustack, kstack] = count(); }"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    prog = None
    for _ in range(100):
        time.sleep(0.1)
        new = perf_event_progs() - before
        if new:
            prog = min(new)
            break
    t0, n0 = bpf_prog_stats(prog)
    time.sleep(seconds)
    t1, n1 = bpf_prog_stats(prog)
    b.send_signal(signal.SIGINT)  # it then names every stack and prints the map
    _, status, ru = os.wait4(b.pid, 0)
    b.returncode = os.waitstatus_to_exitcode(status)
    samples = n1 - n0
    return {"cpu_s": ru.ru_utime + ru.ru_stime, "samples": samples,
            "bpf_ns": (t1 - t0) / max(samples, 1), "rss_mib": ru.ru_maxrss / 1024}


def by_thread(rows):
    names = sorted({k for r in rows for k in r.get("threads_us", {})})
    return ", ".join(f"{n} {statistics.median(r['threads_us'].get(n, 0) for r in rows):.1f} µs"
                     for n in names)


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=60,
                    help="measured span; also the agent's --interval (default 60, its default)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--only", default="",
                    help="comma-separated subset of agent,agent-ship,perf,bpftrace (a quick look; "
                         "no report is written)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    if os.geteuid() != 0:
        sys.exit("bench: needs root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    results = {"agent": [], "agent-ship": [], "perf": [], "bpftrace": []}
    try:
        with tempfile.TemporaryDirectory(prefix="cx-bench-") as tmp:
            for rep in range(args.reps):
                for name, fn in (("agent", run_agent), ("agent-ship", run_agent_ship),
                                 ("perf", run_perf), ("bpftrace", run_bpftrace)):
                    if only and name not in only:
                        continue
                    ws = start_workload(4 * args.seconds + 60, args.procs)
                    try:
                        r = fn(args.seconds, tmp)
                    finally:
                        stop_workload(ws)
                    r["us_per_sample"] = 1e6 * r["cpu_s"] / max(r["samples"], 1)
                    results[name].append(r)
                    print(f"rep {rep + 1} {name}: {r}", file=sys.stderr, flush=True)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)

    if only:
        return
    a, p, t = (results[k] for k in ("agent", "perf", "bpftrace"))
    sh = results["agent-ship"]
    au, pu, tu = med(a, "us_per_sample"), med(p, "us_per_sample"), med(t, "us_per_sample")
    ab, tb = med(a, "bpf_ns"), med(t, "bpf_ns")
    lines = [
        f"# make bench: {os.cpu_count()} CPUs busy + {args.procs} light processes, "
        f"{args.seconds} s measured a run (the agent: one whole --interval {args.seconds} window "
        f"after a first), median of {args.reps}",
        "",
        "The agent writes a pprof file per process per window to --output-dir, or uploads each "
        "to a codexray-server on loopback (--endpoint, as a fleet runs it; the server's CPU is "
        "not counted).",
        "",
        "| profiler | user-space CPU per sample | BPF time per sample | peak RSS | samples a run |",
        "|---|---|---|---|---|",
        f"| codexray-node-agent | {au:.1f} µs | {ab / 1000:.2f} µs | {med(a, 'rss_mib'):.1f} MiB "
        f"| {med(a, 'samples'):.0f} |",
        f"| codexray-node-agent, shipping to codexray-server | {med(sh, 'us_per_sample'):.1f} µs "
        f"| {med(sh, 'bpf_ns') / 1000:.2f} µs | {med(sh, 'rss_mib'):.1f} MiB "
        f"| {med(sh, 'samples'):.0f} |",
        f"| perf record -g -a + perf script | {pu:.1f} µs | (in-kernel callchain) "
        f"| {med(p, 'rss_mib'):.1f} MiB | {med(p, 'samples'):.0f} |",
        f"| bpftrace profile:hz:100 | {tu:.1f} µs | {tb / 1000:.2f} µs | {med(t, 'rss_mib'):.1f} MiB "
        f"| {med(t, 'samples'):.0f} |",
        "",
        f"- user-space CPU per sample: perf / agent = {pu / au:.1f}x, bpftrace / agent = "
        f"{tu / au:.1f}x (targets: agent <= 25 µs and >= 10x cheaper than perf)",
        f"- BPF time per sample: agent / bpftrace = {ab / tb:.2f} (target <= 1.0)",
        f"- processes in the agent's windows: {med(a, 'procs'):.0f}; peak RSS {med(a, 'rss_mib'):.1f}"
        f" MiB (target <= 64 MiB with 500 processes)",
        f"- the agent's CPU per sample by thread (medians): {by_thread(a)}; shipping: "
        f"{by_thread(sh)}",
    ]
    report = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", "report.md"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
