"""A key function called back by sorted() in a second thread.

    python py_sort_thread.py SECONDS

The thread "py-sorter" (its OS name set with prctl, so the thread label
says it) sorts a list with key= over and over: key runs under
sort_round -> sorter, with the builtin sorted and list.sort (native code)
between key and sort_round. The main thread spins in main_spin meanwhile.
"""
import ctypes
import sys
import threading
import time


def set_thread_name(name):
    """prctl(PR_SET_NAME): the calling thread's comm."""
    ctypes.CDLL(None, use_errno=True).prctl(15, name, 0, 0, 0)


def key(v):
    x = v
    for _ in range(30):
        x = (x * 31 + 7) & 0xFFFF  # KEY
    return x


def sort_round(data):
    return sorted(data, key=key)


def sorter(seconds):
    set_thread_name(b"py-sorter")
    data = list(range(2000))
    end = time.time() + seconds
    while time.time() < end:
        sort_round(data)


def main_spin(seconds):
    x = 0
    end = time.time() + seconds
    while time.time() < end:
        for i in range(1000):
            x = (x + i) & 0xFFFF  # MAIN
    return x


seconds = float(sys.argv[1])
t = threading.Thread(target=sorter, args=(seconds,))
t.start()
main_spin(seconds)
t.join()
