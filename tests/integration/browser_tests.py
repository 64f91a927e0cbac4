"""The web UI in headless Chromium (tests/browser/ui_test.mjs, playwright-core)
against the real server filled by the real agent profiling cpu_split, and
py_split under a real CPython at the same time."""
import json
import os
import subprocess
import time
import urllib.parse

import offcpu_server_tests
import offcpu_tests
import server_tests
from server_tests import ROOT, WORK, Server, check, run_agent, stop_agent

BROWSER = os.path.join(ROOT, "tests", "browser")
OUT = os.path.join(ROOT, "build", "test-output", "browser")
# A real interpreter: the pyenv shim "python3" on PATH forks one, so the
# process the test knows would not be the one running the workload.
PYTHON = "/usr/bin/python3"
PY_SPLIT = os.path.join(ROOT, "tests", "workloads", "py_split.py")


def app_of_pid(srv, pid, t0, t1):
    """The application the server filed pid under."""
    _, body = srv.get(f"/api/v1/applications?from={t0}&to={t1}")
    for a in json.loads(body).get("applications", []):
        q = urllib.parse.urlencode({"app": a["name"], "from": t0, "to": t1})
        _, lb = srv.get(f"/api/v1/labels?{q}")
        if str(pid) in map(str, json.loads(lb).get("pid", [])):
            return a["name"]
    return None


def test_browser_ui(tmp):
    """Front page lists the app; its flame graph is drawn and the table names
    hot_a; search, zoom and back, a diff of two ranges; no script errors.
    A Python program's graph: its frames named and in Python's greens."""
    check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "playwright-core missing: run 'make test' (npm ci in tests/browser)")
    check(os.access(PYTHON, os.X_OK), f"{PYTHON} missing (Debian's python3)")
    srv = Server(tmp)
    try:
        a, log = run_agent(tmp, srv.url)
        try:
            time.sleep(1)
            t0 = int(time.time()) - 1
            # The Python workload beside the first cpu_split: no time added.
            py = subprocess.Popen([PYTHON, PY_SPLIT, "4"], stdout=subprocess.DEVNULL)
            subprocess.run([os.path.join(WORK, "cpu_split"), "4"], stdout=subprocess.DEVNULL,
                           timeout=30, check=True)
            check(py.wait(timeout=30) == 0, f"py_split exited {py.returncode}")
            time.sleep(2.5)  # the 2 s window closes
            tmid = int(time.time())
            subprocess.run([os.path.join(WORK, "cpu_split"), "4"], stdout=subprocess.DEVNULL,
                           timeout=30, check=True)
            time.sleep(2.5)
        finally:
            rc, alog = stop_agent(a, log)
        check(rc == 0, f"agent exited {rc}: {alog[-500:]}")
        t1 = int(time.time()) + 1
        py_app = app_of_pid(srv, py.pid, t0, t1)
        check(py_app, f"no application has py_split's pid {py.pid}")
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_test.mjs"), srv.url, OUT,
                            "cpu_split", str(t0), str(tmid), str(t1), py_app, str(py.pid)],
                           capture_output=True, text=True, timeout=180)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser test failed (screenshots in {OUT}):\n{p.stderr[-3000:]}")
        print(f"    screenshots in {os.path.relpath(OUT, ROOT)}")
    finally:
        srv.stop()


def test_browser_read_key(tmp):
    """With --read-api-key the UI asks for the key once, keeps it for the
    session and sends it on every data call (tests/browser/ui_read_key.mjs)."""
    srv = Server(tmp, "--read-api-key", "s3cr3t-r34d")
    try:
        st, _ = srv.post("/api/v1/profiles?service=keyed", server_tests.good_profile("keyed"))
        check(st == 202, f"ingest: {st}")
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_read_key.mjs"), srv.url,
                            "s3cr3t-r34d", "keyed"], capture_output=True, text=True, timeout=120)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser read-key test failed:\n{p.stderr[-3000:]}")
    finally:
        srv.stop()


# The deep profile's stacks, root first, and their CPU time (ns): a compile
# whose collector marks recursively, 512 and 300 calls deep, as g++'s does.
DEEP_STACKS = [
    (["main", "compile"] + ["gc_mark"] * 512 + ["mark_leaf"], 6_000_000_000),
    (["main", "compile"] + ["gc_mark"] * 300, 2_000_000_000),
    (["main", "compile", "parse"], 2_000_000_000),
]


def deep_profile(service, stacks=DEEP_STACKS):
    """A pprof profile of stacks, [(frames root first, ns)] (DEEP_STACKS by
    default; built here: the known answer)."""
    funcs = sorted({f for stack, _ in stacks for f in stack})
    strings = ["", "samples", "count", "cpu", "nanoseconds", "service", service] + funcs
    fid = {f: i + 1 for i, f in enumerate(funcs)}
    samples = [([fid[f] for f in reversed(stack)], [ns // 10_000_000, ns], [(5, 6)])
               for stack, ns in stacks]
    return server_tests.profile(strings, [(1, 2), (3, 4)], samples,
                                locations=[(i, i) for i in fid.values()],
                                functions=[(i, 7 + i - 1) for i in fid.values()])


def test_browser_deep(tmp):
    """A 512-deep recursion: the page stays about a window tall (the graph
    scrolls in its own viewport, the path and the table in view), and
    "collapse recursion" shows gc_mark once with its time kept, in the URL
    (tests/browser/ui_deep.mjs)."""
    srv = Server(tmp)
    try:
        st, body = srv.post("/api/v1/profiles?service=deepapp", deep_profile("deepapp"))
        check(st == 202, f"ingest: {st} {body}")
        st, body = srv.post("/api/v1/profiles?service=flatapp", server_tests.good_profile("flatapp"))
        check(st == 202, f"ingest: {st} {body}")
        want = {
            "root": sum(ns for _, ns in DEEP_STACKS),
            "gc_mark": sum(ns for s, ns in DEEP_STACKS if "gc_mark" in s),
            "gc_mark_self": sum(ns for s, ns in DEEP_STACKS if s[-1] == "gc_mark"),
            "mark_leaf": sum(ns for s, ns in DEEP_STACKS if "mark_leaf" in s),
            "depth": max(len(s) for s, _ in DEEP_STACKS),
        }
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_deep.mjs"), srv.url, OUT, "deepapp",
                            json.dumps(want), "flatapp"], capture_output=True, text=True, timeout=120)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser deep-stack test failed (screenshots in {OUT}):\n"
              f"{p.stderr[-3000:]}")
    finally:
        srv.stop()


def test_browser_sandwich(tmp):
    """Two cpu_split processes at once: the sandwich of dispatch from the
    function table (callers run, callees hot_a/b/c, the table's totals),
    from the search, in a diff and with interpreter frames shown; the CPU
    by pid lists both processes with their shares, a click filters to one
    (tests/browser/ui_sandwich.mjs)."""
    check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "playwright-core missing: run 'make test' (npm ci in tests/browser)")
    srv = Server(tmp)
    try:
        a, log = run_agent(tmp, srv.url)
        try:
            time.sleep(1)
            t0 = int(time.time()) - 1
            procs = [subprocess.Popen([os.path.join(WORK, "cpu_split"), "4"], stdout=subprocess.DEVNULL)
                     for _ in range(2)]
            for p in procs:
                check(p.wait(timeout=60) == 0, f"cpu_split exited {p.returncode}")
            time.sleep(2.5)  # the 2 s window closes
        finally:
            rc, alog = stop_agent(a, log)
        check(rc == 0, f"agent exited {rc}: {alog[-500:]}")
        t1 = int(time.time()) + 1
        # The diff's split: the last second a profile starts in (the
        # timeline puts a profile's CPU in its start's step). Not the
        # range's middle: with 2 s windows no profile may start between it
        # and the run's end (CI, stop 45: "No profiles" in the diff's half).
        st, body = srv.get(f"/api/v1/timeline?app=cpu_split&from={t0}&to={t1}&step=1s")
        check(st == 200, f"timeline: {st} {body[:300]}")
        tl = json.loads(body)
        starts = [i for i, c in enumerate(tl["cpu_cores"]) if c > 0]
        check(len(starts) >= 2, f"profiles start in fewer than 2 seconds of the range: {tl}")
        tm = t0 + starts[-1]
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_sandwich.mjs"), srv.url, OUT, "cpu_split",
                            str(t0), str(t1), str(procs[0].pid), str(procs[1].pid), str(tm)],
                           capture_output=True, text=True, timeout=180)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser sandwich test failed (screenshots in {OUT}):\n{p.stderr[-3000:]}")
    finally:
        srv.stop()


def test_browser_offcpu(tmp):
    """The type selector: CPU, Off-CPU and Wall trees of profiles with known
    off-CPU time (offcpu_server_tests.py), in the URL, with the table, search,
    timeline, downloads and a diff of that type; an application without
    off-CPU data says so (tests/browser/ui_offcpu.mjs)."""
    check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "playwright-core missing: run 'make test' (npm ci in tests/browser)")
    srv = Server(tmp)
    try:
        now = int(time.time())
        offcpu_server_tests.post_all(srv, now)  # offsvc at now-300 and now-240, cpuonly at now-300
        lock = sum(off for s, _, _, off in offcpu_server_tests.STACKS if s[-1] == "[off-CPU: lock]")
        want = {"cpu": 2 * offcpu_server_tests.CPU, "off": 2 * offcpu_server_tests.OFF, "lock": 2 * lock}
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_offcpu.mjs"), srv.url, OUT,
                            str(now - 600), str(now), str(now - 270), json.dumps(want)],
                           capture_output=True, text=True, timeout=180)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser off-CPU test failed (screenshots in {OUT}):\n"
              f"{p.stderr[-3000:]}")
    finally:
        srv.stop()


# A profile the page's max_nodes (lowered to FOLDED_MAX_NODES by the test,
# so a small profile is trimmed) folds: tiny_handler and small_handler go
# into serve's "other" frame.
FOLDED_STACKS = [
    (["main", "serve", "parse", "lex"], 5_000_000_000),
    (["main", "serve", "tiny_handler"], 10_000_000),
    (["main", "serve", "small_handler"], 20_000_000),
    (["main", "idle"], 4_000_000_000),
    (["main", "gc", "mark"], 3_000_000_000),
]
FOLDED_MAX_NODES = 9


def test_browser_folded(tmp):
    """No frame out of reach: with the server trimming the tree (max_nodes),
    a zoom into serve fetches its stacks (focus=) and shows tiny_handler
    with its exact time, which a click or a URL then zooms into and the
    search finds; a search alone finds a frame still folded (search=)
    (tests/browser/ui_folded.mjs)."""
    srv = Server(tmp)
    try:
        st, body = srv.post("/api/v1/profiles?service=foldapp", deep_profile("foldapp", FOLDED_STACKS))
        check(st == 202, f"ingest: {st} {body}")
        # A path with an empty name is refused, saying what focus= takes.
        st, body = srv.get("/api/v1/profile?app=foldapp&from=now-1h&format=flamegraph&focus=main;;serve")
        check(st == 400 and b"focus: function names joined by" in body, f"bad focus: {st} {body}")
        # A search the server cannot take is refused, saying why.
        st, body = srv.get("/api/v1/profile?app=foldapp&from=now-1h&format=flamegraph&search=/a(/")
        check(st == 400 and b"not a POSIX extended regular expression" in body, f"bad search: {st} {body}")
        st, body = srv.get("/api/v1/profile?app=foldapp&from=now-1h&format=pprof&search=tiny")
        check(st == 400 and b"search: with format=flamegraph" in body, f"search of pprof: {st} {body}")
        want = {"root": sum(ns for _, ns in FOLDED_STACKS),
                "serve": sum(ns for s, ns in FOLDED_STACKS if "serve" in s),
                "tiny": sum(ns for s, ns in FOLDED_STACKS if "tiny_handler" in s),
                "small": sum(ns for s, ns in FOLDED_STACKS if "small_handler" in s),
                "maxNodes": FOLDED_MAX_NODES}
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_folded.mjs"), srv.url, OUT, "foldapp",
                            json.dumps(want)], capture_output=True, text=True, timeout=120)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser folded-frames test failed (screenshots in {OUT}):\n"
              f"{p.stderr[-3000:]}")
    finally:
        srv.stop()


def test_browser_fn_timeline(tmp):
    """A function over time: three hours of one-minute profiles in which
    parse costs 13 ms a minute, 33 from minute 100 (a deploy); the timeline
    of parse chosen from the function table, of serve from its sandwich and
    of parse from a link: its cores per step exact and the step found at
    the deploy (tests/browser/ui_fn_timeline.mjs)."""
    import fn_timeline_tests as ft
    check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "playwright-core missing: run 'make test' (npm ci in tests/browser)")
    srv = Server(tmp)
    try:
        base = (int(time.time()) - ft.H - 300) // 60 * 60
        for m in range(ft.H // 60):
            st, body = srv.post("/api/v1/profiles?service=svc&host=h1",
                                ft.minute_profile((base + m * 60 + 1) * 10**9, m >= ft.DEPLOY_MIN))
            check(st == 202, f"post {m}: {st} {body}")
        want = {"deploy": ft.DEPLOY_MIN, "before": ft.want_ms("parse", "total", False),
                "after": ft.want_ms("parse", "total", True), "serveSelf": ft.want_ms("serve", "self", False)}
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_fn_timeline.mjs"), srv.url, OUT, "svc",
                            str(base), str(base + ft.H), json.dumps(want)],
                           capture_output=True, text=True, timeout=180)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser function-timeline test failed (screenshots in {OUT}):\n"
              f"{p.stderr[-3000:]}")
    finally:
        srv.stop()


def test_browser_offcpu_agent(tmp):
    """The Off-CPU selector on the real agent's data: the daemon with
    --off-cpu ships offcpu_mix to the server (offcpu_tests.daemon_run); the
    Off-CPU view's root is the API's off-CPU total and each of the
    workload's [off-CPU: CLASS] frames is in the table with the API's share
    (tests/browser/ui_offcpu_agent.mjs)."""
    check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "playwright-core missing: run 'make test' (npm ci in tests/browser)")
    srv, app, rng, _, _ = offcpu_tests.daemon_run(tmp, seconds=5)
    try:
        q = urllib.parse.quote(app, safe="")
        total, per = offcpu_tests.fg_totals(srv, f"app={q}&{rng}&type=off_cpu")
        classes = {f"[off-CPU: {c}]": per.get(f"[off-CPU: {c}]", 0)
                   for c in ("sleep", "pipe", "lock", "io")}
        check(total > 0 and all(classes.values()), f"API: total {total}, {classes}")
        t0, t1 = (int(x.split("=")[1]) for x in rng.split("&"))
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_offcpu_agent.mjs"), srv.url, OUT,
                            app, str(t0), str(t1), json.dumps({"off": total, "classes": classes})],
                           capture_output=True, text=True, timeout=180)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser off-CPU (agent) test failed (screenshots in {OUT}):\n"
              f"{p.stderr[-3000:]}")
    finally:
        srv.stop()


TESTS = [test_browser_ui, test_browser_read_key, test_browser_deep, test_browser_sandwich,
         test_browser_offcpu, test_browser_fn_timeline, test_browser_offcpu_agent,
         test_browser_folded]
