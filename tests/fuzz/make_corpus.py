#!/usr/bin/env python3
"""Writes the fuzz target's seed corpus (tests/fuzz/corpus/): small valid
profiles in each encoding and the shapes issue 16 found trouble with.
    python3 tests/fuzz/make_corpus.py"""
import gzip
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
from server_tests import field, good_profile, packed, profile  # noqa: E402

OUT = os.path.join(os.path.dirname(__file__), "corpus")


def main():
    os.makedirs(OUT, exist_ok=True)
    plain = good_profile("seed")
    strings = ["", "samples", "count", "cpu", "nanoseconds", "service", "s", "f", "g", "pid", "7"]
    deep = profile(strings, [(1, 2), (3, 4)],
                   [([1, 2] * 20, [3, 30000000], [(5, 6), (9, 10)]), ([2], [1, 10], [(5, 6)])],
                   locations=[(1, 1), (2, 2)], functions=[(1, 7), (2, 8)])
    # samples without locations: what UBSan caught (NULL + 0, memcpy of 0 from NULL)
    empty = profile(["", "samples", "count", "service", "e"], [(1, 2)],
                    [([], [5], [(3, 4)]), ([], [2], [(3, 4)])])
    # packed ids, a location without lines (named from its mapping), a period
    mapped = (field(1, field(1, 1) + field(2, 2)) + field(2, packed(1, [1, 1]) + packed(2, [4])) +
              field(3, field(1, 1) + field(5, 5)) +
              field(4, field(1, 1) + field(2, 1) + field(3, 0x1234)) +
              b"".join(field(6, s) for s in ["", "samples", "count", "service", "m", "/bin/x"]) +
              field(11, field(1, 1) + field(2, 2)) + field(12, 1000))
    seeds = {"plain.pb": plain, "plain.pb.gz": gzip.compress(plain), "deep.pb": deep,
             "empty_locations.pb": empty, "mapped.pb": mapped}
    zst = subprocess.run(["zstd", "-q", "-c"], input=deep, stdout=subprocess.PIPE, check=True)
    seeds["deep.pb.zst"] = zst.stdout
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
