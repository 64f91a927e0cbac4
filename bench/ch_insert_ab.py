#!/usr/bin/env python3
"""How a batch's psamples rows best reach the two shards (issue 34).

Builds one batch of the agent's shape (200 profiles, a row each, stacks
per profile drawn between small and large) and writes it, over and over, to
the two local ClickHouse nodes of tests/integration/clickhouse_cluster.py
in three ways, in alternating blocks:

  sync    INSERT INTO psamples (Distributed) with insert_distributed_sync=1
          through node 1: what the server does today.
  async   the same with insert_distributed_sync=0 (node 1 queues the other
          shard's rows on disk and a background sender forwards them).
  direct  each shard's rows (split by ClickHouse's own cityHash64 of the
          sharding key) INSERT INTO psamples_local of that shard's node,
          both at once.

Prints the median and mean wall time of one batch and the CPU of both
ClickHouse processes per batch (a block's CPU over its batches, merges
included as they fall). Run it under the heavy lock:
  flock /tmp/cx-heavy.lock python3 bench/ch_insert_ab.py [--reps N] [--blocks N]
"""
import argparse
import os
import random
import statistics
import struct
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import clickhouse_cluster  # noqa: E402

COLS = ("app String, time_ns Int64, host String, pid Int64, labels String, labelset String, "
        "stack_a Array(UInt64), stack_b Array(UInt64), samples Array(Int64), "
        "cpu_ns Array(Int64), off_cpu_ns Array(Int64)")
ENGINE = ("ReplacingMergeTree PARTITION BY intDiv(time_ns, 86400000000000) "
          "ORDER BY (app, time_ns, host, pid, labels, labelset) SETTINGS index_granularity = 32")
KEY = "cityHash64(app, host, pid, time_ns)"
DB = "ab"


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def string(s):
    b = s.encode()
    return varint(len(b)) + b


def array(fmt, xs):
    return varint(len(xs)) + struct.pack(f"<{len(xs)}{fmt}", *xs)


def batch(rng, n, start_ns):
    """n profiles' rows (RowBinary each, as the parts before and after the
    label set, which is not in the sharding key: each write gives its rows
    their own, so that no two writes' rows collapse) and their (app, host,
    pid, time_ns)."""
    rows, keys = [], []
    for i in range(n):
        app, host, pid = f"app{i % 7}", f"host{i % 3}", 1000 + i
        # The agent's window: mostly small profiles, some large (mean ~290 stacks).
        k = int(rng.choice([20, 60, 150, 300, 600, 1500]) * rng.uniform(0.7, 1.3))
        head = (string(app) + struct.pack("<q", start_ns) + string(host) + struct.pack("<q", pid)
                + string(""))
        tail = (array("Q", [rng.getrandbits(64) for _ in range(k)]) +
               array("Q", [rng.getrandbits(64) for _ in range(k)]) +
               array("q", [rng.randint(1, 50) for _ in range(k)]) +
               array("q", [rng.randint(1, 50) * 10_000_000 for _ in range(k)]) +
                array("q", [0] * k))
        rows.append((head, tail))
        keys.append((app, host, pid, start_ns))
    return rows, keys


def post(url, sql, body=b"", params=""):
    req = urllib.request.Request(f"{url}/?{params}", data=sql.encode() + b"\n" + body,
                                 method="POST")
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.read().decode()


def shards_of(node, keys):
    """Each key's shard index (0-based) as the Distributed table places it:
    cityHash64 of the key modulo the shards' total weight (1 each)."""
    post(node.url, f"CREATE TABLE IF NOT EXISTS {DB}.k (app String, host String, pid Int64, "
         "time_ns Int64) ENGINE = Memory")
    post(node.url, f"TRUNCATE TABLE {DB}.k")
    body = "".join(f"{a}\t{h}\t{p}\t{t}\n" for a, h, p, t in keys).encode()
    post(node.url, f"INSERT INTO {DB}.k FORMAT TabSeparated", body)
    got = {}
    for line in post(node.url, f"SELECT app, host, pid, time_ns, {KEY} % 2 FROM {DB}.k "
                     "FORMAT TabSeparated").splitlines():
        a, h, p, t, s = line.split("\t")
        got[(a, h, int(p), int(t))] = int(s)
    return [got[k] for k in keys]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=20, help="batches a block (default 20)")
    ap.add_argument("--blocks", type=int, default=3, help="blocks of each way (default 3)")
    ap.add_argument("--profiles", type=int, default=200, help="profiles a batch (default 200)")
    a = ap.parse_args()

    nodes = clickhouse_cluster.cluster()
    cl = clickhouse_cluster.CLUSTER
    for n in nodes:
        post(n.url, f"CREATE DATABASE IF NOT EXISTS {DB}")
        post(n.url, f"CREATE TABLE {DB}.psamples_local ({COLS}) ENGINE = {ENGINE}")
        post(n.url, f"CREATE TABLE {DB}.psamples ({COLS}) ENGINE = "
             f"Distributed({cl}, {DB}, psamples_local, {KEY})")
    rng = random.Random(34)
    rows, keys = batch(rng, a.profiles, 1_700_000_000_000_000_000)
    shard = shards_of(nodes[0], keys)
    seq = [0]

    def bodies():
        """The batch's rows with a new label set: all, and each shard's."""
        seq[0] += 1
        tag = string(f"w{seq[0]}")
        whole = b"".join(h + tag + t for h, t in rows)
        part = [b"".join(h + tag + t for (h, t), s in zip(rows, shard) if s == i)
                for i in range(2)]
        return whole, part
    whole, part = bodies()
    print(f"batch: {a.profiles} profiles, {len(whole) / 1e6:.2f} MB RowBinary, "
          f"shard 1 {len(part[0]) / 1e6:.2f} MB, shard 2 {len(part[1]) / 1e6:.2f} MB; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)

    dist = f"INSERT INTO {DB}.psamples FORMAT RowBinary"
    local = f"INSERT INTO {DB}.psamples_local FORMAT RowBinary"

    def sync(whole, part):
        post(nodes[0].url, dist, whole, "insert_distributed_sync=1")

    def async_(whole, part):
        post(nodes[0].url, dist, whole, "insert_distributed_sync=0")

    def direct(whole, part):
        errs = []

        def one(i):
            try:
                post(nodes[i].url, local, part[i])
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append(e)
        th = [threading.Thread(target=one, args=(i,)) for i in range(2)]
        for t in th:
            t.start()
        for t in th:
            t.join()
        if errs:
            raise errs[0]

    ways = {"sync": sync, "async": async_, "direct": direct}
    wall = {w: [] for w in ways}
    cpu = {w: [] for w in ways}
    for w, f in ways.items():  # warm-up
        f(*bodies())
    wait_rows(nodes, len(ways) * a.profiles)
    for _ in range(a.blocks):
        for w, f in ways.items():
            c0 = clickhouse_cluster_cpu(nodes)
            for _ in range(a.reps):
                b = bodies()
                t0 = time.monotonic()
                f(*b)
                wall[w].append(time.monotonic() - t0)
            # The async block's rows are forwarded after its INSERTs answered:
            # its CPU counts until they are all on their shards.
            wait_rows(nodes, a.reps * a.profiles)
            cpu[w].append((clickhouse_cluster_cpu(nodes) - c0) / a.reps)
    total = int(post(nodes[0].url, f"SELECT count() FROM {DB}.psamples").strip())
    print(f"rows stored: {total} (written {_written[0]})")
    print("| way | median ms a batch | mean ms | ClickHouse CPU ms a batch (blocks) |")
    print("|---|---|---|---|")
    for w in ways:
        print(f"| {w} | {statistics.median(wall[w]) * 1e3:.1f} | "
              f"{statistics.mean(wall[w]) * 1e3:.1f} | "
              f"{', '.join(f'{c * 1e3:.0f}' for c in cpu[w])} |")
    print(f"load after: {os.getloadavg()[0]:.1f}")
    for n in nodes:
        post(n.url, f"DROP DATABASE {DB}")


def clickhouse_cluster_cpu(nodes):
    tick = os.sysconf("SC_CLK_TCK")
    s = 0.0
    for n in nodes:
        with open(f"/proc/{n.p.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        s += (int(fields[11]) + int(fields[12])) / tick
    return s


_written = [0]


def wait_rows(nodes, add):
    """Waits (up to 60 s) until the shards hold every row written, add more
    than at the last call (the async INSERTs' rows forwarded)."""
    _written[0] += add
    end = time.monotonic() + 60
    while time.monotonic() < end:
        n = sum(int(post(x.url, f"SELECT count() FROM {DB}.psamples_local").strip())
                for x in nodes)
        if n >= _written[0]:
            return
        time.sleep(0.02)
    raise SystemExit(f"rows written {_written[0]}, on the shards {n} after 60 s")


if __name__ == "__main__":
    main()
