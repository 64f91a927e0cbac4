"""HotSpot JVMs (agent/runtimes/hotspot/ and the perf-map path of
agent/runtimes/jit/): Debian's openjdk-17 running tests/workloads/JitSplit.java
(compiled with javac at test time), whose hotA takes twice the CPU of hotB,
each under its own caller (callA, callB), all under JitSplit.main.

With no flag the agent walks the JVM's Java frames in BPF from its VMStructs
and names them from its metadata; CODEXRAY_JAVA_WALK=off in a JVM's
environment leaves it to the perf-map path (-XX:+PreserveFramePointer, the
map written by the JVM when the agent asks)."""
import os
import re
import subprocess
import time

from pprof_read import traces

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
AGENT = os.path.join(ROOT, "build", "codexray-node-agent")
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"  # Debian's openjdk-17 (tools/deps.sh)
JAVA_SPLIT = {"JitSplit.hotA": 2 / 3, "JitSplit.hotB": 1 / 3}
JAVA_CALLER = {"JitSplit.hotA": "JitSplit.callA", "JitSplit.hotB": "JitSplit.callB"}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def record(tmp, *args, timeout=120):
    out = os.path.join(tmp, f"java-{time.monotonic_ns()}.pb.gz")
    p = subprocess.run([AGENT, "record", "--output", out, *map(str, args)], capture_output=True,
                       text=True, timeout=timeout)
    check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr[-2000:]}")
    return out, p.stderr


def start_java(tmp, flags, seconds, env=None):
    classes = os.path.join(tmp, "classes")
    if not os.path.exists(os.path.join(classes, "JitSplit.class")):
        subprocess.run([os.path.join(JAVA_HOME, "bin", "javac"), "-d", classes,
                        os.path.join(ROOT, "tests", "workloads", "JitSplit.java")], check=True,
                       timeout=120)
    return subprocess.Popen([os.path.join(JAVA_HOME, "bin", "java"), *flags, "-cp", classes,
                             "JitSplit", str(seconds)], cwd=tmp, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


def stop_java(w):
    w.terminate()  # a clean exit removes its attach socket
    try:
        w.wait(timeout=10)
    except subprocess.TimeoutExpired:
        w.kill()
        w.wait()
    for f in (f"/tmp/perf-{w.pid}.map", f"/tmp/.java_pid{w.pid}", f"/tmp/.attach_pid{w.pid}"):
        if os.path.exists(f):
            os.unlink(f)


def java_method(frame):
    """'long JitSplit.hotA(int)' (the perf map's) -> 'JitSplit.hotA'."""
    m = re.search(r"([\w$.]+)\(", frame)
    return m.group(1) if m else frame


WALK_OFF = {"CODEXRAY_JAVA_WALK": "off"}


def test_java_no_flags(tmp):
    """A JVM started with no flag at all: its Java frames walked in BPF and
    named from the JVM's own metadata (no perf map, no attach, no hint). The
    2:1 split of the time under callA and callB within 5 points, every one
    of those samples whole down to JitSplit.main and the launcher's
    JavaMain; hotA and hotB named under their callers (inlined there by C2,
    or frames of their own) in most of them, with their source lines."""
    w = start_java(tmp, [], 14)
    try:
        time.sleep(3)  # compiled by C2 by then
        out, log = record(tmp, "--duration", 6, "--pid", w.pid, "--log-level", "debug")
    finally:
        stop_java(w)
    walked = [l for l in log.splitlines() if f"hotspot: pid={w.pid}: HotSpot 17." in l]
    check(walked and "Java frames walked" in walked[0], f"not walked: {log[-2000:]}")
    print(f"    {walked[0].split('info  ')[-1]}")
    perfmap = [l for l in log.splitlines() if f"perfmap: pid={w.pid} " in l]
    check(not perfmap, f"the perf-map path for a walked JVM: {perfmap}")
    check(not os.path.exists(f"/tmp/perf-{w.pid}.map") or
          os.stat(f"/tmp/perf-{w.pid}.map").st_mtime < time.time() - 60, "a perf map was written")
    ts = traces(out, lines=True)
    under = {"JitSplit.callA": 0, "JitSplit.callB": 0}
    named = {k: 0 for k in JAVA_SPLIT}
    whole = lines_ok = unreadable = total = 0
    for t in ts:
        total += t.count
        fns = [f.replace(" (inline)", "") for f in t.frames]
        unreadable += t.count if any(f.startswith("[java:") for f in fns) else 0
        callers = [c for c in under if c in fns]
        if len(callers) != 1:
            continue
        c = callers[0]
        under[c] += t.count
        i = fns.index(c)
        if "JitSplit.main" in fns[i + 1:] and "JavaMain" in fns[i + 1:]:
            whole += t.count
        hot = [h for h, hc in JAVA_CALLER.items() if hc == c][0]
        if fns.index(hot) == i - 1 if hot in fns else False:
            named[hot] += t.count
            # hotA's loop is on line 11, hotB's on 17 (JitSplit.java)
            want = 11 if hot.endswith("hotA") else 17
            lines_ok += t.count if any(l[0] == hot and l[2] in (want, 0) for l in t.locs) else 0
    hot_total = sum(under.values())
    check(hot_total >= 0.7 * total, f"only {hot_total}/{total} samples under callA/callB")
    share = under["JitSplit.callA"] / hot_total
    print(f"    {hot_total}/{total} samples under callA or callB; callA's share {share:.3f} "
          f"(want 0.667); {whole}/{hot_total} whole to JitSplit.main and JavaMain; hotA named "
          f"in {named['JitSplit.hotA']}/{under['JitSplit.callA']}, hotB in "
          f"{named['JitSplit.hotB']}/{under['JitSplit.callB']}; {unreadable} with an unnamed "
          f"Java frame")
    check(abs(share - 2 / 3) <= 0.05, f"callA's share {share:.3f}, want 0.667 +- 0.05")
    check(whole == hot_total, f"only {whole}/{hot_total} whole to main")
    # A pc between two of the nmethod's PcDescs takes the next one's scope
    # (HotSpot's own rule): without -XX:+DebugNonSafepoints part of hotA's
    # inlined loop shows as callA's (measured 59 % to 79 % named).
    for hot, caller in JAVA_CALLER.items():
        check(named[hot] >= 0.3 * under[caller], f"{hot} named in {named[hot]}/{under[caller]}")
    check(lines_ok == sum(named.values()), f"hot lines: {lines_ok}/{sum(named.values())}")
    check(unreadable <= 0.01 * total, f"{unreadable}/{total} samples with unnamed Java frames")


def test_java_perf_map(tmp):
    """A HotSpot JVM with -XX:+PreserveFramePointer, walk off in its
    environment (the path of a JVM the walk does not know): the agent makes
    it write its perf map (Compiler.perfmap through the attach socket); Java
    names, the 2:1 split within 10 points, each method under its caller,
    interpreted frames as [interpreter]."""
    t0 = time.time()
    w = start_java(tmp, ["-XX:+PreserveFramePointer", "-XX:-Inline"], 12, env=WALK_OFF)
    try:
        time.sleep(4)  # past the agent's minimum age for an attach
        # A file left by an earlier process that had the same pid predates
        # this JVM: only one written since it started counts.
        pm = f"/tmp/perf-{w.pid}.map"
        check(not (os.path.exists(pm) and os.stat(pm).st_mtime >= t0 - 1),
              "a perf map before the agent asked")
        out, log = record(tmp, "--duration", 5, "--pid", w.pid, "--log-level", "debug")
    finally:
        stop_java(w)
    check(f"hotspot: pid={w.pid}: CODEXRAY_JAVA_WALK=off" in log, f"walk not off: {log[-1500:]}")
    attach = [l for l in log.splitlines() if f"perfmap: pid={w.pid} " in l]
    check(any("Compiler.perfmap in" in l for l in attach), f"no attach: {attach} {log[-1500:]}")
    check(not any("PreserveFramePointer" in l for l in attach), f"hint with the flag: {attach}")
    ts = traces(out)
    per, under = {k: 0 for k in JAVA_SPLIT}, {k: 0 for k in JAVA_SPLIT}
    total = sum(t.count for t in ts)
    interp = 0
    for t in ts:
        fns = [java_method(f) for f in t.frames]
        interp += t.count if "[interpreter]" in t.frames else 0
        if fns[0] in per:
            per[fns[0]] += t.count
            if len(fns) > 1 and fns[1] == JAVA_CALLER[fns[0]]:
                under[fns[0]] += t.count
    hot = sum(per.values())
    check(hot >= 0.8 * total, f"only {hot}/{total} samples in hotA/hotB: {ts[:3]}")
    for fn, want in JAVA_SPLIT.items():
        got = per[fn] / hot
        print(f"    {fn}: {got:.3f} (want {want:.3f}), under {JAVA_CALLER[fn]} "
              f"{under[fn]}/{per[fn]}")
        check(abs(got - want) <= 0.10, f"{fn} share {got:.3f}, want {want:.3f} +- 0.10")
    reach = sum(under.values()) / hot
    print(f"    {reach:.3f} of hot samples under their caller; {interp}/{total} pass through "
          f"[interpreter]")
    check(reach >= 0.9, f"only {reach:.3f} of hot samples under their caller")
    check(interp > 0, "no [interpreter] frame (main runs interpreted)")


def test_java_without_frame_pointer_hint(tmp):
    """A JVM left to the perf-map path without -XX:+PreserveFramePointer:
    the hint, once."""
    w = start_java(tmp, [], 8, env=WALK_OFF)
    try:
        time.sleep(1)
        _, log = record(tmp, "--duration", 2, "--pid", w.pid)
    finally:
        stop_java(w)
    hints = [l for l in log.splitlines() if f"perfmap: pid={w.pid} " in l
             and "PreserveFramePointer" in l]
    print(f"    {hints[:1]}")
    check(len(hints) == 1, f"hint lines: {hints}")



def test_java_started_after_agent(tmp):
    """A JVM started while the agent runs: found once it has made its code
    cache (a poll hook looks again every 50 ms), its hot samples whole to
    JitSplit.main from then on."""
    out = os.path.join(tmp, f"java-late-{time.monotonic_ns()}.pb.gz")
    rec = subprocess.Popen([AGENT, "record", "--duration", "7", "--output", out],
                           stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    w = start_java(tmp, [], 4)
    w.wait(timeout=60)
    _, log = rec.communicate(timeout=60)
    check(rec.returncode == 0, f"record exited {rec.returncode}: {log[-2000:]}")
    check(f"hotspot: pid={w.pid}: HotSpot 17." in log, f"not walked: {log[-2000:]}")
    hot = whole = 0
    for t in traces(out):
        if t.labels.get("pid") != str(w.pid):
            continue
        fns = [f.replace(" (inline)", "") for f in t.frames]
        if "JitSplit.callA" in fns or "JitSplit.callB" in fns:
            hot += t.count
            whole += t.count if "JitSplit.main" in fns and "JavaMain" in fns else 0
    print(f"    {whole}/{hot} hot samples whole to JitSplit.main")
    check(hot >= 50, f"only {hot} hot samples")
    check(whole == hot, f"{whole}/{hot} whole")


def test_java_tiny_calls_whole(tmp):
    """A recursive fib with no flag (tests/workloads/JavaFib.java): leaves
    caught in a compiled frame's prologue or epilogue (the return poll, pop
    rbp, ret) step from sp: its samples whole to JavaFib.main (measured
    790/790; 580/787 before the epilogue was read)."""
    classes = os.path.join(tmp, "fib")
    subprocess.run([os.path.join(JAVA_HOME, "bin", "javac"), "-d", classes,
                    os.path.join(ROOT, "tests", "workloads", "JavaFib.java")], check=True,
                   timeout=120)
    w = subprocess.Popen([os.path.join(JAVA_HOME, "bin", "java"), "-cp", classes, "JavaFib", "12"],
                         cwd=tmp, stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(3)
        out, log = record(tmp, "--duration", 5, "--pid", w.pid)
    finally:
        stop_java(w)
    fib = whole = 0
    for t in traces(out):
        fns = [f.replace(" (inline)", "") for f in t.frames]
        if fns and fns[0] == "JavaFib.fib":
            fib += t.count
            whole += t.count if "JavaFib.main" in fns and "JavaMain" in fns else 0
    print(f"    {whole}/{fib} samples in JavaFib.fib whole to JavaFib.main")
    check(fib >= 100, f"only {fib} samples in fib: {log[-1000:]}")
    check(whole >= 0.98 * fib, f"{whole}/{fib} whole")


TESTS = [test_java_no_flags, test_java_tiny_calls_whole, test_java_started_after_agent, test_java_perf_map,
         test_java_without_frame_pointer_hint]
