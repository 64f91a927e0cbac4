#!/usr/bin/env python3
"""make test-kernels: the agent on the kernels fleets run, each booted under
qemu. For each kernel series (Debian 11's 5.10, 12's 6.1, 13's 6.12 and
unstable's newest): fetch Debian's newest build (tools/kernels/fetch.sh),
boot it with an initramfs that holds the agent, its workloads and their
libraries (tools/kernels/initramfs.py, /init is tools/kernels/guest-init.sh),
and read back what the guest sent through its second serial port:

  record      cpu_split (frame pointers) and cfi_split (none) at once: each
              one's hot_a/hot_b/hot_c split 3:2:1 within 5 points (or 4
              sigma), >= 99 % of its samples whole to main; and Debian's
              python3 running py_guest.py (hot_a called twice as often as
              hot_b): hot_a's share of the samples the same way against the
              share of CPU time the workload measured in it, >= 99 % under
              dispatch <- run <- <module>
  daemon      --output-dir --interval 2 --kernel-stacks --off-cpu for two windows:
              exits 0 on SIGTERM, a summary per window, cpu_split's profiles
              with hot_a > hot_b > hot_c; syscall_heavy's system calls
              named (do_syscall_64) in half its samples or more, >= 99 % of
              those from the entry code (entry_SYSCALL_64_after_hwframe) on
              into the user frames, through do_reads to main, untruncated
              and the off-CPU program loaded (off_cpu=true and its
              window line; not counted time: only that it runs)
  errors      no line at level error in the agent's logs

When the agent does not load, its own message, its debug log's libbpf lines
and, for each BPF program loaded alone (tools/kernels/bpf_each.c), the
verifier's last lines are shown. Every guest's console log and results stay in
build/test-output/kernels/SERIES/.

    tools/kernels/run.py [--kernels "5.10 6.1 6.12 sid"] [--jobs N] ...

Exits 1 when any kernel fails, with "kernels: N passed, N failed" last.

With --arch arm64 (make test-arm64): Debian's arm64 builds of 6.1 and 6.12
under qemu-system-aarch64 (-M virt, TCG's pointer authentication with
QEMU's own fast algorithm), the cross-built agent and workloads of
build-arm64/, busybox and Python from Debian's arm64 packages; the results
come back on a virtio console (virt has one UART). The same checks, and
three more workloads in record: pac_split (cpu_split built with
-mbranch-protection=standard, its return addresses PAC-signed) walked whole
with its split, go_split (Go, 2:1) named with its split, and jit_perfmap
(code generated at run time, named by its perf map, 2:1 under its C
callers call_a/call_b to main); the daemon's system call entry is el0_svc,
its entry code el0t_64_sync. Its logs are in
build-arm64/test-output/kernels/SERIES/, its last line "arm64: N passed,
N failed".
"""
import argparse
import base64
import concurrent.futures
import datetime
import glob
import io
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.join(ROOT, "tools", "kernels")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
from pprof_read import traces  # noqa: E402
sys.path.insert(0, HERE)
from initramfs import Cpio  # noqa: E402

SPLIT = {"hot_a": 3 / 6, "hot_b": 2 / 6, "hot_c": 1 / 6}
# What a whole stack of a split workload is: its hot function, then chain,
# then one of roots (cpu_split's threads run from thread_main). hot_only:
# only the samples in a hot function count for whole, since Go's own
# threads (sysmon, the GC's workers) run beside main.main, never under it.
C_SPEC = {"split": SPLIT, "chain": ["dispatch", "run"], "roots": ("main", "thread_main"),
          "hot_only": False}
GO_SPEC = {"split": {"main.hotA": 2 / 3, "main.hotB": 1 / 3},
           "chain": ["main.dispatch", "main.run"], "roots": ("main.main",), "hot_only": True}
# jit_perfmap: code generated at run time, named by its perf map, under a C
# caller of its own each (chain: a list, or one per hot function).
JIT_SPEC = {"split": {"jit_hot_a": 2 / 3, "jit_hot_b": 1 / 3},
            "chain": {"jit_hot_a": ["call_a", "dispatch", "run"],
                      "jit_hot_b": ["call_b", "dispatch", "run"]},
            "roots": ("main",), "hot_only": False}
# The guest's Python: Debian's, libpython linked in (tools/kernels/py_guest.py).
PYTHON = "/usr/bin/python3"
# record's workloads: key (its pid file in the guest), name, and what it is.
WORKLOADS = {"fp": ("cpu_split", C_SPEC), "cfi": ("cfi_split", C_SPEC),
             "pac": ("pac_split", C_SPEC), "go": ("go_split", GO_SPEC),
             "jit": ("jit_perfmap", JIT_SPEC)}
# Each architecture's guest: the series booted, the build directory the
# agent and workloads come from, qemu's machine, the console and the results
# port (cx.port), the system call's entry --kernel-stacks must show (the C
# function the entry code calls, then the entry code, the kernel stack's
# last frame), and the workloads record checks besides Python.
ARCHES = {
    "amd64": {"series": ["5.10", "6.1", "6.12", "sid"], "build": "build",
              "qemu": "qemu-system-x86_64", "machine": "pc", "tcg_cpu": "max",
              "console": "ttyS0", "port": "ttyS1", "triplet": None, "package": False,
              "syscall": ("do_syscall_64", "entry_SYSCALL_64_after_hwframe"),
              "workloads": ["fp", "cfi"], "timeout": 300, "secs": 5,
              "round": None},
    # pauth-impdef: QEMU's own pointer-authentication hash, not the
    # architected QARMA one, whose emulation slows every signed return.
    "arm64": {"series": ["6.1", "6.12"], "build": "build-arm64",
              "qemu": "qemu-system-aarch64", "machine": "virt",
              "tcg_cpu": "max,pauth-impdef=on", "console": "ttyAMA0", "port": "hvc0",
              "triplet": "aarch64-linux-gnu", "package": True,
              "syscall": ("el0_svc", "el0t_64_sync"),
              "workloads": ["fp", "cfi", "pac", "go", "jit"], "timeout": 480, "secs": 20,
              # cpu_split's and go_split's rounds 20 and 30 times shorter than
              # their own: emulated and five to 2 CPUs, a round of their own
              # takes seconds, and the one record's window cuts skews the
              # split (8 and 9 points off seen with their own rounds).
              "round": 1000000},
}
# The arm64 guest's userland, from Debian's arm64 packages of the release
# this machine runs (its agent links this release's libraries): busybox,
# and the Python of the same version as this machine's (python3.11).
PY_VERSION = os.path.basename(os.path.realpath(PYTHON))
USERLAND_DEBS = ["busybox-static", f"{PY_VERSION}-minimal", f"lib{PY_VERSION}-minimal",
                 "libexpat1", "zlib1g", "libc6"]
# Where the agent comes from its package ("package": the guest installs
# build/deb/'s with dpkg -i): dpkg and what dpkg -i runs (dpkg-deb,
# dpkg-split, GNU tar for the control area, ldconfig and start-stop-daemon
# it wants in PATH), dpkg-query for the host's check; the postinst's
# deb-systemd-helper (init-system-helpers, Essential in Debian) with perl
# and the modules it loads (perl -e 'END { print for values %INC,
# @DynaLoader::dl_shared_objects } do "/usr/bin/deb-systemd-helper"' here,
# but Data::Dumper, which it does without); the libraries this machine's
# arm64 ones lack. The guest's dpkg database records them (--dpkg-db).
PACKAGE_DEBS = ["dpkg", "tar", "libc-bin", "libmd0", "libselinux1", "libpcre2-8-0", "libacl1",
                "perl-base", "init-system-helpers"]
PERL_MODULES = [m + ".pm" for m in (
    "Carp", "Carp/Heavy", "Cwd", "Errno", "Exporter", "Exporter/Heavy", "Fcntl", "File/Basename",
    "File/Glob", "File/Path", "File/Spec", "File/Spec/Unix", "File/Temp", "Getopt/Long", "IO",
    "IO/Handle", "IO/Seekable", "List/Util", "Scalar/Util", "SelectSaver", "Symbol", "XSLoader",
    "bytes", "constant", "overload", "overloading", "parent", "strict", "vars", "warnings",
    "warnings/register")] + [f"auto/{m}/{m.rsplit('/', 1)[-1]}.so" for m in (
        "Cwd", "Fcntl", "IO", "List/Util", "File/Glob")]
RELEASE_SERIES = {"bullseye": "5.10", "bookworm": "6.1", "trixie": "6.12"}
SPLIT_TOL = 0.05
WHOLE_MIN = 0.99
PY_SPLIT = {"hot_a": 2 / 3, "hot_b": 1 / 3}  # its calls; its CPU time measured (check_python)
PY_CHAIN = ["dispatch", "run", "<module>"]
BEGIN, END = b"==CX-RESULTS-BEGIN==", b"==CX-RESULTS-END=="


def package_files(triplet):
    """The files of PACKAGE_DEBS the guest gets, at their paths."""
    return ["/usr/bin/dpkg", "/usr/bin/dpkg-deb", "/usr/bin/dpkg-split", "/usr/bin/dpkg-query",
            "/sbin/start-stop-daemon", "/bin/tar", "/sbin/ldconfig", "/usr/bin/perl",
            "/usr/bin/deb-systemd-helper", "/usr/bin/deb-systemd-invoke",
            *(f"/usr/lib/{triplet}/perl-base/{m}" for m in PERL_MODULES)]


def env(name, default):
    v = os.environ.get(name, "")
    return v if v else default


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--arch", choices=sorted(ARCHES), default="amd64",
                   help="the guests' architecture (arm64: make test-arm64)")
    p.add_argument("--kernels", default=env("KERNELS", ""),
                   help="series to boot (env KERNELS), of amd64's " +
                   " ".join(ARCHES["amd64"]["series"]) + ", arm64's " +
                   " ".join(ARCHES["arm64"]["series"]) + "; all by default")
    p.add_argument("--cache", default=env("KERNELS_CACHE", "/var/cache/codexray-kernels"),
                   help="apt state and kernels (env KERNELS_CACHE)")
    p.add_argument("--build", help="where the agent and workloads are (BUILD): build/, or "
                   "build-arm64/ for --arch arm64")
    p.add_argument("--out", help="BUILD/test-output/kernels by default")
    p.add_argument("--timeout", type=int, default=int(env("KERNELS_TIMEOUT", "0")),
                   help="seconds a guest may run before it is killed (env KERNELS_TIMEOUT)")
    p.add_argument("--jobs", type=int, default=int(env("KERNELS_JOBS", "2")),
                   help="guests at once (env KERNELS_JOBS)")
    p.add_argument("--accel", default=env("KERNELS_ACCEL", "tcg"),
                   help="tcg, or kvm where /dev/kvm boots stock kernels (env KERNELS_ACCEL)")
    p.add_argument("--smp", type=int, default=2)
    p.add_argument("--mem", type=int, default=1024, help="guest MiB")
    p.add_argument("--secs", type=int, default=0,
                   help="record's --duration (amd64 5, arm64 20: six workloads share 2 CPUs)")
    p.add_argument("--agent", default=env("KERNELS_AGENT", ""), help="BUILD/codexray-node-agent")
    p.add_argument("--bpf-obj", default=env("KERNELS_BPF_OBJ", ""), help="BUILD/sampler.bpf.o")
    p.add_argument("--bpf-each", help="BUILD/kernels/bpf_each")
    a = p.parse_args()
    a.a = ARCHES[a.arch]
    a.build = os.path.abspath(a.build or os.path.join(ROOT, a.a["build"]))
    a.out = a.out or os.path.join(a.build, "test-output", "kernels")
    a.timeout = a.timeout or a.a["timeout"]
    a.secs = a.secs or a.a["secs"]
    a.agent = a.agent or os.path.join(a.build, "codexray-node-agent")
    a.bpf_obj = a.bpf_obj or os.path.join(a.build, "sampler.bpf.o")
    a.bpf_each = a.bpf_each or os.path.join(a.build, "kernels", "bpf_each")
    a.kernels = a.kernels.split() or a.a["series"]
    bad = [k for k in a.kernels if k not in a.a["series"]]
    if bad:
        p.error(f"unknown {a.arch} kernel series {bad}: pick from {' '.join(a.a['series'])}")
    return a


def fetch_env(args):
    return dict(os.environ, KERNELS_ARCH=args.arch)


def fetch(args):
    p = subprocess.run([os.path.join(HERE, "fetch.sh"), args.cache, *args.kernels],
                       stdout=subprocess.PIPE, text=True, env=fetch_env(args))
    found = {}
    for line in p.stdout.splitlines():
        series, version, path = line.split(None, 2)
        found[series] = (version, path)
    return found, p.returncode


def userland(args):
    """Another architecture's guest: (the directory its Debian packages are
    unpacked in, the python path in it); (None, this machine's python3) for
    a native one."""
    if not args.a["triplet"]:
        return None, PYTHON
    codename = platform.freedesktop_os_release().get("VERSION_CODENAME", "")
    if codename not in RELEASE_SERIES:
        raise SystemExit(f"{args.arch}: this machine runs '{codename}', not a Debian release "
                         f"of {' '.join(RELEASE_SERIES)}: no packages to match its libraries")
    debs = USERLAND_DEBS + (PACKAGE_DEBS if args.a["package"] else [])
    p = subprocess.run([os.path.join(HERE, "fetch.sh"), args.cache, "--debs",
                        RELEASE_SERIES[codename], *debs],
                       stdout=subprocess.PIPE, text=True, env=fetch_env(args))
    if p.returncode != 0 or not p.stdout.startswith("debs "):
        raise SystemExit(f"{args.arch}: cannot fetch the guest's packages {' '.join(debs)}")
    return p.stdout.split(None, 1)[1].strip(), f"/usr/bin/{PY_VERSION}"


def agent_package(args):
    """build/deb/'s agent package of this architecture, built after the
    agent (make ARCH=arm64 deb): what users install is what is tested."""
    d = os.path.join(ROOT, "build", "deb")
    debs = glob.glob(os.path.join(d, f"codexray-node-agent_*_{args.arch}.deb"))
    if len(debs) != 1:
        raise SystemExit(f"{args.arch}: {len(debs)} codexray-node-agent_*_{args.arch}.deb in "
                         f"{d}, want one: make ARCH={args.arch} deb")
    if os.path.getmtime(debs[0]) < os.path.getmtime(args.agent):
        raise SystemExit(f"{args.arch}: {debs[0]} is older than {args.agent}: "
                         f"make ARCH={args.arch} deb")
    return debs[0]


def build_initramfs(args, path):
    files = {
        "codexray-node-agent": args.agent,
        "sampler.bpf.o": args.bpf_obj,
        "bpf_each": args.bpf_each,
        "py_guest.py": os.path.join(HERE, "py_guest.py"),
        "syscall_heavy": os.path.join(args.build, "workloads", "syscall_heavy"),
    }
    for key in args.a["workloads"]:
        name = WORKLOADS[key][0]
        files[name] = os.path.join(args.build, "workloads", name)
    root, python = userland(args)
    cross = ["--root", root, "--multiarch", args.a["triplet"]] if root else []
    if args.a["package"]:
        del files["codexray-node-agent"]
        cross += ["--deb", agent_package(args), "--dpkg-db",
                  *(f"--file={p}" for p in package_files(args.a["triplet"]))]
    subprocess.run([sys.executable, os.path.join(HERE, "initramfs.py"), *cross, "--python", python,
                    path, os.path.join(HERE, "guest-init.sh"),
                    *(f"{k}={v}" for k, v in files.items())], check=True)


def kernel_initramfs(args, initramfs, vmlinuz, series):
    """The initramfs for the kernel at vmlinuz: the common one, and after it
    (the kernel unpacks one archive after another) the modules fetch.sh kept
    beside it, named in /opt/cx/modules.list."""
    kdir = os.path.dirname(vmlinuz)
    mods = read(os.path.join(kdir, "modules.list")).split()
    if not mods:
        return initramfs
    path = os.path.join(args.out, f"initramfs-{series}.cpio")
    shutil.copyfile(initramfs, path + ".tmp")
    c = Cpio(path + ".more")
    for m in mods:
        with open(os.path.join(kdir, "modules", m), "rb") as f:
            c.file(f"opt/cx/modules/{m}", f.read())
    c.file("opt/cx/modules.list", ("\n".join(mods) + "\n").encode())
    c.close()
    with open(path + ".tmp", "ab") as out, open(path + ".more", "rb") as more:
        shutil.copyfileobj(more, out)
    os.remove(path + ".more")
    os.replace(path + ".tmp", path)
    return path


def boot(args, series, vmlinuz, initramfs, d):
    """Runs the guest; returns (seconds, how it ended)."""
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    console, serial = os.path.join(d, "console.log"), os.path.join(d, "results.serial")
    # One host thread runs all of a guest's vCPUs (they still interleave,
    # SMP as before): Debian 12's QEMU 7.2 has multi-threaded TCG race with
    # a guest kernel patching its own text (static keys, as attaching a
    # tracepoint or a perf event flips): an int3 Oops in the guest's kernel,
    # seen in 6.12's timer interrupt before /init and in 7.2's
    # exc_page_fault during record (QEMU 8.1 reworked the locking of pages
    # being translated). Two guests run at once, so both cores stay busy.
    accel = "tcg,thread=single" if args.accel == "tcg" else args.accel
    a = args.a
    cpu = a["tcg_cpu"] if args.accel == "tcg" else "host"
    # The results port: the second serial port, or a virtio console.
    port = ["-serial", "chardev:c1"] if a["port"].startswith("ttyS") else \
        ["-device", "virtio-serial-pci", "-device", "virtconsole,chardev=c1"]
    cmd = [a["qemu"], "-nodefaults", "-no-user-config", "-machine", a["machine"],
           "-accel", accel, "-cpu", cpu, "-smp", str(args.smp), "-m", str(args.mem),
           "-display", "none", "-nic", "none", "-no-reboot",
           "-kernel", vmlinuz, "-initrd", initramfs,
           "-append", f"console={a['console']},115200 panic=-1 cx.secs={args.secs} "
                      f"cx.port={a['port']}" + (f" cx.round={a['round']}" if a["round"] else ""),
           "-chardev", f"file,id=c0,path={console}", "-serial", "chardev:c0",
           "-chardev", f"file,id=c1,path={serial}", *port]
    with open(os.path.join(d, "qemu.cmd"), "w") as f:
        f.write(" ".join(cmd) + "\n")
    t0 = time.monotonic()
    with open(os.path.join(d, "qemu.log"), "w") as log:
        q = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            q.wait(timeout=args.timeout)
            how = "exited" if q.returncode == 0 else f"qemu exited {q.returncode}"
        except subprocess.TimeoutExpired:
            q.kill()
            q.wait()
            how = f"TIMEOUT: guest killed after {args.timeout} s"
    return time.monotonic() - t0, how


def boot_failed_before_init(d):
    """True when the console shows the kernel panicking (or oopsing) before
    it ran /init: a failure of the guest's boot, not of anything tested."""
    con = read(os.path.join(d, "console.log"))
    at_init = con.find("Run /init as init process")
    m = re.search(r"Kernel panic|Oops:|BUG: ", con)
    return m is not None and (at_init < 0 or m.start() < at_init)


def unpack(d):
    """The guest's tar from the serial capture into d/results; False if none."""
    try:
        with open(os.path.join(d, "results.serial"), "rb") as f:
            raw = f.read()
    except OSError:
        return False
    i, j = raw.find(BEGIN), raw.find(END)
    if i < 0 or j < 0:
        return False
    data = base64.b64decode(raw[i + len(BEGIN):j], validate=False)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as t:
        try:
            t.extractall(os.path.join(d, "results"), filter="data")
        except TypeError:  # a Python without extraction filters
            t.extractall(os.path.join(d, "results"))
    return True


def read(path, default=""):
    try:
        with open(path, errors="replace") as f:
            return f.read().strip()
    except OSError:
        return default


def level_lines(log, level):
    return [l for l in log.splitlines() if re.match(rf"^\S+Z {level}\s", l)]


def message(line):
    """'2026-...Z error sampler: X' -> 'sampler: X'."""
    return re.sub(r"^\S+Z \w+\s+", "", line)


def started_after(r, mode, log):
    """Seconds from the agent's launch to its line saying it samples (its
    BPF loaded and attached), to the second: busybox's date has no %N."""
    launched = read(os.path.join(r, f"{mode}.launched"))
    pat = r" record: sample_rate_hz=" if mode == "record" else r" started: sample_rate_hz="
    for line in log.splitlines():
        if re.search(pat, line) and launched:
            ts = datetime.datetime.strptime(line.split()[0], "%Y-%m-%dT%H:%M:%S.%fZ")
            ts = ts.replace(tzinfo=datetime.timezone.utc).timestamp()
            return max(0.0, ts - int(launched))
    return None


def split_of(ts, pid, spec=C_SPEC):
    """Samples of pid (all if None) per hot function (the innermost frame
    of spec's split: a Go one's leaf is its inlined spin), how many whole
    (to a root through the chain's last, no truncation; hot ones with the
    chain right above), and in all (the hot ones only, if spec's hot_only)."""
    split, roots = spec["split"], spec["roots"]
    chains = spec["chain"] if isinstance(spec["chain"], dict) else {k: spec["chain"] for k in split}
    last = {c[-1] for c in chains.values()}
    per, whole, total = {k: 0 for k in split}, 0, 0
    for t in ts:
        if pid is not None and t.labels.get("pid") != str(pid):
            continue
        fr = [f.removesuffix(" (inline)") for f in t.frames]
        hot = next((i for i, f in enumerate(fr) if f in split), None)
        if hot is None and spec["hot_only"]:
            continue
        total += t.count
        if hot is not None:
            per[fr[hot]] += t.count
        ok = not any(f.startswith("[truncated") for f in fr) and any(
            fr[i] in last and fr[i + 1] in roots for i in range(len(fr) - 1))
        if ok and hot is not None:
            chain = chains[fr[hot]]
            ok = fr[hot + 1:hot + 1 + len(chain)] == chain
        whole += t.count if ok else 0
    return per, whole, total


def check_split(what, ts, pid, spec=C_SPEC):
    """(cell text, failure or None)"""
    split = spec["split"]
    per, whole, total = split_of(ts, pid, spec)
    hot = sum(per.values())
    if total < 100 or hot == 0:
        leaves = {}
        for t in ts:
            if t.labels.get("pid") == str(pid):
                k = " <- ".join(t.frames[:3])
                leaves[k] = leaves.get(k, 0) + t.count
        top = sorted(leaves.items(), key=lambda kv: -kv[1])[:3]
        return f"{total} samples, {hot} hot", (
            f"{what}: {total} samples of pid {pid}, {hot} with hot_* as their leaf (want 100 or "
            f"more, most of them hot); most seen: " + "; ".join(f"{n}x {k}" for k, n in top))
    shares = {k: v / hot for k, v in per.items()}
    cell = "/".join(f"{100 * shares[k]:.0f}" for k in split) + \
        f" whole {100 * whole / total:.1f}% n={total}"
    # A share of ~200 samples taken at random times (the sampler's periods
    # are dithered) has a standard error of up to 3.5 points: 5 points alone
    # would fail one run in seven by chance. Allowed: 5 points or 4 sigma.
    tol = {k: max(SPLIT_TOL, 4 * (w * (1 - w) / hot) ** 0.5) for k, w in split.items()}
    bad = [f"{k} {shares[k]:.3f} (want {w:.3f} +- {tol[k]:.3f})" for k, w in split.items()
           if abs(shares[k] - w) > tol[k]]
    if whole / total < WHOLE_MIN:
        bad.append(f"only {whole}/{total} samples whole to main (want >= {100 * WHOLE_MIN:.0f} %)")
    return cell, (f"{what}: " + "; ".join(bad)) if bad else None


def py_measured(r):
    """hot_a's share of the CPU time the guest's Python workload spent in
    hot_a and hot_b over record's window, by its own clock (py_guest.py's
    totals when sampling began and $SECS later), and those seconds; (None,
    why) when the guest left no such figures."""
    try:
        with open(os.path.join(r, "py.cpu0")) as f0, open(os.path.join(r, "py.cpu1")) as f1:
            a0, b0, _ = map(float, f0.read().split())
            a1, b1, _ = map(float, f1.read().split())
    except (OSError, ValueError) as e:
        return None, f"no CPU times of the window from the workload ({e})"
    if a1 - a0 + b1 - b0 <= 0:
        return None, f"the workload had no CPU time in the window ({a0} {b0} -> {a1} {b1})"
    return (a1 - a0) / (a1 - a0 + b1 - b0), a1 - a0 + b1 - b0


def check_python(ts, pid, r):
    """The guest's Python workload (py_guest.py): its hot functions named,
    hot_a's share of their samples within 5 points or 4 sigma (as
    check_split) of the share of CPU time the workload measured in hot_a
    over the same window, and >= 99 % of their samples' Python frames
    (native ones between them left aside) running on through dispatch ->
    run -> <module>. The workload's calls are 2:1, and so is its CPU time
    natively; emulated it is not (py_guest.py says why), so the samples are
    held to the time measured. (cell, failure)"""
    per, whole = {k: 0 for k in PY_SPLIT}, 0
    for t in ts:
        if t.labels.get("pid") != str(pid):
            continue
        py = [f for f in t.frames if f in PY_SPLIT or f in PY_CHAIN]
        if py and py[0] in per:
            per[py[0]] += t.count
            whole += t.count if py[1:] == PY_CHAIN else 0
    hot = sum(per.values())
    if hot < 100:
        return f"{hot} hot", f"record python: {hot} samples in hot_a/hot_b (want 100 or more)"
    share = per["hot_a"] / hot
    want, info = py_measured(r)
    cell = f"{100 * share:.0f}/{100 - 100 * share:.0f}" + \
        (f" (CPU {100 * want:.0f}/{100 - 100 * want:.0f})" if want is not None else "") + \
        f" whole {100 * whole / hot:.1f}% n={hot}"
    bad = []
    if want is None:
        bad.append(info)
    else:
        tol = max(SPLIT_TOL, 4 * (want * (1 - want) / hot) ** 0.5)
        if abs(share - want) > tol:
            bad.append(f"hot_a {share:.3f} of the hot samples, {want:.3f} of the CPU time the "
                       f"workload measured in {info:.1f} s (want +- {tol:.3f})")
    if whole / hot < WHOLE_MIN:
        bad.append(f"only {whole}/{hot} under {' -> '.join(PY_CHAIN)}")
    return cell, ("record python: " + "; ".join(bad)) if bad else None


def check_package(r):
    """The guest's dpkg -i of the agent's package: exit 0, dpkg's record of
    it installed, its postinst's deb-systemd-helper enabled the unit and
    said nothing (no command of its missing, no systemctl or
    deb-systemd-invoke tried: systemd does not run there), and the agent
    the checks ran was /usr/bin's. (cell, failure)"""
    rc, status = read(os.path.join(r, "dpkg.rc"), "none"), read(os.path.join(r, "dpkg.status"))
    agent, link = read(os.path.join(r, "agent.path")), read(os.path.join(r, "dpkg.enabled"))
    log = read(os.path.join(r, "dpkg.log")).splitlines()
    t = read(os.path.join(r, "dpkg.time")).split()
    cell = f"exit {rc}" + (f" in {float(t[1]) - float(t[0]):.1f} s" if len(t) == 2 else "")
    setup = next((i for i, l in enumerate(log) if l.startswith("Setting up ")), len(log))
    bad = log[setup + 1:]  # the maintainer scripts' complaints
    if rc == "0" and status.startswith("install ok installed ") and not bad and \
            link.endswith("/systemd/system/codexray-node-agent.service") and \
            agent == "/usr/bin/codexray-node-agent":
        return cell + ", enabled", None
    return cell, (f"dpkg -i codexray-node-agent: exit {rc}, status '{status}', unit link "
                  f"'{link}', agent run from '{agent}': " + " | ".join((bad or log)[-6:]))


KSTACK_MIN = 0.5  # of syscall_heavy's samples in its system calls (most of its time)
SYSCALL_CHAIN = ["do_reads", "main"]


def check_kernel(ts, entry):
    """--kernel-stacks on syscall_heavy's samples (ts): that most are in
    system calls (its read(2); now()'s clock_gettime too where the vDSO
    falls back to one), with the architecture's entry (entry = (the C
    function, the entry code)) named, and that each of those runs from the
    entry code on into the user frames that made the call, whole through
    do_reads to main (no truncation). (cell, failures)"""
    fn, code = entry
    total = sum(t.count for t in ts)
    ksys, whole, bad = 0, 0, {}
    for t in ts:
        fr = t.frames
        if fn not in fr:
            continue
        ksys += t.count
        i = fr.index(fn)
        j = fr.index(code) if code in fr else -1
        user = fr[j + 1:] if j > i else []
        if any(user[k:k + len(SYSCALL_CHAIN)] == SYSCALL_CHAIN for k in range(len(user))) and \
                not any(f.startswith("[") for f in fr):
            whole += t.count
        else:
            k = " <- ".join(fr[i:i + 6])
            bad[k] = bad.get(k, 0) + t.count
    cell = f"{ksys}/{total} in {fn}, {whole} whole"
    fails = []
    if total == 0 or ksys < KSTACK_MIN * total:
        fails.append(f"daemon: --kernel-stacks, {ksys} of syscall_heavy's {total} samples have "
                     f"{fn} among their frames (want {100 * KSTACK_MIN:.0f} % or more)")
    if ksys and whole < WHOLE_MIN * ksys:
        top = sorted(bad.items(), key=lambda kv: -kv[1])[:3]
        fails.append(f"daemon: --kernel-stacks, only {whole}/{ksys} of syscall_heavy's system "
                     f"calls run from {code} on to {' <- '.join(SYSCALL_CHAIN)} (want >= "
                     f"{100 * WHOLE_MIN:.0f} %); others: " + "; ".join(f"{n}x {k}" for k, n in top))
    return cell, fails


def empty_row(series, version, secs):
    return {"series": series, "version": version, "secs": secs, "btf": "-", "loads": "-",
            "start": "-", "dpkg": "-", **{k: "-" for k in WORKLOADS}, "py": "-", "daemon": "-",
            "errors": "-", "failures": [], "details": []}


def analyze(args, series, version, d, secs, how):
    r = os.path.join(d, "results")
    row = empty_row(series, version, secs)
    row["btf"] = "?"
    if not unpack(d):
        con = read(os.path.join(d, "console.log"))
        row["failures"].append(f"no results from the guest ({how})")
        row["details"].append("console's last lines:")
        row["details"] += ["   " + l for l in con.splitlines()[-15:]]
        return row
    if how != "exited":
        row["failures"].append(how)
    row["boot"] = float(read(os.path.join(r, "boot_s"), "0") or 0)
    row["btf"] = read(os.path.join(r, "btf"), "?")
    if args.a["package"]:
        row["dpkg"], fail = check_package(r)
        if fail:
            row["failures"].append(fail)
    rec_log = read(os.path.join(r, "record.log"))
    dae_log = read(os.path.join(r, "daemon.log"))
    # loads: the record ran and wrote its profile
    starts = [started_after(r, "record", rec_log), started_after(r, "daemon", dae_log)]
    row["start"] = "/".join("-" if t is None else f"{t:.0f}" for t in starts)
    if read(os.path.join(r, "record.rc")) == "0":
        row["loads"] = "yes"
        ts = traces(os.path.join(r, "record.pb.gz"))
        summary = [message(l) for l in rec_log.splitlines() if " record: wrote " in l]
        for key in args.a["workloads"]:
            name, spec = WORKLOADS[key]
            pid = read(os.path.join(r, f"{key}.pid"))
            row[key], fail = check_split(f"record {name}", ts, pid, spec)
            if fail:
                row["failures"].append(fail + (f" [{summary[0]}]" if summary else ""))
        row["py"], fail = check_python(ts, read(os.path.join(r, "py.pid")), r)
        if fail:
            row["failures"].append(fail + (f" [{summary[0]}]" if summary else ""))
    else:
        errs = level_lines(rec_log, "error")
        why = message(errs[0]) if errs else (rec_log.splitlines() or ["no log"])[-1]
        row["loads"] = "no: " + why
        row["failures"].append(f"record exited {read(os.path.join(r, 'record.rc'))}: {why}")
        dbg = read(os.path.join(r, "record-debug.log"))
        lib = [message(l).replace("libbpf: libbpf: ", "libbpf: ") for l in dbg.splitlines()
               if " libbpf: " in l]
        if lib:
            row["details"].append("the agent's --log-level debug, libbpf's lines:")
            for l in lib[-12:]:
                row["details"].append("   " + l[:400] + (" ..." if len(l) > 400 else ""))
        else:
            row["details"].append("the agent's --log-level debug: no libbpf line "
                                  "(it stopped before loading)")
    # daemon
    rc = read(os.path.join(r, "daemon.rc"))
    windows = [l for l in dae_log.splitlines() if " window: processes=" in l]
    pid = read(os.path.join(r, "daemon.pid"))
    ddir = os.path.join(r, "daemon")
    mine = sorted(os.path.join(ddir, f) for f in (os.listdir(ddir) if os.path.isdir(ddir) else [])
                  if f.startswith(f"cpu_split.{pid}."))
    if rc != "0":
        errs = level_lines(dae_log, "error")
        row["daemon"] = f"exit {rc}"
        row["failures"].append(f"daemon exited {rc}: " +
                               (message(errs[0]) if errs else "no error line"))
    elif len(windows) < 2 or not mine:
        row["daemon"] = f"{len(windows)} windows, {len(mine)} profiles"
        row["failures"].append(f"daemon: {len(windows)} window summaries, {len(mine)} profiles of "
                               f"cpu_split (want 2 or more, 1 or more)")
    else:
        per, whole, total = split_of(traces(*mine), None)
        # --kernel-stacks: system calls named under the user frames that made
        # them, syscall_heavy's read(2) of /dev/zero.
        spid = read(os.path.join(r, "syscall.pid"))
        sys_files = [os.path.join(ddir, f) for f in os.listdir(ddir)
                     if f.startswith(f"syscall_heavy.{spid}.")]
        kcell, kfails = check_kernel(traces(*sys_files) if sys_files else [], args.a["syscall"])
        row["daemon"] = f"ok: {len(windows)} windows, {len(mine)} profiles, " + \
            "/".join(str(per[k]) for k in SPLIT) + f"; {kcell}"
        bad = []
        if not per["hot_a"] > per["hot_b"] > per["hot_c"] > 0:
            bad.append(f"daemon: cpu_split's split {per}")
        # --off-cpu (issue 32): loaded, and counting, on every kernel.
        off = [l for l in dae_log.splitlines() if " window: off_cpu_s=" in l]
        m = re.search(r"off_cpu_s=([\d.]+)", off[-1]) if off else None
        row["daemon"] += f"; off-CPU {m.group(1)} s" if m else "; off-CPU off"
        if " off_cpu=true " not in dae_log or not m:
            why = [message(l) for l in dae_log.splitlines() if "off-CPU time off" in l]
            bad.append("daemon: --off-cpu did not load: " + (why[0] if why else "no reason logged"))
        bad += kfails
        if bad:
            row["daemon"] = row["daemon"].replace("ok: ", "")
            row["failures"] += bad
    # errors: only where the agent ran (a refusal is reported as loads: no)
    errs = [message(l) for l in level_lines(dae_log, "error")] if rc == "0" else []
    if row["loads"] == "yes":
        errs += [message(l) for l in level_lines(rec_log, "error")]
    row["errors"] = str(len(errs))
    for e in errs:
        row["failures"].append(f"error line: {e}")
    each = read(os.path.join(r, "bpf_each.log"))
    if each:
        row["details"].append("each BPF program loaded alone (tools/kernels/bpf_each.c), the "
                              "verifier's last lines:")
        row["details"] += ["   " + l for l in each.splitlines()]
    return row


def table(args, rows):
    heads = {"fp": "cpu_split (fp) a/b/c %", "cfi": "cfi_split a/b/c %",
             "pac": "pac_split a/b/c %", "go": "go_split A/B %",
             "jit": "jit_perfmap A/B %"}
    cols = [("kernel", "series"), ("version", "version"), ("time", "time"), ("BTF", "btf"),
            *([("dpkg -i", "dpkg")] if args.a["package"] else []),
            ("loads", "loads_short"), ("agent start s", "start"),
            *((heads[k], k) for k in args.a["workloads"]),
            ("python a/b % (CPU a/b %)", "py"), ("daemon", "daemon"), ("errors", "errors"),
            ("result", "result")]
    for r in rows:
        r["time"] = f"{r['secs']:.0f} s" + (f" (boot {r['boot']:.0f})" if "boot" in r else "")
        r["loads_short"] = r["loads"] if len(r["loads"]) < 4 else "no"
        r["result"] = "PASS" if not r["failures"] else "FAIL"
    w = {k: max(len(h), *(len(str(r[k])) for r in rows)) for h, k in cols}
    lines = ["  ".join(h.ljust(w[k]) for h, k in cols)]
    lines.append("  ".join("-" * w[k] for h, k in cols))
    for r in rows:
        lines.append("  ".join(str(r[k]).ljust(w[k]) for h, k in cols))
    return lines


def main():
    args = parse_args()
    # What the summary lines start with: "kernels:" on amd64, "arm64:".
    tag = "kernels" if args.arch == "amd64" else args.arch
    if not shutil.which(args.a["qemu"]):
        print(f"{tag}: no {args.a['qemu']}: run 'make deps'", file=sys.stderr)
        return 1
    t0 = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    found, rc = fetch(args)
    t_fetch = time.monotonic() - t0
    initramfs = os.path.join(args.out, "initramfs.cpio")
    build_initramfs(args, initramfs)
    print(f"{tag}: fetched {', '.join(f'{s} {v[0]}' for s, v in found.items())} in "
          f"{t_fetch:.0f} s (cache {args.cache}); initramfs {os.path.getsize(initramfs) >> 20} MiB;"
          f" booting under {args.accel}, {args.jobs} at once", flush=True)

    def one(series):
        version, vmlinuz = found[series]
        d = os.path.join(args.out, series)
        rd = kernel_initramfs(args, initramfs, vmlinuz, series)
        secs, how = boot(args, series, vmlinuz, rd, d)
        if boot_failed_before_init(d):
            # The guest kernel died while booting, before /init (seen once:
            # an int3 Oops in 6.12's timer interrupt under TCG's text
            # patching): nothing of ours ran yet. One more boot.
            print(f"{tag}: {series}: the guest kernel failed before /init; booting again",
                  flush=True)
            os.replace(os.path.join(d, "console.log"), os.path.join(args.out,
                                                                    f"{series}.failed-boot.log"))
            secs, how = boot(args, series, vmlinuz, rd, d)
        row = analyze(args, series, version, d, secs, how)
        print(f"{tag}: {series} ({version}): {'PASS' if not row['failures'] else 'FAIL'} in "
              f"{secs:.0f} s", flush=True)
        return row

    rows = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        futs = {s: ex.submit(one, s) for s in args.kernels if s in found}
        for s in args.kernels:
            if s in futs:
                rows.append(futs[s].result())
            else:
                row = empty_row(s, "-", 0)
                row["failures"].append("not fetched (see fetch's message above)")
                rows.append(row)
    print()
    for l in table(args, rows):
        print(l)
    for r in rows:
        if r["failures"] or r["details"]:
            print(f"\n{r['series']} ({r['version']}):")
            for f in r["failures"]:
                print(f"  FAIL {f}")
            for l in r["details"]:
                print(f"  {l}")
    print(f"\n{tag}: guest logs and results in {os.path.relpath(args.out, ROOT)}/SERIES/ "
          f"(console.log, results/); whole run {time.monotonic() - t0:.0f} s")
    passed = sum(1 for r in rows if not r["failures"])
    print(f"{tag}: {passed} passed, {len(rows) - passed} failed")
    return 0 if passed == len(rows) and rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
