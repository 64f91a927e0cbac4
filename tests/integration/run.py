#!/usr/bin/env python3
"""Integration tests: the real agent, real BPF, real workloads with known
answers, every profile read back with `go tool pprof`.

Needs root (BPF and perf events). Run from the repository root:
    python3 tests/integration/run.py [TEST_NAME ...]
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
from pprof_read import raw, traces  # noqa: E402
import server_tests  # noqa: E402
import browser_tests  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
WORK = os.path.join(ROOT, "build", "workloads")
HZ = 100
CHAIN = ["dispatch", "run", "main"]
SPLIT = {"hot_a": 3 / 6, "hot_b": 2 / 6, "hot_c": 1 / 6}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def start_workload(name, *args):
    return subprocess.Popen([os.path.join(WORK, name), *map(str, args)], stdout=subprocess.PIPE,
                            text=True)


def cpu_ticks(pid):
    """utime + stime of a process, in clock ticks (1/100 s)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def record(tmp, *args, timeout=120):
    out = os.path.join(tmp, "record.pb.gz")
    p = subprocess.run([AGENT, "record", "--output", out, *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr}")
    return out, p.stderr


def split_of(ts, pid=None):
    """Share of samples per hot function, and the share with the whole chain."""
    per, whole, total = {k: 0 for k in SPLIT}, 0, 0
    for t in ts:
        if pid is not None and t.labels.get("pid") != str(pid):
            continue
        total += t.count
        leaf = t.frames[0]
        if leaf in per:
            per[leaf] += t.count
            if t.frames[1:1 + len(CHAIN)] == CHAIN:
                whole += t.count
    return per, whole, total


# --- the tests ---------------------------------------------------------------

def test_usage(tmp):
    p = subprocess.run([AGENT, "--help"], capture_output=True, text=True)
    check(p.returncode == 0 and "--sample-rate" in p.stdout and "record" in p.stdout,
          f"--help: {p.returncode} {p.stdout[:200]}")
    p = subprocess.run([AGENT, "--version"], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.startswith("codexray-node-agent "), "--version")
    for bad in (["--bogus"], ["--sample-rate", "0"], ["--sample-rate", "abc"], ["stray"],
                ["record"], ["record", "--duration", "1"], ["record", "--bogus", "1"]):
        p = subprocess.run([AGENT, *bad], capture_output=True, text=True, timeout=10)
        check(p.returncode == 2, f"{bad}: exit {p.returncode}, want 2")
        check("Usage:" in p.stderr, f"{bad}: no usage in stderr: {p.stderr[:300]}")
    p = subprocess.run([AGENT, "record", "--duration", "1", "--output", f"{tmp}/x", "--pid",
                        "4000000"], capture_output=True, text=True, timeout=10)
    check(p.returncode == 1 and "no process with pid 4000000" in p.stderr, p.stderr)
    p = subprocess.run([AGENT, "--config", "/nonexistent.conf"], capture_output=True, text=True,
                       timeout=10)
    check(p.returncode == 2 and "/nonexistent.conf" in p.stderr, p.stderr)
    # Without privileges: exit 1, and the capabilities it needs are named.
    p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", AGENT,
                        "record", "--duration", "1", "--output", f"{tmp}/x"], capture_output=True,
                       text=True, timeout=10)
    check(p.returncode == 1 and "missing privileges" in p.stderr and "CAP_BPF" in p.stderr
          and "CAP_PERFMON" in p.stderr, f"unprivileged: {p.returncode} {p.stderr}")


def test_record_pid_split_and_rate(tmp):
    """A frame-pointer C workload: 3:2:1 split within 5 points, >= 97 % of
    samples with the whole chain to main, sample count at 100 Hz within 15 %."""
    w = start_workload("cpu_split", 14)
    try:
        time.sleep(1)
        t0 = cpu_ticks(w.pid)
        out, log = record(tmp, "--duration", 8, "--pid", w.pid)
        t1 = cpu_ticks(w.pid)
    finally:
        w.kill()
        w.wait()
    ts = traces(out)
    check(all(t.labels.get("pid") == str(w.pid) for t in ts), "a sample without its pid label")
    per, whole, total = split_of(ts)
    hot = sum(per.values())
    check(hot > 0, f"no hot function in {ts[:3]}")
    for fn, want in SPLIT.items():
        got = per[fn] / hot
        print(f"    {fn}: {got:.3f} (want {want:.3f})")
        check(abs(got - want) <= 0.05, f"{fn} share {got:.3f}, want {want:.3f} +- 0.05")
    print(f"    whole chain: {whole}/{total} = {whole / total:.3f}")
    check(whole / total >= 0.97, f"only {whole}/{total} samples reach main through {CHAIN}")
    cpu_s = (t1 - t0) / 100
    expect = cpu_s * HZ
    print(f"    samples {total}, cpu {cpu_s:.2f}s -> {expect:.0f} expected")
    check(abs(total - expect) <= 0.15 * expect, f"{total} samples for {cpu_s:.2f}s CPU at {HZ} Hz")


def test_record_whole_machine(tmp):
    """Without --pid every process is recorded, each sample labelled with its pid."""
    w = start_workload("cpu_split", 8)
    try:
        time.sleep(0.5)
        out, log = record(tmp, "--duration", 3)
    finally:
        w.kill()
        w.wait()
    ts = traces(out)
    check(all("pid" in t.labels for t in ts), "a sample without a pid label")
    per, whole, total = split_of(ts, pid=w.pid)
    check(total >= 200, f"only {total} samples of the workload in a 3 s whole-machine record")
    check(per["hot_a"] > per["hot_c"] > 0, f"workload split not seen: {per}")
    check("processes=" in log, log)


def kernel_names():
    names = set()
    with open("/proc/kallsyms") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[1] in "tTwW":
                names.add(parts[2])
    return names


def test_kernel_stacks(tmp):
    """Kernel frames are left out by default, and named with --kernel-stacks."""
    knames = kernel_names()
    w = start_workload("syscall_heavy", 12)
    try:
        time.sleep(0.5)
        out, _ = record(tmp, "--duration", 3, "--pid", w.pid)
        ts = traces(out)
        frames = {f for t in ts for f in t.frames}
        check("do_reads" in frames, f"user chain missing: {sorted(frames)[:20]}")
        leaked = {f for f in frames if f in knames} - {"main", "do_reads", "raw_read"}
        check(not leaked, f"kernel frames without --kernel-stacks: {sorted(leaked)[:10]}")

        out, _ = record(tmp, "--duration", 3, "--pid", w.pid, "--kernel-stacks")
        ts = traces(out)
    finally:
        w.kill()
        w.wait()
    total = sum(t.count for t in ts)
    in_kernel = sum(t.count for t in ts if t.frames[0] in knames)
    through = sum(t.count for t in ts
                  if "do_syscall_64" in t.frames and "do_reads" in t.frames
                  and t.frames.index("do_syscall_64") < t.frames.index("do_reads"))
    print(f"    kernel leaf {in_kernel}/{total}, syscall under do_reads {through}/{total}")
    check(in_kernel / total >= 0.5, f"only {in_kernel}/{total} samples have a named kernel leaf")
    check(through / total >= 0.5, "kernel frames do not sit under the user chain")


def test_agent_windows(tmp):
    """The agent: config file, environment and flags; a process started after
    it is named; one profile per process per window in --output-dir; labels,
    sample types and period as promised; a summary per window."""
    outdir = os.path.join(tmp, "out")
    os.mkdir(outdir)
    conf = os.path.join(tmp, "agent.conf")
    with open(conf, "w") as f:
        f.write("# test config\ninterval = 2\nsample_rate = 50\n")
    env = dict(os.environ, CODEXRAY_HOST="test-host")
    agent = subprocess.Popen([AGENT, "--config", conf, "--output-dir", outdir, "--sample-rate",
                              "100"], stderr=subprocess.PIPE, text=True, env=env)
    try:
        time.sleep(1.5)
        # Started after the agent, and gone before its window is named: its
        # frames must still be named, from the binary the agent holds open.
        w = start_workload("cpu_split", 3)
        w_out, _ = w.communicate(timeout=30)
        time.sleep(2.5)
    finally:
        agent.send_signal(signal.SIGTERM)
        _, log = agent.communicate(timeout=30)
    check(agent.returncode == 0, f"agent exited {agent.returncode}: {log[-2000:]}")
    start = [l for l in log.splitlines() if " started: " in l]
    check(start and "sample_rate_hz=100" in start[0] and "interval_s=2" in start[0]
          and "cpus=" in start[0] and f"outputs=dir:{outdir}" in start[0]
          and "host=test-host" in start[0], f"start line: {start}")
    windows = [l for l in log.splitlines() if " window: processes=" in l]
    check(len(windows) >= 2, f"window summaries: {windows}")
    for l in windows:
        for key in ("samples=", "lost_samples=", "unnamed_frames=", "truncated_stacks="):
            check(key in l, f"{key} missing in {l}")
    mine = sorted(os.path.join(outdir, f) for f in os.listdir(outdir)
                  if f.startswith(f"cpu_split.{w.pid}."))
    check(mine, f"no profile for pid {w.pid} in {os.listdir(outdir)[:10]}")
    ts = traces(*mine)
    per, whole, total = split_of(ts)
    cpu_s = float(re.search(r"cpu_seconds=([0-9.]+)", w_out).group(1))
    print(f"    {len(mine)} profiles, {total} samples for {cpu_s:.2f}s CPU, split {per}")
    # Attributed from its first moments: a process seen late would lose more.
    check(total >= 0.85 * HZ * cpu_s, f"{total} samples for {cpu_s:.2f}s of CPU at {HZ} Hz")
    check(per["hot_a"] > per["hot_b"] > per["hot_c"] > 0, f"split {per}")
    # Whole stacks for a process started after the agent too: maps read at
    # its exec predate libc, and must be read again.
    cut = sum(t.count for t in ts if any(f.startswith("[truncated") for f in t.frames))
    check(whole >= 0.95 * total and cut <= 0.05 * total,
          f"{whole}/{total} samples reach main, {cut} end truncated")
    for t in ts:
        for key in ("pid", "tid", "thread", "comm", "service", "host"):
            check(key in t.labels, f"label {key} missing: {t.labels}")
        check(t.labels["service"] == "cpu_split" and t.labels["host"] == "test-host", t.labels)
    r = raw(mine[0])
    check("samples/count cpu/nanoseconds" in r, "sample types")
    check("PeriodType: cpu nanoseconds" in r and "Period: 10000000" in r, "period")
    check(re.search(r"Duration: [0-9.]+", r), "duration")
    # One file per process per window: the names say so.
    stamps = {f.split(".")[2] for f in map(os.path.basename, mine)}
    check(len(stamps) == len(mine), f"two files of one window for one pid: {mine}")


TESTS = [test_usage, test_record_pid_split_and_rate, test_record_whole_machine, test_kernel_stacks,
         test_agent_windows] + server_tests.TESTS + browser_tests.TESTS


def main():
    if os.geteuid() != 0:
        print("integration: needs root (BPF, perf events)", file=sys.stderr)
        return 1
    wanted = set(sys.argv[1:])
    passed = failed = 0
    for t in TESTS:
        if wanted and t.__name__ not in wanted:
            continue
        with tempfile.TemporaryDirectory(prefix="cx-it-") as tmp:
            t0 = time.time()
            print(f"[ RUN  ] {t.__name__}", flush=True)
            try:
                t(tmp)
                passed += 1
                print(f"[  OK  ] {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failed += 1
                print(f"[ FAIL ] {t.__name__}: {e}", flush=True)
                if not isinstance(e, (Failure, server_tests.Failure)):
                    traceback.print_exc()
    print(f"integration: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
