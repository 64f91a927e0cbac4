"""Off-CPU time on the server (issue 32 item 5), over real HTTP with a real
store: profiles in the shape the agent writes them (OFFCPU_CONTRACT.md: a
third sample type off_cpu/nanoseconds, off-CPU samples [0, 0, ns] whose
innermost frame names the wait) built here, so the answers are known; the
same body runs on SQLite and on ClickHouse (clickhouse_tests.py). The UI's
side is browser_tests.py test_browser_offcpu."""
import json
import os
import subprocess
import tempfile
import time
import urllib.parse

import server_tests
from pprof_read import go_binary, raw
from server_tests import Server, check, profile

MS = 1_000_000
SEC = 1_000 * MS

# (stack root first, samples, CPU ns, off-CPU ns): one process's minute.
# A CPU sample and an off-CPU sample never share a line, as the agent
# writes them; io_read is on CPU and blocked.
STACKS = [
    (["main", "work"], 30, 300 * MS, 0),
    (["main", "io_read"], 5, 50 * MS, 0),
    (["main", "wait_lock", "futex_wait", "[off-CPU: lock]"], 0, 0, 6 * SEC),
    (["main", "event_loop", "epoll_wait", "[off-CPU: poll]"], 0, 0, 2 * SEC),
    (["main", "io_read", "[off-CPU: io]"], 0, 0, 1 * SEC),
]
CPU = sum(s[2] for s in STACKS)
OFF = sum(s[3] for s in STACKS)


def offcpu_profile(service, time_ns, off_first=False, with_off=True):
    """The STACKS as a pprof body: samples, cpu[, off_cpu] (off_cpu first
    with off_first, to show types are found by name); without with_off a
    CPU profile as agents without --off-cpu write it."""
    funcs = sorted({f for s in STACKS for f in s[0]})
    strings = ["", "samples", "count", "cpu", "nanoseconds", "off_cpu", "service", service] + funcs
    fid = {f: i + 1 for i, f in enumerate(funcs)}
    types = [(1, 2), (3, 4)]
    if with_off:
        types = [(5, 4)] + types if off_first else types + [(5, 4)]
    samples = []
    for stack, n, cpu, off in STACKS:
        if not with_off and not n:
            continue
        vals = [n, cpu, off] if with_off else [n, cpu]
        if with_off and off_first:
            vals = [off, n, cpu]
        samples.append(([fid[f] for f in reversed(stack)], vals, [(6, 7)]))
    return profile(strings, types, samples, locations=[(i, i) for i in fid.values()],
                   functions=[(i, 8 + i - 1) for i in fid.values()], time_ns=time_ns)


def get_json(srv, path):
    st, body = srv.get(path)
    check(st == 200, f"{path}: {st} {body[:300]}")
    return json.loads(body)


def tree_totals(fg):
    """The flame graph's root total and each function's total (summed over
    its nodes; no recursion here), from the server's JSON."""
    nodes, names = fg["nodes"], fg["names"]
    per = {}
    for i in range(0, len(nodes), 4):
        nm = names[nodes[i]]
        per[nm] = per.get(nm, 0) + nodes[i + 1]
    return nodes[1], per


def post_all(srv, now):
    t0 = (now - 300) * SEC
    for i, (svc, kw) in enumerate((("offsvc", {}), ("offsvc", {"off_first": True}),
                                   ("cpuonly", {"with_off": False}))):
        st, body = srv.post(f"/api/v1/profiles?service={svc}",
                            offcpu_profile(svc, t0 + (i % 2) * 60 * SEC, **kw))
        check(st == 202, f"ingest {svc} {kw}: {st} {body[:300]}")


def test_server_off_cpu(tmp):
    """Three profiles (off_cpu third, off_cpu first, CPU only) stored and
    read back by type: the CPU view as before off-CPU (no off-CPU frame),
    the off-CPU view with each wait's known share, wall their sum on one
    tree; the timeline and the applications by type; collapsed and pprof
    exports (read by `go tool pprof -sample_index=off_cpu`); a bad type a
    400 naming it, on every endpoint."""
    srv = Server(tmp)
    try:
        now = int(time.time())
        post_all(srv, now)
        rng = f"from={now - 600}&to={now}"
        fg = {}
        for t in ("cpu", "off_cpu", "wall"):
            fg[t] = get_json(srv, f"/api/v1/profile?app=offsvc&{rng}&format=flamegraph&type={t}")
            check(fg[t]["type"] == t and fg[t]["profiles"] == 2, f"{t}: {str(fg[t])[:200]}")
        total, per = tree_totals(fg["cpu"])
        check(total == 2 * CPU and not any(n.startswith("[off-CPU") for n in per),
              f"cpu view: total {total}, names {sorted(per)}")
        check(per["work"] == 2 * 300 * MS and per["io_read"] == 2 * 50 * MS, f"cpu: {per}")
        # The default is CPU: the same tree without type=.
        check(get_json(srv, f"/api/v1/profile?app=offsvc&{rng}&format=flamegraph")["total"] == total,
              "no type= is not cpu")
        total, per = tree_totals(fg["off_cpu"])
        check(total == 2 * OFF and "work" not in per, f"off_cpu: total {total}, {per}")
        shares = {k: per[k] / total for k in ("[off-CPU: lock]", "[off-CPU: poll]", "[off-CPU: io]")}
        check(abs(shares["[off-CPU: lock]"] - 6 / 9) < 1e-9 and abs(shares["[off-CPU: io]"] - 1 / 9) < 1e-9,
              f"off-CPU shares {shares}")
        check(fg["off_cpu"]["off_cpu"] == 2 * OFF, f"off_cpu field {fg['off_cpu']['off_cpu']}")
        total, per = tree_totals(fg["wall"])
        check(total == 2 * (CPU + OFF) and per["io_read"] == 2 * (50 * MS + SEC),
              f"wall: total {total}, io_read {per.get('io_read')}")
        print(f"    cpu {2 * CPU / SEC:.2f} s, off-CPU {2 * OFF / SEC:.0f} s (lock "
              f"{shares['[off-CPU: lock]']:.3f}), wall {total / SEC:.2f} s")

        # A CPU-only application: its off-CPU view is empty, its profiles counted.
        e = get_json(srv, f"/api/v1/profile?app=cpuonly&{rng}&format=flamegraph&type=off_cpu")
        check(e["total"] == 0 and e["profiles"] == 1 and e["off_cpu"] == 0, f"cpuonly off_cpu: {e}")

        # Collapsed: off-CPU in nanoseconds.
        got = server_tests.stacks_of(srv, f"app=offsvc&{rng}&type=off_cpu")
        check(got == {";".join(s): 2 * off for s, _, _, off in STACKS if off}, f"collapsed: {got}")

        # Timeline: each type's series, sums equal to the tree's.
        for t, want in (("cpu", 2 * CPU), ("off_cpu", 2 * OFF), ("wall", 2 * (CPU + OFF))):
            tl = get_json(srv, f"/api/v1/timeline?app=offsvc&{rng}&step=60&type={t}")
            s = sum(tl[f"{t}_cores"]) * tl["step"] * SEC
            check(tl["type"] == t and abs(s - want) < 1000, f"timeline {t}: {s} want {want}")
        tl = get_json(srv, f"/api/v1/timeline?app=offsvc&{rng}&step=60&type=off_cpu&group_by=pid")
        check(tl["groups"] and "off_cpu_cores" in tl["groups"][0], f"grouped: {str(tl)[:300]}")

        # Applications: both, sorted by the type asked.
        apps = get_json(srv, f"/api/v1/applications?{rng}")["applications"]
        by = {a["name"]: a for a in apps}
        check(by["cpuonly"]["off_cpu_cores"] == 0 and by["offsvc"]["off_cpu_cores"] > 0,
              f"applications: {apps}")
        check(abs(by["offsvc"]["off_cpu_cores"] * 600 * SEC - 2 * OFF) < 1000, f"offsvc: {by['offsvc']}")
        names = [a["name"] for a in get_json(srv, f"/api/v1/applications?{rng}&type=off_cpu")["applications"]]
        check(names.index("offsvc") < names.index("cpuonly"), f"by off-CPU: {names}")

        # pprof: off_cpu a type of its own, the default the one asked for.
        st, body = srv.get(f"/api/v1/profile?app=offsvc&{rng}&type=off_cpu")
        check(st == 200, f"pprof: {st}")
        path = os.path.join(tmp, "off.pb.gz")
        with open(path, "wb") as f:
            f.write(body)
        r = raw(path)
        check("samples/count cpu/nanoseconds off_cpu/nanoseconds[dflt]" in r.replace("\n", " "),
              f"pprof types: {r[:300]}")
        top = subprocess.run([go_binary(), "tool", "pprof", "-sample_index=off_cpu", "-top", path],
                             capture_output=True, text=True, timeout=120, check=True).stdout
        check("[off-CPU: lock]" in top and "12s" in top, f"go tool pprof -top: {top[:600]}")

        # A bad type: 400 with the reason, everywhere.
        for path in (f"/api/v1/profile?app=offsvc&{rng}&type=offcpu",
                     f"/api/v1/timeline?app=offsvc&{rng}&type=CPU",
                     f"/api/v1/applications?{rng}&type="):
            st, body = srv.get(path)
            check(st == 400 and b"type:" in body and b"cpu, off_cpu, wall" in body,
                  f"{path}: {st} {body[:200]}")
    finally:
        srv.stop()


TESTS = [test_server_off_cpu]
