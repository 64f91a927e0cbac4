"""CPU split 2:1 over hot_a and hot_b, each under dispatch -> run -> <module>.

    python py_split.py SECONDS [cpu]

hot_a and hot_b are the same loop over small ints (under 2^30: one-digit
ints, so every iteration costs the same); each round gives hot_a twice
the count it gives hot_b. The count varies from round to round (the same
seeded sequence every run) so that the rounds do not keep step with the
sampling clock. Runs SECONDS of wall time, or with "cpu" until the process
has used SECONDS of CPU time. Prints cpu_seconds= at the end.
"""
import random
import sys
import time

N = 20000


def hot_a(n):
    x = 0
    for i in range(n):
        x = (x + i) & 0xFFFF  # HOT_A
    return x


def hot_b(n):
    x = 0
    for i in range(n):
        x = (x + i) & 0xFFFF  # HOT_B
    return x


def dispatch(which, n):
    if which == 0:
        return hot_a(n)
    return hot_b(n)


def run(seconds, clock):
    end = clock() + seconds
    x = 0
    rng = random.Random(1)
    while clock() < end:
        n = rng.randrange(N // 2, N * 3 // 2)
        x ^= dispatch(0, 2 * n)
        x ^= dispatch(1, n)
    return x


run(float(sys.argv[1]), time.process_time if sys.argv[2:] == ["cpu"] else time.time)
print("cpu_seconds=%.3f" % time.process_time())
