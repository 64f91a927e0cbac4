#!/usr/bin/env python3
"""The test guest's whole root file system, as an initramfs (newc cpio,
uncompressed): busybox, the agent, the workloads, bpf_each, the agent's BPF
object, and every shared library they load, copied from this machine at the
paths its loader finds them. The guest runs tools/kernels/guest-init.sh as
/init and needs no module, no disk and no network from the kernel under test.

    initramfs.py OUT INIT [--python /usr/bin/python3.X] [NAME=FILE ...]
                                              files land in /opt/cx/NAME

With --python, the interpreter at its own path and the few files of its
standard library it reads to start with -S -I (encodings, codecs, io, abc),
plus os.py where it looks for its prefix: the guest's Python workload runs
on builtin modules only.
"""
import os
import re
import stat
import subprocess
import sys

BUSYBOX = "/bin/busybox"  # busybox-static: no library of its own


class Cpio:
    """A newc archive, written without touching the file system: device
    nodes and root-owned files need no privileges."""

    def __init__(self, path):
        self.f = open(path, "wb")
        self.ino = 1
        self.seen = set()

    def _entry(self, name, mode, data=b"", rdev=(0, 0)):
        name = name.lstrip("/")
        if name in self.seen:
            return
        self.seen.add(name)
        nb = name.encode() + b"\0"
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, rdev[0], rdev[1], len(nb), 0))
        self.ino += 1
        self.f.write(hdr.encode() + nb)
        self.f.write(b"\0" * (-(110 + len(nb)) % 4))
        self.f.write(data)
        self.f.write(b"\0" * (-len(data) % 4))

    def dir(self, name):
        parts = [p for p in name.strip("/").split("/") if p]
        for i in range(1, len(parts) + 1):
            self._entry("/".join(parts[:i]), stat.S_IFDIR | 0o755)

    def file(self, name, data, mode=0o644):
        self.dir(os.path.dirname(name.strip("/")))
        self._entry(name, stat.S_IFREG | mode, data)

    def symlink(self, name, target):
        self.dir(os.path.dirname(name.strip("/")))
        self._entry(name, stat.S_IFLNK | 0o777, target.encode())

    def chardev(self, name, major, minor, mode=0o600):
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def close(self):
        self._entry("TRAILER!!!", 0)
        self.f.close()


def libraries(path):
    """The shared libraries path loads, as ldd resolves them here."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        m = re.match(r"\s*\S+ => (/\S+) \(", line) or re.match(r"\s*(/\S+) \(", line)
        if m:
            libs.append(m.group(1))
    return libs


def guest_path(p):
    """/lib/x86_64-linux-gnu/libc.so.6 -> usr/lib/x86_64-linux-gnu/libc.so.6:
    the guest is usr-merged like the host, /lib and /lib64 links into /usr."""
    p = os.path.normpath(p)
    for top in ("/lib/", "/lib64/", "/bin/", "/sbin/"):
        if p.startswith(top):
            return "/usr" + p
    return p


PY_START = ("os.py", "codecs.py", "io.py", "abc.py", "encodings/__init__.py",
            "encodings/aliases.py", "encodings/utf_8.py")


def add_python(c, exe):
    """The interpreter exe and its start-up files; returns its libraries."""
    real = os.path.realpath(exe)
    name = os.path.basename(real)  # python3.11
    with open(real, "rb") as f:
        c.file(guest_path(os.path.join("/usr/bin", name)), f.read(), 0o755)
    c.symlink("usr/bin/python3", name)
    lib = os.path.join("/usr/lib", name)
    for rel in PY_START:
        with open(os.path.join(lib, rel), "rb") as f:
            c.file(os.path.join(lib, rel), f.read())
    c.dir(os.path.join(lib, "lib-dynload"))  # the exec prefix's landmark
    return libraries(real)


def main():
    args = sys.argv[1:]
    python = None
    if len(args) >= 2 and args[0] == "--python":
        python, args = args[1], args[2:]
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, init = args[0], args[1]
    files = dict(a.split("=", 1) for a in args[2:])
    c = Cpio(out + ".tmp")
    for d in ("proc", "sys", "dev", "tmp", "run", "root", "etc", "bin", "sbin", "usr/bin",
              "usr/sbin", "usr/lib", "usr/lib64", "opt/cx"):
        c.dir(d)
    c.symlink("lib", "usr/lib")
    c.symlink("lib64", "usr/lib64")
    # The console init starts on, before devtmpfs is mounted.
    c.dir("dev")
    c.chardev("dev/console", 5, 1)
    c.chardev("dev/null", 1, 3, 0o666)
    c.file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\n")
    c.file("etc/group", b"root:x:0:\n")
    c.file("etc/hostname", b"cx-guest\n")
    with open(init, "rb") as f:
        c.file("init", f.read(), 0o755)
    with open(BUSYBOX, "rb") as f:
        c.file("bin/busybox", f.read(), 0o755)
    c.symlink("bin/sh", "busybox")  # /init's interpreter; init installs the other applets
    libs = set(add_python(c, python)) if python else set()
    for name, path in files.items():
        with open(path, "rb") as f:
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            c.file(f"opt/cx/{name}", f.read(), mode)
        if mode == 0o755:
            libs.update(libraries(path))
    for lib in sorted(libs):
        with open(lib, "rb") as f:  # the file behind any symlink
            c.file(guest_path(lib), f.read(), 0o755)
    c.close()
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
