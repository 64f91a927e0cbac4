"""Reads profiles through Go's own `go tool pprof`, the independent reader:
nothing here parses protobuf itself."""
import re
import shutil
import subprocess


def go_binary():
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    return go


class Trace:
    def __init__(self, count, labels, frames):
        self.count = count      # samples
        self.labels = labels    # {key: value}
        self.frames = frames    # function names, leaf first

    def __repr__(self):
        return f"Trace({self.count}, {self.labels}, {self.frames})"


def traces(*paths):
    """Every sample of the profiles, as `go tool pprof -traces` prints them."""
    out = subprocess.run([go_binary(), "tool", "pprof", "-traces", "-sample_index=samples", *paths],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        labels, frames, count = {}, [], None
        for line in block.splitlines():
            if not line.strip():
                continue
            m = re.match(r"^\s*([\w.-]+):\s+(.*)$", line)
            if m and count is None:
                labels[m.group(1)] = m.group(2).strip()
                continue
            m = re.match(r"^\s*(\d+)\s{3}(.*)$", line)
            if m and count is None:
                count = int(m.group(1))
                frames.append(m.group(2).strip())
                continue
            frames.append(line.strip())
        if count is not None:
            result.append(Trace(count, labels, frames))
    return result


def raw(path):
    """`go tool pprof -raw`: the header fields and sample types."""
    return subprocess.run([go_binary(), "tool", "pprof", "-raw", path], check=True,
                          capture_output=True, text=True, timeout=120).stdout
