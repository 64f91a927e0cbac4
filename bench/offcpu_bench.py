#!/usr/bin/env python3
"""make bench, off-CPU part (issue 32): what recording off-CPU time costs a
context-switch-heavy program. bench/pingpong passes a byte between two
threads on one CPU over pipes (every round trip two blocking reads and two
context switches) for SECONDS, under each of, REPS rounds:

  none       nothing recording
  hook       an empty tp_btf/sched_switch program (bench/switch_floor): what
             the hook alone costs, the floor under any program there
  cpu        `codexray-node-agent record --no-off-cpu` of the whole machine, CPU only
  off-cpu    the same with off-CPU time (the default; the hook duty-cycled above
             off-cpu-switch-rate: docs/internals/bpf.md)
  off-cpu-always  --off-cpu --off-cpu-switch-rate 0: the hook attached all
             the time (before the duty cycle)
  peer       offcputime from Debian's bpfcc-tools (offcputime-bpfcc), or,
             where it is not installed or does not run on this kernel (bcc
             needs kernel headers and kprobes), `perf record --off-cpu -a`

Each round runs every mode once, back to back, in an order rotated from
round to round and reversed every other round, so a drift of the machine's
load falls on every mode alike; many short rounds rather than a few long
ones, as a busy neighbour's burst then spoils one round, not the figure.
It reports each mode's median round trips per second and spread (the
interquartile range and the extremes), and the changes of throughput
(negative: slower) as medians of per-round ratios: each round's mode
against the same round's `none`, and the bound's figure, off-cpu against
cpu in the same round (issue 32: a loss of at most 3 %), with its
interquartile range; off-cpu against hook is the cost
of the program itself over an empty one on the same hook. It prints the
load average before and after: figures from a machine others use at the
same time are noisy; compare the modes of one run, not runs.

    python3 bench/offcpu_bench.py [--seconds S] [--reps R] [--modes none,cpu,...]
                                  [--walks N,...]
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
AGENT = os.path.join(B, "codexray-node-agent")
PINGPONG = os.path.join(B, "bench", "pingpong")
FLOOR = os.path.join(B, "bench", "switch_floor")
BCC = "/usr/sbin/offcputime-bpfcc"
USE_BCC = False  # set by main() once offcputime-bpfcc was seen to run here


def bcc_runs():
    """Whether offcputime-bpfcc runs on this kernel: bcc compiles its program
    against the running kernel's headers and attaches a kprobe, and a kernel
    without either (this machine's 6.18: no headers package, no kprobes)
    makes it exit at once with an error."""
    if not os.access(BCC, os.X_OK):
        return False
    try:
        return subprocess.run([BCC, "1"], capture_output=True, timeout=120).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def wait_line(p, needle, timeout):
    """Reads p's stderr until a line holds needle; False at EOF/timeout."""
    end = time.monotonic() + timeout
    for line in p.stderr:
        if needle in line:
            return True
        if time.monotonic() > end:
            return False
    return False


def start_recorder(mode, tmp):
    """The recorder of mode, once it records; None for none."""
    if mode == "none":
        return None
    if mode == "hook":
        p = subprocess.Popen([FLOOR, FLOOR + ".bpf.o"], stderr=subprocess.PIPE, text=True)
        if not wait_line(p, "attached", 60):
            raise SystemExit("hook: the empty sched_switch program did not attach")
        return p
    if mode == "cpu" or mode.startswith("off-cpu"):
        args = [AGENT, "record", "--duration", "3600", "--output", os.path.join(tmp, mode + ".pb.gz")]
        # Off-CPU time is on by default: CPU only is --no-off-cpu.
        args.append("--off-cpu" if mode.startswith("off-cpu") else "--no-off-cpu")
        if mode.startswith("off-cpu-w"):  # off-cpu-wN: with --off-cpu-walks N
            args += ["--off-cpu-walks", mode[len("off-cpu-w"):]]
        if mode == "off-cpu-always":
            args += ["--off-cpu-switch-rate", "0"]
        p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
        if not wait_line(p, "record: sample_rate_hz=", 60):
            raise SystemExit(f"{mode}: the agent did not start")
        return p
    if USE_BCC:
        # Folded stacks of user and kernel, every process, until interrupted.
        p = subprocess.Popen([BCC, "-f"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True)
        time.sleep(8)  # bcc compiles its program first
    else:
        p = subprocess.Popen(["perf", "record", "--off-cpu", "-a", "-g", "-o",
                              os.path.join(tmp, "perf.data")], stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
        time.sleep(3)
    if p.poll() is not None:
        raise SystemExit(f"peer exited {p.returncode}: {p.stderr.read()[-500:]}")
    return p


def stop(p):
    """Stops p; its stderr from then on ("" for none)."""
    if p is None:
        return ""
    p.send_signal(signal.SIGINT)
    try:
        return p.communicate(timeout=300)[1] or ""
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        return ""


def run_once(mode, seconds, tmp):
    rec = start_recorder(mode, tmp)
    try:
        out = subprocess.run([PINGPONG, str(seconds)], capture_output=True, text=True,
                             check=True, timeout=seconds + 60).stdout
    finally:
        err = stop(rec)
    # The duty cycle's slots and what an attach and a detach took.
    for line in err.splitlines():
        if "duty cycle:" in line:
            print(f"    {mode}: {line.split('sampler: ', 1)[-1]}", flush=True)
    return float(out.strip())


def quartiles(v):
    """The first quartile, median and third quartile of v."""
    if len(v) < 2:
        return v[0], v[0], v[0]
    q = statistics.quantiles(v, n=4, method="inclusive")
    return q[0], q[1], q[2]


def per_round_change(a, b):
    """Each round's change of throughput of a against b, in % (negative:
    a is slower): 100 * (a / b - 1)."""
    return [100 * (x / y - 1) for x, y in zip(a, b)]


def report(rates, modes, seconds, reps, peer, load0, load1):
    print(f"\noff-CPU cost on pingpong ({seconds} s x {reps} rounds; peer: {peer}; "
          f"load average {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f} before, "
          f"{load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f} after):")
    print(f"  {'mode':12s} {'median':>10s} {'IQR':>21s} {'min..max':>21s}   change vs none "
          f"(median of rounds, IQR)")
    for m in modes:
        v = rates[m]
        q1, med, q3 = quartiles(v)
        line = f"  {m:12s} {med:10.0f} {q1:10.0f}..{q3:<10.0f} {min(v):10.0f}..{max(v):<10.0f}"
        if m != "none" and "none" in rates:
            l1, lm, l3 = quartiles(per_round_change(v, rates["none"]))
            line += f"   {lm:+5.1f} % ({l1:+.1f} .. {l3:+.1f})"
        print(line)
    offs = [m for m in modes if m.startswith("off-cpu")]
    for a, b, what in ([(m, "cpu", "the bound: a loss of at most 3 %") for m in offs] +
                       [(m, "hook", "the program over an empty one on the hook") for m in offs] +
                       [("hook", "none", "the hook alone")]):
        if a not in rates or b not in rates:
            continue
        ch = per_round_change(rates[a], rates[b])
        l1, lm, l3 = quartiles(ch)
        print(f"  {a} vs {b}: {lm:+.1f} % median of {len(ch)} rounds (IQR {l1:+.1f} .. "
              f"{l3:+.1f}, extremes {min(ch):+.1f} .. {max(ch):+.1f}; {what})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=2)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--modes", default="none,hook,cpu,off-cpu,peer",
                    help="comma-separated subset of none,hook,cpu,off-cpu,off-cpu-always,peer")
    ap.add_argument("--walks", default="",
                    help="comma-separated N: an off-cpu-wN mode each (--off-cpu-walks N)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("offcpu_bench: needs root", file=sys.stderr)
        return 1
    want = a.modes.split(",")
    bad = [m for m in want if m not in ("none", "hook", "cpu", "off-cpu", "off-cpu-always", "peer")]
    if bad or not want or a.reps < 1 or a.seconds < 1:
        print(f"offcpu_bench: bad --modes/--reps/--seconds ({','.join(bad)})", file=sys.stderr)
        return 2
    global USE_BCC
    peer = None
    if "peer" in want:
        USE_BCC = bcc_runs()
        peer = "offcputime-bpfcc" if USE_BCC else (
            "perf record --off-cpu" if shutil.which("perf") else None)
        if not USE_BCC and os.access(BCC, os.X_OK):
            print("offcpu_bench: offcputime-bpfcc does not run on this kernel (no headers or "
                  "kprobes): the peer is perf record --off-cpu", flush=True)
    extra = [f"off-cpu-w{int(n)}" for n in a.walks.split(",") if n]
    modes = [m for m in ("none", "hook", "cpu", "off-cpu", "off-cpu-always", "peer") if m in want and
             (m != "peer" or peer)] + extra
    rates = {m: [] for m in modes}
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cx-offbench-") as tmp:
        for r in range(a.reps):
            k = r % len(modes)
            order = modes[k:] + modes[:k]
            for m in order if r % 2 == 0 else order[::-1]:
                rate = run_once(m, a.seconds, tmp)
                rates[m].append(rate)
                print(f"  rep {r + 1} {m:8s} {rate:12.0f} round trips/s", flush=True)
    report(rates, modes, a.seconds, a.reps, peer, load0, os.getloadavg())
    return 0


if __name__ == "__main__":
    sys.exit(main())
