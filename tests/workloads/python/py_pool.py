"""multiprocessing.Pool(2), fork start method: each worker runs pool_hot.

    python py_pool.py CPU_SECONDS

Each worker runs pool_hot until it has used CPU_SECONDS of CPU time (or
for 20 s at most, however busy the machine). Prints the workers' pids
(workers=PID,PID) at the end.
"""
import multiprocessing
import os
import sys
import time


def pool_hot(seconds):
    x = 0
    end = time.process_time() + seconds
    give_up = time.time() + 20
    while time.process_time() < end and time.time() < give_up:
        for i in range(1000):
            x = (x + i) & 0xFFFF  # POOL_HOT
    return os.getpid()


if __name__ == "__main__":
    secs = float(sys.argv[1])
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pids = pool.map(pool_hot, [secs, secs], chunksize=1)
    print("workers=" + ",".join(str(p) for p in sorted(set(pids))))
