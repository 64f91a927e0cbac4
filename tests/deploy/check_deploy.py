#!/usr/bin/python3
"""Checks of deploy/: what cannot run on this machine (no systemd as PID 1,
no Docker engine, no Kubernetes) is still checked as far as it can be.

  - the systemd units: `systemd-analyze verify` and `security` against a
    staged root, and what they must hold (capabilities the agent asks for);
  - install.sh: into a temporary root, its files and modes, the written
    config accepted by the real binaries, then --uninstall leaving nothing;
  - the Debian packages of `make deb` (tools/deb/build.sh): deploy/'s units
    and config files in them, the maintainer scripts, stripping, refusals;
  - the Dockerfile: its stages, the packages that carry every shared library
    the binaries need, the README's `docker run`;
  - the Kubernetes manifest: parsed, and what each object must hold;
  - shellcheck on every shell script.

Run from the repository root after `make` (Debian's python3, for yaml):
    /usr/bin/python3 tests/deploy/check_deploy.py [TEST_NAME ...]
"""
import glob
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import runner  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.join(ROOT, "build")
AGENT = os.path.join(BUILD, "codexray-node-agent")
SERVER = os.path.join(BUILD, "codexray-server")
INSTALL = os.path.join(ROOT, "deploy", "install.sh")
UNITS = os.path.join(ROOT, "deploy", "systemd")
CONFIGS = os.path.join(ROOT, "deploy", "config")
DOCKERFILE = os.path.join(ROOT, "deploy", "docker", "Dockerfile")
MANIFEST = os.path.join(ROOT, "deploy", "kubernetes", "node-agent.yaml")
NAMESPACE = "codexray-agents"
# What the agent needs in a container whatever the kernel and the engine:
# SYS_ADMIN stands for BPF and PERFMON, which not every engine can name.
AGENT_CAPS = {"SYS_PTRACE", "SYS_ADMIN"}


class Failure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Failure(msg)


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=kw.pop("timeout", 60), **kw)


def read(path):
    with open(path) as f:
        return f.read()


def caps_in_agent_source():
    """Every CAP_X the agent's code asks for or names in its messages."""
    caps = set()
    for path in glob.glob(os.path.join(ROOT, "agent", "**", "*.c"), recursive=True):
        caps |= set(re.findall(r"\bCAP_([A-Z_]+)\b", read(path)))
    return caps


def unit_settings(path):
    """{(section, key): [values]} of a unit file."""
    out, section = {}, None
    for line in read(path).splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        k, _, v = line.partition("=")
        out.setdefault((section, k.strip()), []).append(v.strip())
    return out


def agent_default(flag):
    """The default the agent's --help gives for a flag."""
    p = run([AGENT, "--help"])
    m = re.search(rf"--{flag} \S+ .*\(default ([^)]+)\)", p.stdout)
    check(m, f"no default for --{flag} in the agent's --help")
    return m.group(1)


def install(*args, check_rc=0):
    p = run([INSTALL, *args], timeout=120)
    if check_rc is not None:
        check(p.returncode == check_rc,
              f"install.sh {' '.join(args)}: exit {p.returncode}, wanted {check_rc}: "
              f"{p.stdout}{p.stderr}")
    return p


def staged_files(root):
    """Every file and symlink under root, relative to it."""
    found = []
    for d, dirs, files in os.walk(root):
        for name in files + [x for x in dirs if os.path.islink(os.path.join(d, x))]:
            found.append(os.path.relpath(os.path.join(d, name), root))
    return sorted(found)


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(proc, pattern, timeout):
    """Reads proc's stderr until a line matches. Returns (lines read, matched)."""
    lines, found = [], threading.Event()

    def reader():
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if re.search(pattern, line):
                found.set()

    threading.Thread(target=reader, daemon=True).start()
    deadline = time.time() + timeout
    while time.time() < deadline and not found.is_set() and proc.poll() is None:
        found.wait(0.1)
    return lines, found.is_set()


# --- systemd units -----------------------------------------------------------

def test_units_verify(tmp):
    """systemd-analyze verify and security against a root with the units as
    installed and the binaries present (ExecStart must exist)."""
    root = os.path.join(tmp, "root")
    os.makedirs(os.path.join(root, "usr/lib/systemd"))
    os.makedirs(os.path.join(root, "usr/local/bin"))
    os.makedirs(os.path.join(root, "etc/systemd/system"))
    # verify needs the system's own units (sysinit.target and the rest).
    shutil.copytree("/lib/systemd/system", os.path.join(root, "usr/lib/systemd/system"),
                    symlinks=True)
    for b in (AGENT, SERVER):
        shutil.copy2(b, os.path.join(root, "usr/local/bin"))
    units = sorted(os.path.basename(u) for u in glob.glob(os.path.join(UNITS, "*.service")))
    check(units == ["codexray-node-agent.service", "codexray-server.service"], f"units: {units}")
    for u in units:
        shutil.copy(os.path.join(UNITS, u), os.path.join(root, "etc/systemd/system"))
    p = run(["systemd-analyze", "verify", f"--root={root}",
             *[f"/etc/systemd/system/{u}" for u in units]])
    # verify exits 0 on unknown keys and bad values; it only warns. Any word
    # from it is a finding.
    check(p.returncode == 0 and not p.stdout.strip() and not p.stderr.strip(),
          f"systemd-analyze verify: exit {p.returncode}: {p.stdout}{p.stderr}")
    # The hardening stays: exposure scores at most these (agent 5.3 and
    # server 1.4 when written; the agent needs root-like capabilities).
    for u, most in (("codexray-node-agent.service", 6.0), ("codexray-server.service", 2.0)):
        p = run(["systemd-analyze", "security", "--offline=yes", f"--root={root}",
                 f"--threshold={int(most * 10)}", f"/etc/systemd/system/{u}"])
        score = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout)
        check(p.returncode == 0 and score,
              f"systemd-analyze security {u}: exit {p.returncode}, "
              f"{score.group(0) if score else p.stdout[-300:] + p.stderr}; at most {most}")


def test_agent_unit_contents(tmp):
    s = unit_settings(os.path.join(UNITS, "codexray-node-agent.service"))
    exe = s.get(("Service", "ExecStart"), [""])[-1].split()
    check(exe[:1] == ["/usr/local/bin/codexray-node-agent"], f"ExecStart {exe}")
    check(s.get(("Service", "Restart")) == ["on-failure"], "Restart=on-failure")
    check(s.get(("Install", "WantedBy")) == ["multi-user.target"], "WantedBy=multi-user.target")
    # The agent's data_dir default is the unit's state directory.
    data_dir = agent_default("data-dir")
    check(s.get(("Service", "StateDirectory")) == [os.path.basename(data_dir)]
          and os.path.dirname(data_dir) == "/var/lib",
          f"StateDirectory {s.get(('Service', 'StateDirectory'))} vs the agent's --data-dir "
          f"default {data_dir}")
    bounding = set(" ".join(s.get(("Service", "CapabilityBoundingSet"), [])).split())
    ambient = set(" ".join(s.get(("Service", "AmbientCapabilities"), [])).split())
    named = {"CAP_" + c for c in caps_in_agent_source()}
    check(named, "no CAP_ found in agent/: the cross-check has nothing to check")
    check(named <= bounding, f"the agent names {sorted(named - bounding)}, not in the bounding set")
    check(bounding == ambient, f"bounding {sorted(bounding)} != ambient {sorted(ambient)}")
    # Settings that hide other processes or kallsyms from the agent.
    for k in ("ProtectProc", "ProcSubset", "ProtectKernelTunables", "PrivateUsers", "User",
              "DynamicUser"):
        check(("Service", k) not in s, f"{k}= breaks reading other processes or kallsyms")


def test_server_unit_contents(tmp):
    s = unit_settings(os.path.join(UNITS, "codexray-server.service"))
    exe = shlex.split(s.get(("Service", "ExecStart"), [""])[-1])
    check(exe[:1] == ["/usr/local/bin/codexray-server"], f"ExecStart {exe}")
    check("--data-dir" in exe and exe[exe.index("--data-dir") + 1] == "/var/lib/codexray-server",
          f"the server's data dir: {exe}")
    check(s.get(("Service", "StateDirectory")) == ["codexray-server"], "StateDirectory")
    check(s.get(("Service", "DynamicUser")) == ["yes"] or ("Service", "User") in s,
          "the server runs unprivileged (DynamicUser= or User=)")
    check(s.get(("Service", "CapabilityBoundingSet")) == [""], "no capabilities")
    check(s.get(("Service", "Restart")) == ["on-failure"], "Restart=on-failure")
    # The config file reaches the unprivileged service as a credential.
    cred = s.get(("Service", "LoadCredential"), [""])[0]
    check(cred == "server.conf:/etc/codexray/server.conf"
          and exe[exe.index("--config") + 1] == "%d/server.conf", f"config: {cred} {exe}")


# --- install.sh --------------------------------------------------------------

def test_install_usage(tmp):
    p = install("--help")
    for word in ("--endpoint", "--api-key", "--root", "--uninstall", "--server", "--no-build"):
        check(word in p.stdout, f"--help does not mention {word}")
    install("--bogus", check_rc=2)
    install("--root", tmp, "--no-build", check_rc=2)                     # no endpoint
    install("--root", tmp, "--no-build", "--endpoint", "ftp://x", check_rc=2)
    install("--root", tmp, "--no-build", "--endpoint", "http://x:8080", "--api-key", "a#b",
            check_rc=2)                                                  # '#' starts a comment
    install("--root", tmp, "--endpoint", check_rc=2)
    install("--root", os.path.join(tmp, "nope"), "--endpoint", "http://x", check_rc=2)
    check(staged_files(tmp) == [], f"bad usage wrote files: {staged_files(tmp)}")


def test_install_root(tmp):
    root = os.path.join(tmp, "root")
    os.mkdir(root)
    p = install("--root", root, "--endpoint", "http://x:8080", "--api-key", "K", "--no-build",
                "--server", "--listen", "0.0.0.0:8080")
    check("not started" in p.stdout, f"install.sh should say nothing was started: {p.stdout}")
    want = {
        "usr/local/bin/codexray-node-agent": 0o755,
        "usr/local/bin/codexray-server": 0o755,
        "etc/codexray/agent.conf": 0o600,
        "etc/codexray/server.conf": 0o600,
        "etc/systemd/system/codexray-node-agent.service": 0o644,
        "etc/systemd/system/codexray-server.service": 0o644,
        "etc/systemd/system/multi-user.target.wants/codexray-node-agent.service": None,
        "etc/systemd/system/multi-user.target.wants/codexray-server.service": None,
        "usr/local/share/doc/codexray/README.md": 0o644,
    }
    got = staged_files(root)
    check(got == sorted(want), f"files: {got}")
    for f, m in want.items():
        path = os.path.join(root, f)
        if m is None:   # enabled: the wants link points at the installed unit
            check(os.readlink(path) == "/" + f.replace("multi-user.target.wants/", ""),
                  f"{f} -> {os.readlink(path)}")
            continue
        check(mode(path) == m, f"{f}: mode {oct(mode(path))}, wanted {oct(m)}")
        check(os.lstat(path).st_uid == os.getuid(), f"{f}: owner")
    for f in ("usr/local/bin/codexray-node-agent", "usr/local/bin/codexray-server"):
        with open(os.path.join(root, f), "rb") as a, \
                open(os.path.join(BUILD, os.path.basename(f)), "rb") as b:
            check(a.read() == b.read(), f"{f} differs from build/")
    for u in ("codexray-node-agent.service", "codexray-server.service"):
        check(read(os.path.join(root, "etc/systemd/system", u)) == read(os.path.join(UNITS, u)),
              f"{u} differs from deploy/systemd/")
    # deploy/config/'s files (the packages' conffiles) with the values set.
    conf = read(os.path.join(root, "etc/codexray/agent.conf"))
    want = re.sub(r"^endpoint = .*$", "endpoint = http://x:8080",
                  read(os.path.join(CONFIGS, "agent.conf")), flags=re.M)
    want = re.sub(r"^# api_key = .*$", "api_key = K", want, flags=re.M)
    check(conf == "# Written by deploy/install.sh from deploy/config/agent.conf.\n" + want,
          f"agent.conf: {conf}")
    sconf = read(os.path.join(root, "etc/codexray/server.conf"))
    want = re.sub(r"^listen = .*$", "listen = 0.0.0.0:8080",
                  read(os.path.join(CONFIGS, "server.conf")), flags=re.M)
    want = re.sub(r"^# api_key = .*$", "api_key = K", want, flags=re.M)
    check(sconf == "# Written by deploy/install.sh from deploy/config/server.conf.\n" + want,
          f"server.conf: {sconf}")

    # Again, agent only, another endpoint and no key: the config is rewritten.
    install("--root", root, "--endpoint", "https://cx.example:443", "--no-build")
    conf = read(os.path.join(root, "etc/codexray/agent.conf"))
    check("endpoint = https://cx.example:443" in conf and not re.search(r"^api_key", conf, re.M),
          f"agent.conf after a second install: {conf}")
    check(mode(os.path.join(root, "etc/codexray/agent.conf")) == 0o600, "agent.conf mode")

    # --keep-data keeps the spool and the store, nothing else.
    for d in ("var/lib/codexray-agent/spool", "var/lib/private/codexray-server"):
        os.makedirs(os.path.join(root, d))
        open(os.path.join(root, d, "x"), "w").close()
    install("--root", root, "--uninstall", "--keep-data")
    check(staged_files(root) == ["var/lib/codexray-agent/spool/x",
                                 "var/lib/private/codexray-server/x"],
          f"--uninstall --keep-data left: {staged_files(root)}")
    install("--root", root, "--server", "--no-build")
    install("--root", root, "--uninstall")
    check(staged_files(root) == [], f"--uninstall left: {staged_files(root)}")
    left = [d for d, _, _ in os.walk(root) if "codexray" in d]
    check(not left, f"--uninstall left directories: {left}")
    install("--root", root, "--uninstall")     # nothing installed: still fine


def test_installed_config_accepted(tmp):
    """The real binaries read what install.sh wrote: the agent its endpoint
    (logged at start), the server its key (auth=api-key)."""
    root = os.path.join(tmp, "root")
    os.mkdir(root)
    install("--root", root, "--endpoint", "http://127.0.0.1:9", "--api-key", "K", "--no-build",
            "--server")
    port = free_port()
    srv = subprocess.Popen([os.path.join(root, "usr/local/bin/codexray-server"), "--config",
                            os.path.join(root, "etc/codexray/server.conf"), "--data-dir",
                            os.path.join(tmp, "store"), "--listen", f"127.0.0.1:{port}"],
                           stderr=subprocess.PIPE, text=True)
    try:
        lines, ok = wait_for_line(srv, r"codexray-server .* started: .*auth=api-key", 10)
        check(ok, f"the server with install.sh's server.conf: {lines}")
    finally:
        srv.send_signal(signal.SIGTERM)
        srv.wait(10)
    if os.geteuid() != 0:
        print("  (agent start skipped: needs root)")
        return
    agent = subprocess.Popen([os.path.join(root, "usr/local/bin/codexray-node-agent"), "--config",
                              os.path.join(root, "etc/codexray/agent.conf"), "--data-dir",
                              os.path.join(tmp, "agent")], stderr=subprocess.PIPE, text=True)
    try:
        lines, ok = wait_for_line(
            agent, r"upload: ProfilesEndpoint=http://127\.0\.0\.1:9/api/v1/profiles", 30)
        check(ok, f"the agent with install.sh's agent.conf: {lines[-5:]}")
    finally:
        agent.send_signal(signal.SIGTERM)
        rc = agent.wait(60)
    check(rc == 0, f"the agent exited {rc} on SIGTERM")


# --- Debian packages ---------------------------------------------------------

DEB_BUILD = os.path.join(ROOT, "tools", "deb", "build.sh")
# package: (its unit, its config file, a library its Depends must name,
# the data directories its purge removes)
DEB_PKGS = {
    "codexray-node-agent": ("codexray-node-agent.service", "agent.conf", "libbpf1",
                            ["/var/lib/codexray-agent"]),
    "codexray-server": ("codexray-server.service", "server.conf", "libmicrohttpd12",
                        ["/var/lib/codexray-server", "/var/lib/private/codexray-server"]),
}


def test_deb_packages(tmp):
    """make deb's packages, made here from build/ (lintian is make deb's):
    the units and config files of deploy/ with only the paths rewritten,
    the maintainer scripts filled in, the binaries stripped with their
    debug information in -dbgsym; wrong binaries and versions refused."""
    ver = run([AGENT, "--version"]).stdout.split()[-1]
    out = os.path.join(tmp, "deb")
    p = run([DEB_BUILD, "--build-dir", BUILD, "--arch", "amd64", "--version", ver, "--out", out,
             "--no-lintian"], timeout=300)
    check(p.returncode == 0, f"build.sh: {p.stdout}{p.stderr}")
    for pkg, (unit, conf, lib, data) in DEB_PKGS.items():
        debs = glob.glob(os.path.join(out, f"{pkg}_*_amd64.deb"))
        check(len(debs) == 1, f"{pkg}: {os.listdir(out)}")
        x = os.path.join(tmp, pkg)
        run(["dpkg-deb", "-R", debs[0], x])
        fields = run(["dpkg-deb", "--field", debs[0]]).stdout
        check(re.search(r"^Version: 0~git\d+\.g" + ver + "$", fields, re.M)
              and re.search(r"^Architecture: amd64$", fields, re.M)
              and re.search(rf"^Depends: .*\b{lib} \(>= ", fields, re.M), f"{pkg}: {fields}")
        bin_ = pkg
        want = read(os.path.join(UNITS, unit)).replace("/usr/local/bin/", "/usr/bin/").replace(
            "file:///usr/local/share/doc/codexray/README.md",
            f"file:///usr/share/doc/{pkg}/README.md.gz")
        got = os.path.join(x, "lib/systemd/system", unit)
        check(read(got) == want and f"ExecStart=/usr/bin/{bin_}" in want,
              f"{pkg}: its unit is not deploy/systemd/{unit} with /usr/bin")
        got = os.path.join(x, "etc/codexray", conf)
        check(read(got) == read(os.path.join(CONFIGS, conf)) and mode(got) == 0o600,
              f"{pkg}: /etc/codexray/{conf} is not deploy/config/{conf}, mode 0600")
        check(read(os.path.join(x, "DEBIAN/conffiles")) == f"/etc/codexray/{conf}\n",
              f"{pkg}: conffiles")
        for script in ("postinst", "prerm", "postrm"):
            path = os.path.join(x, "DEBIAN", script)
            text = read(path)
            check(mode(path) == 0o755 and unit in text and "@" not in text,
                  f"{pkg}: DEBIAN/{script}: mode {oct(mode(path))}, placeholders left or no {unit}")
            sc = run(["shellcheck", "-s", "sh", path])
            check(sc.returncode == 0, f"{pkg}: DEBIAN/{script}: {sc.stdout}")
        check(f'DATA_DIRS="{" ".join(data)}"' in read(os.path.join(x, "DEBIAN/postrm")),
              f"{pkg}: postrm does not purge {data}")
        # Stripped; the debug information under the build id in -dbgsym.
        exe = os.path.join(x, "usr/bin", bin_)
        sections = run(["readelf", "-S", "-W", exe]).stdout
        check(".debug_info" not in sections and ".symtab" not in sections
              and ".gnu_debuglink" in sections, f"{pkg}: /usr/bin/{bin_} not stripped")
        bid = re.search(r"Build ID: ([0-9a-f]+)", run(["readelf", "-n", exe]).stdout).group(1)
        dbg = glob.glob(os.path.join(out, f"{pkg}-dbgsym_*_amd64.deb"))
        check(len(dbg) == 1, f"{pkg}-dbgsym: {os.listdir(out)}")
        files = run(["dpkg-deb", "-c", dbg[0]]).stdout
        check(f"./usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug" in files,
              f"{pkg}-dbgsym lacks build id {bid}: {files}")

    # Refused, and nothing written: another architecture's binaries, a
    # version that is not git describe's, the server missing (the agent's
    # packages made first are not kept either).
    bad = os.path.join(tmp, "bad")
    half = os.path.join(tmp, "half")
    os.mkdir(half)
    shutil.copy(AGENT, half)
    for args, why in ((["--build-dir", BUILD, "--arch", "arm64", "--version", ver],
                       "is not an arm64 binary"),
                      (["--build-dir", BUILD, "--arch", "amd64", "--version", "x y"],
                       "version 'x y'"),
                      (["--build-dir", BUILD, "--arch", "i386", "--version", ver],
                       "--arch must be"),
                      (["--build-dir", BUILD, "--arch", "amd64", "--version", ver + "-dirty"],
                       "was not built as version"),
                      (["--build-dir", half, "--arch", "amd64", "--version", ver],
                       "codexray-server is missing")):
        p = run([DEB_BUILD, "--out", bad, "--no-lintian", *args], timeout=300)
        check(p.returncode != 0 and why in p.stderr, f"build.sh {args}: {p.returncode} {p.stderr}")
        check(not glob.glob(os.path.join(bad, "*.deb")), f"build.sh {args} wrote packages")


# --- Docker ------------------------------------------------------------------

def dockerfile_stages():
    """[{name, base, instructions: [(INSTR, args)]}] with continuations joined."""
    text = re.sub(r"\\\n", " ", read(DOCKERFILE))
    stages = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, args = line.partition(" ")
        instr, args = instr.upper(), args.strip()
        if instr == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", args, re.I)
            check(m, f"FROM {args}")
            stages.append({"name": m.group(2), "base": m.group(1), "instructions": []})
        else:
            check(stages, f"{instr} before FROM")
            stages[-1]["instructions"].append((instr, args))
    return stages


def apt_packages(stage):
    pkgs = set()
    for instr, args in stage["instructions"]:
        if instr != "RUN":
            continue
        for cmd in re.split(r"&&|;", args):
            words = cmd.split()
            if words[:2] == ["apt-get", "install"]:
                pkgs |= {w for w in words[2:] if not w.startswith("-")}
    return pkgs


def deps_packages():
    text = read(os.path.join(ROOT, "tools", "deps.sh"))
    m = re.search(r"pkgs=\((.*?)\)", text, re.S)
    check(m, "no pkgs=( ... ) in tools/deps.sh")
    return set(re.sub(r"#.*", "", m.group(1)).split())


def needed_packages(binary):
    """The Debian package of every DT_NEEDED library of binary."""
    p = run(["readelf", "-d", binary])
    sonames = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", p.stdout)
    check(sonames, f"no NEEDED in {binary}")
    paths = dict(re.findall(r"^\s*(\S+) => (\S+)", run(["ldd", binary]).stdout, re.M))
    cands = {}
    for so in sonames:
        check(so in paths, f"ldd does not resolve {so} of {binary}")
        c = {paths[so], os.path.realpath(paths[so])}
        # usrmerge: dpkg knows each library under one of /lib and /usr/lib.
        cands[so] = c | {x[4:] if x.startswith("/usr/") else "/usr" + x for x in c}
    owner = {}
    out = run(["dpkg", "-S", *sorted(set().union(*cands.values()))]).stdout
    for line in out.splitlines():
        pkg, _, path = line.partition(": ")
        owner[path.strip()] = pkg.split(":")[0]
    pkgs = {}
    for so, c in cands.items():
        hits = {owner[x] for x in c if x in owner}
        check(len(hits) == 1, f"dpkg -S: {so} belongs to {sorted(hits) or 'no package'}")
        pkgs[so] = hits.pop()
    return pkgs


def test_dockerfile(tmp):
    stages = dockerfile_stages()
    by_name = {s["name"]: s for s in stages}
    check(stages[0]["base"] == "debian:12" and stages[0]["name"] == "build",
          f"the first stage: {stages[0]['base']} {stages[0]['name']}")
    check({"agent", "server"} <= set(by_name), f"stages {list(by_name)}")
    build = by_name["build"]
    # The build stage installs what the build needs (deps.sh less the tools
    # of the tests, the benchmarks and make run).
    test_only = {"clang-format", "libcmocka-dev", "golang-go", "g++", "python3", "linux-perf",
                 "bpftrace", "shellcheck", "python3-yaml", "systemd", "curl", "chromium",
                 "nodejs", "openjdk-17-jdk-headless", "zstd",
                 "qemu-system-x86", "busybox-static",  # make test-kernels
                 "debuginfod",  # the debuginfod tests' server
                 "clickhouse-server",  # the ClickHouse store's tests: local servers
                 "zookeeper"}  # their distributed DDL (ON CLUSTER) test
    missing = deps_packages() - test_only - apt_packages(build)
    check(not missing, f"the build stage lacks {sorted(missing)} (in tools/deps.sh)")
    runs = " ".join(a for i, a in build["instructions"] if i == "RUN")
    check(re.search(r"\bmake\b.*build/codexray-node-agent.*build/codexray-server", runs),
          "the build stage makes both binaries")
    ignore = read(os.path.join(ROOT, ".dockerignore")).split()
    check("build" in ignore or "build/" in ignore or "/build" in ignore,
          ".dockerignore must keep out build/ (the host's objects would pass for up to date)")
    for instr, args in build["instructions"]:
        if instr == "COPY" and not args.startswith("--from"):
            for src in args.split()[:-1]:
                check(os.path.exists(os.path.join(ROOT, src)), f"COPY {src}: not in the repository")
    for name, binary in (("agent", AGENT), ("server", SERVER)):
        st = by_name[name]
        check(st["base"] in ("debian:12", "debian:12-slim"), f"{name}: FROM {st['base']}")
        pkgs = apt_packages(st)
        need = needed_packages(binary)
        lacking = {so: p for so, p in need.items() if p not in pkgs}
        check(not lacking, f"the {name} stage does not install {lacking}")
        check(not any(p.endswith("-dev") for p in pkgs), f"{name}: -dev packages at runtime")
        copies = [a.split() for i, a in st["instructions"] if i == "COPY"]
        src = f"/src/build/{os.path.basename(binary)}"
        dst = [c[-1] for c in copies if c[0] == "--from=build" and c[1] == src]
        check(dst, f"{name}: no COPY --from=build {src}")
        ep = [a for i, a in st["instructions"] if i == "ENTRYPOINT"]
        check(ep and yaml.safe_load(ep[-1])[0] == dst[0], f"{name}: ENTRYPOINT {ep} vs {dst}")
    server = by_name["server"]
    user = [a for i, a in server["instructions"] if i == "USER"]
    check(user and not user[-1].startswith(("0", "root")), f"the server runs as {user}")
    cmd = yaml.safe_load([a for i, a in server["instructions"] if i == "CMD"][-1])
    check(cmd[cmd.index("--listen") + 1].startswith("0.0.0.0:"), f"server CMD {cmd}")
    if shutil.which("hadolint"):
        p = run(["hadolint", DOCKERFILE])
        check(p.returncode == 0, f"hadolint: {p.stdout}{p.stderr}")


def test_readme_docker_run(tmp):
    """The README's `docker run` of the agent holds what the agent needs."""
    text = read(os.path.join(ROOT, "README.md"))
    cmds = [re.sub(r"\\\n", " ", m) for m in re.findall(r"docker run (?:[^\n]*\\\n)*[^\n]*", text)]
    agent = [c for c in cmds if "codexray-node-agent" in c.split()[-1]]
    check(agent, "no `docker run ... codexray-node-agent` in README.md")
    words = shlex.split(agent[0])
    joined = " ".join(words)
    check(re.search(r"--pid[= ]host", joined), "docker run: --pid host")
    caps = {c.upper().removeprefix("CAP_") for c in re.findall(r"--cap-add[= ](\S+)", joined)}
    check(AGENT_CAPS <= caps, f"docker run: the capabilities {sorted(AGENT_CAPS - caps)}")
    # Names engines before 2021 (docker.io 20.10) refuse to start with.
    check(not caps & {"BPF", "PERFMON"}, f"docker run: {sorted(caps)} fails on docker.io 20.10")
    # Nothing the agent does not read: BTF is in the container's /sys, names
    # are read through /proc/1/root.
    mounts = re.findall(r"-v[= ](\S+)", joined)
    check(all(":/var/lib/codexray-agent" in m for m in mounts), f"docker run: mounts {mounts}")
    check(re.search(r"-v[= ]\S+:/var/lib/codexray-agent\b", joined), "docker run: the spool volume")
    check("CODEXRAY_ENDPOINT=" in joined, "docker run: -e CODEXRAY_ENDPOINT=")


# --- Kubernetes --------------------------------------------------------------

def test_kubernetes_manifest(tmp):
    docs = [d for d in yaml.safe_load_all(read(MANIFEST)) if d]
    objs = {}
    for d in docs:
        check({"apiVersion", "kind", "metadata"} <= set(d), f"an object without kind/metadata: {d}")
        objs.setdefault(d["kind"], []).append(d)
        if d["kind"] != "Namespace":
            check(d["metadata"].get("namespace") == NAMESPACE,
                  f"{d['kind']} {d['metadata'].get('name')} is not in {NAMESPACE}")
    check([n["metadata"]["name"] for n in objs.get("Namespace", [])] == [NAMESPACE], "Namespace")
    for kind in ("ServiceAccount", "DaemonSet", "Deployment", "Service", "PersistentVolumeClaim"):
        check(len(objs.get(kind, [])) == 1, f"one {kind}, not {len(objs.get(kind, []))}")
    agent_help = run([AGENT, "--help"]).stdout

    def pod_checks(what, wl):
        spec = wl["spec"]
        sel = spec["selector"]["matchLabels"]
        labels = spec["template"]["metadata"]["labels"]
        check(sel.items() <= labels.items(), f"{what}: selector {sel} vs labels {labels}")
        pod = spec["template"]["spec"]
        vols = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            lim = c.get("resources", {}).get("limits", {})
            check({"cpu", "memory"} <= set(lim), f"{what}: resources.limits {lim}")
            for m in c.get("volumeMounts", []):
                check(m["name"] in vols, f"{what}: mount of an undefined volume {m['name']}")
        return pod, vols, labels

    ds = objs["DaemonSet"][0]
    pod, vols, _ = pod_checks("DaemonSet", ds)
    check(pod.get("serviceAccountName") == objs["ServiceAccount"][0]["metadata"]["name"],
          "DaemonSet: serviceAccountName")
    check(pod.get("hostPID") is True, "DaemonSet: hostPID: true")
    check(any(t.get("operator") == "Exists" and "key" not in t and "effect" not in t
              for t in pod.get("tolerations", [])), "DaemonSet: a toleration of every taint")
    c = pod["containers"][0]
    sc = c.get("securityContext", {})
    caps = set(sc.get("capabilities", {}).get("add", []))
    check(sc.get("privileged") is True or AGENT_CAPS <= caps,
          f"DaemonSet: privileged or the capabilities {sorted(AGENT_CAPS - caps)}")
    mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
    check(list(mounts) == [agent_default("data-dir")], f"DaemonSet: mounts {list(mounts)}: only "
          "the spool (names are read through /proc/1/root, BTF is in the container's /sys)")
    for path, ro in ((agent_default("data-dir"), False),):
        check(path in mounts, f"DaemonSet: no mount at {path}")
        m = mounts[path]
        check(bool(m.get("readOnly")) == ro, f"DaemonSet: {path} readOnly should be {ro}")
        check(vols[m["name"]].get("hostPath", {}).get("path") == path,
              f"DaemonSet: {path} is not the host's {path}")
    env = {e["name"]: e for e in c.get("env", [])}
    for name in env:
        flag = "--" + name.removeprefix("CODEXRAY_").lower().replace("_", "-")
        check(name.startswith("CODEXRAY_") and flag + " " in agent_help,
              f"DaemonSet: {name} is no option of the agent")
    check(env.get("CODEXRAY_HOST", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
          == "spec.nodeName", "DaemonSet: CODEXRAY_HOST from spec.nodeName")

    svc = objs["Service"][0]
    dep = objs["Deployment"][0]
    dpod, dvols, dlabels = pod_checks("Deployment", dep)
    check(dep["spec"].get("replicas", 1) == 1 and dep["spec"].get("strategy", {}).get("type")
          == "Recreate", "Deployment: one replica, Recreate (one SQLite store on one volume)")
    sport = svc["spec"]["ports"][0]
    url = f"http://{svc['metadata']['name']}.{NAMESPACE}.svc:{sport['port']}"
    check(env.get("CODEXRAY_ENDPOINT", {}).get("value") == url,
          f"DaemonSet: CODEXRAY_ENDPOINT {env.get('CODEXRAY_ENDPOINT')} is not the Service {url}")
    check(svc["spec"]["selector"].items() <= dlabels.items(), "Service: selector vs Deployment")
    sc0 = dpod["containers"][0]
    ports = {p.get("name"): p["containerPort"] for p in sc0.get("ports", [])}
    check(sport["targetPort"] in ports or sport["targetPort"] in ports.values(),
          f"Service: targetPort {sport['targetPort']} vs {ports}")
    args = sc0.get("args", [])
    listen = args[args.index("--listen") + 1] if "--listen" in args else ""
    check(listen.startswith("0.0.0.0:") and int(listen.split(":")[1]) in ports.values(),
          f"Deployment: --listen {listen} vs ports {ports}")
    data = args[args.index("--data-dir") + 1] if "--data-dir" in args else ""
    dm = {m["mountPath"]: m["name"] for m in sc0.get("volumeMounts", [])}
    pvc = objs["PersistentVolumeClaim"][0]["metadata"]["name"]
    check(data in dm and dvols[dm[data]].get("persistentVolumeClaim", {}).get("claimName") == pvc,
          f"Deployment: --data-dir {data} is not on the PersistentVolumeClaim {pvc}")
    probe = sc0.get("readinessProbe", {}).get("httpGet", {}).get("path")
    check(probe == "/healthz", f"Deployment: readinessProbe {probe}")
    check(dpod.get("securityContext", {}).get("runAsNonRoot") is True, "the server runs as non-root")


def test_clickhouse_examples(tmp):
    """deploy/clickhouse/ and server-clickhouse.yaml agree with each other
    and with the server: the cluster the XML defines is the one the conf
    and the ConfigMap name; the conf's keys and the manifest's variables
    are the server's (the server, given the conf with unreachable URLs,
    fails at ClickHouse, not at its config)."""
    import xml.etree.ElementTree as ET
    d = os.path.join(ROOT, "deploy", "clickhouse")
    root = ET.parse(os.path.join(d, "cluster.xml")).getroot()
    check(root.tag == "yandex", f"cluster.xml: root <{root.tag}>, not <yandex> (ClickHouse 18.16)")
    clusters = list(root.find("remote_servers"))
    check(len(clusters) == 1, f"cluster.xml: {len(clusters)} clusters")
    name, shards = clusters[0].tag, clusters[0].findall("shard")
    hosts = [s.find("replica/host").text for s in shards]
    check(len(shards) == 2 and all(len(s.findall("replica")) == 1 for s in shards),
          "cluster.xml: two shards of one replica")
    conf = dict(tuple(x.strip() for x in line.split("=", 1)) for line in
                read(os.path.join(d, "codexray-server-clickhouse.conf")).splitlines()
                if line.strip() and not line.startswith("#"))
    check(conf.get("clickhouse-cluster") == name, f"the conf's cluster is not {name}")
    urls = [u.strip() for u in conf.get("clickhouse", "").split(",")]
    check([u.split("//")[1].split(":")[0] for u in urls] == hosts,
          f"the conf's URLs {urls} are not the shards' hosts {hosts}")
    text = read(os.path.join(d, "codexray-server-clickhouse.conf"))
    text = text.replace(conf["clickhouse"], "http://127.0.0.1:1, http://127.0.0.1:2")
    text = text.replace(conf["listen"], "127.0.0.1:0")
    cf = os.path.join(tmp, "server.conf")
    with open(cf, "w") as f:
        f.write(text)
    p = run([SERVER, "--config", cf, "--data-dir", os.path.join(tmp, "data")])
    check(p.returncode != 0 and "unknown key" not in p.stderr and "cannot read database" in p.stderr,
          f"the server on the example conf: {p.returncode} {p.stderr[-400:]}")

    docs = [x for x in yaml.safe_load_all(read(os.path.join(ROOT, "deploy", "kubernetes",
                                                             "server-clickhouse.yaml"))) if x]
    objs = {x["kind"]: x for x in docs}
    check(set(objs) == {"ConfigMap", "Deployment"}, f"server-clickhouse.yaml: {sorted(objs)}")
    for x in docs:
        check(x["metadata"].get("namespace") == NAMESPACE, f"{x['kind']} not in {NAMESPACE}")
    dep, cm = objs["Deployment"], objs["ConfigMap"]
    base = {x["kind"]: x for x in yaml.safe_load_all(read(MANIFEST)) if x}
    check(dep["metadata"]["name"] == base["Deployment"]["metadata"]["name"],
          "its Deployment does not take the place of node-agent.yaml's")
    check(dep["spec"]["replicas"] >= 2, "stateless servers: more than one replica")
    pod = dep["spec"]["template"]["spec"]
    check(not any("persistentVolumeClaim" in v for v in pod.get("volumes", [])),
          "a volume claim: the ClickHouse server keeps nothing")
    c = pod["containers"][0]
    check([e["configMapRef"]["name"] for e in c.get("envFrom", [])] == [cm["metadata"]["name"]],
          "the container's variables are not the ConfigMap's")
    help_ = run([SERVER, "--help"]).stdout
    for var in list(cm["data"]) + [e["name"] for e in c.get("env", [])]:
        flag = "--" + var.removeprefix("CODEXRAY_").lower().replace("_", "-")
        check(var.startswith("CODEXRAY_") and flag + " " in help_, f"{var} is no server option")
    check(cm["data"]["CODEXRAY_CLICKHOUSE_CLUSTER"] == name, f"the ConfigMap's cluster is not {name}")
    check(base["Service"]["spec"]["selector"].items()
          <= dep["spec"]["template"]["metadata"]["labels"].items(), "the Service does not select it")


# --- shell scripts -----------------------------------------------------------

def test_shellcheck(tmp):
    scripts = sorted(set(glob.glob(os.path.join(ROOT, "deploy", "*.sh"))
                         + glob.glob(os.path.join(ROOT, "tools", "**", "*.sh"), recursive=True)
                         + glob.glob(os.path.join(ROOT, "tests", "**", "*.sh"), recursive=True)
                         + [os.path.join(ROOT, ".ci", "run")]))
    check(os.path.join(ROOT, "deploy", "install.sh") in scripts, "deploy/install.sh")
    p = run(["shellcheck", *scripts])
    check(p.returncode == 0, f"shellcheck:\n{p.stdout}{p.stderr}")
    for s in scripts:
        check(os.access(s, os.X_OK), f"{os.path.relpath(s, ROOT)} is not executable")


def test_parallel_build_waits_for_deps(tmp):
    """make -j on a fresh machine: nothing compiles before `make deps` is done
    (issue 30: protoc-c was run beside its own install). deps is a stand-in
    that takes 3 s; the compiler a stand-in that writes whether deps had
    finished, then fails so the build stops there. A bare `make` (no goal),
    as the README says: it builds `all` (it built only build/version.stamp
    when that rule came first in the Makefile)."""
    marker, log = os.path.join(tmp, "deps-done"), os.path.join(tmp, "cc.log")
    slow, cc = os.path.join(tmp, "slow_deps.sh"), os.path.join(tmp, "cc.sh")
    with open(slow, "w") as f:
        f.write(f"#!/bin/sh\nsleep 3\ntouch {marker}\n")
    with open(cc, "w") as f:
        f.write(f"#!/bin/sh\n[ -e {marker} ] && echo after >>{log} || echo before >>{log}\nexit 1\n")
    os.chmod(slow, 0o755)
    os.chmod(cc, 0o755)
    p = subprocess.run(["make", "-C", ROOT, "-j4", "--no-print-directory", f"B={tmp}/b",
                        f"DEPS_SH={slow}", f"CC={cc}", "VMLINUX_BTF=/sys/kernel/btf/vmlinux"],
                       capture_output=True, text=True, timeout=300)
    check(p.returncode != 0, "the stand-in compiler fails: make should have stopped")
    calls = read(log).split() if os.path.exists(log) else []
    check(calls, f"no compile was started: {p.stderr[-500:]}")
    check(set(calls) == {"after"}, f"{calls.count('before')} of {len(calls)} compiles started before deps ended")


TESTS = [test_parallel_build_waits_for_deps, test_units_verify, test_agent_unit_contents, test_server_unit_contents,
         test_install_usage, test_install_root, test_installed_config_accepted, test_deb_packages,
         test_dockerfile, test_readme_docker_run, test_kubernetes_manifest, test_clickhouse_examples,
         test_shellcheck]


def main():
    for b in (AGENT, SERVER):
        if not os.access(b, os.X_OK):
            print(f"deploy: {b} is missing: run make first", file=sys.stderr)
            return 1
    return runner.run(TESTS, "deploy", (Failure,), "cx-deploy-")


if __name__ == "__main__":
    sys.exit(main())
