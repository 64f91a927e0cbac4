"""A pure-Python standard-library workload for the integration tests: for
SECONDS (argv[1]) difflib diffs two 1,500-line texts (SequenceMatcher's
find_longest_match, all Python, spends its time in the interpreter's dict
and list code). Run it with a real interpreter (/usr/bin/python3)."""
import difflib
import random
import sys
import time


def main():
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefgh") for _ in range(5)) for _ in range(400)]
    a = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(1500)]
    b = list(a)
    for i in range(0, len(b), 7):
        b[i] = " ".join(rng.choice(words) for _ in range(8))
    end = time.monotonic() + float(sys.argv[1] if len(sys.argv) > 1 else 5)
    while time.monotonic() < end:
        for _ in difflib.unified_diff(a, b, lineterm=""):
            pass


if __name__ == "__main__":
    main()
