"""CPython 3.14 and 3.15 (agent/runtimes/python/): Debian unstable's
python3.14 and python3.15, which need unstable's libc, run inside a root
file system made by mmdebstrap from the host's Debian mirror, while the
agent on the host records them. The same split, chain and lines as
python_tests.test_python_split_chain_line asks of 3.7 to 3.13.

The root is made once (~40 s; ~200 MB) and kept under CACHE
(debian_root.py). The workload is copied into the root at the path it has
on the host, so co_filename is the same path either side.

Skipped, saying why, only when the root cannot be made for want of the
tool or a mirror (no mmdebstrap, no Debian archive in the host's apt
sources); a mirror that is there and fails is a failure."""
import json
import os
import shutil
import subprocess
import time

import debian_root
import python_tests as pt
from pprof_read import traces

CACHE = "/var/cache/codexray-python"
VERSIONS = ["3.14", "3.15"]
NAME = "sid-python"


def unstable_root():
    """(path of the extracted root, None), or (None, why it cannot be made)."""
    try:
        return debian_root.root(CACHE, NAME, "unstable", [f"python{v}" for v in VERSIONS])
    except debian_root.RootError as e:
        raise pt.Failure(str(e))


def start_in_root(root, exe, script, *args):
    """exe (a name on the root's PATH) running script inside the root by
    chroot: the pid returned is the interpreter's (chroot execs it)."""
    dst = os.path.join(root, pt.PYWORK.lstrip("/"))
    os.makedirs(dst, exist_ok=True)
    shutil.copy(os.path.join(pt.PYWORK, script), dst)
    return subprocess.Popen(["chroot", root, exe, os.path.join(pt.PYWORK, script),
                             *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))


def first_lines_in_root(root, exe, script):
    p = subprocess.run(["chroot", root, exe, "-c", pt.CODE_LINES,
                        os.path.join(pt.PYWORK, script)],
                       capture_output=True, text=True, timeout=60)
    pt.check(p.returncode == 0, f"{exe}: {p.stderr[-500:]}")
    return json.loads(p.stdout)


def test_python_unstable_split_chain_line(tmp):
    """Debian unstable's python3.14 (3.14.10) and python3.15 (3.15.2), run
    in the root: test_python_split_chain_line's checks (the 2:1 split within
    5 points, >= 97 % of hot samples with hot_X -> dispatch -> run ->
    <module> and no native frame between, every frame in the script's file,
    >= 80 % of hot_a's on its body or header line, the start lines the
    interpreter's own co_firstlineno, under 3 % of samples without a Python
    frame); and the agent's log saying the layout came from
    _Py_DebugOffsets in that release's own shape, and the binary its
    interpreter. Before 3.14's and 3.15's split evaluation loop was found
    (their ~80 KiB part the ~1 KiB entry jumps to) these had no Python
    frame at all: python_frames=0.0%."""
    root, why = unstable_root()
    if not root:
        print(f"    SKIPPED: Debian unstable's root cannot be made: {why}")
        return
    path = os.path.join(pt.PYWORK, pt.SPLIT_PY)
    body = pt.marked_line(pt.SPLIT_PY, "HOT_A")
    failures = []
    for v in VERSIONS:
        label, exe = f"unstable-{v}", f"python{v}"
        if not os.access(os.path.join(root, "usr/bin", exe), os.X_OK):
            failures.append(f"{label}: no /usr/bin/{exe} in {root}")
            continue
        w = start_in_root(root, exe, pt.SPLIT_PY, 60)
        try:
            time.sleep(1)
            if w.poll() is not None:
                raise pt.Failure(f"{exe} in the root exited: {w.communicate()[1][-500:]}")
            ts, outs, logs = pt.record_until(
                tmp, w.pid,
                lambda ts: sum(pt.split_figures(ts, path)["per"].values()) >= pt.MIN_HOT,
                "--sample-rate", pt.SPLIT_HZ)
            f = pt.split_figures(ts, path)
            a = f["per"]["hot_a"] / max(sum(f["per"].values()), 1)
            if abs(a - pt.SPLIT["hot_a"]) > 0.05 and len(outs) < 3:
                print(f"    {label}: hot_a {a:.3f} in {len(outs)} record(s): 3 s more")
                out, log = pt.record(tmp, 3, "--pid", w.pid, "--sample-rate", pt.SPLIT_HZ)
                outs.append(out)
                logs.append(log)
                ts = pt.of_pid(traces(*outs, lines=True), w.pid)
                f = pt.split_figures(ts, path)
        finally:
            pt.stop(w)
        try:
            pt.check_split(label, exe, ts, f, outs, logs, path, body, body - 1,
                           lines_of=lambda: first_lines_in_root(root, exe, pt.SPLIT_PY))
            log = "".join(logs)
            want = (f"python: {os.path.join(root, 'usr/bin', exe)}: CPython {v}, its frames are "
                    f"walked (layout: _Py_DebugOffsets, read in {v}'s shape)")
            pt.check(want in log, f"no '{want}' in the log: "
                                  f"{[ln for ln in log.splitlines() if 'python:' in ln][:4]}")
        except pt.Failure as e:
            print(f"    {label}: FAIL: {e}")
            failures.append(f"{label}: {e}")
    pt.check(not failures, " | ".join(failures))



def test_python_unstable_callback_through_native(tmp):
    """py_sort_thread.py in the root under Debian unstable's python3.14 and
    python3.15: test_python_callback_through_native_in_thread's checks
    (>= 95 % of key's samples with key -> sort_round -> sorter in order and
    a native frame between key and sort_round, on the thread py-sorter; the
    main thread's main_spin on the main thread). Each sorted() call is a
    second invocation of the evaluation function under the first: its
    entry frame must end the inner invocation's Python frames."""
    root, why = unstable_root()
    if not root:
        print(f"    SKIPPED: Debian unstable's root cannot be made: {why}")
        return
    failures = []
    for v in VERSIONS:
        label, exe = f"unstable-{v}", f"python{v}"
        w = start_in_root(root, exe, pt.SORT_PY, 60)
        try:
            time.sleep(1)
            ts, _, logs = pt.record_until(tmp, w.pid, pt.sort_enough)
        finally:
            pt.stop(w)
        try:
            pt.check_sort(label, ts, logs, w.pid, named=False)
        except pt.Failure as e:
            print(f"    {label}: FAIL: {e}")
            failures.append(f"{label}: {e}")
    pt.check(not failures, " | ".join(failures))


TESTS = [test_python_unstable_split_chain_line, test_python_unstable_callback_through_native]
