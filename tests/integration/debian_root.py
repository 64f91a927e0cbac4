"""Debian root file systems made by mmdebstrap from the host's Debian
mirror, for runtimes that need another release's libc (CPython 3.14 and
3.15 in unstable, OpenJDK 21 in trixie, OpenJDK 25 and later in
unstable): the agent on the host records them running in the root by
chroot.

A root is made once (~40 s to a few minutes) and kept under its cache: a
tar, made again when the command making it changes, and its extracted
tree beside it. It cannot be made for want of the tool or a mirror (no
mmdebstrap, no Debian archive in the host's apt sources): the caller skips
saying why; a mirror that is there and fails is an error."""
import os
import re
import shlex
import shutil
import subprocess


class RootError(Exception):
    pass


def host_mirror():
    """The host's Debian archive, as tools/kernels/fetch.sh's host_mirror
    finds it: the first apt source URI ending in /debian, or None."""
    uris = []
    srcdir = "/etc/apt/sources.list.d"
    files = ["/etc/apt/sources.list"] + ([os.path.join(srcdir, f) for f in
                                          sorted(os.listdir(srcdir))]
                                         if os.path.isdir(srcdir) else [])
    for path in files:
        try:
            text = open(path).read()
        except OSError:
            continue
        for line in text.splitlines():
            m = re.match(r"\s*URIs:\s*(.*)", line)
            if m:
                uris += m.group(1).split()
            m = re.match(r"\s*deb\s+(\[[^]]*\]\s+)?(\S+)", line)
            if m:
                uris.append(m.group(2))
    for u in uris:
        if re.search(r"/debian/?$", u):
            return u.rstrip("/")
    return None


def root(cache, name, suite, packages):
    """(path of the extracted root of Debian `suite` with `packages`
    installed, None), or (None, why it cannot be made). Kept as
    cache/name.tar and cache/name/. Raises RootError when mmdebstrap
    fails."""
    if not shutil.which("mmdebstrap"):
        return None, "no mmdebstrap"
    mirror = os.environ.get("KERNELS_MIRROR")
    mirror = mirror + "/debian" if mirror else host_mirror()
    if not mirror:
        return None, "no Debian archive in the host's apt sources (set KERNELS_MIRROR=URL)"
    # check-valid-until off: the signature is still checked; a mirror a few
    # weeks behind is fine for a test (unstable's Release expires in 7 days).
    cmd = ["mmdebstrap", "--variant=apt", "--quiet",
           "--aptopt=Acquire::Check-Valid-Until \"false\"",
           "--include=" + ",".join(packages), suite]
    want = shlex.join(cmd + [mirror])
    tar = os.path.join(cache, name + ".tar")
    stamp = tar + ".cmd"
    tree = os.path.join(cache, name)
    os.makedirs(cache, exist_ok=True)
    if not (os.path.exists(tar) and os.path.exists(stamp) and open(stamp).read() == want):
        # mmdebstrap takes the format from the name's end: keep it .tar.
        tmp = tar[:-4] + ".partial.tar"
        p = subprocess.run(cmd + [tmp, mirror], capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RootError(f"mmdebstrap {suite} exited {p.returncode}: {p.stderr[-1500:]}")
        os.rename(tmp, tar)
        with open(stamp, "w") as f:
            f.write(want)
        shutil.rmtree(tree, ignore_errors=True)
    done = os.path.join(tree, ".extracted")
    if not (os.path.exists(done) and os.path.getmtime(done) >= os.path.getmtime(tar)):
        shutil.rmtree(tree, ignore_errors=True)
        os.makedirs(tree)
        subprocess.run(["tar", "-C", tree, "-xf", tar], check=True, timeout=300)
        open(done, "w").close()
    return tree, None
