"""Phases of 0.4 s since the process started, each in its own function.

    python py_phases.py PHASES

Phase k runs from 0.4 k s to 0.4 (k + 1) s after the process's start
(its start time in /proc/self/stat, on the boot clock), in phase_k: a
sample in phase_k, named, proves the profiler named this interpreter's
frames within 0.4 (k + 1) s of its start.
"""
import os
import sys
import time

PHASE_S = 0.4


def since_start():
    """Seconds since this process started (fork; exec follows at once)."""
    with open("/proc/self/stat") as f:
        start = int(f.read().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start / os.sysconf("SC_CLK_TCK")


def spin(until):
    x = 0
    while time.monotonic() < until:
        for i in range(200):
            x = (x + i) & 0xFFFF
    return x


def phase_0(until):
    return spin(until)


def phase_1(until):
    return spin(until)


def phase_2(until):
    return spin(until)


def phase_3(until):
    return spin(until)


def phase_4(until):
    return spin(until)


def phase_5(until):
    return spin(until)


def phase_6(until):
    return spin(until)


def phase_7(until):
    return spin(until)


def phase_8(until):
    return spin(until)


def phase_9(until):
    return spin(until)


def phase_10(until):
    return spin(until)


def phase_11(until):
    return spin(until)


PHASES = [phase_0, phase_1, phase_2, phase_3, phase_4, phase_5, phase_6, phase_7, phase_8,
          phase_9, phase_10, phase_11]


def main(n):
    start = time.monotonic() - since_start()  # the process's start, on the monotonic clock
    for k in range(n):
        end = start + PHASE_S * (k + 1)
        if time.monotonic() < end:
            PHASES[k](end)
    print("started_ago_s=%.3f" % (time.monotonic() - start))


main(int(sys.argv[1]))
