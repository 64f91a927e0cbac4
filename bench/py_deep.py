"""The Python benchmark's workload: a pure-Python loop at the bottom of a
recursion, so every sample has the same known Python depth: DEPTH frames
(<module>, main, dive x (DEPTH - 3), spin).

    python bench/py_deep.py SECONDS DEPTH
"""
import sys
import time


def spin(end):
    x = 0
    while time.time() < end:
        for i in range(20000):
            x = (x + i) & 0xffff
    return x


def dive(n, end):
    if n > 0:
        return dive(n - 1, end) + 1
    return spin(end)


def main():
    seconds, depth = float(sys.argv[1]), int(sys.argv[2])
    dive(depth - 4, time.time() + seconds)


main()
