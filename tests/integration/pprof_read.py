"""Reads profiles through Go's own `go tool pprof`, the independent reader:
nothing here parses protobuf itself."""
import re
import shutil
import subprocess


def go_binary():
    go = shutil.which("go") or "/usr/lib/go/bin/go"
    return go


class Trace:
    def __init__(self, count, labels, frames, locs=None):
        self.count = count      # samples
        self.labels = labels    # {key: value}
        self.frames = frames    # function names, leaf first
        self.locs = locs        # with lines=True: (function, file, line) per frame, leaf first

    def __repr__(self):
        return f"Trace({self.count}, {self.labels}, {self.frames})"


def split_line_frame(text):
    """One frame of `-traces -lines`: "fn file:line", "fn file" (line 0) or
    "fn" (no file), " (inline)" after it for an inlined one. Returns
    (frame, function, file, line), frame being what `-traces` alone prints
    (the function, " (inline)" kept). File names like "<frozen zipimport>"
    (Python's frozen modules) have a space; markers ("[python: ...]") have
    no file; any other function whose name has a space and no file is
    misread (no test reads such frames with lines)."""
    inline = text.endswith(" (inline)")
    if inline:
        text = text[:-len(" (inline)")]
    if text.startswith("[") and text.endswith("]"):
        return text, text, "", 0  # a marker: "[truncated: ...]", "[python: ...]"
    m = re.match(r"^(.+?) (<[^>]*>|\S+):(\d+)$", text)
    if m:
        fn, file, line = m.group(1), m.group(2), int(m.group(3))
    else:
        m = re.match(r"^(.+) (<[^>]*>|\S+)$", text)
        fn, file, line = (m.group(1), m.group(2), 0) if m else (text, "", 0)
    return fn + (" (inline)" if inline else ""), fn, file, line


def traces(*paths, lines=False):
    """Every sample of the profiles, as `go tool pprof -traces` prints them;
    with lines=True (`-lines`) each Trace also has locs: (function, file,
    line) per frame."""
    out = subprocess.run([go_binary(), "tool", "pprof", "-traces", "-sample_index=samples",
                          *(["-lines"] if lines else []), *paths],
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
            if lines:
                split = [split_line_frame(f) for f in frames]
                result.append(Trace(count, labels, [s[0] for s in split],
                                    [s[1:] for s in split]))
            else:
                result.append(Trace(count, labels, frames))
    return result


def start_lines(path):
    """From `go tool pprof -raw`: {(function, file): {start_line, ...}} of
    every line of every location whose start line is set."""
    found = {}
    for line in raw(path).split("\nLocations\n", 1)[-1].splitlines():
        m = re.match(r"^\s+(?:\d+: 0x[0-9a-f]+ (?:M=\d+ )?)?(.+?) (<[^>]*>|\S+):\d+ "
                     r"s=(\d+)", line)
        if m and int(m.group(3)):
            found.setdefault((m.group(1), m.group(2)), set()).add(int(m.group(3)))
    return found


def raw(path):
    """`go tool pprof -raw`: the header fields and sample types."""
    return subprocess.run([go_binary(), "tool", "pprof", "-raw", path], check=True,
                          capture_output=True, text=True, timeout=120).stdout
