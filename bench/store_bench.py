#!/usr/bin/env python3
"""SQLite beside ClickHouse in one run: the same generated profiles
(bench/gen_profiles) ingested by a codexray-server on each store, then the
hour's and the whole range's flame graph. ClickHouse runs as the tests run
it: two local clickhouse-server processes as a two-shard cluster
(tests/integration/clickhouse_cluster.py), so its figures include the
Distributed tables' work; both shards share this machine's cores.

    python3 bench/store_bench.py [--procs 4] [--hours 6] [--stacks 2000] [--reps 5]

Ingest: one client, zstd bodies as the agent ships them; wall profiles/s,
the server's CPU per profile, and ClickHouse's (both processes) for the
ClickHouse store. Queries: median wall and server CPU of --reps runs.
"""
import argparse
import concurrent.futures
import gzip
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clickhouse_cluster  # noqa: E402
from server_tests import Server, metric  # noqa: E402
from run import proc_cpu  # noqa: E402
from server_bench import at_time, post, timed, zat_time  # noqa: E402


def ch_cpu():
    return sum(proc_cpu(n.p.pid) for n in clickhouse_cluster.cluster())


def stack_table_bytes(args):
    """Rows and bytes on disk of the stacks and functions tables (both
    shards): what storing each key once a day it is used costs."""
    db = args[args.index("--clickhouse-database") + 1]
    rows = nbytes = 0
    for n in clickhouse_cluster.cluster():
        out = n.query("SELECT sum(rows), sum(bytes_on_disk) FROM system.parts WHERE active AND "
                      f"database = '{db}' AND table IN ('stacks_local', 'functions_local')")
        r, b = (int(x) for x in out.split())
        rows, nbytes = rows + r, nbytes + b
    return rows, nbytes


def run_store(tmp, name, args, bodies, zbodies, start, hours, reps, minutes=60):
    os.makedirs(os.path.join(tmp, name))
    srv = Server(os.path.join(tmp, name), *args)
    is_ch = "--clickhouse" in args
    try:
        url = srv.url + "/api/v1/profiles"
        n = len(bodies)
        # The first hour, one client: the rate.
        z = [zat_time(b, (start + (i % minutes) * 60) * 10**9) for i, b in enumerate(zbodies)]
        c0, k0, t0 = proc_cpu(srv.p.pid), ch_cpu() if is_ch else 0, time.time()
        for b in z:
            assert post(url, b) == 202
        wall = time.time() - t0
        cpu = proc_cpu(srv.p.pid) - c0
        kcpu = (ch_cpu() - k0) if is_ch else 0
        # The other hours, 4 clients.
        t0 = time.time()
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            for h in range(1, hours):
                sh = [at_time(b, (start + h * 3600 + (i % minutes) * 60) * 10**9)
                      for i, b in enumerate(bodies)]
                codes = list(ex.map(lambda b: post(url, b), sh))
                assert all(c == 202 for c in codes), set(codes)
        rest = time.time() - t0
        # Both stores build rollups in the background: wait for them, as
        # server_bench.py does (a pass runs every 5 s).
        t1 = time.time()
        time.sleep(6)
        while time.time() - t1 < 300 and (metric(srv, "codexray_rollups_pending") > 0 or
                                          metric(srv, "codexray_rollups_built_total") == 0):
            time.sleep(0.5)
        rollup_wait = time.time() - t1
        frm = start + 17
        hour = timed(srv, f"/api/v1/profile?app=benchapp&from={frm}&to={frm + 3600}"
                          "&format=flamegraph", reps)
        day = timed(srv, f"/api/v1/profile?app=benchapp&from={start}&to={start + hours * 3600}"
                         "&format=flamegraph", reps)
        size = metric(srv, "codexray_store_bytes")
        keys = stack_table_bytes(args) if is_ch else None
        return dict(keys=keys, rate=n / wall, cpu_ms=cpu / n * 1000, ch_ms=kcpu / n * 1000,
                    rest_rate=n * (hours - 1) / rest if hours > 1 else float("nan"),
                    hour=hour, day=day, bytes=size / (n * hours), rollup_wait=rollup_wait)
    finally:
        srv.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--hours", type=int, default=6)
    ap.add_argument("--stacks", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    minutes = 60
    with tempfile.TemporaryDirectory(prefix="cx-stbench-") as tmp:
        gen = os.path.join(tmp, "profiles")
        end = int(time.time()) // 10800 * 10800 - 10800
        start = end - a.hours * 3600
        subprocess.run([os.path.join(B, "bench", "gen_profiles"), gen, str(a.procs),
                        str(minutes), str(a.stacks), str(start)], check=True)
        files = sorted(os.path.join(gen, f) for f in os.listdir(gen))
        bodies = [open(f, "rb").read() for f in files]
        zbodies = [subprocess.run(["zstd", "-q", "-3", "-c"], input=gzip.decompress(b),
                                  stdout=subprocess.PIPE, check=True).stdout for b in bodies]
        r = {"SQLite": run_store(tmp, "sqlite", [], bodies, zbodies, start, a.hours, a.reps),
             "ClickHouse, 2 shards": run_store(tmp, "ch", clickhouse_cluster.server_args(), bodies,
                                               zbodies, start, a.hours, a.reps)}
    n = len(bodies)
    rows = [("ingest, one client (profiles/s wall)", lambda x: f"{x['rate']:.0f}"),
            ("server CPU per profile", lambda x: f"{x['cpu_ms']:.2f} ms"),
            ("ClickHouse CPU per profile (both nodes)", lambda x: f"{x['ch_ms']:.2f} ms"),
            ("ingest, 4 clients (profiles/s wall)", lambda x: f"{x['rest_rate']:.0f}"),
            ("flame graph of an hour (wall / server CPU)",
             lambda x: f"{x['hour'][0] * 1000:.0f} ms / {x['hour'][1] * 1000:.0f} ms"),
            (f"flame graph of {a.hours} hours (wall / server CPU)",
             lambda x: f"{x['day'][0] * 1000:.0f} ms / {x['day'][1] * 1000:.0f} ms"),
            ("bytes stored per profile", lambda x: f"{x['bytes'] / 1024:.1f} KiB"),
            ("rollups built after the last post (incl. a 6 s wait)",
             lambda x: f"{x['rollup_wait']:.1f} s")]
    out = [f"# store bench: {a.procs} processes x {minutes} one-minute profiles, ~{a.stacks} "
           f"stacks each ({n} profiles an hour), {a.hours} hours", "",
           "| measure | " + " | ".join(r) + " |", "|---|" + "---|" * len(r)]
    for label, f in rows:
        out.append(f"| {label} | " + " | ".join(f(x) for x in r.values()) + " |")
    k = r["ClickHouse, 2 shards"]["keys"]
    if k:
        out += ["", f"ClickHouse stacks and functions (one day's keys, both shards): {k[0]} rows, "
                f"{k[1] / 1024:.0f} KiB on disk ({k[1] / max(k[0], 1):.1f} bytes a row)"]
    report = "\n".join(out) + "\n"
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", "store_report.md"), "w") as f:
        f.write(report)
    print(report)


if __name__ == "__main__":
    main()
