"""Interpreter frames without a name (common/interp_frames.h): on Debian's own
/usr/bin/python3 (3.11, libpython linked in, no .symtab), the real agent
records a CPU-bound Python program, the real server stores it, and the
profile read back with interp=hidden (the default) puts the interpreter's
unnamed frames' time on the Python functions that run them; interp=shown
gives every frame back, with the same samples."""
import json
import os
import re
import shutil
import subprocess
import time

from pprof_read import traces
from server_tests import AGENT, ROOT, Server, check

DEBIAN_PYTHON = "/usr/bin/python3"
WORKLOADS = os.path.join(ROOT, "tests", "workloads")
UNNAMED = re.compile(r"^\S+\+0x[0-9a-fA-F]+$")


def kind_of(name, file):
    """python, unnamed or native, as the UI classifies a frame
    (server/ui/classify.js)."""
    if file.endswith(".py") or file.startswith("<"):
        return "python"
    if UNNAMED.match(name) and not name.startswith("[kernel]"):
        return "unnamed"
    return "native"


def self_shares(fg):
    """The flame graph's self time per function and per kind, as shares of
    the whole: ({name index: share}, {kind: share})."""
    nodes, names, files = fg["nodes"], fg["names"], fg["files"]
    total = nodes[1]
    per_fn, per_kind = {}, {"python": 0.0, "native": 0.0, "unnamed": 0.0}
    for i in range(0, len(nodes), 4):
        nm, self_ = nodes[i], nodes[i + 2]
        if nm < 2 or not self_:
            continue
        per_fn[nm] = per_fn.get(nm, 0) + self_ / total
        per_kind[kind_of(names[nm], files[nm])] += self_ / total
    return per_fn, per_kind


def stacks_through_unnamed(text):
    """The share of samples whose stack holds a frame without a name (what
    the unnamed-frames note used to count), from folded stacks."""
    touched = total = 0
    for line in text.splitlines():
        stack, _, n = line.rpartition(" ")
        total += int(n)
        if any(UNNAMED.match(f) for f in stack.split(";")):
            touched += int(n)
    return touched / total if total else 0.0


def has_symtab(path):
    p = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, timeout=30)
    check(p.returncode == 0, f"readelf {path}: {p.stderr[-300:]}")
    return re.search(r"\]\s+\.symtab\s", p.stdout) is not None


def check_program(tmp, srv, service, argv):
    """argv (an interpreter running a script, or chroot execing one: its pid
    the interpreter's) recorded (debug files not fetched), stored as service
    and read back both ways: the checks of the test."""
    py = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = os.path.join(tmp, f"{service}.pb.gz")
        p = subprocess.run([AGENT, "record", "--duration", "10", "--pid", str(py.pid),
                            "--debuginfod", "none", "--data-dir", os.path.join(tmp, "agent-data"),
                            "--output", out], capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, f"record exited {p.returncode}: {p.stderr[-2000:]}")
    finally:
        py.kill()
        py.wait()
    m = re.search(r"interp_frames=([0-9.]+)%", p.stderr)
    check(m and float(m.group(1)) > 0, f"the agent marked no interpreter frame: {p.stderr[-800:]}")
    written = sum(t.count for t in traces(out))
    check(written >= 50, f"only {written} samples of {service}: too few to judge")
    with open(out, "rb") as f:
        st, body = srv.post(f"/api/v1/profiles?service={service}", f.read())
    check(st == 202, f"ingest: {st} {body[:300]}")
    got = {}
    q = f"/api/v1/profile?app={service}&from=now-1h"
    for interp in ("hidden", "shown"):
        st, body = srv.get(f"{q}&format=flamegraph&interp={interp}")
        check(st == 200, f"flamegraph interp={interp}: {st} {body[:300]}")
        st, folded = srv.get(f"{q}&format=collapsed&interp={interp}")
        check(st == 200, f"collapsed interp={interp}: {st} {folded[:300]}")
        got[interp] = (json.loads(body), folded.decode())
    st, default = srv.get(f"{q}&format=collapsed")
    check(st == 200 and default.decode() == got["hidden"][1], "the default is not interp=hidden")
    hid, shown = got["hidden"][0], got["shown"][0]
    # Not a sample lost: the same samples and CPU both ways, all the agent wrote.
    check(hid["samples"] == shown["samples"] == written,
          f"samples: hidden {hid['samples']}, shown {shown['samples']}, written {written}")
    check(hid["total"] == shown["total"], f"CPU: hidden {hid['total']}, shown {shown['total']}")
    in_graph = lambda fg: {nm for nm in fg["nodes"][0::4]  # noqa: E731
                           if nm >= 2 and fg["files"][nm].startswith("[interpreter]")}
    check(in_graph(shown), "no interpreter frame in the graph with interp=shown")
    left = in_graph(hid)
    check(not left, f"interpreter frames left with interp=hidden: {[hid['names'][n] for n in left][:5]}")
    fn_h, kind_h = self_shares(hid)
    fn_s, kind_s = self_shares(shown)
    tops = lambda fg, fn: ", ".join(f"{fg['names'][nm]} {100 * sh:.1f} %"  # noqa: E731
                                    for nm, sh in sorted(fn.items(), key=lambda kv: -kv[1])[:4])
    fmt = lambda k: ", ".join(f"{x} {100 * v:.1f} %" for x, v in k.items())  # noqa: E731
    print(f"    {service}: {written} samples; self time with interp=shown (before): {fmt(kind_s)}; "
          f"top: {tops(shown, fn_s)}")
    print(f"    {service}: interp=hidden (after): {fmt(kind_h)}; top: {tops(hid, fn_h)}")
    print(f"    {service}: samples whose stack holds an unnamed frame: "
          f"{100 * stacks_through_unnamed(got['shown'][1]):.1f} % shown, "
          f"{100 * stacks_through_unnamed(got['hidden'][1]):.1f} % hidden")
    check(kind_h["unnamed"] <= 0.05, f"{100 * kind_h['unnamed']:.1f} % of the self time unnamed with interp=hidden")
    first = max(fn_h.items(), key=lambda kv: kv[1])[0]
    check(kind_of(hid["names"][first], hid["files"][first]) == "python",
          f"the first function by self time is not a Python one: {tops(hid, fn_h)}")
    check(kind_h["python"] > kind_s["python"], f"Python's self time did not grow: {kind_s} -> {kind_h}")


def test_python_interp_frames_folded(tmp):
    """Debian's python3 running py_split.py (a hot loop, the pure-Python
    JSON encoder, a sort with a key) and py_difflib.py (the standard
    library's difflib): hidden, at most 5 % of the self time in unnamed
    frames and the first function by self time a Python one; shown, the
    interpreter's frames are there; the same samples both ways, as many as
    the agent wrote."""
    check(os.access(DEBIAN_PYTHON, os.X_OK), f"{DEBIAN_PYTHON} missing (Debian's python3)")
    real = os.path.realpath(DEBIAN_PYTHON)
    check(not has_symtab(real), f"{real} has a .symtab: not the stripped interpreter this test is about")
    srv = Server(tmp)
    try:
        for service, script in (("py_split", "py_split.py"), ("py_difflib", "py_difflib.py")):
            check_program(tmp, srv, service, [DEBIAN_PYTHON, os.path.join(WORKLOADS, script), "30"])
    finally:
        srv.stop()


def test_python_unstable_interp_frames_folded(tmp):
    """The same on Debian unstable's python3.14 and python3.15 (stripped
    too), run in the unstable root python_unstable_tests.py makes."""
    import python_unstable_tests as put
    root, why = put.unstable_root()
    if root is None:
        print(f"    skipped: {why}")
        return
    inside = "/cx-interp"
    os.makedirs(os.path.join(root, inside.lstrip("/")), exist_ok=True)
    for script in ("py_split.py", "py_difflib.py"):
        shutil.copy(os.path.join(WORKLOADS, script), os.path.join(root, inside.lstrip("/")))
    srv = Server(tmp)
    try:
        for v in put.VERSIONS:
            exe = os.path.realpath(os.path.join(root, "usr", "bin", f"python{v}"))
            check(not has_symtab(exe), f"{exe} has a .symtab: not a stripped interpreter")
            for script in ("py_split.py", "py_difflib.py"):
                service = f"{script[:-3]}_{v.replace('.', '_')}"
                check_program(tmp, srv, service,
                              ["chroot", root, f"python{v}", f"{inside}/{script}", "30"])
    finally:
        srv.stop()


TESTS = [test_python_interp_frames_folded, test_python_unstable_interp_frames_folded]
