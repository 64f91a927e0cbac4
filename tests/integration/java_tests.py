"""HotSpot JVMs (agent/runtimes/hotspot/ and the perf-map path of
agent/runtimes/jit/): Debian's openjdk-17 running tests/workloads/JitSplit.java
(compiled with javac at test time), whose hotA takes twice the CPU of hotB,
each under its own caller (callA, callB), all under JitSplit.main.
OpenJDK 21 (trixie's) and 25 to 28 (unstable's) run the same classes in
Debian roots made by mmdebstrap (debian_root.py) under chroot.

With no flag the agent walks the JVM's Java frames in BPF from its VMStructs
and names them from its metadata; CODEXRAY_JAVA_WALK=off in a JVM's
environment leaves it to the perf-map path (-XX:+PreserveFramePointer, the
map written by the JVM when the agent asks)."""
import os
import re
import shutil
import subprocess
import time

import debian_root
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


# The roots of other JDKs: (label, cache name, suite, packages, java
# homes by major version). Kept with the other tests' roots.
ROOTS_CACHE = "/var/cache/codexray-roots"
ROOTS = [("trixie", "trixie-java", "trixie", ["openjdk-21-jre-headless"], [21]),
         ("unstable", "sid-java", "unstable",
          [f"openjdk-{v}-jre-headless" for v in (25, 26, 27, 28)], [25, 26, 27, 28])]
# Releases the walk knows (hs_vm.c); the others in the roots are refused.
WALKED = [21, 25, 26, 27]


def classes_dir(tmp, workload):
    """tests/workloads/<workload>.java compiled by the host's javac 17 (its
    class files run on every later JVM)."""
    classes = os.path.join(tmp, "classes")
    if not os.path.exists(os.path.join(classes, workload + ".class")):
        subprocess.run([os.path.join(JAVA_HOME, "bin", "javac"), "-d", classes,
                        os.path.join(ROOT, "tests", "workloads", workload + ".java")], check=True,
                       timeout=120)
    return classes


def start_java(tmp, flags, seconds, env=None, root=None, major=17, workload="JitSplit"):
    """The workload under the host's JDK 17, or under JDK `major` in the
    Debian root `root`: chroot, in a mount namespace of its own with a
    /proc (the launcher finds libjli through /proc/self/exe); the classes
    copied to the same path inside. The pid is the JVM's (each execs)."""
    classes = classes_dir(tmp, workload)
    cmd = [*flags, "-cp", classes, workload, str(seconds)]
    if not root:
        return subprocess.Popen([os.path.join(JAVA_HOME, "bin", "java"), *cmd], cwd=tmp,
                                stdout=subprocess.PIPE, text=True,
                                env={**os.environ, **(env or {})})
    inside = os.path.join(root, classes.lstrip("/"))
    shutil.rmtree(inside, ignore_errors=True)
    shutil.copytree(classes, inside)
    java = f"/usr/lib/jvm/java-{major}-openjdk-amd64/bin/java"
    return subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             'mount -t proc proc "$0/proc" && exec chroot "$0" "$@"', root, java,
                             *cmd], cwd=tmp, stdout=subprocess.PIPE, text=True,
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
    check_no_flags(tmp, "17", None, 17)


def check_no_flags(tmp, label, root, major):
    """test_java_no_flags's checks on JDK `major` (in `root`, or the
    host's)."""
    w = start_java(tmp, [], 14, root=root, major=major)
    try:
        time.sleep(3)  # compiled by C2 by then
        # At 400 Hz (~2400 samples): at 100 Hz a JVM given half a CPU by a
        # busy machine has ~300, a binomial spread of 2.7 points against
        # the split's 5 (v8_tests.SPLIT_HZ).
        out, log = record(tmp, "--duration", 6, "--pid", w.pid, "--sample-rate", 400,
                          "--log-level", "debug")
    finally:
        stop_java(w)
    walked = [l for l in log.splitlines() if f"hotspot: pid={w.pid}: HotSpot {major}." in l]
    check(walked and "Java frames walked" in walked[0], f"{label}: not walked: {log[-2000:]}")
    print(f"    {label}: {walked[0].split('info  ')[-1]}")
    perfmap = [l for l in log.splitlines() if f"perfmap: pid={w.pid} " in l]
    check(not perfmap, f"{label}: the perf-map path for a walked JVM: {perfmap}")
    for d in ["/tmp"] + ([os.path.join(root, "tmp")] if root else []):
        pm = os.path.join(d, f"perf-{w.pid}.map")
        check(not os.path.exists(pm) or os.stat(pm).st_mtime < time.time() - 60,
              f"{label}: a perf map was written")
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
    check(hot_total >= 0.7 * total, f"{label}: only {hot_total}/{total} samples under callA/callB")
    share = under["JitSplit.callA"] / hot_total
    print(f"    {label}: {hot_total}/{total} samples under callA or callB; callA's share "
          f"{share:.3f} (want 0.667); {whole}/{hot_total} whole to JitSplit.main and JavaMain; "
          f"hotA named in {named['JitSplit.hotA']}/{under['JitSplit.callA']}, hotB in "
          f"{named['JitSplit.hotB']}/{under['JitSplit.callB']}; {unreadable} with an unnamed "
          f"Java frame")
    check(abs(share - 2 / 3) <= 0.05, f"{label}: callA's share {share:.3f}, want 0.667 +- 0.05")
    check(whole == hot_total, f"{label}: only {whole}/{hot_total} whole to main")
    # A pc between two of the nmethod's PcDescs takes the next one's scope
    # (HotSpot's own rule): without -XX:+DebugNonSafepoints part of hotA's
    # inlined loop shows as callA's (measured 59 % to 79 % named).
    for hot, caller in JAVA_CALLER.items():
        check(named[hot] >= 0.3 * under[caller],
              f"{label}: {hot} named in {named[hot]}/{under[caller]}")
    check(lines_ok == sum(named.values()),
          f"{label}: hot lines: {lines_ok}/{sum(named.values())}")
    check(unreadable <= 0.01 * total,
          f"{label}: {unreadable}/{total} samples with unnamed Java frames")


def java_roots():
    """[(label, root, major)] of the JDKs in the roots, or raises Failure;
    (None, why) when no root can be made here (no mmdebstrap or mirror)."""
    out = []
    for name, cache_name, suite, pkgs, majors in ROOTS:
        try:
            root, why = debian_root.root(ROOTS_CACHE, cache_name, suite, pkgs)
        except debian_root.RootError as e:
            raise Failure(str(e))
        if not root:
            return None, why
        for v in majors:
            java = os.path.join(root, f"usr/lib/jvm/java-{v}-openjdk-amd64/bin/java")
            check(os.access(java, os.X_OK), f"no {java} in the {name} root")
            out.append((f"{name}-jdk{v}", root, v))
    return out, None


def test_java_versions_no_flags(tmp):
    """OpenJDK 21 (Debian 13) and 25, 26 and 27 (Debian unstable) in their
    roots, with no flag: test_java_no_flags's checks (the split within 5
    points, every hot sample whole to JitSplit.main and JavaMain, hotA and
    hotB named inline with their lines), and JavaFib's tiny calls whole.
    21 moved ConstMethod's flags into ConstMethodFlags (a u4); 25 reshaped
    CodeBlob (offsets for pointers, a 16-bit _frame_complete_offset) and
    moved an nmethod's metadata and debug information out of the code
    cache; before that 21 was refused as a ConstMethod without _flags, 25
    to 27 as CodeBlob without _code_begin."""
    roots, why = java_roots()
    if roots is None:
        print(f"    SKIPPED: the Debian roots cannot be made: {why}")
        return
    failures = []
    for label, root, v in roots:
        if v not in WALKED:
            continue
        try:
            check_no_flags(tmp, label, root, v)
            check_fib(tmp, label, root, v)
        except Failure as e:
            print(f"    {label}: FAIL: {e}")
            failures.append(f"{label}: {e}")
    check(not failures, " | ".join(failures))


def test_java_unknown_release_refused(tmp):
    """A HotSpot release the walk does not know (unstable's OpenJDK 28, an
    early-access build whose CodeBlob moved again): refused once with the
    release, the reason and the flag that still works, never walked; its
    samples still counted."""
    roots, why = java_roots()
    if roots is None:
        print(f"    SKIPPED: the Debian roots cannot be made: {why}")
        return
    unknown = [r for r in roots if r[2] not in WALKED]
    check(unknown, "no release the walk does not know in the roots")
    for label, root, v in unknown:
        w = start_java(tmp, [], 8, root=root, major=v)
        try:
            time.sleep(1)
            out, log = record(tmp, "--duration", 3, "--pid", w.pid)
        finally:
            stop_java(w)
        lines = [l for l in log.splitlines() if f"hotspot: pid={w.pid}: " in l]
        print(f"    {label}: {lines[:1]}")
        check(len(lines) == 1 and re.search(rf"HotSpot {v}[.+-]", lines[0]) and
              "a release the walk does not know" in lines[0] and
              "-XX:+PreserveFramePointer" in lines[0], f"{label}: refusal lines: {lines}")
        check(not any("Java frames walked" in l for l in lines), f"{label}: walked")
        total = sum(t.count for t in traces(out))
        check(total >= 50, f"{label}: only {total} samples")


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
    check_fib(tmp, "17", None, 17)


def check_fib(tmp, label, root, major):
    w = start_java(tmp, [], 12, root=root, major=major, workload="JavaFib")
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
    print(f"    {label}: {whole}/{fib} samples in JavaFib.fib whole to JavaFib.main")
    check(fib >= 100, f"{label}: only {fib} samples in fib: {log[-1000:]}")
    check(whole >= 0.98 * fib, f"{label}: {whole}/{fib} whole")


TESTS = [test_java_no_flags, test_java_tiny_calls_whole, test_java_started_after_agent,
         test_java_perf_map, test_java_without_frame_pointer_hint, test_java_versions_no_flags,
         test_java_unknown_release_refused]
