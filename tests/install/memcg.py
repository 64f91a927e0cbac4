"""A memory cgroup of its own for one process tree: cgroup v1's memory
controller (/sys/fs/cgroup/memory, as on this machine) or a cgroup2
hierarchy that has the memory controller (/sys/fs/cgroup, or
/sys/fs/cgroup/unified on a hybrid host). What it is charged is what a
container's memory limit holds a process to: its heap, the file pages it
touched first, and kernel memory (BPF maps, page tables).

Used by tests/install/memlimit.py (the agent under the DaemonSet's limit)
and bench/startup_bench.py (the agent's peak charge)."""
import os
import time

V1 = "/sys/fs/cgroup/memory"


def _v2_roots():
    for root in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        ctl = os.path.join(root, "cgroup.controllers")
        try:
            with open(ctl) as f:
                if "memory" in f.read().split():
                    yield root
        except OSError:
            pass


class Memcg:
    """mkdir'd at construction; `path` is None where no memory controller
    is writable (not root, none mounted)."""

    def __init__(self, name, limit_bytes=None):
        self.path = None
        self.v1 = False
        cands = ([(V1, True)] if os.path.isdir(V1) else []) + [(r, False) for r in _v2_roots()]
        for root, v1 in cands:
            path = os.path.join(root, name)
            try:
                os.mkdir(path)
            except OSError:
                continue
            self.path, self.v1 = path, v1
            break
        if self.path and limit_bytes:
            if self.v1:
                self._write("memory.limit_in_bytes", str(limit_bytes))
                # No swap to hide behind where the kernel lets it be set.
                if os.path.exists(os.path.join(self.path, "memory.memsw.limit_in_bytes")):
                    self._write("memory.memsw.limit_in_bytes", str(limit_bytes))
                self._write("memory.swappiness", "0")
            else:
                self._write("memory.max", str(limit_bytes))
                if os.path.exists(os.path.join(self.path, "memory.swap.max")):
                    self._write("memory.swap.max", "0")

    def _write(self, f, v):
        with open(os.path.join(self.path, f), "w") as fh:
            fh.write(v)

    def _read(self, f):
        with open(os.path.join(self.path, f)) as fh:
            return fh.read()

    def enter(self):
        """In a child before exec (preexec_fn): it and what it starts are in."""
        if self.path:
            self._write("cgroup.procs", str(os.getpid()))

    def peak_mib(self):
        if not self.path:
            return 0.0
        return int(self._read("memory.max_usage_in_bytes" if self.v1 else "memory.peak")) / 2**20

    def oom_kills(self):
        """Processes the kernel's OOM killer killed in this cgroup."""
        text = self._read("memory.oom_control" if self.v1 else "memory.events")
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return int(v)
        return 0

    def remove(self):
        """rmdir once its processes are gone (waits up to 5 s)."""
        if not self.path:
            return
        for _ in range(50):
            try:
                os.rmdir(self.path)
                self.path = None
                return
            except OSError:
                time.sleep(0.1)
