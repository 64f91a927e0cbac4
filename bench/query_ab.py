#!/usr/bin/env python3
"""Two server builds' flame-graph queries side by side on one stored week.

    python3 bench/query_ab.py STORE SERVER_A SERVER_B [--rounds 5] [--reps 11]

STORE is a week kept by `server_bench.py --queries-only --keep STORE` (its
server-data and times.json). Each round starts each server in turn on a
copy of the store made once (the same data for both; a server may build
what its version keeps, such as rollups, when it opens the copy), asks the
week's and the last hour's flame graph once to warm up, then --reps times,
and stops it. Printed: per server and query the median of every query's
server CPU and wall time, each round's medians, the load average, and
whether both servers' responses were byte for byte the same.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import server_tests  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run import proc_cpu  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("store")
    ap.add_argument("servers", nargs=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=11)
    args = ap.parse_args()
    t = json.load(open(os.path.join(args.store, "times.json")))
    start, end = t["start"], t["end"]
    qs = {"hour": f"/api/v1/profile?app=benchapp&from={end - 3600 + 17}&to={end + 17}"
                  "&format=flamegraph",
          "week": f"/api/v1/profile?app=benchapp&from={start + 317}&to={end - 283}"
                  "&format=flamegraph"}
    res = {b: {k: [] for k in qs} for b in args.servers}
    per = {b: {k: [] for k in qs} for b in args.servers}
    bodies = {k: {} for k in qs}
    loads = []
    with tempfile.TemporaryDirectory(prefix="cx-ab-") as tmp:
        for b in args.servers:
            shutil.copytree(os.path.join(args.store, "server-data"),
                            os.path.join(tmp, os.path.basename(b) + str(args.servers.index(b)),
                                         "server-data"))
        for i, b in enumerate(args.servers):
            # Once alone first: what a server's version builds at open
            # (rollup levels it adds) is built before anything is timed.
            server_tests.SERVER = b
            srv = server_tests.Server(os.path.join(tmp, os.path.basename(b) + str(i)),
                                      "--retention", "3650d")
            try:
                last = -1
                while True:
                    time.sleep(6)  # a maintenance pass every 5 s
                    built = server_tests.metric(srv, "codexray_rollups_built_total")
                    if built == last and server_tests.metric(srv, "codexray_rollups_pending") == 0:
                        break
                    last = built
            finally:
                srv.stop()
        loads.append(os.getloadavg()[0])
        for _ in range(args.rounds):
            for i, b in enumerate(args.servers):
                server_tests.SERVER = b
                srv = server_tests.Server(os.path.join(tmp, os.path.basename(b) + str(i)),
                                          "--retention", "3650d")
                try:
                    for k, q in qs.items():
                        st, body = srv.get(q)
                        assert st == 200, (b, k, st, body[:200])
                        if bodies[k].setdefault(b, body) != body:
                            print(f"{b} {k}: the response changed between rounds")
                        one = []
                        for _ in range(args.reps):
                            c0, t0 = proc_cpu(srv.p.pid), time.time()
                            st, _ = srv.get(q)
                            one.append(((proc_cpu(srv.p.pid) - c0) * 1000,
                                        (time.time() - t0) * 1000))
                        res[b][k] += one
                        per[b][k].append((statistics.median(x[0] for x in one),
                                          statistics.median(x[1] for x in one)))
                finally:
                    srv.stop()
                loads.append(os.getloadavg()[0])
    print(f"load average (1 min) over the timed rounds: {min(loads):.1f}-{max(loads):.1f}")
    for k in qs:
        for b in args.servers:
            v = res[b][k]
            print(f"{k} {b}: server CPU {statistics.median(x[0] for x in v):.1f} ms, wall "
                  f"{statistics.median(x[1] for x in v):.1f} ms (median of {len(v)}; rounds "
                  + " ".join(f"{c:.1f}/{w:.1f}" for c, w in per[b][k])
                  + f"), {len(bodies[k][b])} bytes")
        a, b = (bodies[k][s] for s in args.servers)
        print(f"{k}: responses " + ("byte for byte the same" if a == b else "DIFFER"))


if __name__ == "__main__":
    main()
