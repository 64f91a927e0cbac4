#!/usr/bin/env python3
"""make bench, off-CPU part (issue 32): what recording off-CPU time costs a
context-switch-heavy program. bench/pingpong passes a byte between two
threads on one CPU over pipes (every round trip two blocking reads and two
context switches) for SECONDS, under, in turn and interleaved REPS times
(the order reversed every other round):

  none       nothing recording
  hook       an empty tp_btf/sched_switch program (bench/switch_floor): what
             the hook alone costs, the floor under any program there
  cpu        `codexray-node-agent record` of the whole machine, CPU only
  off-cpu    the same with --off-cpu
  peer       offcputime from Debian's bpfcc-tools (offcputime-bpfcc), or,
             where it is not installed or does not run on this kernel (bcc
             needs kernel headers and kprobes), `perf record --off-cpu -a`

It reports each mode's median round trips per second and its loss against
`none` (and off-cpu's against cpu, and against hook: the cost of the
program itself). Figures from a machine others use at
the same time are noisy: compare the modes of one run, not runs.

    python3 bench/offcpu_bench.py [--seconds S] [--reps R]
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
    if mode in ("cpu", "off-cpu"):
        args = [AGENT, "record", "--duration", "3600", "--output", os.path.join(tmp, mode + ".pb.gz")]
        if mode == "off-cpu":
            args.append("--off-cpu")
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
    if p is None:
        return
    p.send_signal(signal.SIGINT)
    try:
        p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_once(mode, seconds, tmp):
    rec = start_recorder(mode, tmp)
    try:
        out = subprocess.run([PINGPONG, str(seconds)], capture_output=True, text=True,
                             check=True, timeout=seconds + 60).stdout
    finally:
        stop(rec)
    return float(out.strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("offcpu_bench: needs root", file=sys.stderr)
        return 1
    global USE_BCC
    USE_BCC = bcc_runs()
    peer = "offcputime-bpfcc" if USE_BCC else (
        "perf record --off-cpu" if shutil.which("perf") else None)
    if not USE_BCC and os.access(BCC, os.X_OK):
        print("offcpu_bench: offcputime-bpfcc does not run on this kernel (no headers or "
              "kprobes): the peer is perf record --off-cpu", flush=True)
    modes = ["none", "hook", "cpu", "off-cpu"] + (["peer"] if peer else [])
    rates = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="cx-offbench-") as tmp:
        for r in range(a.reps):
            # Alternating order: a drift of the machine's load over the run
            # falls on every mode alike.
            for m in modes if r % 2 == 0 else modes[::-1]:
                rate = run_once(m, a.seconds, tmp)
                rates[m].append(rate)
                print(f"  rep {r + 1} {m:8s} {rate:12.0f} round trips/s", flush=True)
    med = {m: statistics.median(v) for m, v in rates.items()}
    print(f"\noff-CPU cost on pingpong ({a.seconds} s x {a.reps}, medians; peer: {peer}):")
    for m in modes:
        loss = 100 * (1 - med[m] / med["none"])
        print(f"  {m:8s} {med[m]:12.0f} round trips/s  {loss:+6.1f} % vs none")
    print(f"  off-cpu vs cpu: {100 * (1 - med['off-cpu'] / med['cpu']):+.1f} % "
          f"(the bound: 3 %)")
    print(f"  off-cpu vs hook: {100 * (1 - med['off-cpu'] / med['hook']):+.1f} % "
          f"(the program itself, over an empty one on the same hook)")
    # The spread: each round's loss against the same round's none.
    for m in modes[1:]:
        per = sorted(100 * (1 - x / n) for x, n in zip(rates[m], rates["none"]))
        print(f"  {m:8s} per round vs none: {per[0]:+.1f} .. {per[-1]:+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
