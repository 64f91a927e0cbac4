#!/usr/bin/env python3
"""The test guest's whole root file system, as an initramfs (newc cpio,
uncompressed): busybox, the agent, the workloads, bpf_each, the agent's BPF
object, and every shared library they load, copied from this machine at the
paths its loader finds them. The guest runs tools/kernels/guest-init.sh as
/init and needs no disk and no network from the kernel under test.

    initramfs.py [--root DIR --multiarch TRIPLET] [--python /usr/bin/python3.X]
                 OUT INIT [NAME=FILE ...]     files land in /opt/cx/NAME

With --python, the interpreter at its own path and the few files of its
standard library it reads to start with -S -I (encodings, codecs, io, abc),
plus os.py where it looks for its prefix: the guest's Python workload runs
on builtin modules only.

With --root, a guest of another architecture (TRIPLET: aarch64-linux-gnu):
busybox and the interpreter are taken from DIR (Debian packages of that
architecture unpacked there, tools/kernels/fetch.sh --debs), --python being
a path in DIR, and libraries are found by their ELF's DT_NEEDED (ldd runs
only native programs) in this machine's multiarch directories for TRIPLET
(the agent's link-time libraries), then in DIR's.
"""
import argparse
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


class Native:
    """This machine's own programs: the shared libraries each one loads, as
    ldd resolves them, each at its own path."""

    def busybox(self):
        return BUSYBOX

    def host(self, path):
        return path

    def libraries(self, path):
        """[(file here, path in the guest)]"""
        out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
        libs = []
        for line in out.splitlines():
            m = re.match(r"\s*\S+ => (/\S+) \(", line) or re.match(r"\s*(/\S+) \(", line)
            if m:
                libs.append((m.group(1), guest_path(m.group(1))))
        return libs


class Cross:
    """Another architecture's programs: busybox and the interpreter from
    root, libraries by DT_NEEDED (and PT_INTERP) found in the multiarch
    directories, this machine's first, all of them landing in the guest's
    /usr/lib/TRIPLET where its loader looks."""

    def __init__(self, root, triplet):
        self.root = root
        self.triplet = triplet
        self.dirs = [os.path.join(base, sub, triplet) for base in ("/", root)
                     for sub in ("usr/lib", "lib")]

    def busybox(self):
        return os.path.join(self.root, BUSYBOX.lstrip("/"))

    def host(self, path):
        return os.path.join(self.root, path.lstrip("/"))

    def find(self, name):
        for d in self.dirs:
            if os.path.exists(os.path.join(d, name)):
                return os.path.join(d, name)
        raise SystemExit(f"initramfs: no {name} for {self.triplet} in {' '.join(self.dirs)} "
                         f"(install its package for that architecture)")

    @staticmethod
    def needed(path):
        """DT_NEEDED names and the interpreter's path (or None) of an ELF."""
        out = subprocess.run(["readelf", "-W", "-d", "-l", path], capture_output=True,
                             text=True).stdout
        names = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
        interp = re.search(r"Requesting program interpreter: (/[^\]]+)\]", out)
        return names, interp.group(1) if interp else None

    def libraries(self, path):
        libs, todo, seen = [], [path], set()
        while todo:
            names, interp = self.needed(todo.pop())
            if interp and interp not in seen:
                seen.add(interp)
                libs.append((self.find(os.path.basename(interp)), guest_path(interp)))
            for n in names:
                if n not in seen:
                    seen.add(n)
                    f = self.find(n)
                    libs.append((f, f"/usr/lib/{self.triplet}/{n}"))
                    todo.append(f)
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


def add_python(c, sys_, exe):
    """The interpreter exe and its start-up files; returns its libraries."""
    real = os.path.realpath(sys_.host(exe))
    name = os.path.basename(real)  # python3.11
    with open(real, "rb") as f:
        c.file(guest_path(os.path.join("/usr/bin", name)), f.read(), 0o755)
    c.symlink("usr/bin/python3", name)
    lib = os.path.join("/usr/lib", name)
    for rel in PY_START:
        with open(os.path.join(sys_.host(lib), rel), "rb") as f:
            c.file(os.path.join(lib, rel), f.read())
    c.dir(os.path.join(lib, "lib-dynload"))  # the exec prefix's landmark
    return sys_.libraries(real)


def main():
    p = argparse.ArgumentParser(usage=__doc__)
    p.add_argument("--python")
    p.add_argument("--root")
    p.add_argument("--multiarch")
    p.add_argument("out")
    p.add_argument("init")
    p.add_argument("files", nargs="*")
    a = p.parse_args()
    if bool(a.root) != bool(a.multiarch) or any("=" not in f for f in a.files):
        p.error("--root and --multiarch go together; files are NAME=FILE")
    sys_ = Cross(a.root, a.multiarch) if a.root else Native()
    out, init, python = a.out, a.init, a.python
    files = dict(f.split("=", 1) for f in a.files)
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
    with open(sys_.busybox(), "rb") as f:
        c.file("bin/busybox", f.read(), 0o755)
    c.symlink("bin/sh", "busybox")  # /init's interpreter; init installs the other applets
    libs = set(add_python(c, sys_, python)) if python else set()
    for name, path in files.items():
        with open(path, "rb") as f:
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            c.file(f"opt/cx/{name}", f.read(), mode)
        if mode == 0o755:
            libs.update(sys_.libraries(path))
    for lib, at in sorted(libs, key=lambda la: la[1]):
        with open(lib, "rb") as f:  # the file behind any symlink
            c.file(at, f.read(), 0o755)
    c.close()
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
