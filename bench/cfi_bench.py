#!/usr/bin/env python3
"""make bench, CFI part: what walking stacks by CFI tables costs, side by side
with the frame-pointer walk and with `perf record --call-graph dwarf`, on the
same workload in the same run.

Workload: bench/deep, one thread per CPU spinning 30 frames deep (built with
frame pointers, so both walks see the same frames).
  - BPF time per sample: the agent's `record --pid` with --unwind fp and
    with --unwind cfi, alternated REPS times (kernel.bpf_stats_enabled);
  - user-space CPU per sample of the agent (cfi) and of perf record
    --call-graph dwarf plus perf script, and perf.data bytes per sample;
  - table size and build time for libc, libjvm and the largest binary
    found (build/bench/cfi_build), and the tables a whole-node recording
    loads.

    python3 bench/cfi_bench.py [--seconds 10] [--reps 5] [--depth 30]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
AGENT = os.path.join(B, "codexray-node-agent")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # first: run is bench/run.py
from run import bpf_prog_stats  # noqa: E402  (bench/run.py)
from pprof_read import traces  # noqa: E402


def start_deep(seconds, depth):
    return subprocess.Popen([os.path.join(B, "bench", "deep"), str(seconds), str(depth),
                             str(os.cpu_count())])


def agent_run(pid, seconds, mode, tmp):
    """One `record --pid`: BPF ns per run of the sampler (from the stats,
    read just before it ends; every CPU is busy with the workload, so nearly
    every run is one of its samples), samples, mean frames per sample."""
    out = os.path.join(tmp, f"rec-{mode}.pb.gz")
    a = subprocess.Popen([AGENT, "record", "--duration", str(seconds), "--pid", str(pid),
                          "--output", out, "--unwind", mode], stderr=subprocess.PIPE, text=True)
    prog = None
    while prog is None:
        line = a.stderr.readline()
        if not line:
            raise RuntimeError("agent record ended before it started")
        m = re.search(r"record: .*bpf_prog_id=(\d+)", line)
        if m:
            prog = int(m.group(1))
    t0, n0 = bpf_prog_stats(prog)
    time.sleep(seconds - 0.5)
    t1, n1 = bpf_prog_stats(prog)
    rest = a.stderr.read()
    a.wait()
    m = re.search(r"samples=(\d+)", rest)
    samples = int(m.group(1)) if m else 0
    ts = traces(out)
    frames = sum(len(t.frames) * t.count for t in ts) / max(sum(t.count for t in ts), 1)
    return {"bpf_ns": (t1 - t0) / max(n1 - n0, 1), "samples": samples, "frames": frames}


def run_measured(argv, **kw):
    p = subprocess.Popen(argv, **kw)
    _, status, ru = os.wait4(p.pid, 0)
    return ru.ru_utime + ru.ru_stime


def agent_cpu_run(pid, seconds, tmp):
    """The agent's own CPU (user + sys) for one cfi recording, naming and
    writing included."""
    out = os.path.join(tmp, "rec-cpu.pb.gz")
    p = subprocess.Popen([AGENT, "record", "--duration", str(seconds), "--pid", str(pid),
                          "--output", out], stderr=subprocess.PIPE, text=True)
    log = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    m = re.search(r"record: wrote .* samples=(\d+)", log)
    return ru.ru_utime + ru.ru_stime, int(m.group(1)) if m else 0


def perf_run(pid, seconds, tmp):
    data = os.path.join(tmp, "perf.data")
    rec = run_measured(["perf", "record", "-q", "-e", "cpu-clock", "-F", "100",
                        "--call-graph", "dwarf", "-p", str(pid), "-o", data, "--", "sleep",
                        str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    script = os.path.join(tmp, "perf.script")
    with open(script, "w") as f:
        scr = run_measured(["perf", "script", "-i", data], stdout=f, stderr=subprocess.DEVNULL)
    with open(script) as f:
        samples = sum(1 for line in f if line.strip() and not line[0].isspace())
    return {"record_cpu_s": rec, "script_cpu_s": scr, "samples": samples,
            "bytes": os.path.getsize(data)}


def largest_elf():
    """The biggest ELF shared object or executable under the usual places."""
    best, size = None, 0
    for d in ("/usr/bin", "/usr/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib/chromium",
              "/usr/lib/jvm"):
        for root, _, files in os.walk(d):
            for n in files:
                p = os.path.join(root, n)
                try:
                    if os.path.islink(p) or not os.path.isfile(p):
                        continue
                    s = os.path.getsize(p)
                    if s > size:
                        with open(p, "rb") as f:
                            if f.read(4) == b"\x7fELF":
                                best, size = p, s
                except OSError:
                    pass
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--depth", type=int, default=30)
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    # dive(depth - 3) plus spin, thread_main, start_thread and clone3: depth frames.
    recursion = args.depth - 4
    rows = {"fp": [], "cfi": []}
    lines = []
    try:
        with tempfile.TemporaryDirectory(prefix="cx-cfi-bench-") as tmp:
            span = args.reps * 2 * (args.seconds + 3) + 6 * (args.seconds + 5) + 30
            w = start_deep(span, recursion)
            try:
                time.sleep(1)
                for rep in range(args.reps):
                    for mode in ("fp", "cfi") if rep % 2 == 0 else ("cfi", "fp"):
                        r = agent_run(w.pid, args.seconds, mode, tmp)
                        rows[mode].append(r)
                        print(f"rep {rep + 1} {mode}: {r}", file=sys.stderr, flush=True)
                # Each at S and 2S seconds: the difference is the cost per
                # sample without the fixed part (loading symbols, tables).
                a1 = agent_cpu_run(w.pid, args.seconds, tmp)
                a2 = agent_cpu_run(w.pid, 2 * args.seconds, tmp)
                p1 = perf_run(w.pid, args.seconds, tmp)
                p2 = perf_run(w.pid, 2 * args.seconds, tmp)
                print(f"agent {a1} {a2}; perf {p1} {p2}", file=sys.stderr)
            finally:
                w.kill()
                w.wait()
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)

    fp_ns = statistics.median(r["bpf_ns"] for r in rows["fp"])
    cfi_ns = statistics.median(r["bpf_ns"] for r in rows["cfi"])
    ratios = sorted(c["bpf_ns"] / f["bpf_ns"] for c, f in zip(rows["cfi"], rows["fp"]))
    fp_frames = statistics.median(r["frames"] for r in rows["fp"])
    cfi_frames = statistics.median(r["frames"] for r in rows["cfi"])
    a_us = 1e6 * a1[0] / max(a1[1], 1)
    a_marg = 1e6 * (a2[0] - a1[0]) / max(a2[1] - a1[1], 1)

    def pcpu(p):
        return p["record_cpu_s"] + p["script_cpu_s"]
    pf = p1
    p_us = 1e6 * pcpu(p1) / max(p1["samples"], 1)
    p_marg = 1e6 * (pcpu(p2) - pcpu(p1)) / max(p2["samples"] - p1["samples"], 1)
    lines += [
        f"# make bench, CFI: bench/deep, {os.cpu_count()} threads {args.depth} frames deep, "
        f"{args.seconds} s a run, median of {args.reps} (fp and cfi alternated)",
        "",
        "| walk | BPF time per sample | frames per sample |",
        "|---|---|---|",
        f"| frame pointers (--unwind fp) | {fp_ns / 1000:.2f} µs | {fp_frames:.1f} |",
        f"| CFI tables (--unwind cfi) | {cfi_ns / 1000:.2f} µs | {cfi_frames:.1f} |",
        "",
        f"- CFI / frame pointers = {cfi_ns / fp_ns:.2f} (per-rep ratios "
        f"{', '.join(f'{x:.2f}' for x in ratios)}; target <= 2.0)",
        "",
        f"| profiler | user-space CPU per sample, {args.seconds} s run | each sample more "
        f"(the {2 * args.seconds} s run minus it) | data per sample |",
        "|---|---|---|---|",
        f"| codexray-node-agent record (cfi) | {a_us:.1f} µs | {a_marg:.1f} µs "
        f"| none kept (BPF time above) |",
        f"| perf record --call-graph dwarf + perf script | {p_us:.1f} µs "
        f"(record {1e6 * pf['record_cpu_s'] / max(pf['samples'], 1):.1f}, script "
        f"{1e6 * pf['script_cpu_s'] / max(pf['samples'], 1):.1f}) | {p_marg:.1f} µs "
        f"| {pf['bytes'] / max(pf['samples'], 1) / 1024:.1f} KiB of perf.data |",
        "",
        f"- perf --call-graph dwarf / agent = {p_us / a_us:.1f}x user-space CPU per sample "
        f"({p_marg / max(a_marg, 1e-9):.1f}x for each sample more)",
    ]

    # Tables: size and build time per binary.
    tool = os.path.join(B, "bench", "cfi_build")
    bins = ["/usr/lib/x86_64-linux-gnu/libc.so.6"]
    bins += sorted(p for p in (os.path.join(r, "libjvm.so") for r, _, f in os.walk("/usr/lib/jvm")
                               if "libjvm.so" in f))[:1]
    big = largest_elf()
    if big and big not in bins:
        bins.append(big)
    out = subprocess.run([tool, *bins], capture_output=True, text=True) if os.path.exists(tool) \
        else subprocess.CompletedProcess([], 1, "", f"{tool}: not built")
    lines += ["", "## Tables (build/bench/cfi_build, median of 5 builds)", "", "```",
              out.stdout.rstrip() or out.stderr.rstrip(), "```"]

    # What a whole-node recording loads.
    rec = subprocess.run([AGENT, "record", "--duration", "3", "--output",
                          os.path.join(B, "bench", "cfi-node.pb.gz")], capture_output=True,
                         text=True, timeout=300)
    m = re.search(r"unwind_tables=(\d+) unwind_table_bytes=(\d+)", rec.stderr)
    if m:
        n, by = int(m.group(1)), int(m.group(2))
        lines += ["", f"- a whole-node recording here loads {n} tables, {by / 1024 / 1024:.1f} "
                  f"MiB ({by / max(n, 1) / 1024:.0f} KiB a binary on average; cap "
                  f"--unwind-tables-max-mb 128)"]
    report = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", "cfi_report.md"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
