"""V8's JavaScript frames without --perf-basic-prof (agent/runtimes/v8/):
the real agent on this machine's node, started with no flag at all, running
a workload with a known answer (tests/workloads/js_split.js), read back
with `go tool pprof`.

A JavaScript frame is shown as the function's name (or "(anonymous)"), its
script and the line the function starts at; the script's top level is the
anonymous function at line 1 of the script."""
import os
import shutil
import subprocess
import time

from pprof_read import traces

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
NODE = shutil.which("node") or "/usr/bin/node"
JS_SPLIT = os.path.join(ROOT, "tests", "workloads", "js_split.js")
SPLIT = {"hot_a": 2 / 3, "hot_b": 1 / 3}
CALLER = {"hot_a": "call_a", "hot_b": "call_b"}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def def_line(name):
    """The line of `function NAME(` in the workload."""
    with open(JS_SPLIT) as f:
        for i, line in enumerate(f, 1):
            if line.startswith(f"function {name}("):
                return i
    raise Failure(f"no function {name} in {JS_SPLIT}")


def record_node(tmp, seconds):
    """node js_split.js with no flag, recorded for `seconds` past its first
    2 s (start-up and tier-up)."""
    out = os.path.join(tmp, "node.pb.gz")
    w = subprocess.Popen([NODE, JS_SPLIT, str(seconds + 4)], cwd=tmp, stdout=subprocess.PIPE,
                         text=True)
    try:
        time.sleep(2)
        p = subprocess.run([AGENT, "record", "--duration", str(seconds), "--pid", str(w.pid),
                            "--output", out], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr[-2000:]}")
    finally:
        w.kill()
        w.wait()
    check(not os.path.exists(f"/tmp/perf-{w.pid}.map"), "node wrote a perf map: a flag slipped in")
    return traces(out, lines=True), p.stderr


def test_node_no_flags_named(tmp):
    """node with no flag: hot_a and hot_b named from V8's structures (file
    and first line right), the 2:1 split within 5 points, every hot sample
    under its caller, the script's top level and on to node's C++ main."""
    ts, log = record_node(tmp, 6)
    check(any(l for l in log.splitlines() if "v8: " in l and "are walked and named" in l),
          f"no v8 line in the log: {log[-1500:]}")
    total = sum(t.count for t in ts)
    per = {fn: 0 for fn in SPLIT}
    whole = {fn: 0 for fn in SPLIT}
    for t in ts:
        fn = t.frames[0]
        if fn not in per:
            continue
        per[fn] += t.count
        f, file, line = t.locs[0]
        check(file == JS_SPLIT and line == def_line(fn), f"{fn}: {file}:{line}")
        # hot -> caller -> the script's top level -> ... -> node's main.
        ok = (len(t.locs) > 3 and t.frames[1] == CALLER[fn]
              and t.locs[1][1:] == (JS_SPLIT, def_line(CALLER[fn]))
              and t.locs[2] == ("(anonymous)", JS_SPLIT, 1)
              and "Module._compile" in t.frames
              and any("node::Start" in f or f == "_start" for f in t.frames))
        if ok:
            whole[fn] += t.count
        elif per[fn] == t.count:
            print(f"    not whole: {t.locs[:6]}")
    hot = sum(per.values())
    check(hot >= 0.8 * total, f"only {hot}/{total} samples in hot_a/hot_b: {ts[:3]}")
    for fn, want in SPLIT.items():
        got = per[fn] / hot
        print(f"    no flag: {fn} {got:.3f} (want {want:.3f}), whole to the top level and main "
              f"{whole[fn]}/{per[fn]}")
        check(abs(got - want) <= 0.05, f"{fn} share {got:.3f}, want {want:.3f} +- 0.05")
    reach = sum(whole.values()) / hot
    check(reach >= 0.95, f"only {reach:.3f} of the hot samples whole to the top level")


TESTS = [test_node_no_flags_named]
