"""The server under hostile input (issue 16): sums past 64 bits, identity
labels that are not text, forged log lines, NaN times. Over real HTTP with
a real SQLite file, like server_tests."""
import gzip
import json
import math
import os
import random
import re
import resource
import socket
import sqlite3
import time
import urllib.parse

from server_tests import Server, check, field, profile

INT64_MAX = (1 << 63) - 1
NS = 10**9


def cpu_profile(service, cpu_ns, duration_ns, time_ns=None):
    """One sample of one stack with the given CPU, over duration_ns."""
    strings = ["", "samples", "count", "cpu", "nanoseconds", "work", "service", service]
    body = profile(strings, [(1, 2), (3, 4)], [([1], [1, cpu_ns], [(6, 7)])],
                   locations=[(1, 1)], functions=[(1, 5)], time_ns=time_ns)
    return gzip.compress(body + field(10, duration_ns))


def test_server_hostile_sums(tmp):
    """A profile may claim no more CPU than 16,384 cores give over its
    duration (400 past it); profiles at that bound whose sum passes 64 bits
    leave every read working: the applications list, the flame graph's
    total (held at INT64_MAX) and the timeline (never negative)."""
    srv = Server(tmp)
    try:
        st, resp = srv.post("/api/v1/profiles", cpu_profile("big", 5 * 10**18, 60 * NS))
        check(st == 400 and b"cores" in resp, f"5e18 ns of CPU in a minute: {st} {resp[:200]}")
        st, resp = srv.post("/api/v1/profiles", cpu_profile("big", 1000, 400 * 86400 * NS))
        check(st == 400 and b"duration" in resp, f"a 400-day profile: {st} {resp[:200]}")
        before_1970 = (1 << 64) - 5  # -5 as protobuf writes an int64
        st, resp = srv.post("/api/v1/profiles", cpu_profile("big", 1000, NS, time_ns=before_1970))
        check(st == 400 and b"time" in resp, f"a profile before 1970: {st} {resp[:200]}")
        # A day on 16,000 cores, seven times: 9.7e18 ns, past int64.
        day = 86400 * NS
        t0 = (int(time.time()) // 86400 - 3) * day
        for i in range(7):
            st, resp = srv.post("/api/v1/profiles",
                                cpu_profile("big", 16000 * day, day, time_ns=t0 + i * 600 * NS))
            check(st == 202, f"profile {i} at the bound: {st} {resp[:200]}")
        rng = f"from={t0 // NS - 3600}&to={t0 // NS + 7200}"
        st, resp = srv.get(f"/api/v1/applications?{rng}")
        check(st == 200, f"applications: {st} {resp[:200]}")
        apps = json.loads(resp)["applications"]
        check([a["name"] for a in apps] == ["big"] and apps[0]["cpu_cores"] > 0
              and math.isfinite(apps[0]["cpu_cores"]), f"applications: {apps}")
        st, resp = srv.get(f"/api/v1/profile?app=big&{rng}&format=flamegraph")
        check(st == 200, f"flame graph: {st} {resp[:200]}")
        g = json.loads(resp)
        check(g["total"] == INT64_MAX and g["nodes"][1] == INT64_MAX,
              f"flame graph total {g['total']}, root {g['nodes'][1]}, want {INT64_MAX}")
        check(all(v >= 0 for v in g["nodes"]), f"a negative node: {g['nodes']}")
        st, resp = srv.get(f"/api/v1/timeline?app=big&{rng}&step=3h")
        check(st == 200, f"timeline: {st} {resp[:200]}")
        cores = json.loads(resp)["cpu_cores"]
        check(all(c >= 0 for c in cores) and max(cores) > 0, f"timeline: {cores}")
        # The pprof export holds the saturated count too.
        st, _ = srv.get(f"/api/v1/profile?app=big&{rng}&format=pprof")
        check(st == 200, f"pprof: {st}")
    finally:
        srv.stop()


def test_server_hostile_identity(tmp):
    """service and host meet the rules of the other identity labels: at most
    4 KiB of valid UTF-8 without control characters (C0, DEL, C1); 400
    otherwise, and nothing of them is stored or listed."""
    srv = Server(tmp)
    try:
        body = gzip.compress(profile(["", "samples", "count", "work"], [(1, 2)],
                                     [([1], [3], [])], locations=[(1, 1)], functions=[(1, 3)]))
        bad = [
            ("service=ev%0Ail%1B[31m", "control"),
            ("service=ok&host=" + "h" * 30000, "longer"),
            ("service=caf%FF", "UTF-8"),
            ("service=%C0%AE", "UTF-8"),  # an overlong '.'
            ("service=csi%C2%9B31m", "control"),  # U+009B, a terminal's CSI
            ("service=del%7F", "control"),
            ("service=ok&host=h%0D", "control"),
            ("service=ok&pod=p%ED%A0%80", "UTF-8"),  # a surrogate
        ]
        for q, why in bad:
            st, resp = srv.post(f"/api/v1/profiles?{q}", body)
            check(st == 400 and why.encode() in resp, f"{q[:60]}: {st} {resp[:200]}")
        # From the sample labels, the same rules.
        lab = gzip.compress(profile(["", "samples", "count", "work", "service", "a\x1b[2Jb"],
                                    [(1, 2)], [([1], [3], [(4, 5)])], locations=[(1, 1)],
                                    functions=[(1, 3)]))
        st, resp = srv.post("/api/v1/profiles", lab)
        check(st == 400 and b"control" in resp, f"service label with ESC: {st} {resp[:200]}")
        q = "service=" + urllib.parse.quote("café-☕") + "&host=" + urllib.parse.quote("hôte")
        st, resp = srv.post(f"/api/v1/profiles?{q}", body)
        check(st == 202, f"UTF-8 names: {st} {resp[:200]}")
        st, resp = srv.get("/api/v1/applications?from=now-1h")
        apps = json.loads(resp)["applications"]
        check([(a["name"], a["hosts"]) for a in apps] == [("café-☕", ["hôte"])],
              f"listed: {apps}")
    finally:
        srv.stop()


LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (debug|info |warn |error) ")


def test_server_hostile_log(tmp):
    """A refused upload's values are escaped in the log: no request can
    write a line of its own."""
    srv = Server(tmp)
    try:
        forged = "x\n2026-12-05T00:00:00.000Z error FORGED"
        st, _ = srv.post("/api/v1/profiles?service=" + urllib.parse.quote(forged), b"\x01junk")
        check(st == 400, f"junk: {st}")
        # A label too long: the refusal quotes its key.
        key = "k\n2026-12-05T00:00:00.000Z error FORGED2"
        lab = gzip.compress(profile(["", "samples", "count", key, "y" * 5000], [(1, 2)],
                                    [([], [1], [(3, 4)])]))
        st, _ = srv.post("/api/v1/profiles", lab)
        check(st == 400, f"long label: {st}")
    finally:
        srv.stop()
    with open(srv.log.name, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    bad = [l for l in lines if not LINE.match(l)]
    check(not bad, f"log lines not written by the server: {bad[:3]}")
    forged = [l for l in lines if l.startswith("2026-12-05T00:00:00.000Z")]
    check(not forged, f"forged lines: {forged}")
    for want in ("service=x\\x0a2026-12-05T00:00:00.000Z error FORGED:",
                 "k\\x0a2026-12-05T00:00:00.000Z error FORGED2"):
        check(any(want in l for l in lines), f"the refusal not logged escaped ({want}): {lines}")


def test_server_hostile_numbers(tmp):
    """NaN and infinities are no times, durations or steps: 400, not 500."""
    srv = Server(tmp)
    try:
        st, _ = srv.post("/api/v1/profiles?service=keep", cpu_profile("keep", 1000, NS))
        check(st == 202, f"a good profile: {st}")
        for q in ("/api/v1/profile?app=keep&from=nan", "/api/v1/profile?app=keep&from=now-nan",
                  "/api/v1/profile?app=keep&to=inf", "/api/v1/profile?app=keep&from=-inf",
                  "/api/v1/profile?app=keep&from=now-infm", "/api/v1/timeline?app=keep&step=nan",
                  "/api/v1/timeline?app=keep&step=inf", "/api/v1/applications?from=NaN",
                  "/api/v1/labels?app=keep&from=now-nanh"):
            st, resp = srv.get(q)
            check(st == 400, f"{q}: {st}, want 400: {resp[:200]}")
        check(srv.get("/api/v1/profile?app=keep&from=now-1h&format=collapsed")[0] == 200,
              "a good query after them")
    finally:
        srv.stop()




def many_samples(n, service):
    """n samples drawn at random from 64 stacks x 4 CPU values (random, so
    the body compresses as a real one does, not past --max-ratio), gzipped."""
    strings = ["", "samples", "count", "cpu", "nanoseconds"] + [f"fn{i}" for i in range(64)]
    head = field(1, field(1, 1) + field(2, 2)) + field(1, field(1, 3) + field(2, 4))
    head += field(9, time.time_ns() - 120 * NS) + field(10, 60 * NS)
    variants = [field(2, field(1, 1 + v % 64) + field(2, 1) + field(2, (1 + v // 64) * 10**7))
                for v in range(256)]
    tail = b"".join(field(4, field(1, i) + field(4, field(1, i))) for i in range(1, 65))
    tail += b"".join(field(5, field(1, i) + field(2, 4 + i)) for i in range(1, 65))
    tail += b"".join(field(6, x) for x in strings)
    pick = random.Random(16).randbytes(n)
    return gzip.compress(head + b"".join(map(variants.__getitem__, pick)) + tail, 6), pick


def hwm_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1))


def test_server_hostile_memory(tmp):
    """4 million samples of 64 stacks (a 9 MB gzip body, legal): stored as
    64 rows (identical samples merged as read), their counts exact, and the
    server's peak memory grows by less than 200 MB (it grew by 470 MB when
    every sample took its own rows in five arrays). With --max-ingest-memory
    8M, a body whose tables need more is refused with 413, and a small one
    still goes in."""
    body, pick = many_samples(4_000_000, "many")
    srv = Server(tmp)
    try:
        before = hwm_kib(srv.p.pid)
        st, resp = srv.post("/api/v1/profiles?service=many", body)
        check(st == 202, f"4M samples: {st} {resp[:200]}")
        grew = (hwm_kib(srv.p.pid) - before) / 1024
        print(f"    {len(body) / 2**20:.1f} MiB body: peak memory grew by {grew:.0f} MiB")
        check(grew < 200, f"peak memory grew by {grew:.0f} MiB for one upload")
        db = sqlite3.connect(os.path.join(srv.data, "profiles.db"))
        try:
            (blob,), = db.execute("SELECT length(data) FROM profiles").fetchall()
        finally:
            db.close()
        check(blob < 64 * 40, f"a blob of {blob} bytes for 64 distinct stacks")
        st, text = srv.get("/api/v1/profile?app=many&from=now-1h&format=collapsed")
        got = {l.rsplit(" ", 1)[0]: int(l.rsplit(" ", 1)[1]) for l in text.decode().splitlines()}
        want = {}
        for b in pick:
            want[f"fn{b % 64}"] = want.get(f"fn{b % 64}", 0) + 1
        check(got == want, f"merged counts differ: {sorted(got.items())[:4]} vs "
              f"{sorted(want.items())[:4]}")
    finally:
        srv.stop()
    srv = Server(tmp, "--max-ingest-memory", str(8 << 20), port=None)
    try:
        # 200,000 distinct stacks of 2 frames: tens of MB of tables and rows
        strings = ["", "samples", "count"] + [f"f{i}" for i in range(1, 501)]
        samples = [([1 + i % 500, 1 + i // 500], [1], []) for i in range(200_000)]
        big = gzip.compress(profile(strings, [(1, 2)], samples,
                                    locations=[(i, i) for i in range(1, 501)],
                                    functions=[(i, 2 + i) for i in range(1, 501)]))
        st, resp = srv.post("/api/v1/profiles?service=wide", big)
        check(st == 413 and b"memory" in resp, f"past --max-ingest-memory: {st} {resp[:200]}")
        st, resp = srv.post("/api/v1/profiles?service=small", cpu_profile("small", 1000, NS))
        check(st == 202, f"a small profile after it: {st} {resp[:200]}")
    finally:
        srv.stop()


TESTS = [test_server_hostile_sums, test_server_hostile_identity, test_server_hostile_log,
         test_server_hostile_numbers, test_server_hostile_memory]


def raw_request(port, data, source="127.0.0.1", timeout=10):
    """Sends data on a new connection from source; the answer's first line,
    or the error that came instead."""
    s = socket.socket()
    s.settimeout(timeout)
    try:
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        return s.recv(4096).split(b"\r\n", 1)[0]
    except OSError as e:
        return repr(e).encode()
    finally:
        s.close()


def test_server_hostile_requests(tmp):
    """A query string of hundreds of parameters: 414 at once (it hung until
    the timeout); "%00" in a path or value: 400 (/ui/index.html%00.js served
    index.html); the Bearer scheme in any case."""
    srv = Server(tmp, "--api-key", "k3y")
    try:
        for n in (500, 5000):
            q = "&".join(f"p{i}={i}" for i in range(n))
            line = raw_request(srv.port, f"GET /api/v1/labels?app=x&{q} HTTP/1.1\r\nHost: x\r\n\r\n"
                               .encode())
            check(line.startswith(b"HTTP/1.1 414"), f"{n} parameters: {line}")
        for path in ("/ui/index.html%00.js", "/api/v1/labels?app=a%00b", "/%00"):
            st, resp = srv.get(path)
            check(st == 400 and b"NUL" in resp, f"{path}: {st} {resp[:100]}")
        check(srv.get("/ui/app.js")[0] == 200, "the UI after them")
        body = cpu_profile("auth", 1000, NS)
        for auth in ("bearer k3y", "BEARER k3y", "Bearer  k3y"):
            st, _ = srv.post("/api/v1/profiles", body, {"Authorization": auth})
            check(st == 202, f"Authorization: {auth}: {st}")
        for auth in ("Bearer k3", "Basic k3y", "Bearerk3y", "bearer"):
            st, _ = srv.post("/api/v1/profiles", body, {"Authorization": auth})
            check(st == 401, f"Authorization: {auth}: {st}, want 401")
    finally:
        srv.stop()


def test_server_hostile_connections(tmp):
    """One client holding 1,100 idle sockets (past the server's limit of
    1,000) cannot keep another from /healthz: a client may hold 64."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    srv = Server(tmp)  # inherits the limit: room for its 1,000 connections
    held = []
    try:
        for _ in range(1100):
            s = socket.socket()
            s.settimeout(5)
            try:
                s.connect(("127.0.0.1", srv.port))
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # headers never end
            except OSError:
                pass
            held.append(s)
        line = raw_request(srv.port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "127.0.0.2")
        check(line.startswith(b"HTTP/1.1 200"), f"/healthz from another client: {line}")
    finally:
        for s in held:
            s.close()
        srv.stop()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_server_read_key(tmp):
    """With --read-api-key every read API and /metrics need it; /healthz,
    the UI's files and ingest (its own key) do not."""
    srv = Server(tmp, "--api-key", "ingest", "--read-api-key", "r34d")
    try:
        st, _ = srv.post("/api/v1/profiles", cpu_profile("rk", 1000, NS),
                         {"Authorization": "Bearer ingest"})
        check(st == 202, f"ingest with its key: {st}")
        reads = ["/api/v1/applications", "/api/v1/profile?app=rk&format=collapsed",
                 "/api/v1/timeline?app=rk", "/api/v1/labels?app=rk", "/metrics"]
        for path in reads:
            for hdr in (None, "Bearer ingest", "Bearer r34"):
                st, resp = srv.get(path, {"Authorization": hdr} if hdr else None)
                check(st == 401, f"{path} with {hdr}: {st}, want 401")
            st, resp = srv.get(path, {"Authorization": "bearer r34d"})
            check(st == 200, f"{path} with the read key: {st} {resp[:100]}")
        for path in ("/healthz", "/", "/ui/app.js"):
            check(srv.get(path)[0] == 200, f"{path} without a key")
        st, _ = srv.post("/api/v1/profiles", cpu_profile("rk", 1000, NS),
                         {"Authorization": "Bearer r34d"})
        check(st == 401, f"ingest with the read key: {st}")
    finally:
        srv.stop()


TESTS += [test_server_hostile_requests, test_server_hostile_connections, test_server_read_key]
