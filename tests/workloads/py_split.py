"""A Python workload for the integration tests: for SECONDS (argv[1]) a
pure-Python hot loop (Crunch.hot_py, about half the time), the standard
library's pure-Python JSON encoder (json/, indent= takes it off the C
accelerator) and a sort with a key lambda (Python frames under C's
list_sort). Run it with a real interpreter (/usr/bin/python3), not a shim
that forks one."""
import json
import sys
import time


class Crunch:
    def hot_py(self, n):
        s = 0
        for i in range(n):
            s += i * i % 7
        return s


def encode_py(obj):
    return json.dumps(obj, indent=1)


def sort_py(xs):
    return sorted(xs, key=lambda x: (x * 7919) % 1009)


def main():
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 5)
    c = Crunch()
    data = [{"id": i, "name": "item%d" % i, "tags": ["a", "b", i % 5]} for i in range(300)]
    xs = list(range(3000))
    while time.monotonic() < end:
        c.hot_py(60000)
        encode_py(data)
        sort_py(xs)


if __name__ == "__main__":
    main()
