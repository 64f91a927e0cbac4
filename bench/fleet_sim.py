#!/usr/bin/env python3
"""A fleet, simulated (issue 34): one process plays many node agents, each
a distinct host with its own processes of a few applications, that send
one zstd POST /api/v1/profiles/batch a minute (the agent's shape) to one of
two codexray-servers over the two-shard ClickHouse cluster the tests use
(tests/integration/clickhouse_cluster.py). Applications deploy every few
minutes: a new build's stacks and a tenth of its functions are new keys
(bench/gen_profiles SEED). Time is simulated: minutes follow each other
as fast as the servers take them, and the fleet's rate is what they
sustain. A reader asks one application's last hour and the whole range
(the "day") every --read-every seconds, alternately of each server.

    python3 bench/fleet_sim.py [--duration 150] [--nodes 100] [--procs 40]
        [--apps 8] [--deploy-every 10] [--clients 6] [--dup 0.02] [--store clickhouse|sqlite]
        [--server PATH] [--server-args '--ingest-concurrency 4']

Nothing lost: every profile a server answered 202 is remembered with its
samples and CPU; at the end each application's whole range is read back
through the API (its profile count and CPU) and, with ClickHouse, from
the profiles table itself with FINAL, and must equal what was
acknowledged: none missing, none twice, on either store. --dup sends
that share of the acknowledged batches again, as an agent does whose
answer was lost: whole, or (one time in two) their first half, as when
an agent's spool resends what it had not seen acknowledged;
profiles answered 503 are sent again (up to 5 times), as the agent's
spool does.

The report (build/bench/fleet_report.md): profiles/s sustained, the
servers' and ClickHouse's CPU a profile, the reader's latencies (median,
90th, max), and the check. The machine's other load counts: say so.
"""
import argparse
import collections
import gzip
import http.client
import json
import os
import queue
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import zlib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
B = os.path.join(ROOT, "build")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import clickhouse_cluster  # noqa: E402
import server_tests  # noqa: E402
from server_tests import Server, varint  # noqa: E402
from run import proc_cpu  # noqa: E402

MIN_NS = 60 * 10**9


def pb_fields(data):
    """The (field number, wire type, value) of a protobuf message: ints
    for varints, bytes for length-delimited fields."""
    i, n = 0, len(data)
    while i < n:
        key, i = read_varint(data, i)
        f, wt = key >> 3, key & 7
        if wt == 0:
            v, i = read_varint(data, i)
        elif wt == 2:
            ln, i = read_varint(data, i)
            v, i = data[i:i + ln], i + ln
        elif wt == 1:
            v, i = data[i:i + 8], i + 8
        elif wt == 5:
            v, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield f, wt, v


def read_varint(data, i):
    shift = v = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7F) << shift
        if b < 0x80:
            return v, i
        shift += 7


def totals(raw):
    """A gen_profiles profile's samples and CPU ns (its two values)."""
    s = c = 0
    for f, wt, v in pb_fields(raw):
        if f != 2 or wt != 2:
            continue
        vals = []
        for sf, swt, sv in pb_fields(v):
            if sf == 2 and swt == 2:
                j = 0
                while j < len(sv):
                    x, j = read_varint(sv, j)
                    vals.append(x)
            elif sf == 2:
                vals.append(sv)
        s, c = s + vals[0], c + vals[1]
    return s, c


class Builds:
    """Each application's builds, generated when first deployed: TEMPLATES
    processes' one-minute profiles each, (raw pprof, samples, cpu)."""
    TEMPLATES = 8

    def __init__(self, tmp, start):
        self.tmp, self.start = tmp, start
        self.cache, self.lock = {}, threading.Lock()

    def get(self, app, large, build):
        key = (app, build)
        with self.lock:
            if key not in self.cache:
                d = os.path.join(self.tmp, f"{app}-{build}")
                subprocess.run([os.path.join(B, "bench", "gen_profiles"), d, str(self.TEMPLATES),
                                "1", "600" if large else "50", str(self.start),
                                str(zlib.crc32(f"{app}-{build}".encode()) + 1)],
                               check=True, stdout=subprocess.DEVNULL)
                out = []
                for f in sorted(os.listdir(d)):
                    raw = gzip.decompress(open(os.path.join(d, f), "rb").read())
                    out.append((raw,) + totals(raw))
                self.cache[key] = out
            return self.cache[key]


def zstd(body):
    return subprocess.run(["zstd", "-q", "-1", "-c"], input=body, stdout=subprocess.PIPE,
                          check=True).stdout


class Fleet:
    def __init__(self, a, urls, builds):
        self.a, self.urls, self.builds = a, urls, builds
        self.apps = [f"app{i:02d}" for i in range(a.apps)]
        self.acked = {}  # (app, host, pid, minute) -> (samples, cpu)
        self.lock = threading.Lock()
        self.stats = collections.Counter()
        self.minute = 0  # the newest minute handed out
        self.rng = random.Random(34)

    def node_profiles(self, node, minute):
        """The node's processes at minute: [(identity, query, raw, samples, cpu)]."""
        out = []
        host = f"node-{node:05d}"
        for p in range(self.a.procs):
            app = self.apps[(node * 7 + p) % len(self.apps)]
            ai = self.apps.index(app)
            # Rolling deploys: each application at its own minute.
            build = (minute + ai * 3) // self.a.deploy_every
            large = p % 10 == 0
            raw, s, c = self.builds.get(app, large, build)[(node + p) % Builds.TEMPLATES]
            pid = 1000 + p
            t = (self.builds.start + minute * 60) * 10**9
            q = f"service={app}&host={host}&pid={pid}"
            out.append(((app, host, pid, minute), q, raw + b"\x48" + varint(t), s, c))
        return out

    def send(self, conn, url, profiles):
        """Posts profiles as one batch, and again those answered 5xx (up
        to 5 times); returns those stored (202). Raises when a request
        fails as a whole 5 times."""
        left, stored = profiles, []
        for attempt in range(6):
            body = bytearray(b"codexray-batch 1\n")
            for _, q, raw, _, _ in left:
                body += q.encode() + b"\n" + str(len(raw)).encode() + b"\n" + raw
            z = zstd(bytes(body))
            u = urllib.parse.urlsplit(url)
            try:
                if conn[0] is None:
                    conn[0] = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
                conn[0].request("POST", "/api/v1/profiles/batch", body=z,
                                headers={"Content-Encoding": "zstd"})
                r = conn[0].getresponse()
                a = json.loads(r.read())
            except (OSError, http.client.HTTPException, ValueError):
                conn[0] = None
                a = None
            with self.lock:
                self.stats["requests"] += 1
                self.stats["bytes"] += len(z)
            if a is None or r.status != 200:
                with self.lock:
                    self.stats["request failures"] += 1
                time.sleep(0.5 * (attempt + 1))
                continue
            again = []
            for prof, st in zip(left, a["statuses"]):
                if st == 202:
                    stored.append(prof)
                elif st >= 500:
                    again.append(prof)
                else:
                    raise RuntimeError(f"a profile refused {st}: {a}")
            with self.lock:
                self.stats["resent"] += len(again)
            if not again:
                return stored
            left = again
            time.sleep(0.5 * (attempt + 1))
        return stored

    def worker(self, jobs):
        conns = [[None] for _ in self.urls]
        while True:
            job = jobs.get()
            if job is None:
                return
            node, minute = job
            si = node % len(self.urls)
            profs = self.node_profiles(node, minute)
            try:
                stored = self.send(conns[si], self.urls[si], profs)
            except Exception as e:  # noqa: BLE001 (a refused profile: counted, not fatal)
                print(f"fleet: node {node} minute {minute}: {e}", file=sys.stderr)
                stored = []
                with self.lock:
                    self.stats["worker errors"] += 1
            with self.lock:
                for ident, _, _, s, c in stored:
                    self.acked[ident] = (s, c)
                self.stats["acked"] += len(stored)
                self.stats["lost before ack"] += len(profs) - len(stored)
                dup = self.rng.random() < self.a.dup
                half = self.rng.random() < 0.5
            if dup and stored:
                # The answer "lost": the agent sends the same batch again,
                # whole or in part.
                again = stored[:max(1, len(stored) // 2)] if half else stored
                self.send(conns[si], self.urls[si], again)
                with self.lock:
                    self.stats["sent twice"] += len(again)


def reader(fleet, srvs, start, stop, lat):
    """The hour's and the day's flame graph of one application (in turn)
    every --read-every seconds, of each server alternately."""
    k = 0
    while not stop.wait(fleet.a.read_every):
        now = start + (fleet.minute + 1) * 60
        app = fleet.apps[k % len(fleet.apps)]
        srv = srvs[k % len(srvs)]
        k += 1
        for label, frm in (("hour", max(start, now - 3600)), ("day", start)):
            q = f"/api/v1/profile?app={app}&from={frm}&to={now}&format=flamegraph"
            c = http.client.HTTPConnection("127.0.0.1", int(srv.url.rsplit(":", 1)[1]),
                                           timeout=120)
            t0 = time.time()
            try:
                c.request("GET", q)
                r = c.getresponse()
                r.read()
                lat[label].append((time.time() - t0, r.status))
            except (OSError, http.client.HTTPException):
                lat[label].append((time.time() - t0, 0))
            finally:
                c.close()


def check(fleet, srvs, start, end_minute, ch_nodes, db):
    """Each application's whole range read back against what was acked:
    [(app, acked profiles, API profiles, acked CPU, API CPU, ClickHouse
    FINAL profiles or None)]."""
    want = collections.defaultdict(lambda: [0, 0, 0])
    for (app, _, _, _), (s, c) in fleet.acked.items():
        w = want[app]
        w[0], w[1], w[2] = w[0] + 1, w[1] + s, w[2] + c
    chs = {}
    if ch_nodes:
        out = ch_nodes[0].query(f"SELECT app, count(), sum(cpu_ns) FROM {db}.profiles FINAL "
                                "GROUP BY app")
        for line in out.split("\n"):
            if line:
                app, n, c = line.split("\t")
                chs[app] = (int(n), int(c))
    rows = []
    to = start + (end_minute + 2) * 60
    for i, app in enumerate(fleet.apps):
        srv = srvs[i % len(srvs)]
        c = http.client.HTTPConnection("127.0.0.1", int(srv.url.rsplit(":", 1)[1]), timeout=300)
        c.request("GET", f"/api/v1/profile?app={app}&from={start}&to={to}&format=flamegraph")
        r = c.getresponse()
        g = json.loads(r.read())
        c.close()
        w = want[app]
        rows.append((app, w[0], g.get("profiles"), w[2], g.get("total"), chs.get(app)))
    return rows


def gen_cpu():
    """This process's CPU and its children's (zstd, gen_profiles), s."""
    import resource
    return sum(resource.getrusage(w).ru_utime + resource.getrusage(w).ru_stime
               for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=float, default=150, help="seconds of load")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--procs", type=int, default=40, help="processes a node")
    ap.add_argument("--apps", type=int, default=8)
    ap.add_argument("--deploy-every", type=int, default=10, help="simulated minutes")
    ap.add_argument("--clients", type=int, default=6, help="requests at once")
    ap.add_argument("--dup", type=float, default=0.02)
    ap.add_argument("--read-every", type=float, default=5)
    ap.add_argument("--store", choices=("clickhouse", "sqlite"), default="clickhouse")
    ap.add_argument("--server", help="the codexray-server to run (default: this build's)")
    ap.add_argument("--server-args", default="", help="more flags for the servers, e.g. "
                    "'--ingest-concurrency 4'")
    a = ap.parse_args()
    if a.server:
        server_tests.SERVER = os.path.abspath(a.server)
    tmp = tempfile.mkdtemp(prefix="cx-fleet-")
    # Simulated time starts two days back at midnight: a run's minutes stay
    # in the past whatever the rate.
    start = int(time.time()) // 86400 * 86400 - 2 * 86400
    if a.store == "clickhouse":
        args = clickhouse_cluster.server_args() + shlex.split(a.server_args)
        nodes = clickhouse_cluster.cluster()
        db = args[args.index("--clickhouse-database") + 1]
        srvs = []
        for i in range(2):
            os.makedirs(os.path.join(tmp, f"s{i}"))
            srvs.append(Server(os.path.join(tmp, f"s{i}"), *args))
    else:
        # One SQLite server: it cannot share its store.
        os.makedirs(os.path.join(tmp, "s0"))
        nodes, db, srvs = [], None, [Server(os.path.join(tmp, "s0"), *shlex.split(a.server_args))]
    builds = Builds(tmp, start)
    fleet = Fleet(a, [s.url for s in srvs], builds)
    try:
        jobs = queue.Queue(maxsize=a.clients * 2)
        threads = [threading.Thread(target=fleet.worker, args=(jobs,)) for _ in range(a.clients)]
        for t in threads:
            t.start()
        lat = {"hour": [], "day": []}
        stop = threading.Event()
        rt = threading.Thread(target=reader, args=(fleet, srvs, start, stop, lat))
        cpu0 = [proc_cpu(s.p.pid) for s in srvs]
        kcpu0 = [proc_cpu(n.p.pid) for n in nodes]
        g0 = gen_cpu()
        t0 = time.time()
        rt.start()
        minute = 0
        while time.time() - t0 < a.duration:
            fleet.minute = minute
            for node in range(a.nodes):
                jobs.put((node, minute))
            minute += 1
        for _ in threads:
            jobs.put(None)
        for t in threads:
            t.join()
        wall = time.time() - t0
        stop.set()
        rt.join()
        cpu = sum(proc_cpu(s.p.pid) - c for s, c in zip(srvs, cpu0))
        kcpu = sum(proc_cpu(n.p.pid) - c for n, c in zip(nodes, kcpu0))
        gcpu = gen_cpu() - g0
        rows = check(fleet, srvs, start, minute, nodes, db)
        disk = inserts = 0
        if nodes:
            nodes[0].query("SYSTEM FLUSH LOGS")
            inserts = int(nodes[0].query(
                "SELECT count() FROM system.query_log WHERE type = 2 AND is_initial_query AND "
                f"query LIKE 'INSERT INTO {db}.psamples %'").strip())
        for nd in nodes:
            disk += int(nd.query("SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND "
                                 f"database = '{db}'").strip() or 0)
    finally:
        for s in srvs:
            s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    st = fleet.stats
    n = st["acked"]
    ok = all(r[1] == r[2] and r[3] == r[4] and (r[5] is None or r[5] == (r[1], r[3]))
             for r in rows)
    out = [f"# fleet, simulated ({a.store}): {a.nodes} nodes x {a.procs} processes, {a.apps} "
           f"applications deploying every {a.deploy_every} simulated minutes, "
           f"{len(srvs)} server(s), {a.clients} requests at once, {wall:.0f} s", "",
           f"- simulated minutes: {minute} ({a.nodes * a.procs} profiles each)",
           f"- profiles acknowledged: {n} in {wall:.1f} s: **{n / wall:.0f} profiles/s** "
           f"({st['requests']} requests, {st['bytes'] / max(st['requests'], 1) / 1024:.0f} KiB "
           "zstd each)",
           f"- CPU a profile: servers {cpu / max(n, 1) * 1000:.2f} ms"
           + (f", ClickHouse (both nodes) {kcpu / max(n, 1) * 1000:.2f} ms" if nodes else "")
           + f"; this load generator {gcpu / max(n, 1) * 1000:.2f} ms (on the same 2 cores)",
           (f"- INSERTs into psamples: {inserts}, {st['requests'] / max(inserts, 1):.1f} requests "
            "an INSERT\n" if nodes else "")
           + (f"- ClickHouse on disk (both nodes, all tables, parts as merged so far): "
            f"{disk / 2**20:.0f} MiB, {disk / max(n, 1) / 1024:.1f} KiB a profile\n" if nodes else "")
           + f"- sent twice (a lost answer): {st['sent twice']}; answered 5xx and sent again: "
           f"{st['resent']}; requests failed whole: {st['request failures']} (errors: "
           f"{st['worker errors']}); never "
           f"acknowledged: {st['lost before ack']}", ""]
    out += ["| query under load | n | median | 90th | max | not 200 |", "|---|---|---|---|---|---|"]
    for label in ("hour", "day"):
        xs = [x for x, s in lat[label] if s == 200]
        bad = sum(1 for _, s in lat[label] if s != 200)
        out.append(f"| the {label}'s flame graph | {len(lat[label])} | "
                   f"{statistics.median(xs) * 1000 if xs else float('nan'):.0f} ms | "
                   f"{pct(xs, 0.9) * 1000:.0f} ms | {max(xs, default=float('nan')) * 1000:.0f} ms | "
                   f"{bad} |")
    out += ["", "| application | acknowledged | API: profiles | acknowledged CPU s | API: CPU s | "
            "ClickHouse FINAL: profiles, CPU s |", "|---|---|---|---|---|---|"]
    for app, na, ng, ca, cg, chs in rows:
        out.append(f"| {app} | {na} | {ng} | {ca / 1e9:.1f} | {(cg or 0) / 1e9:.1f} | "
                   + (f"{chs[0]}, {chs[1] / 1e9:.1f}" if chs else "-") + " |")
    out += ["", "nothing lost, nothing twice: " + ("yes" if ok else "**NO**")]
    report = "\n".join(out) + "\n"
    os.makedirs(os.path.join(B, "bench"), exist_ok=True)
    with open(os.path.join(B, "bench", f"fleet_report_{a.store}.md"), "w") as f:
        f.write(report)
    print(report)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
