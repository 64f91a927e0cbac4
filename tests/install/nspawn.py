"""systemd for real: a Debian 12 machine booted with systemd-nspawn (systemd
as its PID 1), CodeXray installed in it with deploy/install.sh --server,
both units started by its systemd; a C service and a Java service (its JIT
frames named under the agent unit's hardening) profiled and shipped, and
`systemctl stop` shipping the last window."""
import os
import shutil
import subprocess
import time

from common import (CACHE, HOSTNAME, ROOT, Failure, Teardown, apps, check, collapsed,
                    free_port, labels, run, stop_proc, wait_for)

JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"  # the host's (make deps), bound read-only
# What the machine needs beyond minbase: systemd to boot, the libraries the
# two binaries load (as the Docker images' runtime stages install them).
PACKAGES = ("systemd,systemd-sysv,dbus,libbpf1,libelf1,libdw1,libdebuginfod1,libprotobuf-c1,libcurl4,"
            "libzstd1,libdeflate0,zlib1g,libmicrohttpd12,libsqlite3-0,ca-certificates")


def rootfs_tar():
    tar = os.path.join(CACHE, "bookworm-systemd.tar")
    stamp = tar + ".packages"
    if not (os.path.exists(tar) and os.path.exists(stamp) and open(stamp).read() == PACKAGES):
        os.makedirs(CACHE, exist_ok=True)
        # mmdebstrap takes the format from the name's end: keep it .tar.
        tmp = tar[:-4] + ".partial.tar"
        run(["mmdebstrap", "--variant=minbase", "--quiet", f"--include={PACKAGES}", "bookworm",
             tmp], timeout=600)
        os.rename(tmp, tar)
        with open(stamp, "w") as f:
            f.write(PACKAGES)
    return tar


class Machine:
    def __init__(self, tmp, td):
        self.dir = os.path.join(tmp, "machine")
        os.mkdir(self.dir)
        td.add("machine's files", lambda: shutil.rmtree(self.dir, ignore_errors=True))
        run(["tar", "-C", self.dir, "-xf", rootfs_tar()], timeout=300)
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
               f"--bind-ro={JAVA_HOME}", "--bind-ro=/etc/java-17-openjdk"]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL)

        def stop():
            stop_proc(self.proc, timeout=90)  # SIGTERM: the machine shuts down cleanly
            self.log.close()
        td.add("machine", stop)
        self.leader = wait_for("the machine's PID 1", self._leader, 60, 0.5)
        state = wait_for("the machine's systemd up", lambda: self.sh(
            "systemctl is-system-running --wait", check_rc=False).stdout.strip(), 120, 1)
        check(state in ("running", "degraded"), f"the machine's systemd: {state}")

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


def test_systemd_machine(tmp):
    td = Teardown()
    t0 = time.time()
    try:
        m = Machine(tmp, td)
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
        m.sh("sed -i 's/^interval = 4$/interval = 3600/' /etc/codexray/agent.conf && "
             "systemctl restart codexray-node-agent")
        since = time.time()
        wait_for("the agent restarted", lambda: m.journal("codexray-node-agent").count(
            "interval_s=3600") >= 1, 60, 1)
        time.sleep(3)
        m.sh("systemctl stop codexray-node-agent", timeout=90)
        log = m.journal("codexray-node-agent")
        check("stopping: writing the last window" in log, f"the agent's stop: {log[-1500:]}")
        last = wait_for("the last window at the server", lambda: collapsed(
            port, "cx-work", frm=f"{since:.0f}").strip(), 30)
        check("hot_a" in last, f"the last window: {last[:500]}")
        print(f"    systemctl stop shipped the last window; {time.time() - t0:.0f}s", flush=True)
    finally:
        errors = td.run()
    check(not errors, f"systemd: teardown: {errors}")



