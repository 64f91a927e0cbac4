"""The agent under the DaemonSet's memory limit (issue 36): run in a memory
cgroup whose limit is the manifest's limits.memory (no swap), on this node
with a process of 5,000 threads more, for three windows. It must not be
OOM-killed, and must go on writing windows with that process in them.

The cgroup holds the agent to what a container's limit holds it to: its
heap, the file pages it touched first, and the BPF maps it created
(tests/install/memcg.py)."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

from common import BUILD, Failure, check
from kube import load
from memcg import Memcg

THREADS = 5000
WINDOWS = 3
INTERVAL = 5

# 5,000 threads that wake every second, out of step, and work a little: the agent sees them in its samples and in /proc/PID/task, not only
# as a count.
THREADS_PY = """
import random, sys, threading, time
n, seconds = int(sys.argv[1]), float(sys.argv[2])
go, stop = threading.Event(), threading.Event()
def spin():
    go.wait()  # all started first: 5,000 starts beside running threads take a minute
    stop.wait(random.random())  # out of step: in step they thrash over the GIL
    while not stop.is_set():
        sum(range(100))
        stop.wait(1.0)
threading.stack_size(256 * 1024)
ts = [threading.Thread(target=spin, daemon=True) for _ in range(n)]
for t in ts:
    t.start()
go.set()
print("started", flush=True)
time.sleep(seconds)
stop.set()
for t in ts:
    t.join()
"""


def limit_bytes(text):
    """A Kubernetes quantity of memory (Mi, Gi, M, G or bytes) in bytes."""
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi|K|M|G)?", text)
    check(m, f"the DaemonSet's memory limit {text!r} is not a quantity this test reads")
    mult = {None: 1, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    return int(m.group(1)) * mult[m.group(2)]


def manifest_limit():
    ds = next(d for d in load() if d["kind"] == "DaemonSet")
    return ds["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"]


def run_under_limit(tmp, limit, threads=THREADS):
    """The agent in a cgroup of `limit` bytes beside `threads` threads; its
    log, the cgroup's OOM kills and peak charge (MiB), whether it still
    ran at the end, and how many profiles of the thread process it wrote."""
    out = os.path.join(tmp, "memlimit-out")
    os.makedirs(out, exist_ok=True)
    span = INTERVAL * (WINDOWS + 1) + 30
    w = subprocess.Popen([sys.executable, "-c", THREADS_PY, str(threads), str(span)],
                         stdout=subprocess.PIPE, text=True)
    cg = Memcg(f"cx-install-memlimit-{os.getpid()}", limit)
    a = None
    try:
        check(w.stdout.readline().strip() == "started", "the 5,000-thread workload did not start")
        check(cg.path, "no memory cgroup could be made (cgroup v1 memory, or cgroup2 with memory)")
        a = subprocess.Popen([os.path.join(BUILD, "codexray-node-agent"), "--interval",
                              str(INTERVAL), "--output-dir", out], stderr=subprocess.PIPE,
                             text=True, preexec_fn=cg.enter)
        lines = []
        done = threading.Event()

        def read_log():
            for line in a.stderr:
                lines.append(line)
                if sum(" window: processes=" in x for x in lines) >= WINDOWS:
                    done.set()
            done.set()  # ended

        threading.Thread(target=read_log, daemon=True).start()
        done.wait(timeout=INTERVAL * WINDOWS + 120)
        alive = a.poll() is None
        kills, peak = cg.oom_kills(), cg.peak_mib()
        mine = [f for f in os.listdir(out) if f".{w.pid}." in f and f.endswith(".pb.gz")]
        return "".join(lines), kills, peak, alive, len(mine)
    finally:
        if a and a.poll() is None:
            a.send_signal(signal.SIGTERM)
            try:
                a.wait(timeout=60)
            except subprocess.TimeoutExpired:
                a.kill()
                a.wait()
        w.kill()
        w.wait()
        cg.remove()


def test_agent_memory_limit(tmp):
    text = manifest_limit()
    limit = limit_bytes(text)
    log, kills, peak, alive, profiled = run_under_limit(tmp, limit)
    windows = re.findall(r" window: processes=(\d+) .* profiles=(\d+)", log)
    tail = "".join(log.splitlines(True)[-15:])
    check(kills == 0, f"the agent was OOM-killed {kills} time(s) under the DaemonSet's limit "
          f"{text} (peak charge {peak:.1f} MiB):\n{tail}")
    check(alive, f"the agent ended under the limit {text}:\n{tail}")
    check(len(windows) >= WINDOWS, f"{len(windows)} windows written, {WINDOWS} wanted:\n{tail}")
    check(profiled > 0, f"no profile of the {THREADS}-thread process was written:\n{tail}")
    print(f"    limit {text}: {len(windows)} windows beside {THREADS} threads, no OOM kill, "
          f"peak charge {peak:.1f} MiB ({100 * peak * 2**20 / limit:.0f} % of the limit)")


if __name__ == "__main__":
    # By hand: `memlimit.py 40Mi` runs the same under another limit, to see
    # a limit too low end in OOM kills (the check can fail).
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        lim = limit_bytes(sys.argv[1]) if len(sys.argv) > 1 else limit_bytes(manifest_limit())
        log, kills, peak, alive, _ = run_under_limit(d, lim)
        print(f"oom_kills={kills} peak_mib={peak:.1f} alive={alive} "
              f"windows={log.count(' window: processes=')}")
        if kills:
            raise Failure("OOM-killed")
