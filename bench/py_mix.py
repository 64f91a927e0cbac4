"""The Python naming benchmark's workload: one of many processes, each
running a mix of standard-library code (json, re, textwrap, decimal,
difflib, string formatting), so the agent names a few thousand distinct
code objects per process, at a low CPU share each.

    python bench/py_mix.py SECONDS DUTY
"""
import decimal
import difflib
import json
import re
import sys
import textwrap
import time

TEXT = ("The quick brown fox jumps over the lazy dog. " * 40).split()


def work(i):
    doc = {"id": i, "words": TEXT[i % 50:], "nested": {"a": [1, 2, 3], "b": "x" * (i % 30)}}
    s = json.dumps(doc, sort_keys=True)
    json.loads(s)
    re.findall(r"\b\w{4,5}\b", s)
    textwrap.fill(" ".join(TEXT[: 20 + i % 40]), width=37)
    decimal.Decimal(i) / decimal.Decimal(7) + decimal.Decimal("1.25")
    list(difflib.unified_diff(TEXT[:15], TEXT[1:16], lineterm=""))
    return "{:>10}|{:<8.3f}|{!r}".format(i, i / 3, s[:10])


def main():
    seconds, duty = float(sys.argv[1]), float(sys.argv[2])
    end = time.time() + seconds
    i = 0
    while time.time() < end:
        t0 = time.time()
        while time.time() - t0 < 0.05 * duty:
            work(i)
            i += 1
        time.sleep(0.05 * (1 - duty))


main()
