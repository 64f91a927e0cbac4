"""The loop every test script of this project runs: each test gets its own
temporary directory, a RUN/OK/FAIL line with its time, and a traceback
when it fails with anything but a check; the script exits 1 if one failed.

    sys.exit(runner.run(TESTS, "integration", (Failure,), "cx-it-"))
"""
import sys
import tempfile
import time
import traceback


def run(tests, label, checks, prefix):
    """Runs tests (those named on the command line, or all), each in a
    temporary directory named prefix...; checks: the exception types a
    failed check raises (no traceback for those)."""
    wanted = set(sys.argv[1:])
    passed = 0
    failures = []  # (name, message): repeated at the end, where a log's tail shows them
    for t in tests:
        if wanted and t.__name__ not in wanted:
            continue
        with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
            t0 = time.time()
            print(f"[ RUN  ] {t.__name__}", flush=True)
            try:
                t(tmp)
                passed += 1
                print(f"[  OK  ] {t.__name__} ({time.time() - t0:.1f}s)", flush=True)
            except Exception as e:  # noqa: BLE001 - every failure is reported
                failures.append((t.__name__, str(e)))
                print(f"[ FAIL ] {t.__name__}: {e}", flush=True)
                if not isinstance(e, checks):
                    traceback.print_exc()
    for name, msg in failures:
        print(f"[ FAIL ] {name}: {msg[:500]}")
    print(f"{label}: {passed} passed, {len(failures)} failed")
    return 0 if not failures else 1
