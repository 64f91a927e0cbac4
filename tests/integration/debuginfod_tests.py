"""Debug files fetched by build id (debuginfod): a stripped workload whose
debug file is served by Debian's debuginfod (or, for the failure cases, by a
small server here that misbehaves on purpose), named by `record`, by the
agent through codexray-server, and nothing broken by what goes wrong."""
import http.server
import os
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request

from cpu_split_answer import CHAIN, SPLIT, split_of
from pprof_read import traces
from server_tests import Server, free_port, run_agent, stop_agent

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
WORK = os.path.join(ROOT, "build", "workloads")
DEBUG = os.path.join(WORK, "debug")


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True,
                         check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


def env_without_debuginfod():
    return {k: v for k, v in os.environ.items() if not k.startswith("DEBUGINFOD_")}


class Debuginfod:
    """Debian's debuginfod over one directory of debug files, on a loopback port."""

    def __init__(self, tmp, directory, port=None):
        self.port = port or free_port()
        self.log_path = os.path.join(tmp, f"debuginfod-{self.port}.log")
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen(["debuginfod", "-F", directory, "-p", str(self.port), "-d",
                                   os.path.join(tmp, f"debuginfod-{self.port}.sqlite"),
                                   "-t", "0", "-g", "0"], stdout=self.log, stderr=self.log)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def wait_serving(self, bid, timeout=60):
        """Until its scan of the directory has indexed bid."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with urllib.request.urlopen(f"{self.url}/buildid/{bid}/debuginfo",
                                            timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.3)
        raise Failure("debuginfod did not index the debug files")

    def asked(self, bid):
        """How many times it was asked for bid's debug file."""
        with open(self.log_path) as f:
            return sum(1 for line in f if f"GET /buildid/{bid}/debuginfo " in line)

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.log.close()


class FakeUpstream:
    """A debuginfod-protocol server whose answer the test sets: a file's
    bytes, a delay first, or a refusal. Counts what it is asked."""

    def __init__(self, port=None):
        self.body, self.delay, self.asked = None, 0.0, 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.asked += 1
                time.sleep(outer.delay)
                body = outer.body
                try:
                    if body is None:
                        self.send_error(404)
                        return
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", port or 0), H)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.srv.shutdown()
        self.srv.server_close()


def start(name, seconds):
    return subprocess.Popen([os.path.join(WORK, name), str(seconds)], stdout=subprocess.DEVNULL)


def record_pid(tmp, pid, tag, *extra, env=None, seconds=5):
    out = os.path.join(tmp, f"{tag}.pb.gz")
    p = subprocess.run([AGENT, "record", "--duration", str(seconds), "--pid", str(pid), "--output",
                        out, "--data-dir", os.path.join(tmp, f"data-{tag}"), *extra],
                       capture_output=True, text=True, timeout=180,
                       env=env if env is not None else env_without_debuginfod())
    check(p.returncode == 0, f"record ({tag}) exited {p.returncode}: {p.stderr[-2000:]}")
    return out, p.stderr


def unnamed_share(log):
    return float(re.search(r"unnamed_frames=([0-9.]+)%", log).group(1))


def check_split(ts, what, tolerance=0.06):
    per, whole, total = split_of(ts)
    hot = sum(per.values())
    check(hot > 0, f"{what}: no hot function named in {ts[:3]}")
    for fn, want in SPLIT.items():
        got = per[fn] / hot
        print(f"    {what}: {fn} {got:.3f} (want {want:.3f})")
        check(abs(got - want) <= tolerance, f"{what}: {fn} share {got:.3f}, want {want:.3f}")
    check(whole / hot >= 0.9, f"{what}: only {whole}/{hot} hot samples under {CHAIN}")
    return hot, total


# --- the tests ---------------------------------------------------------------

def test_debuginfod_record(tmp):
    """record with DEBUGINFOD_URLS at Debian's debuginfod: the stripped
    workload's functions are named (3:2:1 within 6 points, the chain to
    main), where without it they are not; the unnamed share before and
    after is printed. Stripped C and C++ both."""
    dbg = Debuginfod(tmp, DEBUG)
    split_exe, cxx_exe = (os.path.join(WORK, n) for n in ("stripped_split", "stripped_cxx"))
    try:
        dbg.wait_serving(build_id(split_exe))
        for name in ("stripped_split", "stripped_cxx"):
            w = start(name, 120)
            try:
                time.sleep(1)
                _, before = record_pid(tmp, w.pid, f"{name}-off", "--debuginfod", "none")
                env = env_without_debuginfod()
                env["DEBUGINFOD_URLS"] = dbg.url
                out, after = record_pid(tmp, w.pid, f"{name}-on", env=env)
            finally:
                w.kill()
                w.wait()
            b, a = unnamed_share(before), unnamed_share(after)
            print(f"    {name}: unnamed_frames {b:.1f}% without debuginfod, {a:.1f}% with")
            check("debug file fetched" in after, f"{name}: no fetch logged: {after[-1500:]}")
            check(a <= 5.0 and b >= 30.0, f"{name}: unnamed {b}% -> {a}%")
            if name == "stripped_split":
                check_split(traces(out), name)
            else:
                names = {f for t in traces(out) for f in t.frames}
                check(any("hot" in f or "Spin" in f or "::" in f for f in names),
                      f"{name}: no C++ function named: {sorted(names)[:20]}")
    finally:
        dbg.stop()


def window_lines(log):
    return [line for line in log.splitlines() if " window: processes=" in line]


def test_debuginfod_fleet(tmp):
    """The fleet path: the server with --debuginfod-upstream at Debian's
    debuginfod, the agent with --endpoint and nothing else set. The stored
    profile names the stripped workload within two windows of its first;
    eight more clients asking the server at once with the agent: the
    upstream is asked once, every one gets the file."""
    exe = os.path.join(WORK, "stripped_split")
    bid = build_id(exe)
    dbg = Debuginfod(tmp, DEBUG)
    srv = None
    a = w = None
    try:
        dbg.wait_serving(bid)
        before = dbg.asked(bid)
        srv = Server(tmp, "--debuginfod-upstream", dbg.url, "--api-key", "k3y")
        old = os.environ.copy()
        os.environ.clear()
        os.environ.update(env_without_debuginfod())
        try:
            a, log = run_agent(tmp, srv.url, "--api-key", "k3y")
        finally:
            os.environ.clear()
            os.environ.update(old)
        w = start("stripped_split", 60)
        results = []

        def ask():
            try:
                req = urllib.request.Request(f"{srv.url}/debuginfod/buildid/{bid}/debuginfo",
                                             headers={"Authorization": "Bearer k3y"})
                with urllib.request.urlopen(req, timeout=120) as r:
                    results.append((r.status, len(r.read())))
            except OSError as e:
                results.append((str(e), 0))
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        time.sleep(9)
        w.kill()
        w.wait()
        w = None
        time.sleep(2.5)
        rc, alog = stop_agent(a, log)
        a = None
        check(rc == 0, f"agent exited {rc}: {alog[-2000:]}")
        size = os.path.getsize(os.path.join(DEBUG, "stripped_split.debug"))
        check(all(r == (200, size) for r in results), f"clients got {results}")
        asked = dbg.asked(bid) - before
        print(f"    upstream asked {asked} time(s) for 8 clients and the agent")
        check(asked == 1, f"the upstream was asked {asked} times")
        check("urls=\"" + srv.url + "/debuginfod\" (from --endpoint)" in alog,
              f"the agent did not ask its server: {alog[:1500]}")
        wins = window_lines(alog)
        late = [i for i, line in enumerate(wins) if "stripped_split:" in line]
        print(f"    windows listing stripped_split unnamed: {late} of {len(wins)}")
        check(not late or max(late) <= 2, f"still unnamed in windows {late}: {wins}")
        st, body = srv.get("/api/v1/profile?app=stripped_split&from=now-10m&format=collapsed")
        check(st == 200, f"collapsed: {st} {body[:200]}")
        text = body.decode()
        per = {k: 0 for k in SPLIT}
        for line in text.splitlines():
            stack, _, n = line.rpartition(" ")
            if stack.split(";")[-1] in per:
                per[stack.split(";")[-1]] += int(n)
        hot = sum(per.values())
        print(f"    stored: {per}")
        check(hot > 0, f"the stored profile names none of {list(SPLIT)}: {text[:500]}")
        st, body = srv.get("/metrics")
        m = {line.split()[0]: float(line.split()[1]) for line in body.decode().splitlines()
             if line.startswith("codexray_debuginfod_")}
        print(f"    server metrics: {m}")
        # Other binaries the agent met lack names too (the upstream has
        # none of theirs: misses); this one was served nine times.
        check(m.get("codexray_debuginfod_hits_total", 0) >= 9
              and m.get("codexray_debuginfod_bytes_served_total", 0) >= 9 * size
              and m.get("codexray_debuginfod_upstream_fetches_total", 0) >= 1, f"metrics {m}")
    finally:
        if w:
            w.kill()
            w.wait()
        if a:
            a.kill()
            a.wait()
        if srv:
            srv.stop()
        dbg.stop()


def test_debuginfod_upstream_slow_then_back(tmp):
    """An upstream that answers nothing in time (and one not there at all):
    the agent's windows come on time, the workload unnamed, the failure
    logged once with its reason; once the upstream answers, a later window
    names it."""
    exe = os.path.join(WORK, "stripped_split")
    bid = build_id(exe)
    up = FakeUpstream()
    up.delay = 8.0
    with open(os.path.join(DEBUG, "stripped_split.debug"), "rb") as f:
        up.body = f.read()
    srv = Server(tmp, "--debuginfod-upstream", f"http://127.0.0.1:{free_port()} {up.url}",
                 "--debuginfod-timeout", "2")
    a = w = None
    try:
        a, log = run_agent(tmp, srv.url)
        w = start("stripped_split", 90)
        # The upstream stays slow until the agent has asked and given up: a
        # busy machine can take longer than the 9 s this once waited before
        # the agent first asks for a new binary.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(1)
            with open(log.name) as f:
                if f"build_id={bid}: no debug file:" in f.read():
                    break
        up.delay = 0.0  # back
        deadline = time.monotonic() + 60
        named = False
        while time.monotonic() < deadline and not named:
            time.sleep(2)
            with open(log.name) as f:
                named = "debug file fetched" in f.read()
        time.sleep(4.5)  # two windows more
        rc, alog = stop_agent(a, log)
        a = None
        check(rc == 0, f"agent exited {rc}: {alog[-2000:]}")
        wins = window_lines(alog)
        times = [time.mktime(time.strptime(line[:19], "%Y-%m-%dT%H:%M:%S")) for line in wins]
        gaps = [b - c for b, c in zip(times[1:], times)]
        print(f"    {len(wins)} windows, gaps {gaps}; upstream asked {up.asked} times")
        check(gaps and max(gaps) <= 4, f"windows held up: gaps {gaps}")
        fails = [line for line in alog.splitlines()
                 if f"build_id={bid}: no debug file:" in line]
        check(len(fails) == 1, f"failure logged {len(fails)} times: {fails}")
        print(f"    {fails[0][fails[0].index('no debug file'):][:160]}")
        check(named, f"never named once the upstream was back: {alog[-2000:]}")
        unnamed_then = [i for i, line in enumerate(wins) if "stripped_split:" in line]
        check(unnamed_then and unnamed_then[0] <= 1, f"not unnamed at first: {wins[:3]}")
        check("stripped_split:" not in wins[-1], f"the last window still unnamed: {wins[-1]}")
    finally:
        if w:
            w.kill()
            w.wait()
        if a:
            a.kill()
            a.wait()
        srv.stop()
        up.stop()


def test_debuginfod_bad_files(tmp):
    """What comes back is checked: another binary's debug file, one cut in
    half, one over the size cap: each refused with its reason logged, the
    recording written, the workload left unnamed. The server refuses the
    same as uploads (422, 413) and keeps nothing."""
    exe = os.path.join(WORK, "stripped_split")
    bid = build_id(exe)
    with open(os.path.join(DEBUG, "stripped_split.debug"), "rb") as f:
        good = f.read()
    with open(os.path.join(DEBUG, "stripped_cxx.debug"), "rb") as f:
        other = f.read()
    cap = max(len(good), len(other)) + 4096
    cases = {"wrong build id": (other, "its build id is"),
             "truncated": (good[:len(good) // 2], "truncated"),
             "huge": (good + b"\0" * cap, "over the cap")}
    up = FakeUpstream()
    w = start("stripped_split", 120)
    try:
        time.sleep(1)
        for tag, (body, reason) in cases.items():
            up.body = body
            env = env_without_debuginfod()
            env["DEBUGINFOD_URLS"] = up.url
            out, log = record_pid(tmp, w.pid, tag.replace(" ", "_"), "--debuginfod-file-max",
                                  str(cap), env=env, seconds=2)
            refused = [line for line in log.splitlines() if "no debug file:" in line]
            print(f"    {tag}: {refused[0][refused[0].index('no debug file'):][:140] if refused else log[-300:]}")
            check(refused and reason in refused[0], f"{tag}: not refused for '{reason}': {refused}")
            check(unnamed_share(log) >= 30.0, f"{tag}: named from a bad file?")
            check(len(traces(out)) > 0, f"{tag}: no samples recorded")
        srv = Server(tmp, "--api-key", "k", "--debuginfod-file-max", str(cap))
        try:
            for tag, (body, _) in cases.items():
                req = urllib.request.Request(f"{srv.url}/debuginfod/buildid/{bid}/debuginfo",
                                             data=body, method="PUT",
                                             headers={"Authorization": "Bearer k"})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        st = r.status
                except urllib.error.HTTPError as e:
                    st = e.code
                want = 413 if tag == "huge" else 422
                check(st == want, f"upload {tag}: {st}, want {want}")
            for bad in ("../../../etc/passwd", "ABCDEF0123456789", "0123", "zz" * 10,
                        "00" * 65, bid + "/../" + bid):
                st, _ = srv.get(f"/debuginfod/buildid/{bad}/debuginfo")
                check(st in (400, 404), f"hostile id {bad}: {st}")
            st, _ = srv.get(f"/debuginfod/buildid/{bid}/source/etc/passwd")
            check(st == 400, f"source: {st}")
            st, _ = srv.get(f"/debuginfod/buildid/{bid}/debuginfo")
            check(st == 404, f"refused uploads were kept: {st}")
            up_dir = os.path.join(srv.data, "debuginfod", "uploads")
            check(os.listdir(up_dir) == [], f"left in uploads: {os.listdir(up_dir)}")
        finally:
            srv.stop()
    finally:
        w.kill()
        w.wait()
        up.stop()


TESTS = [test_debuginfod_record, test_debuginfod_fleet, test_debuginfod_upstream_slow_then_back,
         test_debuginfod_bad_files]
