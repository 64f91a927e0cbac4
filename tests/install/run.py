#!/usr/bin/python3
"""make test-install: CodeXray installed the ways the README says, for real,
on this machine: Docker (dockerd of Debian's docker.io, started here),
Podman, systemd (systemd-nspawn booting a Debian machine: the Debian
packages of `make deb` installed with apt, and deploy/install.sh), and the
Kubernetes manifest (typed against the API's models; its agent container run
on Docker; the agent under its memory limit, in a memory cgroup, beside
5,000 threads). Everything started is torn down. Root, and the packages of
`make deps`.

    /usr/bin/python3 tests/install/run.py [TEST_NAME ...]
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, ".."), os.path.join(HERE, "..", "integration")]

import engines  # noqa: E402
import kube  # noqa: E402
import memlimit  # noqa: E402
import nspawn  # noqa: E402
import runner  # noqa: E402
from common import BUILD, Failure  # noqa: E402

TESTS = [kube.test_kubernetes_manifest_typed, memlimit.test_agent_memory_limit, engines.test_docker,
         engines.test_podman, nspawn.test_systemd_packages, nspawn.test_systemd_machine]


def main():
    if os.geteuid() != 0:
        print("test-install: needs root (container engines, systemd-nspawn, BPF)", file=sys.stderr)
        return 1
    for b in ("codexray-node-agent", "codexray-server", "workloads/cpu_split"):
        if not os.access(os.path.join(BUILD, b), os.X_OK):
            print(f"test-install: build/{b} is missing: run make first", file=sys.stderr)
            return 1
    return runner.run(TESTS, "install", (Failure,), "cx-install-")


if __name__ == "__main__":
    sys.exit(main())
