#!/usr/bin/env python3
"""What walking and naming HotSpot's Java frames costs (issue 33): a JVM
with no flag (its frames walked in BPF from its VMStructs, named from its
metadata) against a JVM on the perf-map path (-XX:+PreserveFramePointer,
CODEXRAY_JAVA_WALK=off: a frame-pointer walk, names from the perf map the
JVM writes when asked), both running tests/workloads/JitSplit.java side by
side, each recorded by its own `record --pid` at the same time (which
starts first alternates). Per pair: BPF ns per sample (the sampler's run
time over the samples of its process, as bench/py_bench.py counts it),
frames per sample, and the agent's CPU per sample while both ran.
With --base-agent, a third JVM with no flag recorded at the same time by
that agent binary (another build: the namer before a change).

    python3 bench/java_bench.py [--seconds 10] [--pairs 3] [--base-agent PATH]
"""
import argparse
import os
import re
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import bpf_prog_stats, proc_cpu  # noqa: E402  (bench/run.py)
import cfi_bench  # noqa: E402
from pprof_read import traces  # noqa: E402
import java_tests  # noqa: E402


def agent_start(agent, pid, seconds, out):
    saved = cfi_bench.AGENT
    cfi_bench.AGENT = agent
    try:
        return cfi_bench.agent_start(pid, seconds, "cfi", out)
    finally:
        cfi_bench.AGENT = saved


def pair(seconds, walk_first, tmp, base_agent=None):
    span = seconds + 12
    jw = java_tests.start_java(tmp, [], span)
    jp = java_tests.start_java(tmp, ["-XX:+PreserveFramePointer"], span,
                               env=java_tests.WALK_OFF)
    jb = java_tests.start_java(tmp, [], span) if base_agent else None
    try:
        time.sleep(4)  # compiled; the perf-map JVM old enough to be asked for its map
        order = [("walk", jw.pid, cfi_bench.AGENT), ("perfmap", jp.pid, cfi_bench.AGENT)]
        if jb:
            order.append(("base", jb.pid, base_agent))
        if not walk_first:
            order.reverse()
        runs = {}
        for name, pid, agent in order:
            out = os.path.join(tmp, f"{name}.pb.gz")
            a, prog, t = agent_start(agent, pid, seconds, out)
            runs[name] = {"proc": a, "prog": prog, "start": t, "out": out}
        first = min(r["start"] for r in runs.values())
        last = max(r["start"] for r in runs.values())
        time.sleep(max(last + 1.0 - time.monotonic(), 0))
        t0 = time.monotonic()
        s0 = {k: (bpf_prog_stats(r["prog"]), proc_cpu(r["proc"].pid)) for k, r in runs.items()}
        time.sleep(max(first + seconds - 1.0 - time.monotonic(), 1.0))
        t1 = time.monotonic()
        s1 = {k: (bpf_prog_stats(r["prog"]), proc_cpu(r["proc"].pid)) for k, r in runs.items()}
        res = {}
        for k, r in runs.items():
            log = r["proc"].stderr.read()
            r["proc"].wait()
            m = re.search(r"record: wrote .* samples=(\d+)", log)
            samples = int(m.group(1)) if m else 0
            in_window = max(samples * (t1 - t0) / seconds, 1)
            ts = traces(r["out"])
            n = max(sum(t.count for t in ts), 1)
            res[k] = {"bpf_ns": (s1[k][0][0] - s0[k][0][0]) / in_window,
                      "cpu_us": 1e6 * (s1[k][1] - s0[k][1]) / in_window,
                      "frames": sum(len(t.frames) * t.count for t in ts) / n,
                      "samples": samples}
        return res
    finally:
        for w in (jw, jp, jb):
            if w:
                java_tests.stop_java(w)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--base-agent", help="another agent binary, recording a third JVM")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    rs = []
    try:
        with tempfile.TemporaryDirectory(prefix="cx-java-bench-") as tmp:
            for i in range(args.pairs):
                r = pair(args.seconds, i % 2 == 0, tmp, args.base_agent)
                rs.append(r)
                print(f"pair {i + 1}: {r}", file=sys.stderr, flush=True)
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)
    med = statistics.median
    ratios = [r["walk"]["bpf_ns"] / r["perfmap"]["bpf_ns"] for r in rs]
    print(f"\n## Java (bench/java_bench.py, {time.strftime('%Y-%m-%d')}, load "
          f"{os.getloadavg()[0]:.1f})\n")
    print("| JitSplit, side by side | BPF µs per sample | frames per sample | agent CPU µs per "
          "sample |")
    print("|---|---|---|---|")
    rows = [("walk", "no flag: Java frames walked from VMStructs"),
            ("perfmap", "-XX:+PreserveFramePointer, walk off: perf map")]
    if args.base_agent:
        rows.append(("base", f"no flag, agent {os.path.basename(args.base_agent)}"))
    for k, label in rows:
        print(f"| {label} | {med([r[k]['bpf_ns'] for r in rs]) / 1e3:.2f} | "
              f"{med([r[k]['frames'] for r in rs]):.1f} | "
              f"{med([r[k]['cpu_us'] for r in rs]):.1f} |")
    print(f"\nBPF time walked / perf-map path: {med(ratios):.2f} (median of {len(rs)} pairs; "
          f"{min(ratios):.2f}-{max(ratios):.2f})")
    cpu = [r["walk"]["cpu_us"] / max(r["perfmap"]["cpu_us"], 1e-9) for r in rs]
    print(f"agent CPU walked / perf-map path: {med(cpu):.2f} (pairs {min(cpu):.2f}-"
          f"{max(cpu):.2f})")
    if args.base_agent:
        base = [r["walk"]["cpu_us"] / max(r["base"]["cpu_us"], 1e-9) for r in rs]
        print(f"agent CPU walked / {os.path.basename(args.base_agent)}: {med(base):.2f} "
              f"(pairs {min(base):.2f}-{max(base):.2f})")


if __name__ == "__main__":
    main()
