"""Off-CPU time (issue 32): threads that wait in known functions, each
timing its own waits (tests/workloads/offcpu_mix.c), recorded with
--off-cpu. Each function's share of the off-CPU time must match its share
of the time the workload measured within 5 points, under the right
[off-CPU: CLASS] frame, and the CPU profile of the same run must still be
the CPU profile (its split, no off-CPU frame in it)."""
import json
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.parse

import java_tests
import python_tests
import server_tests
from pprof_read import go_binary, raw, traces

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
WORK = os.path.join(ROOT, "build", "workloads")
SECONDS = 10
WAITS = {"wait_pipe": "pipe", "nap": "sleep", "wait_lock": "lock", "sync_file": "io"}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def off_traces(path):
    """[(ns, labels, frames leaf first)] of the off_cpu sample type, read by
    `go tool pprof -traces -sample_index=off_cpu -unit=ns`."""
    out = subprocess.run([go_binary(), "tool", "pprof", "-traces", "-sample_index=off_cpu",
                          "-unit=ns", path], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        labels, frames, ns = {}, [], None
        for line in block.splitlines():
            if not line.strip():
                continue
            m = re.match(r"^\s*([\w.-]+):\s+(.*)$", line)
            if m and ns is None:
                labels[m.group(1)] = m.group(2).strip()
                continue
            m = re.match(r"^\s*(\d+)(ns)?\s{3}(.*)$", line)
            if m and ns is None:
                ns = int(m.group(1))
                frames.append(m.group(3).strip())
                continue
            frames.append(line.strip())
        if ns:
            result.append((ns, labels, frames))
    return result


def sample_types(path):
    """The sample types in order, from `go tool pprof -raw`."""
    m = re.search(r"(?m)^Samples:\n(.*)$", raw(path))
    return m.group(1).split() if m else []


class Mix:
    """offcpu_mix, its cumulative wait times read as it prints them."""

    def __init__(self, tmp, seconds=SECONDS, nap_us=None, nappers=None):
        nap = [str(nap_us or 3000)] + ([str(nappers)] if nappers else []) if nap_us or nappers else []
        self.p = subprocess.Popen([os.path.join(WORK, "offcpu_mix"), os.path.join(ROOT, "build"),
                                   str(seconds + 60)] + nap,
                                  stdout=subprocess.PIPE, text=True)
        self.last = None
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.last = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}

    def snapshot(self):
        return dict(self.last or {})

    def stop(self):
        self.p.kill()
        self.p.wait()


def test_offcpu_known_waits(tmp):
    """Shares of wait_pipe, nap, wait_lock and sync_file within 5 points of
    the workload's own timing, each under its class; the CPU split of the
    same run intact."""
    known_waits(tmp, SECONDS, [])


def test_offcpu_duty_cycle(tmp):
    """The same known shares with the sched_switch hook duty-cycled (each
    50 ms slot attached with probability 0.7, --off-cpu-duty-test) and naps
    of 120 ms, longer than a slot: a nap counts only when the slots of both
    its ends were attached and weighs 1/(f_a f_b); the short waits weigh
    1/f. A weight wrong by a factor f (e.g. no 1/f_b) puts nap's share 7
    points off. Why 8 nappers out of step and 120 s (make test-runtimes, not
    make test): a nap's count is a product of two slots' draws (variance
    1/f^2 - 1 = 1.04 of its mean squared), a napper's naps chain (each ends
    in the slot the next begins in), and naps in step share their slots, so
    with 2 nappers in step over 30 s (the first version) the naps' total
    moved by about 10 % run to run and its share by up to 5 points (a CI
    run failed at 5.1); 8 nappers out of step over 30 s still moved the
    total by up to 10 %; the noise goes as one over the root of the slots
    drawn, so 2,400 slots halve it."""
    text = known_waits(tmp, 120, ["--off-cpu-duty-test", "70", "--off-cpu-slot-ms", "50"],
                       nap_us=120000, nappers=8)
    m = re.search(r"duty cycle: (\d+) slots, (\d+) watched", text)
    check(m is not None, f"no duty cycle line: {text[-2000:]}")
    slots, watched = int(m.group(1)), int(m.group(2))
    print(f"    duty cycle: {watched} of {slots} slots watched")
    # 120 s of 50 ms slots (late polls make some longer); 0.7 of them drawn.
    check(slots >= 1200 and 0.6 <= watched / slots <= 0.8,
          f"{watched} of {slots} slots watched, want about 0.7 of 2,400")


def known_waits(tmp, seconds, extra, nap_us=None, nappers=None):
    """record --off-cpu (and `extra`) of offcpu_mix for `seconds`: the known
    shares, classes and CPU split checked; returns record's log."""
    w = Mix(tmp, seconds, nap_us, nappers)
    out = os.path.join(tmp, "offcpu.pb.gz")
    marks = {}
    try:
        time.sleep(1)
        rec = subprocess.Popen([AGENT, "record", "--duration", str(seconds), "--output", out,
                                "--pid", str(w.p.pid), "--off-cpu", "--kernel-stacks",
                                # More walks than the default: the shares are checked to 5
                                # points, not the variance of a smaller sample.
                                "--off-cpu-walks", "5000"] + extra,
                               stderr=subprocess.PIPE, text=True)
        log = []
        for line in rec.stderr:
            log.append(line)
            if "start" not in marks and "record: sample_rate_hz=" in line:
                marks["start"] = w.snapshot()
                threading.Timer(seconds, lambda: marks.setdefault("end", w.snapshot())).start()
        rc = rec.wait(timeout=seconds + 120)
    finally:
        time.sleep(0.2)
        w.stop()
    text = "".join(log)
    check(rc == 0, f"record exited {rc}: {text[-2000:]}")
    check("off_cpu=true" in text, f"off-CPU did not start: {text[-2000:]}")
    check("start" in marks and "end" in marks, "no start line from record")
    print("    " + "".join(l.split("record: ", 1)[1] for l in log if "record: off_cpu_s=" in l)
          .strip())
    truth = {f: marks["end"][f] - marks["start"][f] for f in WAITS}
    check(all(v > 0 for v in truth.values()), f"workload waits: {truth}")
    spun = {f: marks["end"].get(f, 0) - marks["start"].get(f, 0) for f in ("spin_a", "spin_b")}

    check(sample_types(out) == ["samples/count", "cpu/nanoseconds", "off_cpu/nanoseconds"],
          f"sample types: {sample_types(out)}")
    ts = off_traces(out)
    got = dict.fromkeys(WAITS, 0)
    cls = {f: {} for f in WAITS}
    for ns, labels, frames in ts:
        check(frames[0].startswith("[off-CPU: "), f"off-CPU stack without its class: {frames[:4]}")
        for f in WAITS:
            if f in frames:
                got[f] += ns
                c = frames[0][len("[off-CPU: "):-1]
                cls[f][c] = cls[f].get(c, 0) + ns
                break
    total_truth, total_got = sum(truth.values()), sum(got.values())
    check(total_got > 0, f"no off-CPU time in the known functions: {ts[:5]}")
    for f, want_class in WAITS.items():
        share_t, share_g = truth[f] / total_truth, got[f] / total_got
        main = cls[f].get(want_class, 0) / got[f] if got[f] else 0
        print(f"    {f}: {share_g:.3f} of off-CPU time (measured {share_t:.3f}), "
              f"{got[f] / 1e9:.2f} s vs {truth[f] / 1e9:.2f} s, [{want_class}] {main:.2f} "
              f"{cls[f]}")
        check(abs(share_g - share_t) <= 0.05,
              f"{f}: share {share_g:.3f}, measured {share_t:.3f} (+- 0.05)")
        check(main >= 0.9, f"{f}: only {main:.2f} of its time under [off-CPU: {want_class}]")
    # The estimate is unbiased: the total is the time waited, not a sample of it.
    ratio = total_got / total_truth
    print(f"    total {total_got / 1e9:.2f} s, measured {total_truth / 1e9:.2f} s ({ratio:.3f})")
    check(0.85 <= ratio <= 1.15, f"off-CPU total {ratio:.3f} of the time measured")

    # The CPU profile of the same run.
    cpu = traces(out)
    check(not any(t.count and any(f.startswith("[off-CPU") for f in t.frames) for t in cpu),
          "an off-CPU frame in a CPU sample")
    a = sum(t.count for t in cpu if "spin_a" in t.frames)
    b = sum(t.count for t in cpu if "spin_b" in t.frames)
    check(a + b >= 300, f"only {a + b} CPU samples in spin_a/spin_b")
    share = a / (a + b)
    check(all(spun.values()), f"the spinner's CPU time: {spun}")
    want = spun["spin_a"] / (spun["spin_a"] + spun["spin_b"])
    print(f"    CPU: spin_a {share:.3f} of {a + b} samples (measured {want:.3f})")
    # +- 0.06: three standard deviations of a share of 300 samples or more.
    # Against the spinner's own CPU time in each, not 2:1: on a busy
    # machine spin_a's share of the samples moved 0.60 to 0.72 run to run.
    check(abs(share - want) <= 0.06, f"spin_a share {share:.3f}, measured {want:.3f} +- 0.06")
    return text


def test_offcpu_on_by_default(tmp):
    """Off-CPU time is on with no flag (the cost bound holds:
    bench/offcpu_bench.py); --no-off-cpu leaves the two CPU sample types."""
    out = os.path.join(tmp, "default.pb.gz")
    p = subprocess.run([AGENT, "record", "--duration", "1", "--output", out, "--pid",
                        str(os.getpid())], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr[-2000:]}")
    check("off_cpu=true" in p.stderr, "off_cpu=true not logged with no flag")
    check(sample_types(out) == ["samples/count", "cpu/nanoseconds", "off_cpu/nanoseconds"],
          f"sample types with no flag: {sample_types(out)}")
    out = os.path.join(tmp, "cpu.pb.gz")
    p = subprocess.run([AGENT, "record", "--duration", "1", "--no-off-cpu", "--output", out,
                        "--pid", str(os.getpid())], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"record --no-off-cpu exited {p.returncode}: {p.stderr[-2000:]}")
    check("off_cpu=false" in p.stderr, "off_cpu=false not logged with --no-off-cpu")
    check(sample_types(out) == ["samples/count", "cpu/nanoseconds"],
          f"sample types with --no-off-cpu: {sample_types(out)}")


# --- the daemon to the server ------------------------------------------------

def app_of_pid(srv, pid, rng):
    """The application the server filed pid under."""
    _, body = srv.get(f"/api/v1/applications?{rng}")
    for a in json.loads(body).get("applications", []):
        q = urllib.parse.urlencode({"app": a["name"]})
        _, lb = srv.get(f"/api/v1/labels?{q}&{rng}")
        if str(pid) in map(str, json.loads(lb).get("pid", [])):
            return a["name"]
    return None


def daemon_run(tmp, seconds=SECONDS):
    """The daemon with --off-cpu shipping to a real server (SQLite) while
    offcpu_mix runs for seconds: (server, app, rng, the workload's waits in
    ns by function, the spinner's CPU ns in spin_a and spin_b). The caller
    stops the server."""
    srv = server_tests.Server(tmp)
    try:
        a, log = server_tests.run_agent(tmp, srv.url, "--off-cpu", "--off-cpu-walks", "5000")
        t0 = int(time.time()) - 1
        w = Mix(tmp)
        try:
            time.sleep(seconds)
        finally:
            w.stop()
            w.t.join(timeout=5)
        snap = w.snapshot()
        truth = {f: snap.get(f, 0) for f in WAITS}
        spun = {f: snap.get(f, 0) for f in ("spin_a", "spin_b")}
        # The last window (--interval 2) closes and ships before the stop.
        time.sleep(3)
        rc, alog = server_tests.stop_agent(a, log)
        check(rc == 0, f"agent exited {rc}: {alog[-2000:]}")
        check("off_cpu=true" in alog, f"off-CPU did not start: {alog[-2000:]}")
        rng = f"from={t0 - 60}&to={int(time.time()) + 60}"
        app = app_of_pid(srv, w.p.pid, rng)
        check(app, f"offcpu_mix (pid {w.p.pid}) not listed")
        return srv, app, rng, truth, spun
    except BaseException:
        srv.stop()
        raise


def shares_of(stacks, truth):
    """Each known function's time and the classes it was under, from
    {folded stack root first: ns}; checked against truth as in
    test_offcpu_known_waits. Returns {function: ns}."""
    got = dict.fromkeys(WAITS, 0)
    cls = {f: {} for f in WAITS}
    for stack, ns in stacks.items():
        frames = stack.split(";")
        check(frames[-1].startswith("[off-CPU: "), f"off-CPU stack without its class: {stack}")
        for f in WAITS:
            if f in frames:
                got[f] += ns
                c = frames[-1][len("[off-CPU: "):-1]
                cls[f][c] = cls[f].get(c, 0) + ns
                break
    total_truth, total_got = sum(truth.values()), sum(got.values())
    check(total_got > 0, f"no off-CPU time in the known functions: {list(stacks.items())[:5]}")
    for f, want_class in WAITS.items():
        share_t, share_g = truth[f] / total_truth, got[f] / total_got
        main = cls[f].get(want_class, 0) / got[f] if got[f] else 0
        print(f"    {f}: {share_g:.3f} of off-CPU time (measured {share_t:.3f}), "
              f"{got[f] / 1e9:.2f} s vs {truth[f] / 1e9:.2f} s, [{want_class}] {main:.2f}")
        check(abs(share_g - share_t) <= 0.05,
              f"{f}: share {share_g:.3f}, measured {share_t:.3f} (+- 0.05)")
        check(main >= 0.9, f"{f}: only {main:.2f} of its time under [off-CPU: {want_class}]")
    ratio = total_got / total_truth
    print(f"    total {total_got / 1e9:.2f} s, measured {total_truth / 1e9:.2f} s ({ratio:.3f})")
    check(0.85 <= ratio <= 1.15, f"off-CPU total {ratio:.3f} of the time measured")
    return got


def fg_totals(srv, query):
    """The flame graph's root total and each name's total, from the API."""
    st, body = srv.get(f"/api/v1/profile?{query}&format=flamegraph")
    check(st == 200, f"{query}: {st} {body[:300]}")
    fg = json.loads(body)
    nodes, names, per = fg["nodes"], fg["names"], {}
    for i in range(0, len(nodes), 4):
        per[names[nodes[i]]] = per.get(names[nodes[i]], 0) + nodes[i + 1]
    return (nodes[1] if nodes else 0), per


def test_offcpu_daemon_server(tmp):
    """The real daemon (--off-cpu --endpoint) to a real server (SQLite):
    GET /api/v1/profile?type=off_cpu gives offcpu_mix's known shares per
    function and [off-CPU: CLASS] within 5 points in collapsed, flame graph
    and pprof (go tool pprof -sample_index=off_cpu); type=cpu is the CPU
    profile (spin_a 2/3 of spin_a + spin_b, no off-CPU frame); type=wall is
    their sum, node by node where a name is in one type only."""
    srv, app, rng, truth, spun = daemon_run(tmp)
    try:
        q = urllib.parse.quote(app, safe="")
        check(all(v > 0 for v in truth.values()), f"workload waits: {truth}")
        print(f"    app {app}; collapsed:")
        got = shares_of(server_tests.stacks_of(srv, f"app={q}&{rng}&type=off_cpu"), truth)

        off_total, off = fg_totals(srv, f"app={q}&{rng}&type=off_cpu")
        for f in WAITS:
            check(off.get(f) == got[f], f"flame graph {f} {off.get(f)} != collapsed {got[f]}")
        classes = {n: v for n, v in off.items() if n.startswith("[off-CPU: ")}
        check(sum(classes.values()) == off_total, f"classes {classes} do not add up to {off_total}")
        print("    flame graph: " + ", ".join(f"{n} {v / off_total:.3f}" for n, v in
                                              sorted(classes.items(), key=lambda x: -x[1])))

        st, body = srv.get(f"/api/v1/profile?app={q}&{rng}&type=off_cpu&format=pprof")
        check(st == 200, f"pprof: {st}")
        path = os.path.join(tmp, "off.pb.gz")
        with open(path, "wb") as fh:
            fh.write(body)
        pp = {}
        for ns, _, frames in off_traces(path):
            k = ";".join(reversed(frames))
            pp[k] = pp.get(k, 0) + ns
        print("    pprof:")
        shares_of(pp, truth)

        cpu_total, cpu = fg_totals(srv, f"app={q}&{rng}&type=cpu")
        check(not any(n.startswith("[off-CPU") for n in cpu), "an off-CPU frame in the CPU view")
        a, b = cpu.get("spin_a", 0), cpu.get("spin_b", 0)
        check(a + b > 0, f"no spin_a/spin_b CPU time: {sorted(cpu)[:30]}")
        check(all(spun.values()), f"the spinner's CPU time: {spun}")
        want = spun["spin_a"] / (spun["spin_a"] + spun["spin_b"])
        print(f"    CPU: spin_a {a / (a + b):.3f} of {(a + b) / 1e9:.2f} s (measured {want:.3f})")
        check(abs(a / (a + b) - want) <= 0.06,
              f"spin_a share {a / (a + b):.3f}, measured {want:.3f} +- 0.06")
        wall_total, wall = fg_totals(srv, f"app={q}&{rng}&type=wall")
        check(wall_total == cpu_total + off_total,
              f"wall {wall_total} != cpu {cpu_total} + off-CPU {off_total}")
        for n in ("spin_a", "spin_b", *WAITS, *classes):
            check(wall.get(n, 0) == cpu.get(n, 0) + off.get(n, 0),
                  f"wall {n} {wall.get(n)} != cpu {cpu.get(n)} + off {off.get(n)}")
        print(f"    wall {wall_total / 1e9:.2f} s = cpu {cpu_total / 1e9:.2f} s + off-CPU "
              f"{off_total / 1e9:.2f} s")
    finally:
        srv.stop()



# --- a block across windows ---------------------------------------------------

def duration_s(path):
    """The profile's Duration (its window's length), from go tool pprof -raw,
    which prints it cut to 4 characters ("2.00" for 2.0012s, "500m" for
    500ms)."""
    m = re.search(r"(?m)^Duration: ([0-9.]+)(\w*)", raw(path))
    check(m and m.group(2) in ("", "s", "m", "ms"), f"no Duration in {path}")
    return float(m.group(1)) / (1000 if m.group(2).startswith("m") else 1)


def test_offcpu_block_across_windows(tmp):
    """A thread blocked in one nanosleep of 7 s under the daemon with
    --interval 2: its time is in the windows it was spent in, each whole
    window holding about its own length (not all 7 s in the window of its
    wake-up), the total the 7 s."""
    outdir = os.path.join(tmp, "out")
    os.mkdir(outdir)
    log = open(os.path.join(tmp, "agent.log"), "w")
    # The largest walk budget: the one block is then walked with p = 1 even
    # on a busy machine (at p < 1 it would count 1/p times: unbiased over
    # many blocks, but this test has one; at p 0.5 it read 14 s).
    a = subprocess.Popen([AGENT, "--interval", "2", "--output-dir", outdir, "--off-cpu",
                          "--off-cpu-walks", "100000"], stderr=log)
    try:
        server_tests.wait_started(a, log.name)
        time.sleep(0.5)
        w = subprocess.Popen(["sleep", "7"])
        w.wait(timeout=60)
        time.sleep(3)
    finally:
        rc, alog = server_tests.stop_agent(a, log)
    check(rc == 0, f"agent exited {rc}: {alog[-2000:]}")
    mine = sorted(os.path.join(outdir, f) for f in os.listdir(outdir) if f".{w.pid}." in f)
    check(mine, f"no profile for pid {w.pid} in {os.listdir(outdir)[:10]}")
    per = []
    for path in mine:
        ns = sum(n for n, _, _ in off_traces(path))
        per.append((ns / 1e9, duration_s(path)))
    print("    windows (off-CPU s, window s): " +
          ", ".join(f"({o:.2f}, {d:.2f})" for o, d in per))
    total = sum(o for o, _ in per)
    check(6.3 <= total <= 7.7, f"off-CPU total {total:.2f} s, slept 7 s")
    held = [(o, d) for o, d in per if o > 0]
    check(len(held) >= 3, f"7 s in {len(held)} windows of 2 s: {per}")
    # The windows wholly inside the sleep: each holds its own length.
    for o, d in held[1:-1]:
        check(abs(o - d) <= 0.25 * d, f"a window of {d:.2f} s holds {o:.2f} s off-CPU: {per}")
    check(max(o for o, _ in per) <= 0.6 * total, f"one window holds most of the sleep: {per}")



# The waits of short_lived_waits' programs: ROUNDS of SECS, their last two
# arguments (SECS in ms for node and Java).
ROUNDS, SECS = 3, 0.4


def short_lived_waits(tmp, runs, chain, marker):
    """runs: [(label, argv)] of programs that wait ROUNDS * SECS under the
    frames chain (leaf first), started one after the other 1 s into a
    whole-machine record: per run, the off-CPU time under chain within
    10 % of it, and no off-CPU stack with the marker. The record's
    failures, joined."""
    want = ROUNDS * SECS * 1e9
    rec, pids = None, []
    try:
        # The largest walk budget and the hook always attached: each of the
        # few blocks is walked with p = 1 on a busy machine too (at p < 1 a
        # block counts 1/p times or not at all: measured 2.02 s and 0 s of
        # node's 1.2 s beside a CI run).
        rec = python_tests.Recording(tmp, 60, "--off-cpu-walks", 100000,
                                     "--off-cpu-switch-rate", 0)
        time.sleep(1)
        for label, argv in runs:
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
            out, err = p.communicate(timeout=60)
            check(p.returncode == 0 and "slept=" in out, f"{label}: {p.returncode} {err[-500:]}")
            pids.append((label, p.pid))
        time.sleep(0.5)
        path, _ = rec.finish()
    finally:
        if rec:
            rec.kill()
    ts = off_traces(path)
    failures = []
    for label, pid in pids:
        mine = [(ns, fr) for ns, lb, fr in ts if lb.get("pid") == str(pid)]
        named = sum(ns for ns, fr in mine
                    if any(fr[i:i + len(chain)] == chain for i in range(len(fr))))
        unknown = [(ns, fr) for ns, fr in mine if marker in fr]
        print(f"    {label}: {named / 1e9:.3f} s under {' -> '.join(chain)} (want "
              f"{want / 1e9:.1f}), {sum(ns for ns, _ in unknown) / 1e9:.3f} s in {len(unknown)} "
              f"stacks with {marker}, {len(mine)} off-CPU stacks")
        if abs(named - want) > 0.1 * want:
            failures.append(f"{label}: {named / 1e9:.3f} s named, want {want / 1e9:.1f}: "
                            f"{sorted(mine, key=lambda x: -x[0])[:2]}")
        if unknown:
            failures.append(f"{label}: {marker} in {len(unknown)} stacks: {unknown[:1]}")
    return failures


def test_offcpu_python_short_lived(tmp):
    """tests/workloads/python/py_waits.py (0.3 s of CPU, then waiter sleeps
    0.4 s three times under main -> <module>, then the process exits) in
    Debian's python3 and a pyenv build: short_lived_waits. An off-CPU
    block's sums are drained at the window's end, after the exit: before,
    the process's Python state went at its exit event and every Python
    frame of those stacks read "[python: interpreter not known]" (and a
    code object read only then could not be read at all: they are read
    when the stack arrives). Measured before: 0.000 s of 1.2 named."""
    runs = [(label, [exe, os.path.join(python_tests.PYWORK, "py_waits.py"), str(ROUNDS), str(SECS)])
            for label, exe in python_tests.two_pythons()]
    failures = short_lived_waits(tmp, runs, ["waiter", "main", "<module>"],
                                 "[python: interpreter not known]")
    check(not failures, " | ".join(failures))


def test_offcpu_node_short_lived(tmp):
    """tests/workloads/js_waits.js (300 ms of CPU, then waiter blocks in
    Atomics.wait 400 ms three times under main -> the script's top level,
    then node exits), node with no flag: short_lived_waits. Before, its
    JavaScript frames read "[v8: runtime not known]"."""
    node = shutil.which("node") or "/usr/bin/node"
    js = os.path.join(ROOT, "tests", "workloads", "js_waits.js")
    failures = short_lived_waits(tmp, [("node", [node, js, str(ROUNDS), str(int(SECS * 1000))])],
                                 ["waiter", "main", "(anonymous)"], "[v8: runtime not known]")
    check(not failures, " | ".join(failures))


def test_offcpu_java_short_lived(tmp):
    """tests/workloads/JavaWaits.java (1.5 s of CPU, then waiter sleeps
    400 ms three times under main, then the JVM exits), the host's JDK 17
    with no flag: short_lived_waits, its Java frames walked from the JVM's
    own description. Before, they were named "[java: JVM not known]"."""
    classes = java_tests.classes_dir(tmp, "JavaWaits")
    java = os.path.join(java_tests.JAVA_HOME, "bin", "java")
    failures = short_lived_waits(tmp, [("java 17", [java, "-cp", classes, "JavaWaits", str(ROUNDS),
                                                   str(int(SECS * 1000))])],
                                 ["JavaWaits.waiter", "JavaWaits.main"], "[java: JVM not known]")
    check(not failures, " | ".join(failures))

TESTS = [test_offcpu_known_waits, test_offcpu_duty_cycle, test_offcpu_on_by_default,
         test_offcpu_daemon_server, test_offcpu_block_across_windows, test_offcpu_python_short_lived,
         test_offcpu_node_short_lived, test_offcpu_java_short_lived]
