"""systemd for real: Debian 12 machines booted with systemd-nspawn (systemd
as their PID 1).

  - test_systemd_packages: the Debian packages of `make deb` installed with
    `apt install ./codexray-*.deb` (their Depends pulled by apt), both units
    enabled and started by the packages' postinst, the agent's profiles at
    the server; `apt remove` stops the agent and keeps its data, `apt purge`
    removes the units and the data.
  - test_systemd_machine: deploy/install.sh --server, both units started by
    the machine's systemd; a C service and a Java service (its JIT frames
    named under the agent unit's hardening) profiled and shipped, and
    `systemctl stop` shipping the last window."""
import glob
import os
import shlex
import shutil
import subprocess
import time

from common import (BUILD, CACHE, HOSTNAME, ROOT, Failure, Teardown, apps, check, collapsed,
                    free_port, labels, run, stop_proc, wait_for)

JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"  # the host's (make deps), bound read-only
# What a machine needs beyond minbase to boot with systemd.
BOOT = "systemd,systemd-sysv,dbus,ca-certificates"
# install.sh's machine: the libraries the two binaries load, installed (as
# the Docker images' runtime stages install them).
LIBRARIES = ("libbpf1,libelf1,libdw1,libdebuginfod1,libprotobuf-c1,libcurl4,libzstd1,libdeflate0,"
             "zlib1g,libmicrohttpd12,libsqlite3-0")


def rootfs_tar(name, include, download=()):
    """A Debian 12 root made by mmdebstrap with `include` installed, kept in
    CACHE as NAME.tar and made again when what it holds changes. With
    `download`, those packages (and what they depend on) are fetched into
    apt's cache but not installed, and apt's lists are kept: apt can then
    install them in the machine without the network."""
    tar = os.path.join(CACHE, name + ".tar")
    stamp = tar + ".packages"
    cmd = ["mmdebstrap", "--variant=minbase", "--quiet", f"--include={include}"]
    if download:
        cmd += ["--skip=cleanup/apt",
                # With their Recommends, as a user's `apt install` takes them.
                "--customize-hook=chroot \"$1\" apt-get install --download-only -y -qq "
                "-o APT::Install-Recommends=true " + " ".join(download)]
    want = shlex.join(cmd)
    if not (os.path.exists(tar) and os.path.exists(stamp) and open(stamp).read() == want):
        os.makedirs(CACHE, exist_ok=True)
        # mmdebstrap takes the format from the name's end: keep it .tar.
        tmp = tar[:-4] + ".partial.tar"
        run(cmd + ["bookworm", tmp], timeout=900)
        os.rename(tmp, tar)
        with open(stamp, "w") as f:
            f.write(want)
    return tar


class Machine:
    def __init__(self, tmp, td, tar, binds=()):
        self.dir = os.path.join(tmp, "machine")
        os.mkdir(self.dir)
        td.add("machine's files", lambda: shutil.rmtree(self.dir, ignore_errors=True))
        run(["tar", "-C", self.dir, "-xf", tar], timeout=300)
        self.log = open(os.path.join(tmp, "nspawn.log"), "w")
        cmd = ["systemd-nspawn", "--boot", "--directory", self.dir, "--machine", "cx-install",
               "--console=passive",
               # Sandbox: no machined to register with; stay in this scope.
               "--register=no", "--keep-unit",
               # Sandbox: nspawn's own filter and capability set leave out
               # what the agent needs (its unit asks for them); granted here.
               "--system-call-filter=bpf perf_event_open",
               "--capability=CAP_BPF,CAP_PERFMON,CAP_SYSLOG",
               # The project's checkout, as a user's clone, for install.sh.
               f"--bind-ro={ROOT}:/src",
               # Sandbox: the machine has a PID namespace of its own while
               # BPF reports the host's pids; the host's /proc, bound over
               # the agent's /proc by a drop-in below, makes them match.
               "--bind-ro=/proc:/run/hostproc",
               # The host's JDK for the Java service, and its config links.
               f"--bind-ro={JAVA_HOME}", "--bind-ro=/etc/java-17-openjdk",
               *[f"--bind-ro={b}" for b in binds]]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)

        def stop():
            stop_proc(self.proc, timeout=90)  # SIGTERM: the machine shuts down cleanly
            self.log.close()
        td.add("machine", stop)
        self.leader = wait_for("the machine's PID 1", self._leader, 60, 0.5)
        state = wait_for("the machine's systemd up", self._booted, 120, 1)
        check(state in ("running", "degraded"), f"the machine's systemd: {state}")

    def _booted(self):
        """systemd's state once it is up. `--wait` waits only for a manager
        it can reach: before the machine's PID 1 is systemd (nspawn's
        stub first; slow on a loaded host) the answer is "offline"."""
        state = self.sh("systemctl is-system-running --wait", check_rc=False).stdout.strip()
        return state if state not in ("", "offline") else None

    def _leader(self):
        """The machine's PID 1 as the host numbers it: the child of
        systemd-nspawn that is PID 1 of a PID namespace of its own. Not
        just any child: while the machine starts, nspawn's outer child (in
        the host's PID namespace, gone a moment later) is one too, and every
        nsenter into it would fail."""
        check(self.proc.poll() is None, f"systemd-nspawn exited {self.proc.returncode}: "
                                        f"{open(self.log.name).read()[-2000:]}")
        for kid in run(["pgrep", "-P", str(self.proc.pid)], check_rc=False).stdout.split():
            try:
                with open(f"/proc/{kid}/status") as f:
                    nspid = next((ln.split()[1:] for ln in f if ln.startswith("NSpid:")), [])
            except OSError:
                continue  # gone since
            if len(nspid) > 1 and nspid[-1] == "1":
                return int(kid)
        return None

    def sh(self, script, timeout=120, check_rc=True):
        """A shell command in the machine (its mounts, PID namespace and
        systemd; the host's network, as nspawn gives by default)."""
        return run(["nsenter", "-t", str(self.leader), "-m", "-u", "-i", "-p", "--",
                    "/bin/bash", "-c", script], timeout=timeout, check_rc=check_rc)

    def journal(self, unit):
        return self.sh(f"journalctl -q -o cat -u {unit}", check_rc=False).stdout


def stop_lines(m):
    """How many times the agent's journal says it wrote its last window."""
    return m.journal("codexray-node-agent").count("stopping: writing the last window")


def start_lines(m):
    """How many times the agent's journal says it started."""
    return m.journal("codexray-node-agent").count(" started: sample_rate_hz=")


def test_systemd_machine(tmp):
    td = Teardown()
    t0 = time.time()
    try:
        m = Machine(tmp, td, rootfs_tar("bookworm-systemd", BOOT + "," + LIBRARIES))
        print(f"    machine booted in {time.time() - t0:.0f}s", flush=True)
        port = free_port()
        # The README's install, the server on this machine (and its agent).
        out = m.sh(f"/src/deploy/install.sh --server --listen 127.0.0.1:{port} --no-build",
                   timeout=180)
        check("installed and started" in out.stdout, f"install.sh: {out.stdout}{out.stderr}")
        wait_for("the server's unit", lambda: m.sh(
            "systemctl is-active codexray-server", check_rc=False).stdout.strip() == "active", 30)
        # The agent in the machine's own PID namespace refuses to start.
        wait_for("the agent's refusal in its journal",
                 lambda: "--pid host" in m.journal("codexray-node-agent"), 30, 1)
        # Sandbox: the host's /proc over the agent's (see the nspawn flags);
        # and a short window.
        m.sh("mkdir -p /etc/systemd/system/codexray-node-agent.service.d && "
             "printf '[Service]\\nBindReadOnlyPaths=/run/hostproc:/proc\\n' > "
             "/etc/systemd/system/codexray-node-agent.service.d/host-proc.conf && "
             "echo 'interval = 4' >> /etc/codexray/agent.conf && systemctl daemon-reload")
        # The services to profile: C, and Java with frame pointers.
        cls = os.path.join(m.dir, "opt", "cx")
        run([os.path.join(JAVA_HOME, "bin", "javac"), "-d", cls,
             os.path.join(ROOT, "tests", "workloads", "JitSplit.java")], timeout=120)
        m.sh("systemd-run --unit cx-work /src/build/workloads/cpu_split 600 && "
             f"systemd-run --unit cx-java {JAVA_HOME}/bin/java -XX:+PreserveFramePointer "
             "-cp /opt/cx JitSplit 600")
        m.sh("systemctl restart codexray-node-agent")
        try:
            wait_for("cx-work and cx-java at the server",
                     lambda: {"cx-work", "cx-java"} <= set(apps(port)), 120)
        except Failure as e:
            raise Failure(f"{e}; the agent's journal: {m.journal('codexray-node-agent')[-2500:]}")
        lab = labels(port, "cx-work")
        check(lab.get("systemd_unit") == ["cx-work.service"] and lab.get("host") == [HOSTNAME],
              f"cx-work's labels: {lab}")
        check("hot_a" in collapsed(port, "cx-work"), "cx-work's functions unnamed")
        try:
            java = wait_for("JIT-compiled Java methods named",
                            lambda: "JitSplit.hotA" in collapsed(port, "cx-java") and
                            collapsed(port, "cx-java"), 90)
        except Failure as e:
            log = [ln for ln in m.journal("codexray-node-agent").splitlines() if "perfmap" in ln]
            raise Failure(f"{e}; cx-java: {collapsed(port, 'cx-java')[:600]}; the agent: {log[-6:]}")
        check("JitSplit.hotB" in java, f"cx-java: {java[:800]}")
        log = m.journal("codexray-node-agent")
        check("did not write its perf map" not in log, f"the JVM attach under the unit: "
                                                     f"{log[-2000:]}")
        print(f"    services profiled, Java named, in {time.time() - t0:.0f}s", flush=True)

        # `systemctl stop` ships the last window: with a window far longer
        # than the test, only the stop can bring cx-work's newer samples.
        # Taken before the restart: the new agent's window starts when it
        # starts, which can be before `systemctl restart` returns here (1
        # run in 5 failed so), and the query takes profiles starting at
        # `since` or later.
        since = time.time()
        m.sh("sed -i 's/^interval = 4$/interval = 3600/' /etc/codexray/agent.conf && "
             "systemctl restart codexray-node-agent")
        wait_for("the agent restarted", lambda: m.journal("codexray-node-agent").count(
            "interval_s=3600") >= 1, 60, 1)
        time.sleep(3)
        m.sh("systemctl stop codexray-node-agent", timeout=90)
        log = m.journal("codexray-node-agent")
        check("stopping: writing the last window" in log, f"the agent's stop: {log[-1500:]}")
        try:
            last = wait_for("the last window at the server", lambda: collapsed(
                port, "cx-work", frm=f"{since:.0f}").strip(), 30)
        except Failure as e:
            raise Failure(f"{e}; the agent's journal: {m.journal('codexray-node-agent')[-3000:]}")
        check("hot_a" in last, f"the last window: {last[:500]}")
        print(f"    systemctl stop shipped the last window; {time.time() - t0:.0f}s", flush=True)
    finally:
        errors = td.run()
    check(not errors, f"systemd: teardown: {errors}")





def build_debs(tmp):
    """The amd64 packages of `make deb`, made here from build/'s binaries
    (what is tested is this build, not an older build/deb), without
    lintian (make deb runs it). Returns their directory and the packages
    their Depends name."""
    ver = run([os.path.join(BUILD, "codexray-node-agent"), "--version"]).stdout.split()[-1]
    out = os.path.join(tmp, "deb")
    run([os.path.join(ROOT, "tools", "deb", "build.sh"), "--build-dir", BUILD, "--arch", "amd64",
         "--version", ver, "--out", out, "--no-lintian"], timeout=300)
    depends = set()
    for pkg in ("codexray-node-agent", "codexray-server"):
        debs = glob.glob(os.path.join(out, f"{pkg}_*_amd64.deb"))
        check(len(debs) == 1, f"build.sh made {debs} for {pkg}")
        field = run(["dpkg-deb", "--field", debs[0], "Depends"]).stdout
        for alt in field.replace("|", ",").split(","):
            depends.add(alt.split()[0].split(":")[0])
    return out, sorted(depends)


# Where the packages keep what purge must remove, and what they install.
DATA = ("/var/lib/codexray-agent", "/var/lib/codexray-server", "/var/lib/private/codexray-server")
OWNED = ("/usr/bin/codexray-node-agent", "/usr/bin/codexray-server", "/etc/codexray",
         "/lib/systemd/system/codexray-node-agent.service",
         "/lib/systemd/system/codexray-server.service",
         "/etc/systemd/system/multi-user.target.wants/codexray-node-agent.service",
         "/etc/systemd/system/multi-user.target.wants/codexray-server.service",
         # deb-systemd-helper's record of what it enabled, and its masks
         "/var/lib/systemd/deb-systemd-helper-enabled/codexray-node-agent.service.dsh-also",
         "/var/lib/systemd/deb-systemd-helper-enabled/codexray-server.service.dsh-also",
         "/etc/systemd/system/codexray-node-agent.service",
         "/etc/systemd/system/codexray-server.service")


def test_systemd_packages(tmp):
    td = Teardown()
    t0 = time.time()
    try:
        debs, depends = build_debs(tmp)
        # Their Depends in apt's cache, not installed: apt must pull them.
        tar = rootfs_tar("bookworm-systemd-apt", BOOT, download=depends)
        m = Machine(tmp, td, tar, binds=[f"{debs}:/debs"])
        print(f"    packages built, machine booted in {time.time() - t0:.0f}s", flush=True)
        check(m.sh("dpkg -s libbpf1", check_rc=False).returncode != 0,
              "libbpf1 is installed before the packages: apt would not be tested")
        port = free_port()
        # Sandbox: the host's /proc over the agent's (see the nspawn flags);
        # this run's port and a short window as variables, which the config
        # files' keys yield to. In place before the install: the postinst's
        # start is the only one.
        m.sh("for u in codexray-node-agent codexray-server; do "
             "mkdir -p /etc/systemd/system/$u.service.d; done && "
             "printf '[Service]\\nBindReadOnlyPaths=/run/hostproc:/proc\\n"
             f"Environment=CODEXRAY_ENDPOINT=http://127.0.0.1:{port} CODEXRAY_INTERVAL=4\\n' > "
             "/etc/systemd/system/codexray-node-agent.service.d/test.conf && "
             f"printf '[Service]\\nEnvironment=CODEXRAY_LISTEN=127.0.0.1:{port}\\n' > "
             "/etc/systemd/system/codexray-server.service.d/test.conf")
        # The README's install; the Depends come from apt's cache (not
        # --no-download: it leaves apt unable to take local files).
        out = m.sh("cd /debs && DEBIAN_FRONTEND=noninteractive apt install -y "
                   "./codexray-node-agent_*_amd64.deb ./codexray-server_*_amd64.deb", timeout=300)
        auto = m.sh("apt-mark showauto").stdout.split()
        check("libbpf1" in auto and "libmicrohttpd12" in auto,
              f"apt did not pull the libraries: {out.stdout[-2000:]}")
        for u in ("codexray-node-agent", "codexray-server"):
            check(m.sh(f"systemctl is-enabled {u}", check_rc=False).stdout.strip() == "enabled",
                  f"{u} not enabled by its postinst")
            wait_for(f"{u} started by its postinst", lambda: m.sh(
                f"systemctl is-active {u}", check_rc=False).stdout.strip() == "active", 30, 1)
        m.sh("systemd-run --unit cx-work /src/build/workloads/cpu_split 600")
        try:
            wait_for("cx-work at the server", lambda: "cx-work" in apps(port), 90)
        except Failure as e:
            raise Failure(f"{e}; the agent's journal: {m.journal('codexray-node-agent')[-2500:]}")
        check(labels(port, "cx-work").get("systemd_unit") == ["cx-work.service"]
              and "hot_a" in collapsed(port, "cx-work"), f"cx-work: {labels(port, 'cx-work')}")
        show = m.sh("systemctl show -p ExecStart -p NRestarts codexray-node-agent").stdout
        check("path=/usr/bin/codexray-node-agent" in show and "NRestarts=0" in show,
              f"the agent's unit: {show}")
        print(f"    installed, both started, profiles shipped in {time.time() - t0:.0f}s", flush=True)

        # Installed again (as an upgrade is): the admin's config stays, the
        # postinst restarts the agent.
        m.sh("echo '# the admin was here' >> /etc/codexray/agent.conf")
        pid = m.sh("systemctl show -p MainPID --value codexray-node-agent").stdout.strip()
        stops0, starts0 = stop_lines(m), start_lines(m)
        m.sh("cd /debs && DEBIAN_FRONTEND=noninteractive apt install -y --reinstall "
             "./codexray-node-agent_*_amd64.deb", timeout=180)
        again = m.sh("systemctl show -p MainPID --value codexray-node-agent").stdout.strip()
        check(again not in ("0", pid), f"the agent's MainPID {pid} -> {again} on reinstall")
        check("# the admin was here" in m.sh("cat /etc/codexray/agent.conf").stdout,
              "the reinstall replaced the admin's agent.conf")
        # The restart's stop line, once journald has it (it can come after
        # systemctl returns): counted before the remove, not after it. And
        # the new agent started: a SIGTERM while it still loads its BPF
        # programs (before its handlers are in place) ends it with no line.
        stops = wait_for("the restart's last window in the journal",
                         lambda: [n for n in [stop_lines(m)] if n > stops0], 30, 1)[0]
        wait_for("the agent started again after the reinstall",
                 lambda: start_lines(m) > starts0, 60, 1)

        # remove: the agent stops (shipping its last window), its conffile
        # and spool stay.
        m.sh("DEBIAN_FRONTEND=noninteractive apt-get remove -y codexray-node-agent", timeout=180)
        state = m.sh("systemctl is-active codexray-node-agent", check_rc=False).stdout.strip()
        check(state != "active", f"the agent after apt remove: {state}")
        # Waited for: journald may not have the line when apt returns (CI,
        # 2026-12-07: read at once, it was not there).
        try:
            wait_for("the prerm's stop in the journal", lambda: stop_lines(m) > stops, 30, 1)
        except Failure as e:
            raise Failure(f"the agent was not stopped by the prerm: {e}; its journal: "
                          f"{m.journal('codexray-node-agent')[-1500:]}")
        left = m.sh("ls -d /etc/codexray/agent.conf /var/lib/codexray-agent "
                    "/var/lib/private/codexray-server /usr/bin/codexray-node-agent",
                    check_rc=False).stdout.split()
        check(left == ["/etc/codexray/agent.conf", "/var/lib/codexray-agent",
                       "/var/lib/private/codexray-server"], f"after apt remove: {left}")

        # purge: both units gone, and every file and directory they made.
        m.sh("DEBIAN_FRONTEND=noninteractive apt-get purge -y codexray-node-agent codexray-server",
             timeout=180)
        for u in ("codexray-node-agent", "codexray-server"):
            state = m.sh(f"systemctl is-active {u}", check_rc=False).stdout.strip()
            check(state != "active", f"{u} after apt purge: {state}")
        left = m.sh(f"ls -d {' '.join(DATA + OWNED)}", check_rc=False).stdout.split()
        check(not left, f"apt purge left: {left}")
        status = m.sh("dpkg-query -W -f='${db:Status-Abbrev}\\n' codexray-node-agent "
                      "codexray-server", check_rc=False).stdout.split()
        check(all(s in ("un", "pn") for s in status), f"dpkg after the purge: {status}")
        print(f"    apt remove kept the data, apt purge removed it; {time.time() - t0:.0f}s",
              flush=True)
    finally:
        errors = td.run()
    check(not errors, f"systemd packages: teardown: {errors}")
