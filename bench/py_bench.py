#!/usr/bin/env python3
"""make bench, Python part: what walking and naming CPython frames costs.

1. BPF time per sample of a Python stack 30 frames deep (bench/py_deep.py:
   a pure-Python loop under a recursion) against the CFI walk of a native
   stack 30 frames deep (bench/deep), measured in the same run: the two
   workloads run side by side, one process each, and two `record --pid`
   run at once, one on each; which starts first alternates. BPF ns per
   sample is the sampler's run time over the samples of its process (the
   runs that find another process on the CPU return at once and are counted
   in the run time too, alike for both). Per interpreter: up to 3.10 every
   Python frame is one native evaluation frame with its native callers (the
   walk goes through all of them), from 3.11 on Python calls Python without
   a native frame.
2. Naming: 50 Python processes running a mix of standard-library code at a
   low CPU share each, the agent on the whole node with 10 s windows: its
   CPU per sample, its RSS, the code objects it holds and read.
3. Side by side with perf on the same process at the same time: perf record
   (frame pointers, and --call-graph dwarf) of python3.12 -X perf (the
   interpreter's perf-map trampolines name Python functions for perf):
   which share of samples shows the whole Python stack, and what perf
   record and perf script cost per sample.

    python3 bench/py_bench.py [--seconds 10] [--pairs 5] [--depth 30] [--procs 50]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
AGENT = os.path.join(B, "codexray-node-agent")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import bpf_prog_stats, proc_cpu  # noqa: E402  (bench/run.py)
from cfi_bench import agent_start  # noqa: E402
from pprof_read import traces  # noqa: E402

DEEP_PY = os.path.join(ROOT, "bench", "py_deep.py")
MIX_PY = os.path.join(ROOT, "bench", "py_mix.py")


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def pyenv_root():
    for d in (os.environ.get("PYENV_ROOT"), os.path.expanduser("~/.pyenv"), "/root/.pyenv"):
        if d and os.path.isdir(os.path.join(d, "versions")):
            return d
    return None


def interpreter(minor):
    """pyenv's python3.MINOR binary (not its shim, which forks), or None."""
    root = pyenv_root()
    if not root:
        return None
    for v in sorted(os.listdir(os.path.join(root, "versions")), reverse=True):
        p = os.path.join(root, "versions", v, "bin", f"python3.{minor}")
        if v.startswith(f"3.{minor}.") and os.access(p, os.X_OK):
            return p
    return None


# --- 1. BPF time per sample ---------------------------------------------------

def pair(py, seconds, depth, py_first, tmp):
    """A Python and a native workload side by side, each recorded by its own
    agent at the same time. BPF ns per sample and frames per sample of each."""
    span = seconds + 8
    pw = subprocess.Popen([py, DEEP_PY, str(span), str(depth)])
    cw = subprocess.Popen([os.path.join(B, "bench", "deep"), str(span), str(depth - 5), "1"])
    try:
        time.sleep(1)
        order = [("py", pw.pid), ("c", cw.pid)]
        if not py_first:
            order.reverse()
        runs = {}
        for name, pid in order:
            out = os.path.join(tmp, f"{name}.pb.gz")
            a, prog, t = agent_start(pid, seconds, "cfi", out)
            runs[name] = {"proc": a, "prog": prog, "start": t, "out": out}
        first = min(r["start"] for r in runs.values())
        last = max(r["start"] for r in runs.values())
        time.sleep(max(last + 1.0 - time.monotonic(), 0))
        t0 = time.monotonic()
        s0 = {k: bpf_prog_stats(r["prog"]) for k, r in runs.items()}
        time.sleep(max(first + seconds - 1.0 - time.monotonic(), 1.0))
        t1 = time.monotonic()
        s1 = {k: bpf_prog_stats(r["prog"]) for k, r in runs.items()}
        res = {}
        for k, r in runs.items():
            log = r["proc"].stderr.read()
            r["proc"].wait()
            m = re.search(r"record: wrote .* samples=(\d+)", log)
            samples = int(m.group(1)) if m else 0
            in_window = samples * (t1 - t0) / seconds
            ts = traces(r["out"])
            n = max(sum(t.count for t in ts), 1)
            res[k] = {"bpf_ns": (s1[k][0] - s0[k][0]) / max(in_window, 1),
                      "frames": sum(len(t.frames) * t.count for t in ts) / n,
                      "py_frames": sum(sum(1 for f in t.frames if f in ("dive", "spin", "main",
                                                                        "<module>")) * t.count
                                       for t in ts) / n,
                      "samples": samples}
        return res
    finally:
        for w in (pw, cw):
            w.kill()
            w.wait()


def bpf_part(args, tmp):
    out = []
    for label, py in (("3.10", interpreter(10)), ("3.11 (Debian)", "/usr/bin/python3"),
                      ("3.12", interpreter(12)), ("3.13", interpreter(13))):
        if not py or not os.access(py, os.X_OK):
            print(f"python {label}: not installed, skipped", file=sys.stderr)
            continue
        rs = []
        for i in range(args.pairs):
            r = pair(py, args.seconds, args.depth, i % 2 == 0, tmp)
            rs.append(r)
            print(f"python {label} pair {i + 1}: py {r['py']['bpf_ns'] / 1e3:.2f} µs "
                  f"({r['py']['frames']:.1f} frames, {r['py']['py_frames']:.1f} Python), "
                  f"native {r['c']['bpf_ns'] / 1e3:.2f} µs ({r['c']['frames']:.1f} frames), "
                  f"ratio {r['py']['bpf_ns'] / r['c']['bpf_ns']:.2f}", file=sys.stderr, flush=True)
        out.append((label, rs))
    return out


# --- 2. naming on a node of Python processes ----------------------------------

def naming_part(args, tmp):
    """The agent's steady cost: CPU from the end of its 2nd window to the end
    of its last, over the samples of the windows between (the first windows
    pay for loading symbols, tables and reading every code object once)."""
    py = interpreter(11) or "/usr/bin/python3"
    duty = min(0.03, 1.5 / args.procs)
    procs = [subprocess.Popen([py, MIX_PY, str(args.windows * 10 + 40), str(duty)])
             for _ in range(args.procs)]
    lines = []
    try:
        time.sleep(2)
        outdir = os.path.join(tmp, "naming")
        os.makedirs(outdir)
        a = subprocess.Popen([AGENT, "--output-dir", outdir, "--interval", "10", "--log-level",
                              "debug"], stderr=subprocess.PIPE, text=True)
        reader = threading.Thread(target=lambda: lines.extend(a.stderr), daemon=True)
        reader.start()

        def wait_windows(n):
            while sum("window: processes=" in x for x in list(lines)) < n:
                time.sleep(0.2)
            return proc_cpu(a.pid)
        c2 = wait_windows(2)
        cn = wait_windows(args.windows)
        with open(f"/proc/{a.pid}/status") as f:
            rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024
        a.terminate()
        _, _, ru = os.wait4(a.pid, 0)
        reader.join(5)
    finally:
        for p in procs:
            p.kill()
            p.wait()
    log = "".join(lines)
    windows = re.findall(r"window: processes=(\d+) samples=(\d+) .*?unnamed_frames=([\d.]+)% "
                         r".*?python_frames=([\d.]+)% .*?cpu_ms=(\d+)", log)
    codes = [tuple(int(x) for x in m) for m in
             re.findall(r"python: code_objects=(\d+) code_bytes=(\d+) reads=(\d+) "
                        r"read_failures=(\d+) read_ms=(\d+)", log)]
    steady = windows[2:args.windows]
    samples = sum(int(w[1]) for w in steady)
    return {"procs": args.procs, "duty": duty, "interp": py, "windows": len(windows),
            "samples": samples, "cpu_s": cn - c2,
            "cpu_us_per_sample": 1e6 * (cn - c2) / max(samples, 1), "rss_mib": rss,
            "peak_mib": ru.ru_maxrss / 1024,
            "python_frames": [float(w[3]) for w in windows],
            "unnamed": [float(w[2]) for w in windows],
            "worker_cpu_ms": [int(w[4]) for w in windows],
            "codes": max(codes, default=(0, 0, 0, 0, 0), key=lambda c: c[1]),
            "reads": [c[2] for c in codes], "read_ms": [c[4] for c in codes]}


# --- 3. perf on the same process --------------------------------------------------

def perf_part(args, tmp):
    py = interpreter(12) or interpreter(13)
    if not py:
        return None
    secs = args.seconds
    res = {}
    for mode in ("fp", "dwarf"):
        w = subprocess.Popen([py, "-X", "perf", DEEP_PY, str(secs + 8), str(args.depth)])
        try:
            time.sleep(1)
            data = os.path.join(tmp, f"perf-{mode}.data")
            perf = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "100",
                                     "--call-graph", mode, "-p", str(w.pid), "-o", data, "--",
                                     "sleep", str(secs)], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            out = os.path.join(tmp, f"agent-{mode}.pb.gz")
            a = subprocess.run([AGENT, "record", "--duration", str(secs - 2), "--pid", str(w.pid),
                                "--output", out], capture_output=True, text=True)
            _, _, pru = os.wait4(perf.pid, 0)
        finally:
            w.kill()
            w.wait()
        script = data + ".txt"
        with open(script, "w") as f:
            s = subprocess.Popen(["perf", "script", "-i", data], stdout=f,
                                 stderr=subprocess.DEVNULL)
            _, _, sru = os.wait4(s.pid, 0)
        with open(script) as f:
            blocks = f.read().split("\n\n")
        want = args.depth - 1  # dive x (depth - 3), spin, main: <module> is not a function to perf
        perf_n = perf_whole = 0
        for b in blocks:
            if not b.strip():
                continue
            perf_n += 1
            py_frames = len(re.findall(r"py::(?:dive|spin|main):", b))
            perf_whole += py_frames >= want
        ts = traces(out)
        n = sum(t.count for t in ts)
        whole = sum(t.count for t in ts
                    if sum(1 for f in t.frames if f in ("dive", "spin", "main")) >= want)
        res[mode] = {"perf_samples": perf_n, "perf_whole": perf_whole,
                     "perf_record_cpu_s": pru.ru_utime + pru.ru_stime,
                     "perf_script_cpu_s": sru.ru_utime + sru.ru_stime,
                     "perf_bytes": os.path.getsize(data),
                     "agent_samples": n, "agent_whole": whole, "agent_ok": a.returncode == 0}
        print(f"perf {mode}: {res[mode]}", file=sys.stderr, flush=True)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--procs", type=int, default=50)
    ap.add_argument("--windows", type=int, default=6, help="10 s windows of the naming part")
    ap.add_argument("--parts", default="bpf,naming,perf", help="which parts to run")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("bench: needs root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        with tempfile.TemporaryDirectory(prefix="cx-py-bench-") as tmp:
            parts = args.parts.split(",")
            bpf = bpf_part(args, tmp) if "bpf" in parts else []
            naming = naming_part(args, tmp) if "naming" in parts else None
            print(f"naming: {naming}", file=sys.stderr, flush=True)
            perf = perf_part(args, tmp) if "perf" in parts else None
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)

    print(f"\n## Python (bench/py_bench.py, {time.strftime('%Y-%m-%d')}, load "
          f"{os.getloadavg()[0]:.1f})\n")
    print(f"BPF time per sample, a Python stack {args.depth} frames deep against a native one "
          f"{args.depth} deep (CFI), side by side, {args.pairs} pairs each, medians:\n")
    print("| interpreter | Python µs | frames (Python) | native µs | frames | ratio (median of "
          "pairs) | range |")
    print("|---|---|---|---|---|---|---|")
    for label, rs in bpf:
        ratios = [r["py"]["bpf_ns"] / r["c"]["bpf_ns"] for r in rs]
        print(f"| {label} | {med([r['py']['bpf_ns'] for r in rs]) / 1e3:.2f} | "
              f"{med([r['py']['frames'] for r in rs]):.0f} "
              f"({med([r['py']['py_frames'] for r in rs]):.0f}) | "
              f"{med([r['c']['bpf_ns'] for r in rs]) / 1e3:.2f} | "
              f"{med([r['c']['frames'] for r in rs]):.0f} | {med(ratios):.2f} | "
              f"{min(ratios):.2f}-{max(ratios):.2f} |")
    n = naming
    if n:
        print(f"\nNaming: {n['procs']} processes of bench/py_mix.py ({os.path.basename(n['interp'])}, "
              f"{100 * n['duty']:.0f} % CPU each), the agent on the whole node, 10 s windows: "
              f"steady (windows 3 to {n['windows']}, {n['samples']} samples) agent CPU "
              f"{n['cpu_us_per_sample']:.1f} µs per sample ({n['cpu_s']:.2f} s); RSS "
              f"{n['rss_mib']:.1f} MiB (peak {n['peak_mib']:.1f}); python_frames "
              f"{n['python_frames']} %, unnamed {n['unnamed']} %; code objects held at most "
              f"{n['codes'][0]} ({n['codes'][1] / 1024:.0f} KiB; the cap is 64 MiB), read so far "
              f"after each window {n['reads']} taking {n['read_ms']} ms of CPU in all; the worker's "
              f"CPU per window {n['worker_cpu_ms']} ms.")
    if perf:
        print("\nSide by side with perf on python3.12 -X perf, the same process at the same "
              "time: samples with the whole Python stack:\n")
        for mode, r in perf.items():
            print(f"- perf --call-graph {mode}: {r['perf_whole']}/{r['perf_samples']} "
                  f"(perf record {r['perf_record_cpu_s']:.2f} s CPU, perf script "
                  f"{r['perf_script_cpu_s']:.2f} s, {r['perf_bytes'] // 1024} KiB); CodeXray: "
                  f"{r['agent_whole']}/{r['agent_samples']}")


if __name__ == "__main__":
    main()
