#!/usr/bin/env python3
"""BPF time per sample of agent builds side by side, in one boot: each build's
`record` and bpftrace `profile:hz:100 { @[pid, ustack, kstack] = count(); }`
run at the same time on the same workload, and the run time per run of each
one's perf_event program (kernel.bpf_stats_enabled: a tail call's time counts
in the program that started it) is taken over the same span. Which build
starts first alternates rep by rep; the ratios are taken rep by rep.

    python3 bench/bpf_ab.py WORKLOAD SECONDS REPS TAG=AGENT [TAG=AGENT...] [--no-bpftrace]

WORKLOAD, each on both CPUs:
  fp       bench/deep 30 frames deep, built with frame pointers (record --pid)
  cfi      the same built -O2 -fomit-frame-pointer (bench/deep_nofp, --pid):
           the CFI rows do all the work (bpftrace's frame-pointer walk stops
           after a frame or two there)
  shallow  workloads/cfi_split (a few frames, no frame pointers; --pid)
  quiet    bench/run.py's quiet machine (cpu_split + 500 bench/many), whole machine
  loaded   its loaded one (two more CPU-bound processes and a parallel
           compile: cc1 without frame pointers), whole machine
Run it under the heavy-work lock; needs root.
"""
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")


def prog_stats():
    j = json.loads(subprocess.run(["bpftool", "prog", "show", "--json"], capture_output=True,
                                  text=True, check=True).stdout)
    return {p["id"]: p for p in j}


def stats(ids):
    allp = prog_stats()
    return {i: (allp[i].get("run_time_ns", 0), allp[i].get("run_cnt", 0)) for i in ids if i in allp}


def start_workload(name, seconds):
    if name == "fp":
        return [subprocess.Popen([B + "/bench/deep", str(seconds), "25", "2"])], True
    if name == "cfi":
        return [subprocess.Popen([B + "/bench/deep_nofp", str(seconds), "25", "2"])], True
    if name == "shallow":
        return [subprocess.Popen([B + "/workloads/cfi_split", str(seconds), "2"],
                                 stdout=subprocess.DEVNULL)], True
    if name == "loaded":
        ws = [subprocess.Popen([B + "/workloads/cpu_split", str(seconds), "2"], stdout=subprocess.DEVNULL),
              subprocess.Popen([B + "/bench/many", "500", str(seconds)], start_new_session=True)]
        for _ in range(2):
            ws.append(subprocess.Popen([B + "/workloads/cpu_split", str(seconds), "1"],
                                       stdout=subprocess.DEVNULL))
        ws.append(subprocess.Popen(["sh", "-c", f"cd {ROOT} && while :; do ls common/*.c | xargs -P 2 -I SRC gcc -O2 -g "
                                    "-std=gnu11 -D_GNU_SOURCE -Ibuild/gen -c SRC -o /dev/null 2>/dev/null; done"],
                                   start_new_session=True))
        return ws, False
    if name == "quiet":
        ws = [subprocess.Popen([B + "/workloads/cpu_split", str(seconds), "2"], stdout=subprocess.DEVNULL),
              subprocess.Popen([B + "/bench/many", "500", str(seconds)], start_new_session=True)]
        return ws, False
    raise SystemExit("unknown workload")


def stop(ws):
    for w in ws:
        try:
            os.killpg(w.pid, signal.SIGKILL) if os.getpgid(w.pid) == w.pid else w.kill()
        except ProcessLookupError:
            pass
    for w in ws:
        w.wait()


def start_agent(path, seconds, pid, tmp, tag):
    argv = [path, "record", "--duration", str(seconds), "--output", f"{tmp}/{tag}.pb.gz"]
    if pid:
        argv += ["--pid", str(pid)]
    a = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    while True:
        line = a.stderr.readline()
        if not line:
            raise RuntimeError("agent ended")
        m = re.search(r"record: .*bpf_prog_id=(\d+)", line)
        if m:
            return a, int(m.group(1))


def start_bpftrace(pid):
    before = set(prog_stats())
    flt = f"/pid == {pid}/ " if pid else ""
    b = subprocess.Popen(["bpftrace", "-e", "profile:hz:100 " + flt + "{ @[pid, ustack, kstack] = count(); }"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        time.sleep(0.2)
        new = [i for i, p in prog_stats().items() if i not in before and p.get("type") == "perf_event"]
        if new:
            return b, new[0]
    raise RuntimeError("bpftrace prog not found")


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    with open("/proc/sys/kernel/bpf_stats_enabled") as f:
        was = f.read().strip()
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    try:
        measure()
    finally:
        with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
            f.write(was)


def measure():
    wl, seconds, reps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    agents = [a.split("=", 1) for a in sys.argv[4:] if "=" in a]
    use_bt = "--no-bpftrace" not in sys.argv
    res = {t: [] for t, _ in agents}
    res["bpftrace"] = []
    for rep in range(reps):
        ws, per_pid = start_workload(wl, seconds + 12)
        try:
            one_rep(ws, per_pid, rep, agents, seconds, use_bt, res)
        finally:
            stop(ws)
    report(wl, agents, res)


def one_rep(ws, per_pid, rep, agents, seconds, use_bt, res):
    if True:
        time.sleep(1.5)
        pid = ws[0].pid if per_pid else 0
        with tempfile.TemporaryDirectory() as tmp:
            order = agents if rep % 2 == 0 else agents[::-1]
            runs = {}
            for tag, path in order:
                runs[tag] = start_agent(path, seconds + 120, pid, tmp, tag)
            bt = start_bpftrace(pid) if use_bt else None
            time.sleep(2)
            ids = {t: r[1] for t, r in runs.items()}
            if bt:
                ids["bpftrace"] = bt[1]
            s0 = stats(ids.values())
            time.sleep(seconds)
            s1 = stats(ids.values())
            line = [f"rep {rep}"]
            for t, i in ids.items():
                dt, dn = s1[i][0] - s0[i][0], s1[i][1] - s0[i][1]
                v = dt / max(dn, 1)
                res[t].append(v)
                line.append(f"{t} {v:.0f} ns/run ({dn} runs)")
            print(", ".join(line), flush=True)
            if bt:
                bt[0].send_signal(signal.SIGINT)
                bt[0].wait()
            for t, r in runs.items():
                r[0].send_signal(signal.SIGINT)
            for t, r in runs.items():
                r[0].wait()


def report(wl, agents, res):
    for t, v in res.items():
        if v:
            print(f"{wl} {t}: median {statistics.median(v):.0f} ns/run, all {[round(x) for x in v]}")
    base = agents[0][0]
    for t, _ in agents[1:] + [("bpftrace", None)]:
        if res[t]:
            print(f"{wl} {t}/{base} per rep: {[round(n / max(o, 1), 3) for n, o in zip(res[t], res[base])]}")
    if res["bpftrace"]:
        for t, _ in agents:
            print(f"{wl} {t}/bpftrace per rep: {[round(n / max(b, 1), 3) for n, b in zip(res[t], res['bpftrace'])]}")


main()
