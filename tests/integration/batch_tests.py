"""POST /api/v1/profiles/batch on the real server binary with a real SQLite
file: batches written here by a framing writer of our own (common/batch.h's
format, not its code), statuses read as JSON, what is stored read back
through `go tool pprof`."""
import gzip
import json
import os
import random
import socket
import threading
import urllib.parse

from pprof_read import traces
from server_tests import Server, check, good_profile, kill9_during, metric, profile, zstd

KEY = "batch-key"
AUTH = {"Authorization": "Bearer " + KEY}


def batch(entries):
    """A batch body of (query, bytes) entries."""
    out = bytearray(b"codexray-batch 1\n")
    for q, data in entries:
        out += q.encode() + b"\n" + str(len(data)).encode() + b"\n" + data
    return bytes(out)


def stack_profile(fn, samples):
    """One stack main -> fn of `samples` samples (10 ms each), no service
    label: the batch's query names it."""
    strings = ["", "samples", "count", "cpu", "nanoseconds", "main", fn]
    return profile(strings, [(1, 2), (3, 4)], [([2, 1], [samples, samples * 10**7], [])],
                   locations=[(1, 1), (2, 2)], functions=[(1, 5), (2, 6)])


def post_batch(srv, body, n):
    st, resp = srv.post("/api/v1/profiles/batch", body, AUTH)
    check(st == 200, f"batch of {n}: {st} {resp[:300]}")
    a = json.loads(resp)
    check(len(a["statuses"]) == n and len(a["errors"]) == n, f"batch of {n}: {resp[:300]}")
    return a


def pprof_traces(srv, tmp, query):
    st, body = srv.get("/api/v1/profile?" + query, AUTH)
    check(st == 200, f"{query}: {st} {body[:200]}")
    path = os.path.join(tmp, "merged.pb.gz")
    with open(path, "wb") as f:
        f.write(body)
    return traces(path)


def test_server_batch(tmp):
    """A window's worth of processes in one request: 300 profiles (gzip,
    zstd and plain, 3 services, a pid each, a percent-encoded pod) with a
    bad one in the middle: each answered in order, the good ones stored
    under their own identity and read back by go tool pprof; the metrics
    count 300 profiles, as 300 single uploads would."""
    srv = Server(tmp, "--api-key", KEY)
    try:
        entries, want = [], []
        for i in range(301):
            if i == 150:
                entries.append(("service=b-bad&pid=150", b"\x0a\xff\xff"))
                want.append(400)
                continue
            body = stack_profile(f"fn_{i % 3}", 1 + i % 7)
            body = (gzip.compress(body), zstd(body), body)[i % 3]
            pod = urllib.parse.quote(f"pod {i % 3}&x=1", safe="")
            entries.append((f"service=b-svc{i % 3}&host=h{i % 2}&pid={1000 + i}&pod={pod}", body))
            want.append(202)
        a = post_batch(srv, batch(entries), len(entries))
        check(a["statuses"] == want, f"statuses {a['statuses']}")
        check(a["stored"] == 300, f"stored {a['stored']}")
        check(a["errors"][150] and all(e is None for k, e in enumerate(a["errors"]) if k != 150),
              f"errors {a['errors'][148:152]}")
        for s in range(3):
            ts = pprof_traces(srv, tmp, f"app=b-svc{s}&from=now-1h")
            got = {}
            for t in ts:
                got[tuple(t.frames)] = got.get(tuple(t.frames), 0) + t.count
            expect = sum(1 + i % 7 for i in range(301) if i % 3 == s and i != 150)
            check(got == {(f"fn_{s}", "main"): expect}, f"b-svc{s}: {got}, want {expect}")
        st, body = srv.get("/api/v1/labels?app=b-svc1&from=now-1h", AUTH)
        labels = json.loads(body)
        check(labels["pod"] == ["pod 1&x=1"], f"pods {labels['pod']}")
        check(len(labels["pid"]) == 100 and "1001" in labels["pid"], f"pids {labels['pid'][:5]}")
        check(metric(srv, "codexray_profiles_ingested_total") == 300, "ingested total")
        check(metric(srv, "codexray_bytes_ingested_total") ==
              sum(len(d) for q, d in entries if "b-bad" not in q), "bytes ingested")
    finally:
        srv.stop()


def test_server_batch_zstd(tmp):
    """A batch as the agent now sends one: 200 plain profiles in one zstd
    stream (Content-Encoding: zstd, compressed by the zstd command), stored
    under their own identity and read back by go tool pprof, with the
    statuses the same batch gets sent plain; a cut stream is 400 and a
    gzip one 415, storing nothing; a zstd bomb (a frame of 64 MiB of
    zeros) past 10 x --max-ratio is 413 naming the flag."""
    srv = Server(tmp, "--api-key", KEY)
    try:
        def entries(pre):
            out = [(f"service={pre}{i % 2}&host=h{i % 4}&pid={2000 + i}",
                    stack_profile(f"zfn_{i % 2}", 1 + i % 5)) for i in range(200)]
            out.insert(100, (f"service={pre}-bad&pid=1", b"\x0a\xff\xff"))
            return out
        want = [202] * 100 + [400] + [202] * 100
        plain = post_batch(srv, batch(entries("zp")), 201)
        check(plain["statuses"] == want, f"plain statuses {plain['statuses'][98:103]}")
        body = batch(entries("zs"))
        z = zstd(body)
        check(len(z) * 10 < len(body), f"{len(body)} bytes compress only to {len(z)}")
        st, resp = srv.post("/api/v1/profiles/batch", z, {**AUTH, "Content-Encoding": "zstd"})
        check(st == 200, f"zstd batch: {st} {resp[:300]}")
        a = json.loads(resp)
        check(a["statuses"] == want and a["stored"] == 200, f"zstd statuses {a['statuses'][98:103]}")
        check(a["errors"] == plain["errors"], f"errors differ: {a['errors'][100]}")
        for s in range(2):
            got = {}
            for t in pprof_traces(srv, tmp, f"app=zs{s}&from=now-1h"):
                got[tuple(t.frames)] = got.get(tuple(t.frames), 0) + t.count
            expect = sum(1 + i % 5 for i in range(200) if i % 2 == s)
            check(got == {(f"zfn_{s}", "main"): expect}, f"zs{s}: {got}, want {expect}")
        labels = json.loads(srv.get("/api/v1/labels?app=zs1&from=now-1h", AUTH)[1])
        check(len(labels["pid"]) == 100 and labels["host"] == ["h1", "h3"], f"labels {labels}")
        check(metric(srv, "codexray_profiles_ingested_total") == 400, "ingested total")
        refused = batch([("service=zs-no&pid=1", stack_profile("zfn_no", 1))])
        st, resp = srv.post("/api/v1/profiles/batch", zstd(refused)[:-3],
                            {**AUTH, "Content-Encoding": "zstd"})
        check(st == 400 and b"zstd" in resp, f"cut zstd: {st} {resp[:200]}")
        st, resp = srv.post("/api/v1/profiles/batch", gzip.compress(refused),
                            {**AUTH, "Content-Encoding": "gzip"})
        check(st == 415 and b"zstd" in resp, f"gzip: {st} {resp[:200]}")
        bomb = zstd(b"\0" * (64 << 20))
        st, resp = srv.post("/api/v1/profiles/batch", bomb, {**AUTH, "Content-Encoding": "zstd"})
        check(st == 413 and b"--max-ratio" in resp, f"bomb of {len(bomb)}: {st} {resp[:200]}")
        check(srv.get("/api/v1/profile?app=zs-no&from=now-1h&format=collapsed", AUTH)[1] == b"",
              "a refused zstd batch stored something")
    finally:
        srv.stop()


def test_server_batch_hostile(tmp):
    """Hostile batches: 5,000 bad profiles are answered one by one and
    logged in a few lines; framing that is cut, lies about a length, is not
    a batch or holds over 10,000 profiles is 400 with nothing stored; past
    --max-body 413 before the body is read; the server answers afterwards."""
    srv = Server(tmp, "--api-key", KEY, "--max-body", str(4 << 20))
    try:
        rnd = random.Random(7)
        bad = [(f"service=h-bad{i}%0a%1b[31m", rnd.randbytes(20)) for i in range(5000)]
        srv.log.flush()
        log = os.path.join(tmp, f"server-{srv.port}.log")
        before = os.path.getsize(log)
        a = post_batch(srv, batch(bad), 5000)
        check(a["stored"] == 0 and set(a["statuses"]) == {400}, f"{a['statuses'][:5]}")
        with open(log, "rb") as f:
            f.seek(before)
            lines = f.read().splitlines()
        check(1 <= len(lines) <= 5, f"{len(lines)} log lines for one batch: {lines[:8]}")
        check(all(b"\x1b" not in ln for ln in lines), f"an escape reached the log: {lines[:2]}")
        check(metric(srv, 'codexray_requests_rejected_total{reason="bad_request"}') == 5000,
              "rejects counted")
        good = batch([("service=h-good", gzip.compress(stack_profile("fn_g", 3)))] * 2)
        for name, body in (("cut", good[:-1]), ("not a batch", good[1:]),
                           ("a length past the end",
                            good + b"service=h-good\n99999999999\nxx"),
                           ("over 10,000 profiles", good + batch([("pid=1", b"")] * 10001)[17:])):
            st, resp = srv.post("/api/v1/profiles/batch", body, AUTH)
            check(st == 400 and b'"error"' in resp, f"{name}: {st} {resp[:200]}")
        check(srv.get("/api/v1/profile?app=h-good&from=now-1h&format=collapsed", AUTH)[1] == b"",
              "a refused batch stored something")
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(b"POST /api/v1/profiles/batch HTTP/1.1\r\nHost: x\r\nAuthorization: "
                         b"Bearer " + KEY.encode() + b"\r\nContent-Length: 4194305\r\n\r\n")
            resp = sock.recv(4096)
        check(resp.startswith(b"HTTP/1.1 413"), f"past --max-body: {resp[:100]}")
        check(srv.post("/api/v1/profiles/batch", good)[0] == 401, "no key")
        a = post_batch(srv, good, 2)
        check(a["statuses"] == [202, 202], f"after all that: {a}")
    finally:
        srv.stop()


def test_server_batch_durability(tmp):
    """kill -9 while batches are being stored (a batch's profiles are made
    durable in groups, one flush for many): every profile a batch answered
    202 for is there after a restart."""
    srv = Server(tmp)
    acked, stop = [], threading.Event()

    def send(k):
        i = 0
        while not stop.is_set():
            names = [f"bd-{k}-{i}-{j}" for j in range(40)]
            body = zstd(batch([(f"service={n}&pid={j + 1}", good_profile(n))
                               for j, n in enumerate(names)]))
            try:
                st, resp = srv.post("/api/v1/profiles/batch", body,
                                    {"Content-Encoding": "zstd"})
            except OSError:
                return
            if st == 200:
                a = json.loads(resp)
                acked.extend(n for n, s in zip(names, a["statuses"]) if s == 202)
            i += 1

    kill9_during(srv, send, 3, stop, acked, 200)


def test_server_batch_resent(tmp):
    """A batch sent again after its 200 (the agent's answer lost: a
    timeout, a cut connection), whole and then in part with new profiles:
    every profile answered 202 again, and counted once, in the merge (raw
    and from rollups), the applications, the timeline and the labels;
    profiles differing only in a label (a pod, a Pyroscope client's region)
    are distinct and stay so."""
    import time
    from server_tests import stacks_of

    srv = Server(tmp, "--api-key", KEY)
    try:
        H = 3 * 3600
        base = (int(time.time()) - 2 * H) // H * H  # a complete 3-hour bucket
        entries = []
        for i in range(40):
            t = (base + 60 * (i % 10)) * 10**9
            body = profile(["", "samples", "count", "cpu", "nanoseconds", "main", f"rs_{i % 3}"],
                           [(1, 2), (3, 4)], [([2, 1], [1 + i, (1 + i) * 10**7], [])],
                           locations=[(1, 5), (2, 6)], functions=[(5, 5), (6, 6)], time_ns=t)
            # i and i + 20 differ only in their pod: two profiles
            entries.append((f"service=rs-svc{i % 2}&host=h{i % 4}&pid={100 + i % 20}"
                            f"&pod=pod{i // 20}", zstd(body) if i % 2 else body))
        py = []
        for region in ("eu", "us"):  # two SDK instances, one process each
            q = urllib.parse.urlencode({"name": f"rs-svc0{{host=h9,region={region}}}",
                                        "from": base + 30, "until": base + 40})
            py.append(q)

        def send(part):
            a = post_batch(srv, batch(part), len(part))
            check(a["statuses"] == [202] * len(part) and a["stored"] == len(part),
                  f"statuses {a['statuses']}")
            for q in py:
                st, b = srv.post(f"/ingest?{q}", b"main;py 7\n", AUTH)
                check(st == 200, f"/ingest {q}: {st} {b[:200]!r}")

        def totals(built):
            # Both apps' 10-minute and 3-hour buckets, built at least
            # `built` times in all: whole buckets are read from rollups.
            deadline = time.time() + 60
            while (metric(srv, "codexray_rollups_pending") or
                   metric(srv, "codexray_rollups_built_total") < built):
                check(time.time() < deadline, "rollups not built within 60 s")
                time.sleep(0.5)
            out = {}
            for app in ("rs-svc0", "rs-svc1"):
                for frm, to in ((base, base + H), (base - 60, base + 3600 + 7)):
                    r = f"app={app}&from={frm}&to={to}"
                    st, body = srv.get(f"/api/v1/profile?{r}&format=flamegraph", AUTH)
                    check(st == 200, f"{r}: {st}")
                    g = json.loads(body)
                    out[r] = (g["profiles"], g["total"], stacks_of(srv, r))
                st, body = srv.get(f"/api/v1/timeline?app={app}&from={base}&to={base + 3600}"
                                   "&step=600", AUTH)
                out[app + " timeline"] = json.loads(body)["cpu_cores"]
                st, body = srv.get(f"/api/v1/labels?app={app}&from={base}&to={base + H}", AUTH)
                out[app + " labels"] = json.loads(body)
            st, body = srv.get(f"/api/v1/applications?from={base}&to={base + H}", AUTH)
            out["apps"] = sorted((a["name"], a["cpu_cores"])
                                 for a in json.loads(body)["applications"])
            return out

        send(entries[:30])
        first = totals(4)
        want0 = sum(1 + i for i in range(0, 30, 2)) + 2 * 7
        got0 = first[f"app=rs-svc0&from={base}&to={base + H}"]
        check(got0[0] == 15 + 2 and got0[1] == want0 * 10**7,
              f"rs-svc0: {got0[:2]}, want 17 profiles, {want0} samples of 10 ms")
        send(entries[:30])  # whole, again
        check(totals(4) == first, "a batch sent again counted twice")
        send(entries[10:])  # in part, with ten new ones
        now = totals(8)
        want0 = sum(1 + i for i in range(0, 40, 2)) + 2 * 7
        got0 = now[f"app=rs-svc0&from={base}&to={base + H}"]
        check(got0[0] == 20 + 2 and got0[1] == want0 * 10**7,
              f"rs-svc0 after a partial resend: {got0[:2]}, want 22 profiles, {want0} samples")
        check(now["rs-svc0 labels"]["labels"]["region"] == ["eu", "us"],
              f"regions {now['rs-svc0 labels']}")
        check(now["rs-svc1 labels"]["pod"] == ["pod0", "pod1"], f"pods {now['rs-svc1 labels']}")
        print(f"    {len(entries) + 2} profiles sent {2 * 30 + 30 + 2 * 2 * 2} times,"
              f" stored once each")
    finally:
        srv.stop()


TESTS = [test_server_batch, test_server_batch_zstd, test_server_batch_hostile,
         test_server_batch_durability, test_server_batch_resent]
