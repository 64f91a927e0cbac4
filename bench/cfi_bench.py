#!/usr/bin/env python3
"""make bench, CFI part: what walking stacks by CFI tables costs, side by side
with the frame-pointer walk and with `perf record --call-graph dwarf`, on the
same workload in the same run.

Workload: bench/deep, one thread per CPU spinning 30 frames deep (built with
frame pointers, so both walks see the same frames up to libc's start_thread).
  - BPF time per sample: two `record --pid` at once on the same samples, one
    --unwind fp and one --unwind cfi (which starts first alternates), PAIRS
    times; their ratio, pair by pair, is what is quoted (the VM is shared: the
    absolute times move with its load, the ratio much less). CONTROLS pairs of
    fp and fp show the spread the method itself has;
  - the agent's process CPU (user + sys, per-thread schedstat ns) per sample
    while it runs, apart from its fixed cost a run (loading the BPF programs,
    the tables, naming and writing at the end), from the same pairs; perf
    record --call-graph dwarf the same way, and perf script per sample more
    (a long and a short recording, scripted);
  - table size and build time for libc, libjvm and the largest binary found
    (build/bench/cfi_build), the tables a whole-node recording loads, and many
    binaries at once: every ELF shared object under /usr/lib built by
    cfi_build, and mapped by one process under `record --pid` (tables, bytes,
    BPF maps and their kernel memory, the agent's RSS), also with a cap
    lower than what they need.

    python3 bench/cfi_bench.py [--seconds 12] [--pairs 7] [--controls 3] [--perf-reps 3]
                               [--depth 30] [--libs /usr/lib]
"""
import argparse
import json
import mmap
import os
import re
import resource
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
AGENT = os.path.join(B, "codexray-node-agent")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # first: run is bench/run.py
from run import bpf_prog_stats, proc_cpu  # noqa: E402  (bench/run.py)
from pprof_read import traces  # noqa: E402


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def start_deep(seconds, depth):
    # dive(depth - 5) is depth - 4 frames, then spin, thread_main,
    # start_thread and __clone3: depth frames (the fp walk stops at libc's
    # start_thread, which keeps no frame pointer: one fewer).
    return subprocess.Popen([os.path.join(B, "bench", "deep"), str(seconds), str(depth - 5),
                             str(os.cpu_count())])


# --- the agent, two at once -------------------------------------------------

def agent_start(pid, seconds, mode, out):
    a = subprocess.Popen([AGENT, "record", "--duration", str(seconds), "--pid", str(pid),
                          "--output", out, "--unwind", mode], stderr=subprocess.PIPE, text=True)
    while True:
        line = a.stderr.readline()
        if not line:
            raise RuntimeError("agent record ended before it started")
        m = re.search(r"record: .*bpf_prog_id=(\d+)", line)
        if m:
            return a, int(m.group(1)), time.monotonic()


def agent_pair(pid, seconds, modes, tmp, with_frames):
    """Two recordings of the same process at the same time. For each: BPF ns
    per run of its sampler and the agent's CPU per sample while it ran
    (between one second after the later start and one second before the
    earlier end), its whole-run CPU and peak RSS."""
    runs = []
    for i, mode in enumerate(modes):
        out = os.path.join(tmp, f"pair-{i}-{mode}.pb.gz")
        a, prog, t = agent_start(pid, seconds, mode, out)
        runs.append({"mode": mode, "proc": a, "prog": prog, "start": t, "out": out})
    t_end = runs[0]["start"] + seconds - 1.0
    time.sleep(max(runs[-1]["start"] + 1.0 - time.monotonic(), 0))
    t0 = time.monotonic()
    s0 = [(bpf_prog_stats(r["prog"]), proc_cpu(r["proc"].pid)) for r in runs]
    time.sleep(max(t_end - time.monotonic(), 1.0))
    t1 = time.monotonic()
    s1 = [(bpf_prog_stats(r["prog"]), proc_cpu(r["proc"].pid)) for r in runs]
    res = []
    for r, (b0, c0), (b1, c1) in zip(runs, s0, s1):
        log = r["proc"].stderr.read()
        _, _, ru = os.wait4(r["proc"].pid, 0)
        m = re.search(r"record: wrote .* samples=(\d+)", log)
        samples = int(m.group(1)) if m else 0
        in_window = samples * (t1 - t0) / seconds
        frames = None
        if with_frames:
            ts = traces(r["out"])
            frames = sum(len(t.frames) * t.count for t in ts) / max(sum(t.count for t in ts), 1)
        cpu_total = ru.ru_utime + ru.ru_stime
        steady_us = 1e6 * (c1 - c0) / max(in_window, 1)
        res.append({"mode": r["mode"], "bpf_ns": (b1[0] - b0[0]) / max(b1[1] - b0[1], 1),
                    "runs": b1[1] - b0[1], "samples": samples, "steady_us": steady_us,
                    "cpu_s": cpu_total, "fixed_ms": 1e3 * cpu_total - steady_us * samples / 1e3,
                    "rss_mib": ru.ru_maxrss / 1024, "frames": frames})
    return res


# --- perf --------------------------------------------------------------------

def perf_rec(pid, seconds, data):
    """perf record --call-graph dwarf of pid: its CPU per sample while it ran
    (schedstat, as for the agent), its whole-run CPU; samples by perf script,
    which is timed too."""
    p = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "100",
                          "--call-graph", "dwarf", "-p", str(pid), "-o", data, "--", "sleep",
                          str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steady = None
    if seconds >= 6:
        time.sleep(2)
        t0, c0 = time.monotonic(), proc_cpu(p.pid)
        time.sleep(seconds - 3)
        t1, c1 = time.monotonic(), proc_cpu(p.pid)
        steady = (c1 - c0, (t1 - t0) / seconds)
    _, _, ru = os.wait4(p.pid, 0)
    script = data + ".script"
    with open(script, "w") as f:
        s = subprocess.Popen(["perf", "script", "-i", data], stdout=f, stderr=subprocess.DEVNULL)
        _, _, sru = os.wait4(s.pid, 0)
    with open(script) as f:
        samples = sum(1 for line in f if line.strip() and not line[0].isspace())
    r = {"record_cpu_s": ru.ru_utime + ru.ru_stime, "script_cpu_s": sru.ru_utime + sru.ru_stime,
         "samples": samples, "bytes": os.path.getsize(data)}
    if steady:
        r["record_steady_us"] = 1e6 * steady[0] / max(samples * steady[1], 1)
    return r


# --- many binaries -------------------------------------------------------------

def exec_segment(path):
    """(offset, size) of the first executable PT_LOAD of a 64-bit ELF file."""
    with open(path, "rb") as f:
        h = f.read(64)
        if len(h) < 64 or h[:4] != b"\x7fELF" or h[4] != 2:
            return None
        phoff, = struct.unpack_from("<Q", h, 32)
        phentsize, phnum = struct.unpack_from("<HH", h, 54)
        f.seek(phoff)
        ph = f.read(phentsize * phnum)
    for i in range(phnum):
        if (i + 1) * phentsize > len(ph):
            break
        p_type, p_flags, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", ph, i * phentsize)
        if p_type == 1 and p_flags & 1 and p_filesz:
            return p_offset, p_filesz
    return None


def shared_objects(top):
    """Every ELF shared object under top with code: regular files (no
    symlinks) with .so in the name."""
    found = []
    for root, _, files in os.walk(top):
        for n in sorted(files):
            p = os.path.join(root, n)
            if ".so" not in n or os.path.islink(p) or not os.path.isfile(p):
                continue
            try:
                if exec_segment(p):
                    found.append(p)
            except OSError:
                pass
    return found


def map_libs(top, seconds):
    """The many-binaries workload (run as a child): maps the code of every
    shared object under top, as ld.so would but running none of it, then
    sleeps. Prints how many it mapped."""
    resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    keep = []
    for p in shared_objects(top):
        try:
            off, size = exec_segment(p)
            start = off & ~(mmap.ALLOCATIONGRANULARITY - 1)
            fd = os.open(p, os.O_RDONLY)
            try:
                keep.append(mmap.mmap(fd, off + size - start, flags=mmap.MAP_PRIVATE,
                                      prot=mmap.PROT_READ | mmap.PROT_EXEC, offset=start))
            finally:
                os.close(fd)
        except (OSError, ValueError):
            pass
    print(len(keep), flush=True)
    time.sleep(seconds)


def bpf_maps():
    out = subprocess.run(["bpftool", "map", "show", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out)


def cfi_maps(after_id):
    """The CFI row arrays made since map id after_id (ids only grow; another
    agent running at the same time would be counted too): how many, and the
    kernel memory they are charged."""
    ms = [m for m in bpf_maps() if m.get("name", "").startswith("cx_cfi_rows")
          and m["id"] > after_id]
    return len(ms), sum(m.get("bytes_memlock", 0) for m in ms)


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0


def many_binaries(top, tmp, seconds=14, cap_mb=None):
    """record --pid of a process mapping every shared object under top:
    what the agent loaded, the BPF maps, its CPU and memory."""
    w = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--map-libs", top,
                          str(seconds + 10)], stdout=subprocess.PIPE, text=True)
    try:
        mapped = int(w.stdout.readline())
        argv = [AGENT, "record", "--duration", str(seconds), "--pid", str(w.pid), "--output",
                os.path.join(tmp, "many.pb.gz")]
        if cap_mb:
            argv += ["--unwind-tables-max-mb", str(cap_mb)]
        first_id = max((m["id"] for m in bpf_maps()), default=0)
        t0 = time.monotonic()
        a = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        log = []
        while True:
            line = a.stderr.readline()
            if not line:
                break
            log.append(line)
            if "record: sample_rate_hz" in line:
                break
        time.sleep(max(t0 + seconds - 1.5 - time.monotonic(), 0))
        nmaps, memlock = cfi_maps(first_id)
        rss = rss_mib(a.pid)
        log.append(a.stderr.read())
        _, _, ru = os.wait4(a.pid, 0)
    finally:
        w.kill()
        w.wait()
    log = "".join(log)
    m = re.search(r"unwind_tables=(\d+) unwind_table_bytes=(\d+)", log)
    return {"mapped": mapped, "tables": int(m.group(1)) if m else 0,
            "bytes": int(m.group(2)) if m else 0, "maps": nmaps, "memlock": memlock,
            "over_cap": log.count("over the cap"), "emfile": log.count("Too many open files"),
            "cpu_s": ru.ru_utime + ru.ru_stime, "peak_mib": ru.ru_maxrss / 1024, "rss_mib": rss}


def build_all(tool, files):
    """cfi_build over files, each distinct file (inode) once: count, row
    bytes, the sum of the median build times, the largest."""
    seen, uniq = set(), []
    for p in files:
        st = os.stat(p)
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            uniq.append(p)
    out = subprocess.run([tool, *uniq], capture_output=True, text=True).stdout
    rx = re.compile(r"^(\S+)\n  \w+: \d+ FDEs, \d+ rows \(\d+ before merging\), (\d+) bytes, "
                    r"[\d.]+ bytes/FDE, median ([\d.]+) ms", re.M)
    tables = [(int(m.group(2)), float(m.group(3)), m.group(1)) for m in rx.finditer(out)]
    sizes = sorted(t[0] for t in tables)
    return {"files": len(uniq), "tables": len(tables), "bytes": sum(sizes),
            "ms": sum(t[1] for t in tables), "median": med(sizes) if sizes else 0,
            "largest": max(tables) if tables else None}


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


def rng(xs, fmt="{:.2f}"):
    xs = sorted(xs)
    return f"{fmt.format(xs[0])}-{fmt.format(xs[-1])}" if xs else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=12)
    ap.add_argument("--pairs", type=int, default=7)
    ap.add_argument("--controls", type=int, default=3)
    ap.add_argument("--perf-reps", type=int, default=3)
    ap.add_argument("--depth", type=int, default=30)
    ap.add_argument("--libs", default="/usr/lib")
    ap.add_argument("--map-libs", nargs=2, metavar=("DIR", "SECONDS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.map_libs:
        map_libs(args.map_libs[0], float(args.map_libs[1]))
        return
    if os.geteuid() != 0:
        sys.exit("bench: needs root")
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        stats_was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    S = args.seconds
    pairs, controls, perf_long, perf_short = [], [], [], []
    try:
        with tempfile.TemporaryDirectory(prefix="cx-cfi-bench-") as tmp:
            span = (args.pairs + args.controls) * (S + 6) + args.perf_reps * (S + S // 4 + 15) + 30
            w = start_deep(span, args.depth)
            try:
                time.sleep(1)
                for i in range(args.pairs):
                    modes = ("fp", "cfi") if i % 2 == 0 else ("cfi", "fp")
                    r = {x["mode"]: x for x in agent_pair(w.pid, S, modes, tmp, i < 2)}
                    r["first"] = modes[0]
                    pairs.append(r)
                    print(f"pair {i + 1} ({modes[0]} first): fp {r['fp']['bpf_ns'] / 1e3:.2f} µs, "
                          f"cfi {r['cfi']['bpf_ns'] / 1e3:.2f} µs, "
                          f"ratio {r['cfi']['bpf_ns'] / r['fp']['bpf_ns']:.2f}; agent CPU/sample "
                          f"fp {r['fp']['steady_us']:.1f} cfi {r['cfi']['steady_us']:.1f} µs",
                          file=sys.stderr, flush=True)
                for i in range(args.controls):
                    a, b = agent_pair(w.pid, S, ("fp", "fp"), tmp, False)
                    controls.append(b["bpf_ns"] / a["bpf_ns"])
                    print(f"control {i + 1}: fp {a['bpf_ns'] / 1e3:.2f} / fp "
                          f"{b['bpf_ns'] / 1e3:.2f} µs, ratio {controls[-1]:.2f}",
                          file=sys.stderr, flush=True)
                for i in range(args.perf_reps):
                    perf_long.append(perf_rec(w.pid, S, os.path.join(tmp, "perf-long.data")))
                    perf_short.append(perf_rec(w.pid, max(S // 4, 2),
                                               os.path.join(tmp, "perf-short.data")))
                    print(f"perf {i + 1}: {perf_long[-1]} {perf_short[-1]}", file=sys.stderr,
                          flush=True)
            finally:
                w.kill()
                w.wait()
            tool = os.path.join(B, "bench", "cfi_build")
            have_tool = os.path.exists(tool)
            libs = shared_objects(args.libs)
            many = many_binaries(args.libs, tmp)
            print(f"many: {many}", file=sys.stderr, flush=True)
            capped = many_binaries(args.libs, tmp, cap_mb=32)
            print(f"many, capped: {capped}", file=sys.stderr, flush=True)
            built = build_all(tool, libs) if have_tool else None
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(stats_was)

    n = len(pairs)
    fp_ns = med([p["fp"]["bpf_ns"] for p in pairs])
    cfi_ns = med([p["cfi"]["bpf_ns"] for p in pairs])
    ratios = [p["cfi"]["bpf_ns"] / p["fp"]["bpf_ns"] for p in pairs]
    ratio = med(ratios)
    by_first = {m: [x for x, p in zip(ratios, pairs) if p["first"] == m] for m in ("fp", "cfi")}
    framed = [p for p in pairs if p["fp"]["frames"] is not None]
    fp_frames = med([p["fp"]["frames"] for p in framed])
    cfi_frames = med([p["cfi"]["frames"] for p in framed])

    def agent(mode, key):
        return med([p[mode][key] for p in pairs])
    a_steady = agent("cfi", "steady_us")
    pr_steady = med([p["record_steady_us"] for p in perf_long])
    ps_marg = med([1e6 * (lo["script_cpu_s"] - sh["script_cpu_s"]) /
                   max(lo["samples"] - sh["samples"], 1) for lo, sh in zip(perf_long, perf_short)])
    ps_fixed = med([1e3 * lo["script_cpu_s"] - ps_marg * lo["samples"] / 1e3 for lo in perf_long])
    p_whole = med([1e6 * (p["record_cpu_s"] + p["script_cpu_s"]) / max(p["samples"], 1)
                   for p in perf_long])
    p_bytes = med([p["bytes"] / max(p["samples"], 1) for p in perf_long])
    lines = [
        f"# make bench, CFI: bench/deep, {os.cpu_count()} threads {args.depth} frames deep, "
        f"{S} s a run; {n} pairs of recordings at once (fp and cfi, which starts first "
        f"alternating), medians",
        "",
        "| pair | started first | BPF time per sample, fp | cfi | cfi / fp |",
        "|---|---|---|---|---|",
    ] + [
        f"| {i + 1} | {p['first']} | {p['fp']['bpf_ns'] / 1000:.2f} µs | "
        f"{p['cfi']['bpf_ns'] / 1000:.2f} µs | {x:.2f} |"
        for i, (p, x) in enumerate(zip(pairs, ratios))
    ] + [
        f"| median | | {fp_ns / 1000:.2f} µs | {cfi_ns / 1000:.2f} µs | {ratio:.2f} |",
        "",
        f"- frames per sample: fp {fp_frames:.1f}, cfi {cfi_frames:.1f} (the fp walk stops at "
        f"libc's start_thread, which keeps no frame pointer)",
        "- absolute times move with the VM's load from pair to pair; the two walks of a pair "
        "share it",
        f"- CFI / frame pointers, pair by pair (the same samples): median {ratio:.2f}, "
        f"range {rng(ratios)} over {n} pairs; target <= 2.0: "
        f"{'met' if ratio <= 2.0 else 'NOT met'}"
        + (f" ({sum(x > 2.0 for x in ratios)} of {n} pairs above 2.0)"
           if any(x > 2.0 for x in ratios) else ""),
        f"- by which started first: fp first {rng(by_first['fp'])}, "
        f"cfi first {rng(by_first['cfi'])}",
        f"- the method's own spread, fp against fp in {len(controls)} pairs: "
        f"{', '.join(f'{x:.2f}' for x in controls)}",
        "",
        f"| profiler | process CPU per sample while recording | fixed CPU a {S} s run | "
        f"whole {S} s run per sample | data per sample |",
        "|---|---|---|---|---|",
        f"| codexray-node-agent record --unwind cfi | {a_steady:.1f} µs | "
        f"{agent('cfi', 'fixed_ms'):.0f} ms | "
        f"{med([1e6 * p['cfi']['cpu_s'] / max(p['cfi']['samples'], 1) for p in pairs]):.1f} µs "
        f"| none kept (BPF time above) |",
        f"| codexray-node-agent record --unwind fp | {agent('fp', 'steady_us'):.1f} µs | "
        f"{agent('fp', 'fixed_ms'):.0f} ms | "
        f"{med([1e6 * p['fp']['cpu_s'] / max(p['fp']['samples'], 1) for p in pairs]):.1f} µs "
        f"| none kept |",
        f"| perf record --call-graph dwarf | {pr_steady:.1f} µs | | | "
        f"{p_bytes / 1024:.1f} KiB of perf.data |",
        f"| perf script (post-processing) | {ps_marg:.1f} µs (each sample more) | "
        f"{ps_fixed:.0f} ms | | |",
        f"| perf record + perf script | {pr_steady + ps_marg:.1f} µs | | {p_whole:.1f} µs | |",
        "",
        f"- perf --call-graph dwarf / agent (cfi), per sample while recording, script "
        f"included: {(pr_steady + ps_marg) / a_steady:.1f}x (perf record alone "
        f"{pr_steady / a_steady:.1f}x); perf: median of {len(perf_long)}, script's per sample "
        f"from a {S} s and a {max(S // 4, 2)} s recording",
        "- perf's kernel side (8 KiB of stack copied a sample) is in none of these; the "
        "agent's is the BPF time above",
        f"- agent peak RSS: cfi {agent('cfi', 'rss_mib'):.1f} MiB, fp "
        f"{agent('fp', 'rss_mib'):.1f} MiB",
    ]

    # Tables: size and build time per binary.
    bins = ["/usr/lib/x86_64-linux-gnu/libc.so.6"]
    bins += sorted(p for p in (os.path.join(r, "libjvm.so") for r, _, f in os.walk("/usr/lib/jvm")
                               if "libjvm.so" in f))[:1]
    big = largest_elf()
    if big and big not in bins:
        bins.append(big)
    out = subprocess.run([tool, *bins], capture_output=True, text=True) if have_tool \
        else subprocess.CompletedProcess([], 1, "", f"{tool}: not built")
    lines += ["", "## Tables (build/bench/cfi_build, median of 5 builds)", "", "```",
              out.stdout.rstrip() or out.stderr.rstrip(), "```"]

    # What a whole-node recording loads.
    rec = subprocess.run([AGENT, "record", "--duration", "3", "--output",
                          os.path.join(B, "bench", "cfi-node.pb.gz")], capture_output=True,
                         text=True, timeout=300)
    m = re.search(r"unwind_tables=(\d+) unwind_table_bytes=(\d+)", rec.stderr)
    if m:
        nt, by = int(m.group(1)), int(m.group(2))
        lines += ["", f"- a whole-node recording here loads {nt} tables, {by / 1024 / 1024:.1f} "
                  f"MiB ({by / max(nt, 1) / 1024:.0f} KiB a binary on average; cap "
                  f"--unwind-tables-max-mb 128)"]

    # Many binaries.
    lines += ["", f"## Many binaries: every ELF shared object under {args.libs}", ""]
    if built:
        lg = built["largest"]
        lines.append(
            f"- cfi_build: {built['files']} distinct files, {built['tables']} with CFI: "
            f"{built['bytes'] / 2**20:.1f} MiB of rows, {built['ms'] / 1e3:.1f} s to build "
            f"them all (one core); median table {built['median'] / 1024:.1f} KiB, largest "
            f"{lg[0] / 2**20:.1f} MiB ({os.path.basename(lg[2])})")
    for label, r in (("default cap (128 MiB)", many), ("--unwind-tables-max-mb 32", capped)):
        lines.append(
            f"- one process mapping {r['mapped']} of them, `record --pid`, {label}: "
            f"{r['tables']} tables loaded, {r['bytes'] / 2**20:.1f} MiB; {r['maps']} BPF "
            f"arrays (one a table) using {r['memlock'] / 2**20:.1f} MiB of kernel memory; "
            f"{r['over_cap']} refused over the cap; {r['emfile']} 'Too many open files'; "
            f"agent CPU {r['cpu_s']:.1f} s, peak RSS {r['peak_mib']:.0f} MiB, RSS with the "
            f"tables loaded {r['rss_mib']:.0f} MiB")
    report = "\n".join(lines) + "\n"
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", "cfi_report.md"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
