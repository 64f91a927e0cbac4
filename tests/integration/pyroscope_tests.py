"""Pyroscope's push API (POST /ingest) fed by the real Pyroscope Node.js SDK
(@pyroscope/nodejs from npm, tests/pyroscope/package-lock.json): a Node
program with a known CPU split (hot_a twice hot_b) profiled by the SDK's
wall profiler with its CPU column, read back through our API (the
flame-graph JSON, the web UI in headless Chromium, and the labels)."""
import json
import os
import subprocess
import time
import urllib.parse

from server_tests import ROOT, Server, check, profile

PYRO = os.path.join(ROOT, "tests", "pyroscope")
BROWSER = os.path.join(ROOT, "tests", "browser")
OUT = os.path.join(ROOT, "build", "test-output", "pyroscope")
KEY = "pyro-ingest-key"


def leaf_cpu(srv, app, t0, t1):
    """{leaf function: CPU ns} of app's flame graph over [t0, t1): the
    frames the SDK names "FILE:FUNCTION:LINE", by their function."""
    q = urllib.parse.urlencode({"app": app, "from": t0, "to": t1, "format": "flamegraph"})
    st, body = srv.get(f"/api/v1/profile?{q}")
    check(st == 200, f"profile: {st} {body[:300]!r}")
    fg = json.loads(body)
    check(fg["unit"] == "nanoseconds", f"unit {fg['unit']}")
    names, nodes, per = fg["names"], fg["nodes"], {}
    for i in range(0, len(nodes), 4):
        name, _total, self_ns = names[nodes[i]], nodes[i + 1], nodes[i + 2]
        parts = name.split(":")
        fn = parts[-2] if len(parts) >= 3 else name
        per[fn] = per.get(fn, 0) + self_ns
    return per, fg


def run_sdk(srv, secs, auth, app):
    p = subprocess.run(["node", os.path.join(PYRO, "split.js"), srv.url, KEY, str(secs), auth,
                        app], capture_output=True, text=True, timeout=secs + 90, cwd=PYRO,
                       env={**os.environ, "DEBUG": "pyroscope"})
    check(p.returncode == 0, f"split.js exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout.strip(), p.stderr


def test_pyroscope_nodejs_split(tmp):
    """@pyroscope/nodejs 0.6.4 pushes a Node program's profiles every 2 s
    (format=pprof, a gzipped pprof of samples, wall and cpu; heap profiles
    beside them): the CPU is stored under the app with its tags as identity
    (host, pod) and as its other labels (region, the SDK's otel.scope.name),
    filterable through our API and the Connect client, hot_a about twice
    hot_b; the heap profiles are refused 422
    with why (logged), nothing of them stored; basic auth works too; a wrong
    key is refused."""
    check(os.path.isdir(os.path.join(PYRO, "node_modules", "@pyroscope", "nodejs")),
          "@pyroscope/nodejs missing: run 'make integration' (npm ci in tests/pyroscope)")
    srv = Server(tmp, "--api-key", KEY)
    try:
        t0 = int(time.time()) - 1
        out, err = run_sdk(srv, 10, "bearer", "node-split")
        t1 = int(time.time()) + 2
        per, fg = leaf_cpu(srv, "node-split", t0, t1)
        a, b = per.get("hot_a", 0), per.get("hot_b", 0)
        print(f"    {out}; stored {fg['total'] / 1e9:.2f} s of CPU in {fg['profiles']} profiles;"
              f" hot_a {a / 1e9:.2f} s, hot_b {b / 1e9:.2f} s")
        check(fg["profiles"] >= 3, f"{fg['profiles']} profiles stored")
        check(a + b > 0.5 * fg["total"], f"hot_a + hot_b {a + b} of {fg['total']} ns")
        # The answer: the time the program measured around each call (about
        # 2/3, as the JIT makes the two bodies run). Each wall sample's
        # stack takes the CPU since the sample before: the profile's split
        # is a count of samples (a sample every 2 ms, hundreds of them
        # however loaded the machine), within a few standard deviations
        # (0.02 at 500 samples) of it.
        want = float(out.split("hot_a_share=")[1].split()[0])
        share = a / max(a + b, 1)
        check(abs(share - want) < 0.06,
              f"hot_a's share {share:.3f} of hot_a + hot_b, the program measured {want:.3f}")
        # The CPU is CPU: no more than the process used (its wall column,
        # 10 s of samples, would be far more on a loaded machine).
        cpu_s = float(out.split("cpu_seconds=")[1].split()[0])
        check(fg["total"] / 1e9 <= cpu_s * 1.05 + 0.1,
              f"stored {fg['total'] / 1e9:.2f} s of CPU, the process used {cpu_s} s")
        # The same in the web UI (headless Chromium, tests/browser/).
        check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
              "playwright-core missing: run 'make integration' (npm ci in tests/browser)")
        os.makedirs(OUT, exist_ok=True)
        png = os.path.join(OUT, "node-split.png")
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_pyroscope.mjs"), srv.url,
                            "node-split", str(t0), str(t1), png, str(want)],
                           capture_output=True, text=True, timeout=120)
        print(p.stdout, end="")
        check(p.returncode == 0, f"the UI: {p.stderr[-2000:]}")
        print(f"    screenshot: {os.path.relpath(png, ROOT)}")
        q = urllib.parse.urlencode({"app": "node-split", "from": t0, "to": t1})
        st, body = srv.get(f"/api/v1/labels?{q}")
        labels = json.loads(body)
        check(st == 200 and "pyro-host" in labels.get("host", []), f"labels: {labels}")
        check("split-pod" in labels.get("pod", []), f"labels: {labels}")
        # Its other labels: the tag region and the SDK's otel.scope.name,
        # not __session_id__; a filter on them selects the profiles.
        others = labels.get("labels", {})
        check(others.get("region") == ["x1"], f"labels: {labels}")
        check(len(others.get("otel.scope.name", [])) == 1, f"labels: {labels}")
        check(not any(k.startswith("__") for k in others), f"labels: {labels}")
        for region, want_total in (("x1", fg["total"]), ("x2", 0)):
            q = urllib.parse.urlencode({"app": "node-split", "from": t0, "to": t1,
                                        "format": "flamegraph", "label.region": region})
            st, body = srv.get(f"/api/v1/profile?{q}")
            check(st == 200 and json.loads(body)["total"] == want_total,
                  f"label.region={region}: {st} {body[:200]!r}, want total {want_total}")
        # The same through the real Connect client: LabelNames and
        # LabelValues as our labels, each tag's value selected as
        # label.KEY=VALUE selects it, group_by by each (query.js).
        p = subprocess.run(["npx", "buf", "generate"], cwd=PYRO, capture_output=True, text=True,
                           timeout=120)
        check(p.returncode == 0, f"buf generate: {p.stderr[-2000:]}")
        p = subprocess.run(["node", os.path.join(PYRO, "query.js"), srv.url, KEY, "node-split",
                            str(t0), str(t1), "open"], capture_output=True, text=True,
                           timeout=180,
                           cwd=PYRO)
        print("    " + "\n    ".join(l for l in p.stdout.splitlines() if "region" in l))
        check(p.returncode == 0 and "all ok" in p.stdout,
              f"query.js on the SDK's profiles: {p.stdout[-1500:]} {p.stderr[-1500:]}")
        # The heap profiles: refused with why, the SDK told.
        check("HTTP 422" in err and "inuse_space/bytes" in err,
              f"the SDK was not told why its heap profile was refused: {err[-1000:]}")
        with open(srv.log.name) as f:
            log = f.read()
        check("422 no cpu/nanoseconds sample type" in log, "no 422 in the server's log")

        # basic auth (user node, the key as password), another app
        run_sdk(srv, 3, "basic", "node-basic")
        per, fg = leaf_cpu(srv, "node-basic", t0, int(time.time()) + 2)
        check(fg["profiles"] >= 1 and per.get("hot_a", 0) > 0, f"basic auth: {fg['profiles']}")
        # a wrong key: nothing stored, the SDK told 401
        p = subprocess.run(["node", os.path.join(PYRO, "split.js"), srv.url, "wrong", "3",
                            "bearer", "node-wrong"], capture_output=True, text=True, timeout=90,
                           cwd=PYRO, env={**os.environ, "DEBUG": "pyroscope"})
        check("HTTP 401" in p.stderr, f"wrong key: {p.stderr[-500:]}")
        st, body = srv.get("/api/v1/applications?from=now-10m")
        check(b"node-wrong" not in body, f"stored with a wrong key: {body!r}")
    finally:
        srv.stop()


def querier_profile(t_ns, stacks, off=()):
    """A pprof of stacks ([(leaf-first function names, samples)]), 10 ms of
    CPU a sample, at t_ns; with off ([(leaf-first names, off-CPU ns)]), a
    third sample type off_cpu/nanoseconds and those stacks' off-CPU
    samples, as the agent writes them (OFFCPU_CONTRACT.md)."""
    fns = sorted({f for st, _ in [*stacks, *off] for f in st})
    strings = ["", "samples", "count", "cpu", "nanoseconds", "off_cpu", *fns]
    fid = {f: i + 1 for i, f in enumerate(fns)}
    zero = [0] if off else []
    samples = [([fid[f] for f in st], [n, n * 10000000, *zero], []) for st, n in stacks]
    samples += [([fid[f] for f in st], [0, 0, ns], []) for st, ns in off]
    return profile(strings, [(1, 2), (3, 4), *([(5, 4)] if off else [])], samples,
                   locations=[(i, i) for i in fid.values()],
                   functions=[(i, 6 + i - 1) for i in fid.values()], time_ns=t_ns)


def test_pyroscope_querier(tmp):
    """Pyroscope's querier API (what Grafana's Pyroscope data source calls)
    through the real Connect client from npm in binary protobuf and JSON
    (tests/pyroscope/query.js): every answer as our /api/v1 answers the same
    query, the flame graph rebuilt as Grafana's levelsToTree rebuilds it;
    for CPU, and for off-CPU and wall time where a range has off-CPU time
    (web on h1: blocked in lock and in read)."""
    check(os.path.isdir(os.path.join(PYRO, "node_modules", "@connectrpc", "connect-node")),
          "@connectrpc/connect-node missing: run 'make integration' (npm ci in tests/pyroscope)")
    p = subprocess.run(["npx", "buf", "generate"], cwd=PYRO, capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, f"buf generate: {p.stderr[-2000:]}")
    srv = Server(tmp, "--api-key", KEY, "--read-api-key", "querier-read")
    try:
        now = int(time.time())
        t0 = now - 900
        # Two applications, web on two hosts with a pod label on one, and
        # off-CPU time on that one; an hour before, db alone, CPU alone.
        off = [(["futex_wait", "lock", "a", "main"], 3 * 10**9), (["read", "d", "a", "main"], 10**9)]
        loads = [("web", "h1", {"pod": "web-0"}, [(["c", "b", "a", "main"], 30),
                                                 (["d", "a", "main"], 20),
                                                 (["b", "main"], 7), (["main"], 3)], off, t0),
                 ("web", "h2", {}, [(["c", "b", "a", "main"], 11), (["e", "main"], 5),
                                    (["x" * 300, "main"], 1)], (), t0),
                 ("db", "h1", {}, [(["scan", "query", "main"], 40)], (), t0),
                 ("db", "h1", {}, [(["scan", "main"], 9)], (), t0 - 3600)]
        for k, (app, host, extra, stacks, off_stacks, t) in enumerate(loads):
            for minute in range(3):
                q = urllib.parse.urlencode({"service": app, "host": host, **extra})
                body = querier_profile((t + 120 + 60 * minute + k) * 10**9, stacks, off_stacks)
                st, b = srv.post(f"/api/v1/profiles?{q}", body,
                                 {"Authorization": f"Bearer {KEY}"})
                check(st == 202, f"ingest {app}/{host}: {st} {b[:200]!r}")
        # web's profiles with other labels too, as a Pyroscope client sends
        # them (/ingest, folded lines): region on two hosts, tier on one.
        for minute in range(3):
            for k, (name, lines) in enumerate((("web{host=h2,region=eu,tier=gold}",
                                                b"main;a;b 13\nmain;f 2\n"),
                                               ("web{host=h1,region=us}", b"main;e 4\n"))):
                t = t0 + 130 + 60 * minute + k
                q = urllib.parse.urlencode({"name": name, "from": t, "until": t + 10})
                st, b = srv.post(f"/ingest?{q}", lines, {"Authorization": f"Bearer {KEY}"})
                check(st == 200, f"/ingest {name}: {st} {b[:200]!r}")
        p = subprocess.run(["node", os.path.join(PYRO, "query.js"), srv.url, "querier-read", "web",
                            str(t0), str(now + 60), "keyed", str(t0 - 3600), str(t0 - 1800)],
                           capture_output=True, text=True, timeout=180, cwd=PYRO)
        print(p.stdout[-3000:])
        check(p.returncode == 0, f"query.js exited {p.returncode}: {p.stderr[-3000:]}")
        check("all ok" in p.stdout, "query.js did not finish")
    finally:
        srv.stop()


TESTS = [test_pyroscope_nodejs_split, test_pyroscope_querier]
