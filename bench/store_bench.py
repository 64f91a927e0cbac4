#!/usr/bin/env python3
"""SQLite beside ClickHouse in one run: the same generated profiles
(bench/gen_profiles) ingested by a codexray-server on each store, then the
hour's and the whole range's flame graph. ClickHouse runs as the tests run
it: two local clickhouse-server processes as a two-shard cluster
(tests/integration/clickhouse_cluster.py), so its figures include the
Distributed tables' work; both shards share this machine's cores.

    python3 bench/store_bench.py [--procs 4] [--hours 6] [--stacks 2000] [--reps 5]
        [--server PATH] [--other-server PATH]
    python3 bench/store_bench.py --batch [--windows 5] [--small 150] [--large 50] [--runs 3]
        [--server PATH] [--other-server PATH] [--also-distributed] [--sqlite-only]

--batch: the agent's request shape alone: each one-minute window's
profiles (--small of ~50 stacks and --large of ~1000, as a node's
processes send) in one zstd POST /api/v1/profiles/batch, into SQLite and
into the two-shard ClickHouse, one client and four; with --other-server
(another build's codexray-server, e.g. main's) its ClickHouse ingest too,
in the same run; with --also-distributed this build's ClickHouse store
inserting through the Distributed tables too (--clickhouse-insert
distributed beside the default, each shard's local table directly).
--sqlite-only: no ClickHouse, and --other-server's
SQLite ingest instead (a change to the SQLite store measured side by
side).

Ingest: one client, zstd bodies as the agent ships them; wall profiles/s,
the server's CPU per profile, and ClickHouse's (both processes) for the
ClickHouse store. Queries: median wall and server CPU of --reps runs.
Then the ClickHouse server is restarted on the same database: the hour's
first flame graph against the same query warm. With --other-server, that
build's ClickHouse run too (ingest, queries, restart), on its own
database (a server of another schema version may refuse this one's).
"""
import argparse
import concurrent.futures
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clickhouse_cluster  # noqa: E402
import server_tests  # noqa: E402
from server_tests import Server, metric, varint  # noqa: E402
from run import proc_cpu  # noqa: E402
from server_bench import at_time, batches_of, post, post_batches, timed, zat_time  # noqa: E402


def server_cpu(pid):
    """CPU seconds of pid, its exited threads included (/proc/PID/stat's
    utime and stime, in clock ticks): the ClickHouse store's threads (a
    request each, a batch's second half) are gone by the time proc_cpu
    reads the live threads' schedstat."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


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


def run_store(tmp, name, args, bodies, zbodies, start, hours, reps, binary=None, minutes=60):
    """One store's run, by binary (None: this build's server)."""
    binary = binary or server_tests.SERVER
    os.makedirs(os.path.join(tmp, name))
    old, server_tests.SERVER = server_tests.SERVER, binary
    try:
        srv = Server(os.path.join(tmp, name), *args)
    finally:
        server_tests.SERVER = old
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
        hour_q = f"/api/v1/profile?app=benchapp&from={frm}&to={frm + 3600}&format=flamegraph"
        hour = timed(srv, hour_q, reps)
        day = timed(srv, f"/api/v1/profile?app=benchapp&from={start}&to={start + hours * 3600}"
                         "&format=flamegraph", reps)
        size = metric(srv, "codexray_store_bytes")
        keys = stack_table_bytes(args) if is_ch else None
        firsts = restarts(tmp, name, args, srv, hour_q, reps, binary) if is_ch else {}
        return dict(keys=keys, rate=n / wall, cpu_ms=cpu / n * 1000, ch_ms=kcpu / n * 1000,
                    rest_rate=n * (hours - 1) / rest if hours > 1 else float("nan"),
                    hour=hour, day=day, bytes=size / (n * hours), rollup_wait=rollup_wait,
                    firsts=firsts)
    finally:
        srv.stop()


def restarts(tmp, name, args, srv, hour_q, reps, binary):
    """The hour's first flame graph after a server's start, against the
    same query warm (median of reps): binary's server started again on the
    database it made (once it logged its caches warmed, at most 60 s, if
    it warms them). {label: (first wall s, warm wall s)}."""
    srv.stop()
    out = {}
    for label in ("this",):
        old, server_tests.SERVER = server_tests.SERVER, binary
        try:
            s2 = Server(os.path.join(tmp, name), *args)
        finally:
            server_tests.SERVER = old
        try:
            log = os.path.join(tmp, name, f"server-{s2.port}.log")
            t0 = time.time()
            while time.time() - t0 < 60 and "caches warmed" not in open(log).read():
                time.sleep(0.2)
            first = timed(s2, hour_q, 1)[0]
            out[label] = (first, timed(s2, hour_q, reps)[0])
        finally:
            s2.stop()
    return out


def window_batches(tmp, a, start):
    """The windows' raw profiles: [(query, raw pprof, minute)], small and
    large processes of one application."""
    out = []
    for kind, procs, stacks, pid0 in (("small", a.small, 50, 1), ("large", a.large, 1000, 10001)):
        gen = os.path.join(tmp, kind)
        subprocess.run([os.path.join(B, "bench", "gen_profiles"), gen, str(procs),
                        str(a.windows), str(stacks), str(start)], check=True,
                       stdout=subprocess.DEVNULL)
        for f in sorted(os.listdir(gen)):
            p, m = int(f[1:4]), int(f[6:10])
            out.append((f"pid={pid0 + p}", gzip.decompress(open(os.path.join(gen, f), "rb").read()),
                        m))
    return out


def batch_bodies(profiles, start, windows, shift_s):
    """One zstd batch a window (made from start), every profile shift_s
    later (its time set by a second field 9, protobuf's last one wins)."""
    bodies, counts = [], []
    for w in range(windows):
        t = (start + w * 60 + shift_s) * 10**9
        mine = [(q, r + b"\x48" + varint(t)) for q, r, m in profiles if m == w]
        b, c = batches_of([r for _, r in mine], [q for q, _ in mine], max_bytes=1 << 30)
        bodies += b
        counts += c
    return bodies, counts


def batch_run(tmp, name, args, server, profiles, start, a):
    """Ingest of the windows' batches: a warm-up (new keys), then one
    client, then four. Returns {one: (rate, server ms, ClickHouse ms), four: ...}."""
    os.makedirs(os.path.join(tmp, name))
    old, server_tests.SERVER = server_tests.SERVER, server
    try:
        srv = Server(os.path.join(tmp, name), *args)
    finally:
        server_tests.SERVER = old
    is_ch = "--clickhouse" in args
    url = srv.url + "/api/v1/profiles/batch"
    out = {}
    try:
        post_batches(url, *batch_bodies(profiles, start, 1, 0))
        for label, clients, hour in (("one", 1, 1), ("four", 4, 2)):
            bodies, counts = batch_bodies(profiles, start, a.windows, hour * 3600)
            n = sum(counts)
            c0, k0, t0 = server_cpu(srv.p.pid), ch_cpu() if is_ch else 0, time.time()
            if clients == 1:
                post_batches(url, bodies, counts)
            else:
                with concurrent.futures.ThreadPoolExecutor(clients) as ex:
                    list(ex.map(lambda i: post_batches(url, bodies[i::clients],
                                                       counts[i::clients]), range(clients)))
            wall = time.time() - t0
            out[label] = (n / wall, (server_cpu(srv.p.pid) - c0) / n * 1000,
                          ((ch_cpu() - k0) / n * 1000) if is_ch else float("nan"))
        return out
    finally:
        srv.stop()


def batch_main(a):
    with tempfile.TemporaryDirectory(prefix="cx-stbatch-") as tmp:
        # Yesterday, from 01:00: the warm-up and both passes in one day
        # (stacks and functions are stored once a day).
        start = int(time.time()) // 86400 * 86400 - 86400 + 3600
        profiles = window_batches(tmp, a, start)
        load0 = os.getloadavg()
        n = sum(1 for p in profiles if p[2] == 0)
        size = sum(len(p[1]) for p in profiles if p[2] == 0)
        stores = [("SQLite", [], server_tests.SERVER)]
        if not a.sqlite_only:
            stores.append(("ClickHouse, 2 shards", None, server_tests.SERVER))
        if a.also_distributed and not a.sqlite_only:
            stores.append(("ClickHouse, 2 shards, --clickhouse-insert distributed",
                           ["--clickhouse-insert", "distributed"], server_tests.SERVER))
        if a.other_server:
            stores.append(("SQLite, " + a.other_label, [], a.other_server) if a.sqlite_only else
                          ("ClickHouse, 2 shards, " + a.other_label, None, a.other_server))
        runs = {name: [] for name, _, _ in stores}
        for k in range(a.runs):
            # The order turned each run: the machine's load drifts.
            for j, (name, args, server) in enumerate(stores[k % len(stores):] +
                                                     stores[:k % len(stores)]):
                if args is None or args[:1] == ["--clickhouse-insert"]:
                    args = clickhouse_cluster.server_args() + (args or [])
                runs[name].append(batch_run(tmp, f"s{k}-{j}", args, server, profiles, start, a))
    # Medians over the runs, each figure on its own.
    r = {name: {label: tuple(statistics.median(x[label][i] for x in xs) for i in range(3))
                for label in ("one", "four")} for name, xs in runs.items()}
    sq = r["SQLite"]
    # Each run's rate over SQLite's in the same run, the median of those:
    # steadier than the medians' ratio when the machine's load drifts.
    per_run = {name: {label: statistics.median(x[label][0] / y[label][0]
                                               for x, y in zip(xs, runs["SQLite"]))
                      for label in ("one", "four")} for name, xs in runs.items()}
    out = [f"# store bench, the agent's batches, medians of {a.runs} runs: {a.windows} windows "
           f"of {n} profiles "
           f"({a.small} of ~50 stacks, {a.large} of ~1000; {size / n / 1024:.1f} KiB raw "
           "a profile on average), one zstd POST /api/v1/profiles/batch a window; load "
           f"average (1, 5, 15 min) {' '.join(f'{x:.1f}' for x in load0)} before, "
           f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} after", "",
           "| store | clients | profiles/s | vs SQLite | vs SQLite, each run's (median) | "
           "server CPU / profile | ClickHouse CPU / profile (both nodes) |",
           "|---|---|---|---|---|---|---|"]
    for name, x in r.items():
        for label in ("one", "four"):
            rate, cpu, kcpu = x[label]
            out.append(f"| {name} | {1 if label == 'one' else 4} | {rate:.0f} | "
                       f"{rate / sq[label][0]:.2f} | {per_run[name][label]:.2f} | {cpu:.2f} ms | "
                       + ("-" if kcpu != kcpu else f"{kcpu:.2f} ms") + " |")
    report = "\n".join(out) + "\n"
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", "store_batch_report.md"), "w") as f:
        f.write(report)
    # Each run's figures, in the order run: (rate, server ms, ClickHouse ms).
    with open(os.path.join(B, "bench", "store_batch_runs.json"), "w") as f:
        json.dump(runs, f, indent=1)
    print(report)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", action="store_true")
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--small", type=int, default=150)
    ap.add_argument("--large", type=int, default=50)
    ap.add_argument("--server", help="the codexray-server to measure (default: this build's)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--other-server")
    ap.add_argument("--other-label", default="main")
    ap.add_argument("--also-distributed", action="store_true",
                    help="--batch: this build's ClickHouse store with --clickhouse-insert "
                    "distributed too")
    ap.add_argument("--sqlite-only", action="store_true",
                    help="--batch without ClickHouse: SQLite (and --other-server's SQLite)")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--hours", type=int, default=6)
    ap.add_argument("--stacks", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if a.server:
        server_tests.SERVER = os.path.abspath(a.server)
    if a.batch:
        return batch_main(a)
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
        if a.other_server:
            # Its own database: a server of another schema version may
            # refuse this build's.
            r["ClickHouse, " + a.other_label] = run_store(
                tmp, "ch-other", clickhouse_cluster.server_args(), bodies, zbodies, start, a.hours,
                a.reps, os.path.abspath(a.other_server))
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
    for who, x in r.items():
        for first, warm in x["firsts"].values():
            out += ["", f"{who}, its server restarted: the hour's first flame graph "
                    f"{first * 1000:.0f} ms, then {warm * 1000:.0f} ms warm (median of {a.reps}; "
                    f"{first / warm:.1f}x)"]
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
