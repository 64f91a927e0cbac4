#!/usr/bin/env python3
"""The test guest's whole root file system, as an initramfs (newc cpio,
uncompressed): busybox, the agent, the workloads, bpf_each, the agent's BPF
object, and every shared library they load, copied from this machine at the
paths its loader finds them. The guest runs tools/kernels/guest-init.sh as
/init and needs no disk and no network from the kernel under test.

    initramfs.py [--root DIR --multiarch TRIPLET [--file PATH ...] [--dpkg-db]]
                 [--python /usr/bin/python3.X] [--deb FILE ...]
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
(the agent's link-time libraries), then in DIR's. Each --file (a path in
DIR: dpkg, tar, perl and its modules) lands at its own path, with its
libraries where it is an ELF file.

--deb FILE: the package lands in /opt/cx/ as it is, with the libraries of
the programs it holds (the guest installs it with dpkg -i). --dpkg-db: a
dpkg database that records what the image holds: for each file copied from
a package (DIR's, by fetch.sh's DIR/../info/PKG.list; this machine's, by
dpkg-query -S), that package's status entry as installed (fetch.sh's
DIR/../info/PKG.control, this machine's /var/lib/dpkg/status) and, in its
file list, the paths of it the image holds. So the guest's dpkg -i finds
the package's dependencies installed, and only those that are there.
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
        self.origin = {}  # path here -> the file on this machine copied there

    def copy(self, name, src, mode):
        """The file at src (behind any symlink) at name; where it came from
        is kept for the dpkg database."""
        with open(src, "rb") as f:
            self.file(name, f.read(), mode)
        self.origin[os.path.normpath("/" + name.lstrip("/"))] = src

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
    c.copy(guest_path(os.path.join("/usr/bin", name)), real, 0o755)
    c.symlink("usr/bin/python3", name)
    lib = os.path.join("/usr/lib", name)
    for rel in PY_START:
        c.copy(os.path.join(lib, rel), os.path.join(sys_.host(lib), rel), 0o644)
    c.dir(os.path.join(lib, "lib-dynload"))  # the exec prefix's landmark
    return sys_.libraries(real)


def is_elf(path):
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def file_path(p):
    """Where a package's file lands: its own path (the guest's /bin and
    /sbin are directories, as on a Debian system not usr-merged on disk),
    /lib's under /usr/lib (the guest's /lib links there)."""
    return guest_path(p) if p.startswith(("/lib/", "/lib64/")) else os.path.normpath(p)


def deb_libraries(sys_, deb):
    """The libraries of the programs (executable ELF files) package deb holds."""
    import tempfile
    libs = set()
    with tempfile.TemporaryDirectory() as d:
        subprocess.run(["dpkg-deb", "-x", deb, d], check=True)
        for top, _, names in os.walk(d):
            for n in names:
                f = os.path.join(top, n)
                if os.path.isfile(f) and not os.path.islink(f) and os.access(f, os.X_OK) \
                        and is_elf(f):
                    libs.update(sys_.libraries(f))
    return libs


def aliases(p):
    """p and its other name in a usr-merged system (/lib/x <-> /usr/lib/x):
    a package lists one of them."""
    for top in ("/lib/", "/bin/", "/sbin/"):
        if p.startswith(top):
            return [p, "/usr" + p]
        if p.startswith("/usr" + top):
            return [p, p[len("/usr"):]]
    return [p]


def stanzas(text):
    """A dpkg status or control file's paragraphs: [(package, arch, text)]."""
    out = []
    for para in re.split(r"\n\s*\n", text.strip()):
        pkg = re.search(r"^Package: (\S+)", para, re.M)
        arch = re.search(r"^Architecture: (\S+)", para, re.M)
        if pkg:
            out.append((pkg.group(1), arch.group(1) if arch else "", para.strip()))
    return out


def read_lines(path):
    with open(path) as f:
        return set(f.read().splitlines())


def dpkg_db(c, root, arch):
    """var/lib/dpkg/ for the files c copied (c.origin): the packages they
    came from as installed, each one's file list the paths of it here."""
    info = os.path.join(os.path.dirname(os.path.normpath(root)), "info")
    owner = {}  # a path in root -> its package
    lists = {}  # (package, where: "root" or "host") -> its whole file list
    for n in os.listdir(info):
        if n.endswith(".list"):
            pkg = n[:-len(".list")]
            lists[pkg, "root"] = read_lines(os.path.join(info, n))
            for path in lists[pkg, "root"]:
                owner[path] = pkg
    host = sorted({a for src in c.origin.values() if not src.startswith(root.rstrip("/") + "/")
                   for a in aliases(os.path.normpath(src))})
    out = subprocess.run(["dpkg-query", "-S", *host], capture_output=True, text=True).stdout
    host_owner = {}
    for line in out.splitlines():
        pkgs, _, path = line.rpartition(": ")
        mine = [q.strip() for q in pkgs.split(",") if q.strip().endswith(":" + arch)]
        if mine and not line.startswith("diversion "):
            host_owner[path] = mine[0].rsplit(":", 1)[0]
    held = {}  # (package, where) -> the paths of it here, as it lists them
    for at, src in sorted(c.origin.items()):
        if src.startswith(root.rstrip("/") + "/"):
            where, cands = "root", aliases("/" + os.path.relpath(src, root))
            pkg = next((owner[p] for p in cands if p in owner), None)
        else:
            where, cands = "host", aliases(os.path.normpath(src))
            pkg = next((host_owner[p] for p in cands if p in host_owner), None)
        if pkg is None:
            raise SystemExit(f"initramfs: no {arch} package owns {src} (copied to {at})")
        if (pkg, where) not in lists:
            mf = f"/var/lib/dpkg/info/{pkg}:{arch}.list"
            lists[pkg, where] = read_lines(mf if os.path.exists(mf) else mf.replace(f":{arch}", ""))
        listed = [p for p in aliases(at) if p in lists[pkg, where]]
        held.setdefault((pkg, where), set()).update(listed[:1])
    entries = {}
    with open("/var/lib/dpkg/status") as f:
        host_status = {(p, a): t for p, a, t in stanzas(f.read())}
    for pkg, where in sorted(held):
        if where == "host":
            text = host_status[pkg, arch]
        else:
            with open(os.path.join(info, pkg + ".control")) as f:
                text = re.sub(r"^(Package: .*)$", r"\1\nStatus: install ok installed",
                              f.read().strip(), count=1, flags=re.M)
        version = re.search(r"^Version: (\S+)", text, re.M).group(1)
        if pkg in entries and entries[pkg][1] != version:
            raise SystemExit(f"initramfs: {pkg} {entries[pkg][1]} (this machine's) and {version} "
                             f"({root}'s) both have files here: one version only")
        entries.setdefault(pkg, (text, version, set()))[2].update(held[pkg, where])
    for d in ("updates", "triggers", "alternatives", "info"):
        c.dir(f"var/lib/dpkg/{d}")
    c.dir("var/log")
    c.file("var/lib/dpkg/status", "".join(t + "\n\n" for t, _, _ in entries.values()).encode())
    for pkg, (text, _, paths) in entries.items():
        same = re.search(r"^Multi-Arch: same$", text, re.M)
        name = f"{pkg}:{arch}" if same else pkg
        c.file(f"var/lib/dpkg/info/{name}.list", "".join(p + "\n" for p in sorted(paths)).encode())
    return sorted(entries)


def main():
    p = argparse.ArgumentParser(usage=__doc__)
    p.add_argument("--python")
    p.add_argument("--root")
    p.add_argument("--multiarch")
    p.add_argument("--file", action="append", default=[])
    p.add_argument("--deb", action="append", default=[])
    p.add_argument("--dpkg-db", action="store_true")
    p.add_argument("out")
    p.add_argument("init")
    p.add_argument("files", nargs="*")
    a = p.parse_args()
    if bool(a.root) != bool(a.multiarch) or any("=" not in f for f in a.files):
        p.error("--root and --multiarch go together; files are NAME=FILE")
    if (a.file or a.dpkg_db) and not a.root:
        p.error("--file and --dpkg-db are for a guest of another architecture (--root)")
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
    c.copy("bin/busybox", sys_.busybox(), 0o755)
    c.symlink("bin/sh", "busybox")  # /init's interpreter; init installs the other applets
    libs = set(add_python(c, sys_, python)) if python else set()
    for path in a.file:
        src = sys_.host(path)
        c.copy(file_path(path), src, 0o755 if os.access(src, os.X_OK) else 0o644)
        if is_elf(src):
            libs.update(sys_.libraries(src))
    for deb in a.deb:
        with open(deb, "rb") as f:
            c.file(f"opt/cx/{os.path.basename(deb)}", f.read())
        libs.update(deb_libraries(sys_, deb))
    for name, path in files.items():
        with open(path, "rb") as f:
            mode = 0o755 if os.access(path, os.X_OK) else 0o644
            c.file(f"opt/cx/{name}", f.read(), mode)
        if mode == 0o755:
            libs.update(sys_.libraries(path))
    for lib, at in sorted(libs, key=lambda la: la[1]):
        c.copy(at, lib, 0o755)  # the file behind any symlink
    if a.dpkg_db:
        arch = {"aarch64-linux-gnu": "arm64"}.get(a.multiarch)
        if not arch:
            p.error(f"--dpkg-db: no Debian architecture known for {a.multiarch}")
        dpkg_db(c, a.root, arch)
    c.close()
    os.replace(out + ".tmp", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
