#!/usr/bin/env python3
"""make docs-check: the documentation points at things that exist.

1. Every relative Markdown link in README.md and docs/ resolves: the file
   (or folder) exists, and a #fragment names a heading of the target page
   (GitHub's anchors: lower case, punctuation dropped, spaces to dashes, -1,
   -2... for repeats).
2. Every repository path written in backticks in those pages (`agent/...`,
   `server/...`, `docs/...`) exists; one with * matches something.
3. Every C source under agent/, server/ and common/ is named, by its path,
   on a page of docs/internals/ (a header by its own path or its .c's), so
   a new module cannot go undocumented.

Prints one line per problem, then "docs: N checked, N failed"; exits 1 if
any failed. Code blocks are skipped: what is in them is not a link.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH_PREFIXES = ("agent/", "server/", "common/", "tests/", "tools/", "deploy/", "bench/",
                 "docs/", ".ci/")
SOURCE_DIRS = ("agent/", "server/", "common/")


def pages():
    out = [os.path.join(ROOT, "README.md")]
    for dirpath, _, files in os.walk(os.path.join(ROOT, "docs")):
        out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".md")]
    return sorted(out)


def prose(text):
    """The page's lines outside fenced code blocks, with their numbers."""
    fence = None
    for n, line in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*(```+|~~~+)", line)
        if m:
            if fence is None:
                fence = m.group(1)[0] * 3
            elif m.group(1).startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, line


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path, cache={}):
    if path not in cache:
        seen, out = {}, set()
        for _, line in prose(open(path, encoding="utf-8").read()):
            m = re.match(r"#{1,6} +(.*?) *#* *$", line)
            if not m:
                continue
            s = slug(m.group(1))
            k = seen.get(s, 0)
            seen[s] = k + 1
            out.add(s if k == 0 else f"{s}-{k}")
        cache[path] = out
    return cache[path]


def check_page(page, problems):
    text = open(page, encoding="utf-8").read()
    rel = os.path.relpath(page, ROOT)
    checked = 0
    for n, line in prose(text):
        # Links: [text](target), not images' URLs, not inside inline code.
        plain = re.sub(r"`[^`]*`", "", line)
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", plain):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            checked += 1
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                problems.append(f"{rel}:{n}: link to a missing file: {target}")
                continue
            if frag:
                if not dest.endswith(".md"):
                    problems.append(f"{rel}:{n}: a fragment into a page that is not Markdown: {target}")
                elif frag not in anchors(dest):
                    problems.append(f"{rel}:{n}: no heading #{frag} in "
                                    f"{os.path.relpath(dest, ROOT)}: {target}")
        # Paths in backticks.
        for code in re.findall(r"`([^`\s]+)`", line):
            code = code.rstrip(".,:;")
            if not code.startswith(PATH_PREFIXES) or "..." in code:
                continue
            checked += 1
            if "*" in code:
                ok = glob.glob(os.path.join(ROOT, code))
            else:
                ok = os.path.exists(os.path.join(ROOT, code))
            if not ok:
                problems.append(f"{rel}:{n}: `{code}` is not in the tree")
    return checked


def check_sources(problems):
    p = subprocess.run(["git", "ls-files", "--", *SOURCE_DIRS], cwd=ROOT, capture_output=True,
                       text=True)
    if p.returncode == 0:
        files = p.stdout.split()
    else:  # not a git checkout (a tarball): the files as they are
        files = [os.path.relpath(os.path.join(d, f), ROOT) for s in SOURCE_DIRS
                 for d, _, fs in os.walk(os.path.join(ROOT, s)) for f in fs]
    files = [f for f in files if f.endswith((".c", ".h"))]
    internals = ""
    for p in glob.glob(os.path.join(ROOT, "docs", "internals", "*.md")):
        internals += open(p, encoding="utf-8").read()
    named = set(re.findall(r"[\w./-]+\.[ch]\b", internals))
    for f in files:
        if f not in named and not (f.endswith(".h") and f[:-2] + ".c" in named):
            problems.append(f"{f}: named on no page of docs/internals/ (add it to its module's page)")
    return len(files)


def main():
    problems = []
    checked = sum(check_page(p, problems) for p in pages())
    checked += check_sources(problems)
    for p in problems:
        print(p)
    print(f"docs: {checked} checked, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
