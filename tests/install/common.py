"""What the install tests share: commands, the server's API, waiting, the
README's commands as a user would copy them, the base image built here, and
a list of what to tear down."""
import json
import os
import re
import shlex
import socket
import subprocess
import time
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
# The base images' rootfs tarballs (mmdebstrap of Debian's packages), kept
# between runs and checkouts as make test-kernels keeps its kernels.
CACHE = os.environ.get("INSTALL_CACHE", "/var/cache/codexray-install")
README = os.path.join(ROOT, "README.md")
HOSTNAME = socket.gethostname()


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def run(cmd, timeout=120, check_rc=True, **kw):
    """Runs cmd (a list), its output captured; a non-zero exit is a failure
    that shows the command and its output."""
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    if check_rc and p.returncode != 0:
        raise Failure(f"{shlex.join(cmd)}: exit {p.returncode} after {time.time() - t0:.0f}s:\n"
                      f"{p.stdout[-3000:]}{p.stderr[-3000:]}")
    return p


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api(port, path, timeout=10):
    """GET an answer of the server at 127.0.0.1:port: parsed if it is JSON
    (by its type: a collapsed stack may start with '[' too), else text."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        body = r.read().decode()
        is_json = r.headers.get_content_type() == "application/json"
    return json.loads(body) if is_json else body


def wait_for(what, fn, timeout, every=2.0):
    """Calls fn until it returns something true; that value, or a failure
    naming what did not happen and fn's last answer or error."""
    deadline, last = time.time() + timeout, None
    while time.time() < deadline:
        try:
            got = fn()
            if got:
                return got
            last = got
        except (OSError, ValueError, Failure) as e:
            last = e
        time.sleep(every)
    raise Failure(f"{what}: not within {timeout}s (last: {str(last)[:1500]})")


def apps(port):
    return {a["name"]: a for a in api(port, "/api/v1/applications?from=now-15m")["applications"]}


def labels(port, app):
    return api(port, f"/api/v1/labels?app={app}&from=now-15m")


def collapsed(port, app, frm="now-15m"):
    return api(port, f"/api/v1/profile?app={app}&from={frm}&format=collapsed")


def readme_block(heading):
    """The first ```sh block after the README heading `heading`, its lines
    joined where they end in a backslash: the commands a user copies."""
    text = open(README).read()
    at = text.index(heading + "\n")
    m = re.search(r"```sh\n(.*?)```", text[at:], re.S)
    check(m, f"no ```sh block after {heading!r} in README.md")
    return [ln.strip() for ln in re.sub(r"\\\n\s*", " ", m.group(1)).splitlines() if ln.strip()]


def readme_commands(heading, prefix):
    """The commands of that block starting with `prefix` ("docker run"), as
    argument lists."""
    cmds = [shlex.split(c, comments=True) for c in readme_block(heading)
            if c.startswith(prefix)]
    return [c for c in cmds if c]


def minbase_tar():
    """A Debian 12 minbase root filesystem made here (no registry is
    reachable): built once with mmdebstrap, kept in CACHE (/var/cache/codexray-install)."""
    os.makedirs(CACHE, exist_ok=True)
    tar = os.path.join(CACHE, "bookworm-minbase.tar")
    if not os.path.exists(tar):
        # mmdebstrap takes the format from the name's end: keep it .tar.
        tmp = tar[:-4] + ".partial.tar"
        run(["mmdebstrap", "--variant=minbase", "--quiet", "bookworm", tmp], timeout=600)
        os.rename(tmp, tar)
    return tar


class Teardown:
    """What a test started, undone in reverse order however it ends; each
    step's failure is reported, and the others still run."""

    def __init__(self):
        self.steps = []

    def add(self, what, fn):
        self.steps.append((what, fn))

    def run(self):
        errors = []
        for what, fn in reversed(self.steps):
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - every step is tried
                errors.append(f"{what}: {e}")
        self.steps = []
        if errors:
            print("  teardown: " + "; ".join(errors), flush=True)
        return errors


def stop_proc(p, timeout=30):
    """SIGTERM to a process we started (a Popen), then SIGKILL if it
    lingers; reaped either way."""
    if p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def host_workload(tmp, seconds):
    """A CPU-bound program on the host with named functions (frame
    pointers, symbols): build/workloads/cpu_split."""
    exe = os.path.join(BUILD, "workloads", "cpu_split")
    check(os.access(exe, os.X_OK), f"{exe} is missing: make build/workloads/cpu_split")
    return subprocess.Popen([exe, str(seconds)], stdout=subprocess.DEVNULL, cwd=tmp)
