"""The test guest's Python workload: a 2:1 CPU split over hot_a and hot_b,
each under dispatch -> run -> <module>, until killed. Only builtin modules
(sys, time): the guest carries the interpreter and the few files its
start-up reads, not the standard library.

    python3 -S -I py_guest.py
"""
import time

N = 400


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


def run():
    x = 0
    k = 0
    while True:
        # Short rounds (well under a 10 ms sample period even emulated), their
        # length moving around N so that they do not keep step with the
        # sampling clock; hot_a always gets twice hot_b's count.
        n = N + (k * 7919) % N
        k += 1
        x ^= dispatch(0, 2 * n)
        x ^= dispatch(1, n)
        if k % 1000 == 0:
            time.sleep(0)
    return x


run()
