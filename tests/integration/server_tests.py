"""The server over real HTTP with a real SQLite file, fed by the real agent."""
import gzip
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

from pprof_read import raw, traces

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SERVER = os.path.join(ROOT, "build", "codexray-server")
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
WORK = os.path.join(ROOT, "build", "workloads")


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# The store the tests' servers use: None for SQLite (the default), else a
# function giving a fresh store's flags (clickhouse_tests.py sets it).
STORE = None


class Server:
    def __init__(self, tmp, *args, port=None):
        self.port = port or free_port()
        self.data = os.path.join(tmp, "server-data")
        self.args = (*(STORE() if STORE else ()), *args)
        self.start()

    def start(self):
        self.log = open(os.path.join(os.path.dirname(self.data), f"server-{self.port}.log"), "a")
        self.p = subprocess.Popen([SERVER, "--listen", f"127.0.0.1:{self.port}", "--data-dir",
                                   self.data, *self.args], stderr=self.log)
        for _ in range(100):
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise Failure("the server did not come up")

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def get(self, path, headers=None):
        try:
            req = urllib.request.Request(self.url + path, headers=headers or {})
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def post(self, path, body, headers=None):
        req = urllib.request.Request(self.url + path, data=body, method="POST",
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def kill9(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            self.p.wait(timeout=30)
        self.log.close()


def collapsed_split(text):
    per = {"hot_a": 0, "hot_b": 0, "hot_c": 0}
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        leaf = stack.split(";")[-1]
        if leaf in per:
            per[leaf] += int(n)
    return per


def run_agent(tmp, endpoint, *extra):
    """The agent shipping to endpoint, once it has started counting samples
    (after its BPF programs load and the tables of the running processes
    are built: on a busy machine that can take seconds)."""
    log = open(os.path.join(tmp, "agent.log"), "w")
    a = subprocess.Popen([AGENT, "--interval", "2", "--endpoint", endpoint, "--data-dir",
                          os.path.join(tmp, "agent-data"), *extra], stderr=log)
    wait_started(a, log.name)
    return a, log


def wait_started(a, path, timeout=60):
    """Waits until the agent's log (at path) says it started, or it exits."""
    end = time.monotonic() + timeout
    while time.monotonic() < end and a.poll() is None:
        with open(path) as f:
            if " started: " in f.read():
                return
        time.sleep(0.1)


def stop_agent(a, log):
    a.send_signal(signal.SIGTERM)
    a.wait(timeout=60)
    log.close()
    with open(log.name) as f:
        return a.returncode, f.read()


# --- a tiny protobuf encoder, so tests can build exactly the bad profile they want ---

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, value):
    if isinstance(value, int):
        return varint(num << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def profile(strings, sample_types, samples, locations=(), functions=(), time_ns=None):
    out = field(9, time_ns if time_ns is not None else time.time_ns())
    for t, u in sample_types:
        out += field(1, field(1, t) + field(2, u))
    for locs, vals, labels in samples:
        s = b"".join(field(1, l) for l in locs) + b"".join(field(2, v) for v in vals)
        s += b"".join(field(3, field(1, k) + field(2, v)) for k, v in labels)
        out += field(2, s)
    for lid, fid in locations:
        out += field(4, field(1, lid) + field(4, field(1, fid)))
    for fid, name in functions:
        out += field(5, field(1, fid) + field(2, name))
    for s in strings:
        out += field(6, s)
    return out


def good_profile(service="svc", fn="work"):
    strings = ["", "samples", "count", "cpu", "nanoseconds", fn, "service", service]
    return profile(strings, [(1, 2), (3, 4)], [([1], [5, 50000000], [(6, 7)])],
                   locations=[(1, 1)], functions=[(1, 5)])


# --- tests ---

def test_server_agent_to_query(tmp):
    """Agent -> server -> query: the workload is listed, its merged profile
    keeps the 3:2:1 split, pprof reads in go tool pprof, collapsed holds
    folded stacks, the flame-graph tree adds up."""
    srv = Server(tmp)
    try:
        a, log = run_agent(tmp, srv.url)
        time.sleep(1)
        w = subprocess.Popen([os.path.join(WORK, "cpu_split"), "5"], stdout=subprocess.PIPE,
                             text=True)
        w_out, _ = w.communicate(timeout=30)
        cpu_s = float(re.search(r"cpu_seconds=([0-9.]+)", w_out).group(1))
        time.sleep(2.5)
        rc, alog = stop_agent(a, log)
        check(rc == 0, f"agent exited {rc}")
        check("ProfilesEndpoint=" + srv.url + "/api/v1/profiles" in alog, "no ProfilesEndpoint line")
        ups = re.findall(r"upload: profiles=(\d+) bytes=(\d+) requests=(\d+) ms=(\d+)", alog)
        check(ups, f"no upload lines: {alog[-1500:]}")
        # A window's profiles in one batch request, not one request each.
        # Excused: the first pass (every process's first profile, over the
        # 4 MiB a batch holds on a busy machine: 65 profiles in 3 requests),
        # the last (what the stop spooled, sent from the spool), and a pass
        # that failed (a loaded server's 503) and the one after it, which
        # sends the spooled window and the new one apart. The steady windows
        # between are judged, and there must be some.
        events = re.findall(r"upload: (?:profiles=(\d+) bytes=\d+ requests=(\d+)|(\S+ failed))",
                            alog)
        ups_at = [i for i, e in enumerate(events) if e[0]]
        judged = [(int(n), int(r)) for i, (n, r, _) in enumerate(events)
                  if n and i not in (ups_at[0], ups_at[-1])
                  and not any(e[2] for e in events[max(i - 1, 0):i + 2])]
        check(judged and all(r == (n + 999) // 1000 for n, r in judged),
              f"not one batch a pass: {judged} of {events}")
        st, body = srv.get("/api/v1/applications?from=now-10m")
        check(st == 200, f"applications: {st}")
        apps = {x["name"]: x for x in json.loads(body)["applications"]}
        check("cpu_split" in apps, f"cpu_split not listed: {list(apps)[:20]}")
        check(apps["cpu_split"]["cpu_cores"] > 0 and apps["cpu_split"]["hosts"], apps["cpu_split"])
        st, body = srv.get("/api/v1/profile?app=cpu_split&from=now-10m&format=collapsed")
        check(st == 200, f"collapsed: {st} {body[:200]}")
        per = collapsed_split(body.decode())
        hot = sum(per.values())
        print(f"    merged split {per}")
        # 100 Hz over the CPU it used (a busy machine gives it less than 5 s).
        check(hot >= 0.8 * 100 * cpu_s, f"only {hot} samples for {cpu_s:.2f} s of CPU")
        for fn, want in (("hot_a", 0.5), ("hot_b", 1 / 3), ("hot_c", 1 / 6)):
            check(abs(per[fn] / hot - want) <= 0.07, f"{fn}: {per[fn] / hot:.3f}, want {want:.3f}")
        check(any(l.startswith("main;run;dispatch;hot_a ") or ";main;run;dispatch;hot_a " in l
                  for l in body.decode().splitlines()), "no folded main;run;dispatch;hot_a line")
        st, body = srv.get("/api/v1/profile?app=cpu_split&from=now-10m&format=pprof")
        check(st == 200, f"pprof: {st}")
        path = os.path.join(tmp, "merged.pb.gz")
        with open(path, "wb") as f:
            f.write(body)
        ts = traces(path)
        check(sum(t.count for t in ts if t.frames[0] == "hot_a") == per["hot_a"],
              "pprof export and collapsed export disagree")
        st, body = srv.get("/api/v1/profile?app=cpu_split&from=now-10m&format=flamegraph")
        fg = json.loads(body)
        nodes = fg["nodes"]
        check(nodes[1] == fg["total"] and fg["total"] > 0, "root total")
        names = {fg["names"][nodes[i]] for i in range(0, len(nodes), 4)}
        check({"hot_a", "hot_b", "hot_c", "main"} <= names, f"names {sorted(names)[:20]}")
        st, body = srv.get("/api/v1/profile?app=cpu_split&from=now-10m&format=flamegraph&max_nodes=5")
        small = json.loads(body)
        sn = small["nodes"]
        check(len(nodes) // 4 > 5 and len(sn) // 4 <= 5 and sn[1] == fg["total"]
              and 1 in sn[0::4], f"max_nodes=5 gave {len(sn) // 4} nodes: {sn}")

        def children_add_up(ns):
            pos = 0

            def walk():
                nonlocal pos
                _, total, self_, kids = ns[pos:pos + 4]
                pos += 4
                got = sum(walk() for _ in range(kids))
                check(got + self_ == total, f"node at {pos}: children {got} + self {self_} != {total}")
                return total
            walk()
            check(pos == len(ns), "nodes left over")
        children_add_up(nodes)
        children_add_up(sn)
        st, body = srv.get("/api/v1/timeline?app=cpu_split&from=now-10m&step=60s")
        tl = json.loads(body)
        check(st == 200 and sum(tl["cpu_cores"]) > 0, f"timeline {tl}")
        st, body = srv.get("/metrics")
        check(b"codexray_profiles_ingested_total" in body, "metrics")
    finally:
        srv.stop()


def test_server_bad_input(tmp):
    """Bad input is refused with the right 4xx and a reason; the server stays
    up and what it stored before is intact."""
    srv = Server(tmp)
    try:
        st, _ = srv.post("/api/v1/profiles?service=keep", gzip.compress(good_profile("keep")))
        check(st == 202, f"a good profile: {st}")
        before = srv.get("/api/v1/profile?app=keep&from=0&format=collapsed")[1]
        check(b"work 5" in before, before)
        bomb = gzip.compress(b"\0" * (300 << 20), 9)
        bad = [
            ("random bytes", random.Random(1).randbytes(5000), 400),
            ("truncated gzip", gzip.compress(good_profile())[:30], 400),
            ("gzip bomb", bomb, 413),
            ("location out of range",
             profile(["", "samples", "count"], [(1, 2)], [([99], [1], [])]), 400),
            ("string index out of range",
             profile(["", "samples", "count"], [(1, 77)], [([], [1], [])]), 400),
            ("function out of range",
             profile(["", "samples", "count", "f"], [(1, 2)], [([1], [1], [])],
                     locations=[(1, 5)], functions=[(1, 3)]), 400),
            ("values per sample",
             profile(["", "samples", "count"], [(1, 2)], [([], [1, 2], [])]), 400),
            ("oversized label",
             profile(["", "samples", "count", "service", "x" * 10000], [(1, 2)],
                     [([], [1], [(3, 4)])]), 400),
            ("no service", profile(["", "samples", "count"], [(1, 2)], [([], [1], [])]), 400),
            ("stack deeper than 2048 frames",
             profile(["", "samples", "count", "f", "service", "s"], [(1, 2)],
                     [([1] * 3000, [1], [(4, 5)])], locations=[(1, 1)], functions=[(1, 3)]), 413),
            ("time_nanos as fixed64", gzip.compress(
                varint(9 << 3 | 1) + b"12345678" + good_profile("keep")), 400),
            ("samples x period past 64 bits",
             profile(["", "samples", "count", "cpu", "nanoseconds", "service", "s"], [(1, 2)],
                     [([], [1 << 62], [(5, 6)])]) + field(11, field(1, 3) + field(2, 4)) +
             field(12, 4), 400),
            # 400,000 locations without lines, each named from a 480-byte file
            # name: 200 MB of made-up names from a 3 MB body
            ("names past the memory budget", gzip.compress(
                field(3, field(1, 1) + field(5, 5)) +
                b"".join(field(4, field(1, i) + field(2, 1) + field(3, i)) for i in range(1, 400001)) +
                b"".join(field(6, x) for x in ["", "samples", "count", "service", "s",
                                                "/" + "x" * 480]) +
                field(1, field(1, 1) + field(2, 2))), 413),
        ]
        for name, body, want in bad:
            st, resp = srv.post("/api/v1/profiles", body)
            check(st == want, f"{name}: {st}, want {want}: {resp[:200]}")
            check(b'"error"' in resp, f"{name}: no stated reason: {resp[:200]}")
        # Past the body limit: refused from the headers, before the body is read.
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(b"POST /api/v1/profiles HTTP/1.1\r\nHost: x\r\n"
                         b"Content-Length: 17825792\r\n\r\n")
            resp = sock.recv(4096)
        check(resp.startswith(b"HTTP/1.1 413"), f"17 MiB body: {resp[:100]}")
        for q, want in (("/api/v1/profile?app=keep&format=svg", 400),
                        ("/api/v1/profile?format=pprof", 400),
                        ("/api/v1/profile?app=keep&from=yesterday", 400),
                        ("/api/v1/timeline?app=keep&step=0", 400),
                        ("/nope", 404)):
            st, resp = srv.get(q)
            check(st == want, f"{q}: {st}, want {want}")
        check(srv.get("/healthz")[0] == 200, "the server went down")
        after = srv.get("/api/v1/profile?app=keep&from=0&format=collapsed")[1]
        check(after == before, f"stored data changed: {before} -> {after}")
        # And what comes after a query is seen by the next one (no stale snapshot).
        st, _ = srv.post("/api/v1/profiles?service=keep", gzip.compress(good_profile("keep")))
        check(st == 202, f"a second good profile: {st}")
        again = srv.get("/api/v1/profile?app=keep&from=0&format=collapsed")[1]
        check(b"work 10" in again, f"a later profile not seen by a later query: {again}")
        st, m = srv.get("/metrics")
        check(re.search(rb'rejected_total\{reason="too_large"\} 4', m), m)
    finally:
        srv.stop()


def test_server_auth(tmp):
    srv = Server(tmp, "--api-key", "s3cret")
    try:
        body = gzip.compress(good_profile("authsvc"))
        check(srv.post("/api/v1/profiles", body)[0] == 401, "no key")
        check(srv.post("/api/v1/profiles", body, {"Authorization": "Bearer nope"})[0] == 401,
              "wrong key")
        check(srv.post("/api/v1/profiles", body, {"Authorization": "Bearer s3cret"})[0] == 202,
              "right key")
    finally:
        srv.stop()


def test_server_durability(tmp):
    """kill -9 during ingest: every profile answered 202 is there after a restart."""
    srv = Server(tmp)
    acked, stop = [], threading.Event()

    def send(k):
        i = 0
        while not stop.is_set():
            name = f"dur-{k}-{i}"
            try:
                st, _ = srv.post(f"/api/v1/profiles?service={name}", gzip.compress(good_profile(name)))
                if st == 202:
                    acked.append(name)
            except OSError:
                return
            i += 1

    kill9_during(srv, send, 4, stop, acked, 20)


def kill9_during(srv, send, nthreads, stop, acked, least):
    """Runs send(k) in nthreads threads for 2 s, kills the server with
    SIGKILL, restarts it, and checks that every application name in acked
    (what the server answered 202 for) is there, and that at least `least`
    were acknowledged."""
    threads = [threading.Thread(target=send, args=(k,)) for k in range(nthreads)]
    for t in threads:
        t.start()
    time.sleep(2)
    srv.kill9()
    stop.set()
    for t in threads:
        t.join()
    srv.start()
    try:
        st, body = srv.get("/api/v1/applications?from=now-1h")
        have = {a["name"] for a in json.loads(body)["applications"]}
        missing = [a for a in acked if a not in have]
        print(f"    {len(acked)} acknowledged before kill -9, {len(missing)} missing after "
              f"restart; {len(have)} stored in all")
        check(len(acked) >= least, f"only {len(acked)} profiles acknowledged in 2 s")
        check(not missing, f"lost after kill -9: {missing[:5]}")
    finally:
        srv.stop()


def test_agent_outage(tmp):
    """The server is down for a while, then up: the spooled windows arrive,
    none twice. The agent is killed outright (SIGKILL) during the outage and
    started again: every window it had made was on disk already."""
    port = free_port()
    outdir = os.path.join(tmp, "files")
    os.mkdir(outdir)
    a, log = run_agent(tmp, f"http://127.0.0.1:{port}", "--output-dir", outdir)
    try:
        w = subprocess.Popen([os.path.join(WORK, "cpu_split"), "5"], stdout=subprocess.DEVNULL)
        w.wait(timeout=30)
    except BaseException:
        a.kill()
        a.wait()
        raise
    spool = os.path.join(tmp, "agent-data", "spool")
    mine = f"~{w.pid}.cxspool"
    ended, deadline = time.time(), time.time() + 30
    while time.time() < deadline:
        # Two windows (2 s each) after the workload's end, no window holds
        # it any more; then every one written is to be in the spool.
        want = len([f for f in os.listdir(outdir) if f.startswith(f"cpu_split.{w.pid}.")])
        if (time.time() - ended > 5 and want >= 2 and
                len([f for f in os.listdir(spool) if f.endswith(mine)]) >= want):
            break
        time.sleep(0.2)
    a.kill()
    a.wait()
    log.close()
    with open(log.name) as f:
        first_log = f.read()
    spooled = len([f for f in os.listdir(spool) if f.endswith(mine)])
    want = len([f for f in os.listdir(outdir) if f.startswith(f"cpu_split.{w.pid}.")])
    check(want >= 2 and spooled == want,
          f"{spooled} of the workload's {want} windows spooled before the kill")
    check("failed" in first_log and "retrying" in first_log,
          "no logged upload failure during the outage")
    a, log = run_agent(tmp, f"http://127.0.0.1:{port}", "--output-dir", outdir)
    srv = None
    try:
        time.sleep(1)
        srv = Server(tmp, port=port)
        deadline = time.time() + 30
        want = len([f for f in os.listdir(outdir) if f.startswith(f"cpu_split.{w.pid}.")])
        got = 0
        while time.time() < deadline:
            st, body = srv.get(f"/api/v1/profile?app=cpu_split&pid={w.pid}&from=now-10m"
                               "&format=flamegraph")
            got = json.loads(body)["profiles"] if st == 200 else 0
            if got >= want:
                break
            time.sleep(0.5)
        rc, alog = stop_agent(a, log)
        time.sleep(0.5)
        want = len([f for f in os.listdir(outdir) if f.startswith(f"cpu_split.{w.pid}.")])
        st, body = srv.get(f"/api/v1/profile?app=cpu_split&pid={w.pid}&from=now-10m"
                           "&format=flamegraph")
        got = json.loads(body)["profiles"]
        print(f"    windows written {want}, spooled before the kill {spooled}, stored after "
              f"the outage {got}")
        check(want >= 2 and got == want, f"{got} profiles stored for {want} windows")
    finally:
        if a.poll() is None:  # a check failed before the agent was stopped
            a.kill()
            a.wait()
        if srv:
            srv.stop()


def metric(srv, name):
    for line in srv.get("/metrics")[1].decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise Failure(f"no metric {name}")


def stacks_of(srv, query):
    st, body = srv.get("/api/v1/profile?" + query + "&format=collapsed")
    check(st == 200, f"{query}: {st} {body[:200]}")
    out = {}
    for line in body.decode().splitlines():
        stack, n = line.rsplit(" ", 1)
        out[stack] = out.get(stack, 0) + int(n)
    return out


def test_server_rollups(tmp):
    """Rollups: a merge over whole 10-minute and 3-hour buckets (read from
    rollups) equals the sum of the same profiles read raw (a host filter
    reads raw), whole and with ragged edges; a profile arriving late in a
    rolled-up bucket counts at once and after the rebuild."""
    srv = Server(tmp)
    try:
        H = 3 * 3600
        base = (int(time.time()) - 3 * H) // H * H  # a complete 3-hour bucket
        strings = ["", "samples", "count", "cpu", "nanoseconds", "service", "svc", "host",
                   "h1", "h2", "main", "work", "idle"]
        n = 0
        for i in range(0, H, 7 * 60):  # every 7 minutes: 26 profiles over 18 buckets
            host = 8 + n % 2
            leaf = 11 + n % 2
            body = profile(strings, [(1, 2), (3, 4)],
                           [([1, 2], [n + 1, (n + 1) * 10000000], [(5, 6), (7, host)]),
                            ([2], [1, 10000000], [(5, 6), (7, host)])],
                           locations=[(1, leaf), (2, 10)],
                           functions=[(10, 10), (11, 11), (12, 12)],
                           time_ns=(base + i) * 10**9)
            st, resp = srv.post("/api/v1/profiles", body)
            check(st == 202, f"post {n}: {st} {resp}")
            n += 1
        deadline = time.time() + 30
        while metric(srv, "codexray_rollups_pending") or metric(srv, "codexray_rollups_built_total") < 19:
            check(time.time() < deadline, "rollups not built within 30 s: built "
                  f"{metric(srv, 'codexray_rollups_built_total')}")
            time.sleep(0.5)

        def raw(frm, to):
            a = stacks_of(srv, f"app=svc&from={frm}&to={to}&host=h1")
            for k, v in stacks_of(srv, f"app=svc&from={frm}&to={to}&host=h2").items():
                a[k] = a.get(k, 0) + v
            return a

        for frm, to in ((base, base + H), (base + 300, base + H - 1), (base - 60, base + 2 * 3600 + 7)):
            merged, want = stacks_of(srv, f"app=svc&from={frm}&to={to}"), raw(frm, to)
            check(merged == want, f"[{frm - base}, {to - base}): rollups {merged} != raw {want}")
        whole = stacks_of(srv, f"app=svc&from={base}&to={base + H}")
        check(sum(whole.values()) == sum(range(1, n + 1)) + n, f"totals {whole}")
        # A late profile lands in a bucket rolled up already.
        body = profile(strings, [(1, 2), (3, 4)], [([1], [1000, 10**10], [(5, 6), (7, 8)])],
                       locations=[(1, 12)], functions=[(12, 12)], time_ns=(base + 61) * 10**9)
        st, _ = srv.post("/api/v1/profiles", body)
        check(st == 202, f"late post: {st}")
        now = stacks_of(srv, f"app=svc&from={base}&to={base + H}")
        check(now.get("idle", 0) == whole.get("idle", 0) + 1000, f"late profile missed: {now}")
        built = metric(srv, "codexray_rollups_built_total")
        deadline = time.time() + 30
        while metric(srv, "codexray_rollups_built_total") < built + 2:
            check(time.time() < deadline, "dirty buckets not rebuilt within 30 s")
            time.sleep(0.5)
        after = stacks_of(srv, f"app=svc&from={base}&to={base + H}")
        check(after == now, f"after the rebuild {after} != {now}")
        print(f"    {n + 1} profiles, {int(metric(srv, 'codexray_rollups_built_total'))} rollups built;"
              " rollup merges equal raw merges")
    finally:
        srv.stop()


def test_server_labels(tmp):
    """Identity labels (container_id, pod, namespace, container,
    systemd_unit) from the query string or the first sample: listed by
    /api/v1/labels, and profile/timeline filter by them; control characters
    are refused."""
    srv = Server(tmp)
    try:
        def prof(fn, labels):
            strings = ["", "samples", "count", "cpu", "nanoseconds", fn, "service", "web"]
            pairs = [(6, 7)]
            for k, v in labels:
                strings += [k, v]
                pairs.append((len(strings) - 2, len(strings) - 1))
            return profile(strings, [(1, 2), (3, 4)], [([1], [10, 10**8], pairs)],
                           locations=[(1, 1)], functions=[(1, 5)])
        st, _ = srv.post("/api/v1/profiles?pod=web-1&namespace=shop&container=app&pid=11",
                         prof("in_pod_1", []))
        check(st == 202, f"post 1: {st}")
        st, _ = srv.post("/api/v1/profiles?pid=12",
                         prof("in_pod_2", [("pod", "web-2"), ("namespace", "shop"),
                                           ("container_id", "c0ffee")]))
        check(st == 202, f"post 2: {st}")
        st, _ = srv.post("/api/v1/profiles?pid=13", prof("in_unit", [("systemd_unit", "web.service")]))
        check(st == 202, f"post 3: {st}")
        st, body = srv.post("/api/v1/profiles?pod=bad%01pod", prof("x", []))
        check(st == 400 and b"control character" in body, f"control character: {st} {body}")
        st, body = srv.get("/api/v1/labels?app=web&from=now-10m")
        check(st == 200, f"labels: {st} {body}")
        lv = json.loads(body)
        check(sorted(lv["pod"]) == ["web-1", "web-2"] and lv["namespace"] == ["shop"]
              and lv["container"] == ["app"] and lv["container_id"] == ["c0ffee"]
              and lv["systemd_unit"] == ["web.service"] and sorted(lv["pid"]) == ["11", "12", "13"],
              f"labels {lv}")
        for q, want in (("pod=web-1", {"in_pod_1"}), ("namespace=shop", {"in_pod_1", "in_pod_2"}),
                        ("systemd_unit=web.service", {"in_unit"}), ("container_id=c0ffee", {"in_pod_2"}),
                        ("pod=web-1&namespace=other", set()), ("pod=web", set())):
            got = set(stacks_of(srv, f"app=web&from=now-10m&{q}"))
            check(got == want, f"{q}: {got}, want {want}")
        st, body = srv.get("/api/v1/labels?app=web&from=now-10m&namespace=shop")
        check(sorted(json.loads(body)["pid"]) == ["11", "12"], f"filtered labels {body}")
        st, body = srv.get("/api/v1/timeline?app=web&from=now-10m&step=60s&pod=web-2")
        check(st == 200 and abs(sum(json.loads(body)["cpu_cores"]) * 60 - 0.1) < 1e-6,
              f"timeline by pod {body}")
    finally:
        srv.stop()


def zstd(data, *args):
    """zstd-compressed data, by Debian's zstd command (tools/deps.sh)."""
    return subprocess.run(["zstd", "-q", "-c", *args], input=data, stdout=subprocess.PIPE,
                          check=True).stdout


def packed(num, values):
    return field(num, b"".join(varint(v) for v in values))


def stack_rows(srv):
    """Rows in the store's stacks table, read from its file as it runs (WAL
    lets a reader in)."""
    import sqlite3
    db = sqlite3.connect(f"file:{srv.data}/profiles.db?mode=ro", uri=True)
    try:
        return db.execute("SELECT count(*) FROM stacks").fetchone()[0]
    finally:
        db.close()


def test_server_stack_keys(tmp):
    """A stack is stored once whatever way a profile spells it (packed or
    unpacked location ids, other ids and order, a call inlined into one
    location or in two); different stacks stay apart; zstd bodies read like
    gzip ones; a store made before stack keys has its stacks keyed when
    opened and goes on deduplicating them."""
    srv = Server(tmp)
    try:
        head = field(9, time.time_ns()) + field(1, field(1, 1) + field(2, 2))
        svc = [(3, 4)]

        def label(k, v):
            return field(3, field(1, k) + field(2, v))

        # main -> run -> work (leaf first: work, run, main), four spellings.
        # 1: one location per frame, ids packed.
        strs1 = ["", "samples", "count", "service", "keys", "work", "run", "main"]
        a = head + field(2, packed(1, [1, 2, 3]) + packed(2, [5]) + label(3, 4))
        for lid, fid in ((1, 10), (2, 11), (3, 12)):
            a += field(4, field(1, lid) + field(4, field(1, fid)))
        for fid, name in ((10, 5), (11, 6), (12, 7)):
            a += field(5, field(1, fid) + field(2, name))
        a += b"".join(field(6, x) for x in strs1)
        # 2: the same, ids unpacked, other ids, strings in another order.
        strs2 = ["", "main", "work", "run", "samples", "count", "service", "keys"]
        b = field(9, time.time_ns()) + field(1, field(1, 4) + field(2, 5))
        b += field(2, field(1, 70) + field(1, 80) + field(1, 90) + field(2, 5) +
                   field(3, field(1, 6) + field(2, 7)))
        for lid, fid in ((90, 3), (70, 1), (80, 2)):
            b += field(4, field(1, lid) + field(4, field(1, fid)))
        for fid, name in ((1, 2), (2, 3), (3, 1)):
            b += field(5, field(1, fid) + field(2, name))
        b += b"".join(field(6, x) for x in strs2)
        # 3: work inlined into run in one location (innermost first), then main.
        c = head + field(2, packed(1, [1, 2]) + packed(2, [5]) + label(3, 4))
        c += field(4, field(1, 1) + field(4, field(1, 10)) + field(4, field(1, 11)))
        c += field(4, field(1, 2) + field(4, field(1, 12)))
        for fid, name in ((10, 5), (11, 6), (12, 7)):
            c += field(5, field(1, fid) + field(2, name))
        c += b"".join(field(6, x) for x in strs1)
        # 4: another stack of the same functions: run -> work -> main reversed.
        d = head + field(2, packed(1, [3, 2, 1]) + packed(2, [7]) + label(3, 4))
        for lid, fid in ((1, 10), (2, 11), (3, 12)):
            d += field(4, field(1, lid) + field(4, field(1, fid)))
        for fid, name in ((10, 5), (11, 6), (12, 7)):
            d += field(5, field(1, fid) + field(2, name))
        d += b"".join(field(6, x) for x in strs1)
        # 5: ids far apart (looked up by hash, not by index), packed.
        e = head + field(2, packed(1, [10**12, 7, 10**15]) + packed(2, [3]) + label(3, 4))
        for lid, fid in ((10**12, 2**40), (7, 2**50), (10**15, 2**60)):
            e += field(4, field(1, lid) + field(4, field(1, fid)))
        for fid, name in ((2**40, 5), (2**50, 6), (2**60, 7)):
            e += field(5, field(1, fid) + field(2, name))
        e += b"".join(field(6, x) for x in strs1)
        # Each from a process of its own: one process's profile sent again
        # is the same profile, stored once.
        for k, (name, body) in enumerate((("packed", a), ("unpacked", b), ("inlined", c),
                                          ("reversed", d), ("sparse ids", e))):
            st, resp = srv.post(f"/api/v1/profiles?pid={k + 1}", body)
            check(st == 202, f"{name}: {st} {resp}")
        got = stacks_of(srv, "app=keys&from=now-10m")
        check(got == {"main;run;work": 18, "work;run;main": 7}, f"merged {got}")
        check(stack_rows(srv) == 2, f"{stack_rows(srv)} stack rows for 2 stacks")
        # A name holding a NUL is kept up to it, by the key as by the store:
        # "nul\0A", "nul\0B" and "nul" are one function, one stack.
        for name in ("nul\0A", "nul\0B", "nul"):
            st, resp = srv.post("/api/v1/profiles?service=nuls", profile(
                ["", "samples", "count", name], [(1, 2)], [([1], [1], [])],
                locations=[(1, 1)], functions=[(1, 3)]))
            check(st == 202, f"{name!r}: {st} {resp}")
        got = stacks_of(srv, "app=nuls&from=now-10m")
        check(got == {"nul": 3}, f"names with a NUL: {got}")
        check(stack_rows(srv) == 3, f"{stack_rows(srv)} stack rows after the NUL names")
        # zstd: the same profile as gzip, counted alike.
        st, resp = srv.post("/api/v1/profiles?pid=6", zstd(a))
        check(st == 202, f"zstd: {st} {resp}")
        st, resp = srv.post("/api/v1/profiles?pid=7", zstd(a) + zstd(b"", "--no-check"))
        check(st == 202, f"two zstd frames: {st} {resp}")
        got = stacks_of(srv, "app=keys&from=now-10m")
        check(got == {"main;run;work": 28, "work;run;main": 7}, f"after zstd {got}")
        bad = [("truncated zstd", zstd(a)[:-7], 400),
               ("zstd then garbage", zstd(a) + b"garbage", 400),
               ("zstd bomb", zstd(b"\0" * (300 << 20), "-1"), 413),
               ("zstd bomb, its size declared", zstd(b"\0" * (300 << 20), "-1",
                                                     "--stream-size=314572800"), 413),
               ("zstd with a 128 MiB window", zstd(b"\0" * (300 << 20), "--long=27"), 400),
               # 1M empty mappings: tables of 48 MB from a 2 MB body
               ("a flood of empty messages", gzip.compress(b"\x1a\x00" * (1 << 20)), 413)]
        for name, body, want in bad:
            st, resp = srv.post("/api/v1/profiles", body)
            check(st == want and b'"error"' in resp, f"{name}: {st}, want {want}: {resp[:200]}")
        # A store from before stack keys: no key column filled, no index, no
        # bases; and a profile stored in the blob form of then (no period:
        # cpu_ns whole), 3 samples of one stack, 4 of the other.
        srv.stop()
        import sqlite3
        db = sqlite3.connect(f"{srv.data}/profiles.db")
        db.execute("DROP INDEX stacks_key")
        db.execute("UPDATE stacks SET key = NULL")
        db.execute("DELETE FROM meta")
        (s1,), (s2,) = db.execute("SELECT id FROM stacks ORDER BY id LIMIT 2").fetchall()
        old = (varint(s1) + varint(0) + varint(3) + varint(30000000) +
               varint(s2) + varint(0) + varint(4) + varint(40000001))
        db.execute("INSERT INTO profiles(app, host, pid, container_id, time_ns, duration_ns, "
                   "period_ns, samples, cpu_ns, bytes_in, data) VALUES('keys', '', 0, '', ?, 0, "
                   "10000000, 7, 70000001, 0, ?)", (time.time_ns(), old))
        db.commit()
        db.close()
        srv.start()
        got = stacks_of(srv, "app=keys&from=now-10m")
        check(got == {"main;run;work": 31, "work;run;main": 11}, f"after reopening {got}")
        st, body = srv.get("/api/v1/profile?app=keys&from=now-10m&format=flamegraph")
        check(st == 200, f"flame graph: {st}")
        st, resp = srv.post("/api/v1/profiles?pid=8", b)
        check(st == 202, f"post after reopening: {st} {resp}")
        check(stack_rows(srv) == 3, f"{stack_rows(srv)} stack rows after reopening")
        got = stacks_of(srv, "app=keys&from=now-10m")
        check(got == {"main;run;work": 36, "work;run;main": 11}, f"after reopening and a post {got}")
        with open(srv.log.name) as f:
            check("3 stored stacks keyed" in f.read(), "no log line for the keyed stacks")
        # CPU kept exactly, also where it is not samples x period.
        strs = ["", "samples", "count", "cpu", "nanoseconds", "service", "cpuexact", "f"]
        body = (field(9, time.time_ns()) + field(1, field(1, 1) + field(2, 2)) +
                field(1, field(1, 3) + field(2, 4)) + field(11, field(1, 3) + field(2, 4)) +
                field(12, 10000000) +
                field(2, packed(1, [1]) + packed(2, [3, 30000007]) + label(5, 6)) +
                field(2, packed(1, [1]) + packed(2, [2, 19999999]) + label(5, 6)) +
                field(4, field(1, 1) + field(4, field(1, 1))) + field(5, field(1, 1) + field(2, 7)) +
                b"".join(field(6, x) for x in strs))
        st, resp = srv.post("/api/v1/profiles", zstd(body))
        check(st == 202, f"cpu profile: {st} {resp}")
        st, pb = srv.get("/api/v1/profile?app=cpuexact&from=now-10m&format=pprof")
        path = os.path.join(tmp, "cpu.pb.gz")
        with open(path, "wb") as f:
            f.write(pb)
        raw_out = raw(path)
        check(re.search(r"^\s*5\s+50000006:", raw_out, re.M), f"samples/cpu not kept: {raw_out}")
        print("    " + [ln for ln in raw_out.splitlines() if "50000006" in ln][0].strip())
    finally:
        srv.stop()


def db_count(srv, table):
    import sqlite3
    db = sqlite3.connect(f"file:{srv.data}/profiles.db?mode=ro", uri=True)
    try:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


def test_server_retention(tmp):
    """Retention deletes profiles past --retention, and then the stacks,
    functions and label sets only they used; what newer profiles use stays,
    and queries over them answer as before."""
    srv = Server(tmp, "--retention", "1h")
    try:
        strings = ["", "samples", "count", "service", "ret", "main", "old_only", "shared",
                   "new_only", "pod", "gone", "kept"]
        old_t, new_t = time.time_ns() - 2 * 3600 * 10**9, time.time_ns()

        def prof(t, leaf, pod):
            return profile(strings, [(1, 2)],
                           [([1, 2], [3], [(3, 4), (9, pod)]), ([3, 2], [4], [(3, 4), (9, pod)])],
                           locations=[(1, leaf), (2, 5), (3, 7)],
                           functions=[(5, 5), (6, 6), (7, 7), (8, 8)], time_ns=t)
        # Two new profiles a second apart (the same one twice is stored once).
        for t, leaf, pod in ((old_t, 6, 10), (new_t, 8, 11), (new_t - 10**9, 8, 11)):
            st, resp = srv.post("/api/v1/profiles", prof(t, leaf, pod))
            check(st == 202, f"post: {st} {resp}")
        check(db_count(srv, "stacks") == 3 and db_count(srv, "functions") == 4 and
              db_count(srv, "labelsets") == 2, "before: stacks "
              f"{db_count(srv, 'stacks')}, functions {db_count(srv, 'functions')}")
        before = stacks_of(srv, "app=ret&from=now-10m")
        check(before == {"main;new_only": 6, "main;shared": 8}, f"before {before}")
        # Retention runs when the server starts, then every minute.
        srv.stop()
        srv.start()
        deadline = time.time() + 30
        while True:
            with open(srv.log.name) as f:
                log = f.read()
            if "orphans deleted" in log:
                break
            check(time.time() < deadline, f"no orphan collection within 30 s: {log[-500:]}")
            time.sleep(0.2)
        m = re.search(r"orphans deleted: (\d+) stacks, (\d+) functions, (\d+) label sets", log)
        check(m and m.groups() == ("1", "1", "1"), f"collected {m and m.groups()}: {log[-300:]}")
        check(db_count(srv, "profiles") == 2, f"profiles left {db_count(srv, 'profiles')}")
        check(db_count(srv, "stacks") == 2 and db_count(srv, "functions") == 3 and
              db_count(srv, "labelsets") == 1, "after: stacks "
              f"{db_count(srv, 'stacks')}, functions {db_count(srv, 'functions')}, label sets "
              f"{db_count(srv, 'labelsets')}")
        after = stacks_of(srv, "app=ret&from=now-10m")
        check(after == before, f"the kept profiles changed: {after} != {before}")
        check(stacks_of(srv, "app=ret&from=now-3h&to=now-1h") == {}, "old profiles still there")
        # The deleted stack comes back when it is used again.
        st, resp = srv.post("/api/v1/profiles", prof(time.time_ns(), 6, 10))
        check(st == 202, f"post after collection: {st} {resp}")
        got = stacks_of(srv, "app=ret&from=now-10m")
        check(got == {"main;new_only": 6, "main;shared": 12, "main;old_only": 3}, f"then {got}")
        print(f"    {m.group(0)}")
    finally:
        srv.stop()


def test_server_list_flags(tmp):
    """Every list flag is read one way (common/list.h): a list either works
    or is refused with the flag named, within a bound. CodeXray issue 30:
    --clickhouse http://ch:8123/ (a trailing slash) spun the server at
    100 % CPU before it logged anything; here port 1 of loopback refuses
    the connection at once, so the server must exit saying so."""
    data = os.path.join(tmp, "data")

    def run(*args, env=None):
        try:
            return subprocess.run([SERVER, "--listen", f"127.0.0.1:{free_port()}", "--data-dir",
                                   data, *args], capture_output=True, text=True, timeout=120,
                                  env=env)
        except subprocess.TimeoutExpired:
            raise Failure(f"{args}: still running after 120 s (the issue 30 hang)")

    for urls in ("http://127.0.0.1:1/", "http://127.0.0.1:1//,", " http://127.0.0.1:1/ , ,"):
        p = run("--clickhouse", urls)
        check(p.returncode == 1 and "store: clickhouse: cannot read database codexray at "
              "http://127.0.0.1:1: " in p.stderr, f"--clickhouse {urls!r}: {p.returncode} "
              f"{p.stderr[-300:]}")
    # The same from the environment and from the config file.
    p = run(env={**os.environ, "CODEXRAY_CLICKHOUSE": "http://127.0.0.1:1/"})
    check(p.returncode == 1 and "at http://127.0.0.1:1: " in p.stderr, f"env: {p.stderr[-300:]}")
    conf = os.path.join(tmp, "server.conf")
    with open(conf, "w") as f:
        f.write("clickhouse = http://127.0.0.1:1/ ,\n")
    p = run("--config", conf)
    check(p.returncode == 1 and "at http://127.0.0.1:1: " in p.stderr, f"file: {p.stderr[-300:]}")
    for urls, why in ((",,,", "--clickhouse: no URL"),
                      ("ftp://ch:8123", "--clickhouse: entry 1 (\"ftp://ch:8123\") is not an "
                                        "http:// or https:// URL"),
                      ("http://a, http://", "--clickhouse: entry 2 (\"http://\")"),
                      ("http://" + "a" * 3000, "--clickhouse: entry 1 is 3007 bytes long"),
                      (",".join(["http://a"] * 300), "--clickhouse: more than 256 entries")):
        p = run("--clickhouse", urls)
        check(p.returncode == 1 and why in p.stderr, f"--clickhouse {urls[:40]!r}: "
              f"{p.returncode} {p.stderr[-300:]}")
    for urls, why in ((", ,", "--debuginfod-upstream: no URL"),
                      ("https://d.example, nonsense", "--debuginfod-upstream: entry 2 "
                                                      "(\"nonsense\")")):
        p = run("--debuginfod-upstream", urls)
        check(p.returncode == 2 and f"codexray-server: {why}" in p.stderr,
              f"--debuginfod-upstream {urls!r}: {p.returncode} {p.stderr[-300:]}")
    # A good one with commas, spaces and slashes: the server starts and hands
    # libdebuginfod the list space-separated.
    srv = Server(tmp, "--debuginfod-upstream", " http://127.0.0.1:1/, http://127.0.0.1:2// ,")
    try:
        check(srv.get("/healthz")[0] == 200, "not up")
    finally:
        srv.stop()
    log = open(os.path.join(tmp, f"server-{srv.port}.log")).read()
    check("upstream http://127.0.0.1:1 http://127.0.0.1:2)" in log, log[-500:])


TESTS = [test_server_stack_keys, test_server_retention, test_server_rollups, test_server_labels, test_server_agent_to_query, test_server_bad_input, test_server_auth,
         test_server_durability, test_agent_outage, test_server_list_flags]
