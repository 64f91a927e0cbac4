#!/usr/bin/env python3
"""The agent's start-up on a busy node (issue 36): CPU, wall time and memory
from launch until its first whole window is written.

Workload (started before the agent, left running): two CPU-bound threads
(cpu_split), N light processes (bench/many.c), a JVM (JitSplit, OpenJDK),
headless chromium on a page that runs JavaScript, and a clickhouse-server:
hundreds of processes and the big binaries a node runs (libjvm, chromium,
clickhouse are 20-500 MiB each).

Per run, from the agent's launch:
  - ready: wall and CPU until its start line (tables of what runs built,
    sampling counted from there),
  - first window: wall until the first whole window's log line, the CPU of
    writing it (its cpu_ms) and the agent's whole CPU until then,
  - peak RSS: VmHWM at the first window's end, and the highest VmRSS read
    every 20 ms (to see when it peaks).
Medians over REPS runs, each with a fresh agent on the same workload.

    python3 bench/startup_bench.py [--reps 3] [--procs 500] [--interval 10]
        [--no-big] [--agent-arg=--flag ...] [--compare OTHER_AGENT]
"""
import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.append(os.path.join(ROOT, "tests", "install"))  # after bench/: it has a run.py too
from memcg import Memcg  # noqa: E402  (tests/install/memcg.py)
from run import AGENT, B, proc_cpu, proc_hwm_kib, thread_cpu  # noqa: E402  (bench/run.py)

CHROMIUM_PAGE = """<html><body><script>
let x = 0;
function spin() { for (let i = 0; i < 2e6; i++) x = (x * 31 + i) | 0; setTimeout(spin, 50); }
spin();
</script></body></html>"""


def proc_rss_kib(pid):
    """VmRSS and its parts (RssAnon: heap and stacks; RssFile: pages of the
    binaries and files mapped; RssShmem), KiB; zeros once the process is gone."""
    out = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0, "RssShmem": 0}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                k = line.split(":", 1)[0]
                if k in out:
                    out[k] = int(line.split()[1])
    except OSError:
        pass
    return out


class Workload:
    """The busy node: everything started, each kept to be stopped at the end."""

    def __init__(self, tmp, procs, work, big, seconds):
        self.procs = []
        self.ch = None
        try:
            self.start(tmp, procs, work, big, seconds)
        except BaseException:
            self.stop()
            raise

    def start(self, tmp, procs, work, big, seconds):
        ncpu = os.cpu_count()
        if big:  # first: the JVM's start-up (javac too) is slow beside 500 processes
            self.start_big(tmp, seconds)
        self.procs.append(subprocess.Popen([os.path.join(B, "workloads", "cpu_split"),
                                            str(seconds), str(min(ncpu, 2))],
                                           stdout=subprocess.DEVNULL))
        self.procs.append(subprocess.Popen([os.path.join(B, "bench", "many"), str(procs),
                                            str(seconds), str(work)]))
        time.sleep(3)  # the processes started, the JVM past its start-up

    def start_big(self, tmp, seconds):
        import java_tests
        classes = os.path.join(B, "bench", "classes")  # kept: javac takes a while
        if not os.path.exists(os.path.join(classes, "JitSplit.class")):
            subprocess.run([os.path.join(java_tests.JAVA_HOME, "bin", "javac"), "-d", classes,
                            os.path.join(ROOT, "tests", "workloads", "JitSplit.java")],
                           check=True, timeout=600)
        self.java = subprocess.Popen([os.path.join(java_tests.JAVA_HOME, "bin", "java"), "-cp",
                                      classes, "JitSplit", str(seconds)], cwd=tmp,
                                     stdout=subprocess.DEVNULL)
        self.procs.append(self.java)
        chrome = shutil.which("chromium")
        if chrome:
            page = os.path.join(tmp, "spin.html")
            with open(page, "w") as f:
                f.write(CHROMIUM_PAGE)
            self.procs.append(subprocess.Popen(
                [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 f"--user-data-dir={os.path.join(tmp, 'chromium')}",
                 "--remote-debugging-port=0", "file://" + page],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True))
        if shutil.which("clickhouse-server"):
            import clickhouse_cluster
            port = clickhouse_cluster._free_port()
            self.ch = clickhouse_cluster.Node(tmp, 0, [port])

    def stop(self):
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL) if p.args[0].endswith("chromium") else p.kill()
            except (ProcessLookupError, PermissionError):
                pass
        for p in self.procs:
            p.wait()
        if self.ch:
            self.ch.stop(kill=True)
            self.ch = None
        subprocess.run(["pkill", "-f", os.path.join(B, "bench", "many")], check=False)


def nprocs_now():
    return sum(1 for d in os.listdir("/proc") if d.isdigit())


def one_run(tmp, interval, agent_args, log_path, agent):
    outdir = tempfile.mkdtemp(prefix="out-", dir=tmp)
    cg = Memcg(f"cx-startup-{os.getpid()}")
    t0 = time.monotonic()
    a = subprocess.Popen([agent, "--interval", str(interval), "--output-dir", outdir,
                          *agent_args], stderr=subprocess.PIPE, text=True, preexec_fn=cg.enter)
    ev = {}
    lines = []
    rss = {"max": 0, "at": 0.0, "parts": {}, "series": []}
    done = threading.Event()

    def read_log():
        for line in a.stderr:
            now = time.monotonic()
            lines.append(f"{now - t0:8.3f} {line}")
            if " started: " in line and "ready" not in ev:
                ev["ready"] = now
                ev["ready_cpu"] = proc_cpu(a.pid)
            elif " window: processes=" in line and "window" not in ev:
                ev["window"] = now
                ev["window_cpu"] = proc_cpu(a.pid)
                ev["window_threads"] = thread_cpu(a.pid)[0]
                ev["window_hwm"] = proc_hwm_kib(a.pid)
                ev["window_cg"] = cg.peak_mib()
                ev["window_line"] = line
                done.set()

    def watch_rss():
        while not done.is_set() and a.poll() is None:
            parts = proc_rss_kib(a.pid)
            r = parts["VmRSS"]
            now = time.monotonic() - t0
            if r > rss["max"]:
                rss["max"], rss["at"], rss["parts"] = r, now, parts
            if not rss["series"] or now - rss["series"][-1][0] >= 0.1:
                rss["series"].append((now, r, parts["RssAnon"], parts["RssFile"]))
            time.sleep(0.02)

    tr = threading.Thread(target=read_log, daemon=True)
    tr.start()
    tw = threading.Thread(target=watch_rss, daemon=True)
    tw.start()
    ok = done.wait(timeout=interval + 180)
    a.send_signal(signal.SIGTERM)
    try:
        a.wait(timeout=120)
    except subprocess.TimeoutExpired:
        a.kill()
        a.wait()
    tr.join(timeout=5)
    cg.remove()
    if log_path:
        with open(log_path, "a") as f:
            f.write("".join(lines))
            f.write("rss (s: KiB total/anon/file): " + " ".join(
                f"{t:.1f}:{k}/{an}/{fi}" for t, k, an, fi in rss["series"]) + "\n")
    if not ok:
        sys.stderr.write("".join(lines[-30:]))
        raise RuntimeError("no first window")
    wl = ev["window_line"]
    w_cpu_ms = int(re.search(r"cpu_ms=(\d+)", wl).group(1))
    w_took_ms = int(re.search(r"took_ms=(\d+)", wl).group(1))
    return {
        "ready_s": ev["ready"] - t0,
        "ready_cpu_s": ev["ready_cpu"],
        "window_s": ev["window"] - t0,
        "window_cpu_s": ev["window_cpu"],
        "write_cpu_s": w_cpu_ms / 1000,
        "write_wall_s": w_took_ms / 1000,
        "hwm_mib": ev["window_hwm"] / 1024,
        "rss_max_mib": rss["max"] / 1024,
        "memcg_mib": ev["window_cg"],
        "rss_max_at_s": rss["at"],
        "rss_max_anon_mib": rss["parts"].get("RssAnon", 0) / 1024,
        "rss_max_file_mib": rss["parts"].get("RssFile", 0) / 1024,
        "procs": int(re.search(r"processes=(\d+)", wl).group(1)),
        "profiles": int(re.search(r"profiles=(\d+)", wl).group(1)),
        "threads": {k: round(v, 2) for k, v in ev["window_threads"].items()},
    }


def med(rows, key):
    return statistics.median(r[key] for r in rows)


def report(rows, interval, nproc):
    print(f"start-up, {len(rows)} runs, {nproc} processes on the node, --interval {interval}")
    print("| | median | runs |")
    print("|---|---|---|")
    for key, name, unit in (
            ("ready_s", "launch to sampling (wall)", "s"),
            ("ready_cpu_s", "launch to sampling (CPU)", "s"),
            ("write_wall_s", "first window's writing (wall)", "s"),
            ("write_cpu_s", "first window's writing (CPU)", "s"),
            ("window_s", "launch to first window written (wall)", "s"),
            ("window_cpu_s", "launch to first window written (CPU)", "s"),
            ("hwm_mib", "peak RSS by then (VmHWM)", "MiB"),
            ("rss_max_mib", "highest VmRSS read (every 20 ms)", "MiB"),
            ("memcg_mib", "peak memory cgroup charge (heap, files, BPF maps)", "MiB"),
            ("rss_max_at_s", "highest VmRSS read at", "s"),
            ("rss_max_anon_mib", "of it anonymous (heap, stacks)", "MiB"),
            ("rss_max_file_mib", "of it file pages (binaries, debug files)", "MiB"),
            ("procs", "processes in the first window", ""),
            ("profiles", "profiles written", "")):
        vals = ", ".join(f"{r[key]:.2f}" if isinstance(r[key], float) else str(r[key])
                         for r in rows)
        m = med(rows, key)
        print(f"| {name} | {m:.2f} {unit} | {vals} |" if isinstance(m, float)
              else f"| {name} | {m} {unit} | {vals} |")
    for r in rows:
        print("  threads (CPU s to first window):", r["threads"])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--procs", type=int, default=500)
    ap.add_argument("--work", type=int, default=20000,
                    help="loop iterations a wake-up of each light process (bench/many.c)")
    ap.add_argument("--interval", type=int, default=10)
    ap.add_argument("--log", help="append the agents' logs (and their RSS every 0.1 s) here")
    ap.add_argument("--agent", default=AGENT, help="the agent binary")
    ap.add_argument("--compare", help="another agent binary, run alternately with --agent on the "
                    "same workload (before and after a change)")
    ap.add_argument("--no-big", action="store_true", help="no JVM, chromium, clickhouse-server")
    ap.add_argument("--agent-arg", action="append", default=[],
                    help="passed to the agent (repeatable)")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("startup_bench: needs root (the agent loads BPF)")
    span = args.reps * (2 if args.compare else 1) * (args.interval + 60) + 60
    with tempfile.TemporaryDirectory(prefix="cx-startup-") as tmp:
        wl = Workload(tmp, args.procs, args.work, not args.no_big, span)
        try:
            nproc = nprocs_now()
            agents = [args.agent] + ([args.compare] if args.compare else [])
            rows = {a: [] for a in agents}
            for i in range(args.reps):
                for a in agents[i % len(agents):] + agents[:i % len(agents)]:
                    rows[a].append(one_run(tmp, args.interval, args.agent_arg, args.log, a))
        finally:
            wl.stop()
    for a in agents:
        print(f"## {a}")
        report(rows[a], args.interval, nproc)


if __name__ == "__main__":
    main()
