"""Docker and Podman for real: the engine (dockerd from Debian's docker.io,
started here with its data root and socket away from their defaults; Podman
runs without a daemon), the base images made here, both
images built and run with the README's commands, a CPU-bound process on the
host and one in a container named by the test, and what the server then
shows. The Kubernetes DaemonSet's container runs on the same engine."""
import os
import shutil
import subprocess
import time

import kube
from common import (HOSTNAME, ROOT, Failure, Teardown, apps, check, collapsed,
                    free_port, host_workload, labels, minbase_tar, readme_commands, run,
                    stop_proc, wait_for)

# The agent's window in these runs: profiles within seconds, not a minute.
INTERVAL = "5"
KEY = "install-test-key"


class Engine:
    """docker or podman, with what this sandbox needs of each."""

    def __init__(self, name):
        self.name = name
        # /usr/bin/docker, Debian's client of the engine started here (an
        # other docker client on PATH may be newer than the engine's API).
        self.cli = ["/usr/bin/docker"] if name == "docker" else ["podman"]
        self.run_extra, self.build_extra = [], []
        if name == "podman":
            # Sandbox: crun is not installed, and the default limits of open
            # files and processes are above what this sandbox lets a
            # container have.
            self.cli += ["--runtime", "runc"]
            limits = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=32768:32768"]
            self.run_extra += limits
            self.build_extra += limits
            # No registry is reachable: never look for a newer base image.
            self.build_extra += ["--pull=never"]

    def __call__(self, *args, **kw):
        return run([*self.cli, *args], **kw)

    def has_image(self, ref):
        return self("image", "inspect", ref, check_rc=False).returncode == 0


def start_dockerd(tmp, td, eng):
    """dockerd of Debian's docker.io keeping its data where many hosts move
    it (a data disk: --data-root) and answering on a socket of its own
    (--host), neither at its default path: the agent must learn both from
    dockerd itself to name containers. No bridge and no iptables rules:
    this sandbox has only loopback, so every container runs with --network
    host. Returns the data root."""
    default_sock = "/var/run/docker.sock"
    if os.path.exists(default_sock) and run(["/usr/bin/docker", "version"], check_rc=False,
                                             timeout=20).returncode == 0:
        raise Failure(f"a Docker engine already answers on {default_sock}: make test-install "
                      f"starts its own; stop that one first")
    data_root = os.path.join(tmp, "docker-data")
    sock = os.path.join(tmp, "docker-api.sock")
    exec_root = os.path.join(tmp, "docker-exec")
    eng.cli += ["--host", f"unix://{sock}"]
    log = open(os.path.join(tmp, "dockerd.log"), "w")
    p = subprocess.Popen(["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false",
                          "--data-root", data_root, "--host", f"unix://{sock}",
                          # Its state and pid file out of /run too: nothing
                          # of it where a system's dockerd would be.
                          "--exec-root", exec_root,
                          "--pidfile", os.path.join(tmp, "docker.pid")],
                         stdout=log, stderr=log)

    def stop():
        stop_proc(p, timeout=60)
        log.close()
        # dockerd leaves its host network namespace bound at
        # <exec-root>/netns/default: unmount what it left under tmp, or
        # tmp cannot be removed.
        with open("/proc/self/mountinfo") as f:
            points = [mp for mp in (ln.split()[4] for ln in f)
                      if mp.startswith((exec_root + "/", data_root + "/"))]
        for mp in sorted(points, reverse=True):
            run(["umount", "-l", mp], check_rc=False)
    td.add("dockerd", stop)
    wait_for("dockerd answering", lambda: p.poll() is None and eng(
        "version", check_rc=False, timeout=20).returncode == 0, 60, 1)
    return data_root


def base_images(eng):
    """debian:12 and debian:12-slim made here from mmdebstrap's minbase: the
    Dockerfile's bases. Without them a build would go to a registry, which
    is not reachable: stop before."""
    tar = minbase_tar()
    for ref in ("debian:12", "debian:12-slim"):
        if not eng.has_image(ref):
            eng("import", tar, ref, timeout=300)
    for ref in ("debian:12", "debian:12-slim"):
        check(eng.has_image(ref), f"{eng.name}: no local {ref} image: a build would try a "
                                  f"registry, and none is reachable here")


def readme(eng, port, spool):
    """The README's Docker commands for this engine, with what this sandbox
    needs changed, each change said."""
    builds = readme_commands("### Docker", "docker build")
    runs = readme_commands("### Docker", "docker run")
    check(len(builds) == 2 and len(runs) == 2, f"README's Docker block: {builds} {runs}")
    out = {"build": [], "server": None, "agent": None}
    for b in builds:
        # Sandbox: no bridge network; builds use the host's (loopback and
        # the Debian mirror).
        out["build"].append(["build", "--network", "host", *eng.build_extra, *b[2:]])
    for r in runs:
        args = r[2:]
        args = [a.replace("KEY", KEY) for a in args]
        if args[-1] == "codexray-server":
            # Sandbox: no bridge, so no -p; the host's network, on a free
            # port (8080 may be taken on this machine).
            i = args.index("-p")
            del args[i:i + 2]
            args = ["--network", "host", *args, "--listen", f"127.0.0.1:{port}",
                    "--data-dir", "/var/lib/codexray-server"]
            out["server"] = args
        else:
            check(args[-1] == "codexray-node-agent", f"README's docker run: {r}")
            args = [a.replace("http://SERVER:8080", f"http://127.0.0.1:{port}") for a in args]
            # Test: a private spool, not the host's /var/lib/codexray-agent.
            args = [a.replace("/var/lib/codexray-agent:", f"{spool}:") for a in args]
            # Sandbox: no bridge network; and a short window.
            args = ["--network", "host", "-e", f"CODEXRAY_INTERVAL={INTERVAL}", *args]
            out["agent"] = args
    for k in ("server", "agent"):
        out[k] = ["run", *eng.run_extra, *out[k]]
    return out


def check_profiles(port, cid, where):
    """The container's process and the host's, as the server shows them."""
    got = wait_for(f"{where}: web-1 and cpu_split at the server",
                   lambda: {"web-1", "cpu_split"} <= set(apps(port)) and apps(port), 150)
    lab = labels(port, "web-1")
    check(lab.get("container") == ["web-1"], f"{where}: web-1's container label: {lab}")
    check(lab.get("container_id") == [cid], f"{where}: web-1's container_id {lab} != {cid}")
    check(lab.get("host") == [HOSTNAME], f"{where}: web-1's host {lab}, want {HOSTNAME}")
    hl = labels(port, "cpu_split")
    check(hl.get("host") == [HOSTNAME] and not hl.get("container"),
          f"{where}: the host process's labels {hl}")
    text = collapsed(port, "cpu_split")
    for fn in ("hot_a", "hot_b", "dispatch", "main"):
        check(fn in text, f"{where}: {fn} not in the host process's stacks: {text[:500]}")
    print(f"    {where}: applications {sorted(got)[:12]}; web-1 {lab}", flush=True)


def engine_part(tmp, name):
    eng = Engine(name)
    td = Teardown()
    t0 = time.time()
    try:
        data_root = None
        if name == "docker":
            data_root = start_dockerd(tmp, td, eng)
        base_images(eng)
        def remove_images():
            for r in ("codexray-node-agent", "codexray-server", "debian:12", "debian:12-slim"):
                eng("rmi", "-f", r, check_rc=False)
            eng("image", "prune", "-f", check_rc=False)  # the build stage's image
        td.add("images", remove_images)
        port = free_port()
        spool = os.path.join(tmp, "spool")
        os.mkdir(spool)
        cmds = readme(eng, port, spool)
        for b in cmds["build"]:
            eng(*b, cwd=ROOT, timeout=400)
        print(f"    {name}: images built in {time.time() - t0:.0f}s", flush=True)
        # Torn down in reverse: the containers, then the volume they used.
        td.add("volume", lambda: eng("volume", "rm", "-f", "codexray-data", check_rc=False))
        for c in ("codexray-server", "codexray-node-agent", "web-1", "cx-ds-agent"):
            td.add(f"container {c}", lambda c=c: eng("rm", "-f", c, check_rc=False))
        eng(*cmds["server"])
        wait_for("the server's /healthz", lambda: run(
            ["curl", "-sf", f"http://127.0.0.1:{port}/healthz"], check_rc=False).returncode == 0,
            30, 1)

        # The workloads: one on the host, one in a container named web-1.
        hw = host_workload(tmp, 600)
        td.add("host workload", lambda: (hw.kill(), hw.wait()))
        cid = eng("run", "-d", *eng.run_extra, "--network", "host", "--name", "web-1",
                  "debian:12", "sh", "-c", "while :; do :; done").stdout.strip()
        check(len(cid) == 64, f"container id {cid!r}")
        if data_root:
            # Named from the data root dockerd was given, not the default.
            check(os.path.exists(os.path.join(data_root, "containers", cid, "config.v2.json"))
                  and not os.path.exists(f"/var/lib/docker/containers/{cid}"),
                  f"docker: web-1's config.v2.json is not (only) under {data_root}")

        eng(*cmds["agent"])
        check_profiles(port, cid, f"{name} (README)")
        logs = eng("logs", "codexray-node-agent").stderr + eng("logs", "codexray-node-agent").stdout
        check("ProfilesEndpoint=" in logs and f"host={HOSTNAME}" in logs,
              f"{name}: the agent's log: {logs[-2000:]}")
        check(f"container {cid}" not in logs,
              f"{name}: the agent logged web-1's name as not found: {logs[-2000:]}")
        eng("stop", "-t", "30", "codexray-node-agent", timeout=60)
        rc = eng("inspect", "-f", "{{.State.ExitCode}}", "codexray-node-agent").stdout.strip()
        check(rc == "0", f"{name}: the agent exited {rc} on stop")
        print(f"    {name}: README's agent and server: profiles in {time.time() - t0:.0f}s",
              flush=True)

        wrong_setup(eng, cmds["agent"], name)
        if name == "docker":
            host_label_private_uts(eng, tmp)
            kube.daemonset_container(eng, tmp, cid)
    finally:
        errors = td.run()
    check(not errors, f"{name}: teardown: {errors}")
    print(f"    {name}: {time.time() - t0:.0f}s in all", flush=True)


def wrong_setup(eng, agent, name):
    """Without --pid host the agent stops at once, exit 1, and says why."""
    args = [a for a in agent if a != "-d"]
    i = args.index("--pid")
    del args[i:i + 2]
    i = args.index("--name")
    args[i + 1] = "cx-nopid"
    args.insert(1, "--rm")
    i = args.index("--restart")
    del args[i:i + 2]
    p = eng(*args, check_rc=False, timeout=60)
    out = p.stdout + p.stderr
    check(p.returncode == 1 and "--pid host" in out and "hostPID: true" in out,
          f"{name}: the agent without --pid host: exit {p.returncode}: {out[-1500:]}")


def host_label_private_uts(eng, tmp):
    """In a container with its own network and UTS namespace (its hostname
    is its id), the host label is still the host's name."""
    import pprof_read
    out = os.path.join(tmp, "uts")
    os.mkdir(out)
    eng("run", "--rm", "--network", "none", "--pid", "host", "--cap-add", "SYS_ADMIN",
        "--cap-add", "SYS_PTRACE", "-v", f"{out}:/out", "codexray-node-agent", "record",
        "--duration", "3", "--output", "/out/r.pb.gz", timeout=120)
    hosts = {t.labels.get("host") for t in pprof_read.traces(os.path.join(out, "r.pb.gz"))}
    check(hosts == {HOSTNAME}, f"host labels from a container with its own UTS: {hosts}")
    shutil.rmtree(out, ignore_errors=True)


def test_docker(tmp):
    """Docker (Debian's docker.io): README's builds and runs, names, labels."""
    engine_part(tmp, "docker")


def test_podman(tmp):
    """Podman (rootful, runc): the same commands with podman."""
    engine_part(tmp, "podman")

