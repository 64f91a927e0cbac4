"""The web UI in headless Chromium (tests/browser/ui_test.mjs, playwright-core)
against the real server filled by the real agent profiling cpu_split."""
import os
import subprocess
import time

import server_tests
from server_tests import ROOT, WORK, Server, check, run_agent, stop_agent

BROWSER = os.path.join(ROOT, "tests", "browser")
OUT = os.path.join(ROOT, "build", "test-output", "browser")


def test_browser_ui(tmp):
    """Front page lists the app; its flame graph is drawn and the table names
    hot_a; search, zoom and back, a diff of two ranges; no script errors."""
    check(os.path.isdir(os.path.join(BROWSER, "node_modules", "playwright-core")),
          "playwright-core missing: run 'make test' (npm ci in tests/browser)")
    srv = Server(tmp)
    try:
        a, log = run_agent(tmp, srv.url)
        try:
            time.sleep(1)
            t0 = int(time.time()) - 1
            subprocess.run([os.path.join(WORK, "cpu_split"), "4"], stdout=subprocess.DEVNULL,
                           timeout=30, check=True)
            time.sleep(2.5)  # the 2 s window closes
            tmid = int(time.time())
            subprocess.run([os.path.join(WORK, "cpu_split"), "4"], stdout=subprocess.DEVNULL,
                           timeout=30, check=True)
            time.sleep(2.5)
        finally:
            rc, alog = stop_agent(a, log)
        check(rc == 0, f"agent exited {rc}: {alog[-500:]}")
        t1 = int(time.time()) + 1
        p = subprocess.run(["node", os.path.join(BROWSER, "ui_test.mjs"), srv.url, OUT,
                            "cpu_split", str(t0), str(tmid), str(t1)],
                           capture_output=True, text=True, timeout=180)
        print(p.stdout, end="")
        check(p.returncode == 0, f"browser test failed (screenshots in {OUT}):\n{p.stderr[-3000:]}")
        print(f"    screenshots in {os.path.relpath(OUT, ROOT)}")
    finally:
        srv.stop()


TESTS = [test_browser_ui]
