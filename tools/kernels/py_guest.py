"""The test guest's Python workload: hot_a and hot_b, each under dispatch ->
run -> <module>, hot_a called twice as often (2:1), until killed; and the
thread's own CPU time spent in each one's calls, kept in the file OUT as
"SECONDS_A SECONDS_B ROUNDS" (replaced whole after each round).

Why it measures: emulated (TCG), equal interpreted work does not take equal
time. Seen in the arm64 guests with this loop: 20 calls of hot_a and 10 of
hot_b taking 73:27 of the thread's CPU time by its own clock (68:32 in
another process at the same moment; 2:1 to the point natively), and in
processes calling hot_a(2n), hot_b(n) the sampled split moving from 61:39
to 77:23 from one process to the next. The host checks the samples against
this measured split, which is what the sampler can be asked to find.
Only builtin modules (sys, time, posix): the guest carries the interpreter
and the few files its start-up reads, not the standard library.

    python3 -S -I py_guest.py OUT
"""
import posix
import sys
import time

N = 400
CALLS = 10  # hot_b's calls a round; hot_a gets twice as many


def hot_a(n):
    x = 0
    for i in range(n):
        x = (x + i) & 0xFFFF
    return x


def hot_b(n):
    x = 0
    for i in range(n):
        x = (x + i) & 0xFFFF
    return x


def dispatch(which, n):
    if which == 0:
        return hot_a(n)
    return hot_b(n)


def save(out, ta, tb, k):
    with open(out + ".tmp", "w") as f:
        f.write(f"{ta:.6f} {tb:.6f} {k}\n")
    posix.rename(out + ".tmp", out)


def run(out):
    x = 0
    k = 0
    ta = tb = 0.0
    while True:
        # Each call alike (the same n: one call of 2 * n turns costs more
        # than two of n, its i above 256 more often, and range's ints up to
        # 256 are cached, the others made and freed each turn); n moving
        # around N so that the calls do not keep step with the sampling
        # clock. The clock is read around each run of calls, not each call.
        n = N + (k * 7919) % N
        k += 1
        t0 = time.thread_time()
        for _ in range(2 * CALLS):
            x ^= dispatch(0, n)
        t1 = time.thread_time()
        for _ in range(CALLS):
            x ^= dispatch(1, n)
        t2 = time.thread_time()
        ta += t1 - t0
        tb += t2 - t1
        save(out, ta, tb, k)
    return x


run(sys.argv[1])
