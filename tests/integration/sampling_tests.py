"""When samples are taken (issue 15): a period in step with the kernel's
tick (250 Hz here) or with periodic work over- or under-counts processes
that switch often. Several processes switching on one CPU and periodic work
on another, recorded at 100, 99 and 250 Hz at once over the same minute:
each one's share of samples against its share of CPU time from /proc."""
import os
import re
import subprocess
import threading
import time

from pprof_read import traces

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
WORK = os.path.join(ROOT, "build", "workloads")
SECONDS = 60


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


# (CPU, arguments of tick_mix): three that spin 2-4 ms and sleep 1 ms
# sharing CPU 0; on CPU 1, work that runs 3 ms every 10 ms on the clock
# beside one more spinner.
WORK_MIX = [(0, ["spin", 3000, 1000]), (0, ["spin", 2000, 1000]), (0, ["spin", 4000, 1000]),
            (1, ["periodic", 10000, 3000]), (1, ["spin", 2000, 1000])]


def cpu_ns(pid):
    """The process's CPU time in ns (schedstat: the scheduler's own sum,
    not tick-sampled like /proc/PID/stat's utime)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            total += int(f.read().split()[0])
    return total


class Recording:
    """One `record` of the whole machine; CPU times of pids read when it
    says it has started and `SECONDS` later."""

    def __init__(self, tmp, pids, rate, *extra):
        self.pids, self.rate, self.extra = pids, rate, extra
        self.out = os.path.join(tmp, f"rate-{rate}-{'-'.join(extra) or 'dithered'}.pb.gz")
        self.p = subprocess.Popen([AGENT, "record", "--duration", str(SECONDS), "--output",
                                   self.out, "--sample-rate", str(rate), "--unwind", "fp",
                                   *extra], stderr=subprocess.PIPE, text=True)
        self.cpu0 = self.cpu1 = None
        self.log = []
        self.t = threading.Thread(target=self._follow)
        self.t.start()

    def _follow(self):
        for line in self.p.stderr:
            self.log.append(line)
            if self.cpu0 is None and re.search(r"record: sample_rate_hz=", line):
                self.cpu0 = {p: cpu_ns(p) for p in self.pids}
                threading.Timer(SECONDS, self._end).start()

    def _end(self):
        self.cpu1 = {p: cpu_ns(p) for p in self.pids}

    def wait(self):
        rc = self.p.wait(timeout=SECONDS + 120)
        self.t.join()
        check(rc == 0, f"record at {self.rate} Hz exited {rc}: {''.join(self.log)[-2000:]}")
        check(self.cpu1 is not None, "no start line from record")
        return traces(self.out)


def errors(rec, ts):
    """Per pid: (samples, share of samples, share of CPU, relative error,
    4 sigma of the error a random sampler would make)."""
    n = {p: 0 for p in rec.pids}
    for t in ts:
        pid = int(t.labels.get("pid", 0))
        if pid in n:
            n[pid] += t.count
    cpu = {p: rec.cpu1[p] - rec.cpu0[p] for p in rec.pids}
    ntot, ctot = sum(n.values()), sum(cpu.values())
    out = {}
    for p in rec.pids:
        q = cpu[p] / ctot
        s = n[p] / ntot if ntot else 0
        out[p] = (n[p], s, q, s / q - 1, 4 * ((1 - q) / (q * ntot)) ** 0.5 if ntot else 1)
    return out, ntot, ctot


def test_sample_times_not_in_step(tmp):
    """Each process's share of samples within 5 % of its share of CPU time
    (or 4 sigma of a random sampler's error where that is larger), at 100, 99
    and 250 Hz, with the default dithered period; and the total within 5 % of
    rate x CPU time. A fixed 4 ms period (250 Hz) recorded at the same time
    must be off by more than 15 % for at least one process: the workload does
    expose lock-step."""
    procs = [subprocess.Popen(["taskset", "-c", str(cpu), os.path.join(WORK, "tick_mix"),
                               *map(str, args), str(SECONDS + 60)])
             for cpu, args in WORK_MIX]
    try:
        time.sleep(0.5)
        pids = [p.pid for p in procs]
        recs = [Recording(tmp, pids, 100), Recording(tmp, pids, 99), Recording(tmp, pids, 250),
                Recording(tmp, pids, 250, "--sample-times", "fixed")]
        got = [(r, r.wait()) for r in recs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    bad = []
    for r, ts in got:
        errs, ntot, ctot = errors(r, ts)
        fixed = bool(r.extra)
        want = ctot / 1e9 * r.rate
        print(f"    {r.rate} Hz {'fixed' if fixed else 'dithered'}: {ntot} samples for "
              f"{ctot / 1e9:.1f} s of CPU ({ntot / want:.3f} of rate x CPU)")
        for (cpu, args), p in zip(WORK_MIX, pids):
            n, s, q, e, sig4 = errs[p]
            tol = max(0.05, sig4)
            print(f"      cpu {cpu} {args[0]:8} {args[1]:>5}/{args[2]:<5}: {n:6} samples, share "
                  f"{s:.3f} of samples, {q:.3f} of CPU: {e:+.1%} (allowed {tol:.1%})")
            if not fixed and abs(e) > tol:
                bad.append(f"{r.rate} Hz pid {p} {args}: {e:+.1%} > {tol:.1%}")
        if fixed:
            # Which process the tick's phase favours changes from run to run
            # (seen: the periodic work at +46 % or -2 %, a spinner at +32 %).
            worst = max(abs(errs[p][3]) for p in pids)
            check(worst > 0.15, f"a fixed 4 ms period sampled every process within "
                                f"{worst:.1%} of its CPU: the workload no longer shows lock-step")
        elif abs(ntot / want - 1) > 0.05:
            bad.append(f"{r.rate} Hz: {ntot} samples for {want:.0f} expected")
    check(not bad, "; ".join(bad))


TESTS = [test_sample_times_not_in_step]
