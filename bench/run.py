#!/usr/bin/env python3
"""make bench: the agent side by side with the peers a user would pick
instead, on the same workload, in the same run.

Two machines, each measured whole (every profiler on it, REPS times):
  - quiet: every CPU busy (cpu_split, one thread per CPU) plus N light
    processes (bench/many.c);
  - loaded: the same, plus two more CPU-bound processes and a parallel
    compile (COMPILE: two gcc at a time, over and over), so that more
    threads are runnable than there are CPUs and processes come and go as
    on a build node.
For each profiler, over the same span:
  - user-space CPU (user + sys of its own processes) per sample, and for
    the agent by thread, with its main thread's wakeups a second;
  - BPF run time per sample (kernel.bpf_stats_enabled, read with bpftool),
  - peak RSS;
  - the processes started a second on the machine meanwhile (/proc/stat).
Peers: `perf record -e cpu-clock -F 100 -g -a` followed by `perf script`,
and bpftrace `profile:hz:100 { @[pid, ustack, kstack] = count(); }`.
The report gives medians and ratios, quiet and loaded side by side.

    python3 bench/run.py [--seconds S] [--reps R] [--procs N]
                         [--machine quiet|loaded|both] [--agent PATH]
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
    cx-ship, cx-unwind, cx-debuginfod; the main thread has the program's),
    and the main thread's voluntary context switches (its wakeups: it
    sleeps in the ring buffer's poll)."""
    out, wakeups = {}, 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = "main" if tid == str(pid) else f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[name] = out.get(name, 0) + int(f.read().split()[0]) / 1e9
            if tid == str(pid):
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    wakeups = int(re.search(r"voluntary_ctxt_switches:\s+(\d+)",
                                            f.read()).group(1))
        except (OSError, ValueError, IndexError, AttributeError):
            pass
    return out, wakeups


def forks():
    """Processes (and threads) created since boot, machine-wide."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("processes "):
                return int(line.split()[1])
    return 0


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


# The loaded machine's third source of load: a parallel compile, two
# compilers at a time, of the repository's own common/ sources, over and
# over (cc1, as and collect2 starting and ending all the time, as on a build
# node): new processes to name, exec and exit events, page-cache churn.
COMPILE = ("cd {root} && while :; do ls common/*.c | xargs -P 2 -I SRC gcc -O2 -g "
           "-std=gnu11 -D_GNU_SOURCE -Ibuild/gen -c SRC -o /dev/null 2>/dev/null; done")


def start_workload(seconds, procs, load=False):
    """The quiet machine: every CPU busy (cpu_split, a thread a CPU) and procs
    light processes. The loaded one adds two more CPU-bound processes and a
    parallel compile: more runnable threads than CPUs, so the agent waits
    for a CPU, shares caches, and sees processes come and go."""
    ncpu = os.cpu_count()
    split = os.path.join(B, "workloads", "cpu_split")
    busy = subprocess.Popen([split, str(seconds + 5), str(ncpu)], stdout=subprocess.DEVNULL)
    # Its own process group: its children are ended with it (killpg).
    many = subprocess.Popen([os.path.join(B, "bench", "many"), str(procs), str(seconds + 5)],
                            start_new_session=True)
    ws = [busy, many]
    if load:
        for _ in range(2):
            ws.append(subprocess.Popen([split, str(seconds + 5), "1"], stdout=subprocess.DEVNULL))
        ws.append(subprocess.Popen(["sh", "-c", COMPILE.format(root=ROOT)],
                                   start_new_session=True))
    time.sleep(2)  # let the processes start
    return ws


def stop_workload(ws):
    for w in ws:
        try:  # many's children, the compile loop's compilers: their group
            os.killpg(w.pid, signal.SIGKILL) if os.getpgid(w.pid) == w.pid else w.kill()
        except ProcessLookupError:
            pass
    for w in ws:
        w.wait()


def run_agent(seconds, tmp, ship=False, agent=AGENT):
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
        return measure_agent(seconds, out, agent)
    finally:
        if srv:
            srv.terminate()
            srv.wait()


def measure_agent(seconds, out, agent=AGENT):
    a = subprocess.Popen([agent, "--interval", str(seconds), *out],
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
    th0, wk0 = thread_cpu(a.pid)
    w0 = time.monotonic()
    t0, n0 = bpf_prog_stats(prog)
    f0, m0 = forks(), time.monotonic()
    time.sleep(max(0, start + 2 * seconds - 0.2 - time.monotonic()))
    t1, n1 = bpf_prog_stats(prog)
    f1, m1 = forks(), time.monotonic()
    for which in ("first", "second"):
        if not windows.acquire(timeout=seconds * 10):
            raise RuntimeError(f"no {which} window")
    c1 = proc_cpu(a.pid)
    th1, wk1 = thread_cpu(a.pid)
    w1 = time.monotonic()
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
    # What the measured (second) window read of /proc (builds that log it).
    second = [x for x in rest if " window: processes=" in x][1]
    reads = {k: int(v) / seconds for k, v in
             re.findall(r" (maps_reads|identity_reads)=(\d+)", second)}
    # The measured window's writing: the worker's CPU over its profiles.
    wr = {k: int(v) for k, v in re.findall(r" (profiles|cpu_ms)=(\d+)", second)}
    samples = n1 - n0  # every run of the program is a sample (idle ones return at once)
    return {"cpu_s": c1 - c0, "samples": samples, "bpf_ns": (t1 - t0) / max(samples, 1),
            "rss_mib": hwm / 1024, "procs": nprocs, "forks_per_s": (f1 - f0) / (m1 - m0),
            "wakeups_per_s": (wk1 - wk0) / (w1 - w0),
            "maps_reads_per_s": reads.get("maps_reads"),
            "identity_reads_per_s": reads.get("identity_reads"),
            "window_profiles": wr.get("profiles"), "window_cpu_ms": wr.get("cpu_ms"),
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


def run_pagetouch(seconds, tmp):
    """What this machine charges for a page touched after a sleep, in the
    machine's state (bench/pagetouch.c): the agent sleeps between wakeups
    and pays it on every distinct page a wakeup reads. Not a sample rate:
    samples 1 so the common code runs."""
    out = subprocess.run([os.path.join(B, "bench", "pagetouch"), "40", "5000", "2"],
                         capture_output=True, text=True, check=True).stdout
    got = {m.group(1): int(m.group(2)) for m in re.finditer(r"pagetouch (\S+) ns=(\d+)", out)}
    return {"cpu_s": 0, "samples": 1, "bpf_ns": None, "rss_mib": 0, "touch_ns": got}


def by_thread(rows):
    names = sorted({k for r in rows for k in r.get("threads_us", {})})
    short = {"cx-worker": "worker", "cx-ship": "upload",
             "cx-unwind": "tables", "cx-debuginfod": "debuginfod"}
    return ", ".join(f"{short.get(n, n)} {statistics.median(r['threads_us'].get(n, 0) for r in rows):.1f}"
                     for n in names)


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, f="{:.1f}"):
    return "-" if v is None else f.format(v)


def spread(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return f" ({min(vals):.1f}-{max(vals):.1f})" if len(vals) > 1 else ""


def ratio(a, b, f="{:.1f}x"):
    return "-" if a is None or not b else f.format(a / b)


def report(results, machines, args):
    """Markdown: one column a machine, medians (ranges for the agent)."""
    cols = {m: results[m] for m in machines}

    def row(label, fn):
        return f"| {label} | " + " | ".join(fn(r) for r in cols.values()) + " |"

    def us(name):
        return lambda r: (fmt(med(r[name], "us_per_sample")) + " µs" +
                          spread(r[name], "us_per_sample")) if r[name] else "-"

    def bpf(name):
        return lambda r: fmt(med(r[name], "bpf_ns") and med(r[name], "bpf_ns") / 1000, "{:.2f}") + " µs"

    def rss(name):
        return lambda r: fmt(med(r[name], "rss_mib")) + " MiB"

    def touch(r):
        rows = [x["touch_ns"] for x in r["pagetouch"]]
        if not rows:
            return "-"
        return ", ".join(f"{statistics.median(x.get(k, 0) for x in rows):.0f} ns"
                         for k in ("4k_after_sleep", "2m_after_sleep", "4k_no_sleep"))

    lines = [
        f"# make bench: the agent against perf and bpftrace, {os.cpu_count()} CPUs, "
        f"{args.procs} light processes, {args.seconds} s measured a run (the agent: one whole "
        f"--interval {args.seconds} window after a first), medians of {args.reps}",
        "",
        "quiet: every CPU busy (cpu_split) + the light processes; loaded: the same + two more "
        "CPU-bound processes + a parallel compile (two gcc at a time, over and over). The agent "
        "ships to a codexray-server on loopback (as a fleet runs it; the server's CPU is not "
        "counted) or writes files (--output-dir).",
        "",
        "| measure | " + " | ".join(cols) + " |",
        "|---|" + "---|" * len(cols),
        row("agent, shipping: user-space CPU per sample", us("agent-ship")),
        row("agent, --output-dir: user-space CPU per sample", us("agent")),
        row("perf record -g -a + perf script: user-space CPU per sample", us("perf")),
        row("bpftrace profile:hz:100: user-space CPU per sample", us("bpftrace")),
        row("perf / agent (shipping)", lambda r: ratio(med(r["perf"], "us_per_sample"),
                                                      med(r["agent-ship"], "us_per_sample"))),
        row("bpftrace / agent (shipping)", lambda r: ratio(med(r["bpftrace"], "us_per_sample"),
                                                          med(r["agent-ship"], "us_per_sample"))),
        row("agent, shipping, by thread (µs a sample)", lambda r: by_thread(r["agent-ship"])),
        row("agent, --output-dir, by thread (µs a sample)", lambda r: by_thread(r["agent"])),
        row("agent's main thread wakeups a second (shipping)",
            lambda r: fmt(med(r["agent-ship"], "wakeups_per_s"), "{:.0f}")),
        row("agent's reads of /proc a second: maps, identities (shipping)",
            lambda r: fmt(med(r["agent-ship"], "maps_reads_per_s"), "{:.0f}") + ", " +
            fmt(med(r["agent-ship"], "identity_reads_per_s"), "{:.0f}")),
        row("processes started a second on the machine",
            lambda r: fmt(med(r["agent-ship"], "forks_per_s"), "{:.0f}")),
        row("processes in the agent's window", lambda r: fmt(med(r["agent-ship"], "procs"), "{:.0f}")),
        row("BPF time per sample: agent (shipping)", bpf("agent-ship")),
        row("BPF time per sample: bpftrace", bpf("bpftrace")),
        row("BPF time per sample: agent / bpftrace",
            lambda r: ratio(med(r["agent-ship"], "bpf_ns"), med(r["bpftrace"], "bpf_ns"), "{:.2f}")),
        row("samples a run (agent, shipping)", lambda r: fmt(med(r["agent-ship"], "samples"), "{:.0f}")),
        row("peak RSS: agent shipping", rss("agent-ship")),
        row("peak RSS: agent --output-dir", rss("agent")),
        row("peak RSS: perf", rss("perf")),
        row("peak RSS: bpftrace", rss("bpftrace")),
        row("a random read of 40 MiB after a 5 ms sleep: 4 KiB pages, 2 MiB pages, "
            "no sleep (bench/pagetouch.c)", touch),
        "",
        "Targets (issue 36): on the loaded machine, the agent (shipping) <= 5 µs of user-space CPU "
        "a sample and >= 10x cheaper than perf; BPF time per sample <= bpftrace's; peak RSS "
        "<= 64 MiB with 500 processes.",
    ]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=60,
                    help="measured span; also the agent's --interval (default 60, its default)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--machine", choices=("quiet", "loaded", "both"), default="both",
                    help="the quiet machine, the loaded one, or both side by side (default)")
    ap.add_argument("--agent", default=AGENT,
                    help="the agent's binary (another build, to compare two side by side with "
                         "--only)")
    ap.add_argument("--only", default="",
                    help="comma-separated subset of agent,agent-ship,perf,bpftrace,pagetouch (a quick look; "
                         "no report is written)")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    machines = ("quiet", "loaded") if args.machine == "both" else (args.machine,)
    if os.geteuid() != 0:
        sys.exit("bench: needs root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    results = {m: {"agent": [], "agent-ship": [], "perf": [], "bpftrace": [], "pagetouch": []}
               for m in machines}
    runs = (("agent", lambda s, t: run_agent(s, t, False, args.agent)),
            ("agent-ship", lambda s, t: run_agent(s, t, True, args.agent)),
            ("perf", run_perf), ("bpftrace", run_bpftrace), ("pagetouch", run_pagetouch))
    try:
        with tempfile.TemporaryDirectory(prefix="cx-bench-") as tmp:
            # Machines alternate within each rep: a drift of the host's own
            # load falls on both columns alike.
            for rep in range(args.reps):
                for machine in machines:
                    for name, fn in runs:
                        if only and name not in only:
                            continue
                        ws = start_workload(4 * args.seconds + 60, args.procs,
                                            machine == "loaded")
                        try:
                            r = fn(args.seconds, tmp)
                        finally:
                            stop_workload(ws)
                        r["us_per_sample"] = 1e6 * r["cpu_s"] / max(r["samples"], 1)
                        results[machine][name].append(r)
                        print(f"rep {rep + 1} {machine} {name}: {r}", file=sys.stderr, flush=True)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)

    if only:
        for m in machines:
            for name, rows in results[m].items():
                if rows and name == "pagetouch":
                    print(f"{m} pagetouch: " + ", ".join(
                        f"{k} {statistics.median(r['touch_ns'].get(k, 0) for r in rows):.0f} ns"
                        for k in ("4k_after_sleep", "2m_after_sleep", "4k_no_sleep")))
                elif rows:
                    print(f"{m} {name}: {fmt(med(rows, 'us_per_sample'))} µs a sample"
                          f"{spread(rows, 'us_per_sample')}; by thread {by_thread(rows)}; "
                          f"wakeups/s {fmt(med(rows, 'wakeups_per_s'), '{:.0f}')}; "
                          f"/proc reads/s maps {fmt(med(rows, 'maps_reads_per_s'), '{:.0f}')} "
                          f"identity {fmt(med(rows, 'identity_reads_per_s'), '{:.0f}')}; "
                          f"forks/s {fmt(med(rows, 'forks_per_s'), '{:.0f}')}")
        return
    text = report(results, machines, args)
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", "report.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
