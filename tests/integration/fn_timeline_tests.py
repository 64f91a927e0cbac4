"""A function over time (GET /api/v1/timeline?fn=NAME) over real HTTP on a
real server and its SQLite store: three hours of one-minute profiles with a
deploy after which parse costs three times as much; its self and total per
step, read from rollups and raw, with recursion and interpreter frames."""
import json
import time
import urllib.parse

from server_tests import Server, check, field, metric

H = 3 * 3600
DEPLOY_MIN = 100  # parse costs 10 ms a minute before, 30 ms after
INTERP = "[interpreter]/usr/bin/python3"

# (frames root first as (name, file), cpu ms before the deploy, after)
STACKS = [
    ([("main", "m.c"), ("serve", "s.c"), ("parse", "p.c")], 10, 30),
    ([("main", "m.c"), ("serve", "s.c"), ("render", "r.c")], 20, 20),
    ([("main", "m.c"), ("serve", "s.c")], 5, 5),
    ([("main", "m.c"), ("idle", "i.c")], 40, 40),
    ([("main", "m.c"), ("serve", "s.c"), ("serve", "s.c"), ("parse", "p.c")], 1, 1),
    ([("main", "m.c"), ("serve", "s.c"), ("parse", "p.c"), ("python3+0x10", INTERP)], 2, 2),
]


def minute_profile(t_ns, after):
    """One minute's pprof: every stack of STACKS, one location a function."""
    strings = ["", "samples", "count", "cpu", "nanoseconds"]
    sid = {}

    def s(x):
        if x not in sid:
            sid[x] = len(strings)
            strings.append(x)
        return sid[x]

    funcs = {}
    out = field(9, t_ns) + field(1, field(1, 1) + field(2, 2)) + field(1, field(1, 3) + field(2, 4))
    samples = b""
    for frames, before, aft in STACKS:
        locs = []
        for name, file in reversed(frames):  # leaf first
            if (name, file) not in funcs:
                funcs[(name, file)] = len(funcs) + 1
            locs.append(funcs[(name, file)])
        ms = aft if after else before
        body = b"".join(field(1, x) for x in locs) + field(2, ms) + field(2, ms * 10**6)
        samples += field(2, body)
    out += samples
    for (name, file), i in funcs.items():
        out += field(4, field(1, i) + field(4, field(1, i)))
        out += field(5, field(1, i) + field(2, s(name)) + field(4, s(file)))
    for x in strings:
        out += field(6, x)
    return out


def want_ms(fn, kind, after, hidden=True):
    """The function's CPU in one minute, from STACKS."""
    total = 0
    for frames, before, aft in STACKS:
        names = [n for n, f in frames if not (hidden and f == INTERP)]
        if fn not in names or (kind == "self" and names[-1] != fn):
            continue
        total += aft if after else before
    return total


def fetch(srv, **q):
    st, body = srv.get("/api/v1/timeline?" + urllib.parse.urlencode(q))
    return st, json.loads(body)


def test_server_fn_timeline(tmp):
    """parse's self and total per 10 minutes show the deploy as a step (x3
    its own CPU), equal read from rollups or raw (a host filter), and per
    minute over a ragged hour; serve's total counts a recursive stack
    once; interp=shown moves time off parse's self; bad requests get 400."""
    srv = Server(tmp)
    try:
        base = (int(time.time()) - H - 300) // H * H  # a complete 3-hour bucket
        for m in range(H // 60):
            body = minute_profile((base + m * 60 + 1) * 10**9, m >= DEPLOY_MIN)
            st, resp = srv.post("/api/v1/profiles?service=svc&host=h1", body)
            check(st == 202, f"post {m}: {st} {resp}")
        deadline = time.time() + 60
        while metric(srv, "codexray_rollups_pending") or metric(srv, "codexray_rollups_built_total") < 19:
            check(time.time() < deadline, "rollups not built within 60 s")
            time.sleep(0.5)
        step = 600
        for fn, kind in (("parse", "self"), ("parse", "total"), ("serve", "self"), ("serve", "total")):
            st, a = fetch(srv, app="svc", fn=fn, **{"from": base, "to": base + H, "step": step})
            check(st == 200, f"{fn}: {st} {a}")
            check(a["fn"] == fn and len(a[kind + "_cores"]) == H // step, f"{fn}: {a}")
            for i, v in enumerate(a[kind + "_cores"]):
                want = sum(want_ms(fn, kind, i * 10 + k >= DEPLOY_MIN) for k in range(10)) * 1e6 / (step * 1e9)
                check(abs(v - want) <= 1e-9 + want * 1e-9, f"{fn} {kind} step {i}: {v} != {want}")
            # Read raw (a host filter reads no rollup): the same figures.
            st, r = fetch(srv, app="svc", fn=fn, host="h1", **{"from": base, "to": base + H, "step": step})
            check(st == 200 and r[kind + "_cores"] == a[kind + "_cores"],
                  f"{fn} {kind}: rollups {a[kind + '_cores']} != raw {r[kind + '_cores']}")
        st, a = fetch(srv, app="svc", fn="parse", **{"from": base, "to": base + H, "step": step})
        before, after = a["self_cores"][DEPLOY_MIN // 10 - 1], a["self_cores"][DEPLOY_MIN // 10]
        check(after > 2 * before, f"no step at the deploy: {before} then {after}")
        check(len(a["cpu_cores"]) == len(a["self_cores"]), f"the application's timeline: {a}")
        # The application's CPU beside it: every stack, every minute.
        app_ms = sum(x[1] for x in STACKS)
        check(abs(a["cpu_cores"][0] - app_ms * 10 * 1e6 / 600e9) < 1e-9, f"app cores {a['cpu_cores'][0]}")
        # A ragged hour by the minute: 60 steps, the deploy at its minute.
        frm = base + (DEPLOY_MIN - 30) * 60 + 17
        st, a = fetch(srv, app="svc", fn="parse", **{"from": frm, "to": frm + 3600, "step": 60})
        check(st == 200 and len(a["self_cores"]) == 60, f"by the minute: {st} {a}")
        for i, v in enumerate(a["total_cores"]):
            m = (frm - 17 - base) // 60 + i + 1  # the profile at base + m*60 + 1 is in step i
            want = want_ms("parse", "total", m >= DEPLOY_MIN) * 1e6 / 60e9
            check(abs(v - want) < 1e-12, f"minute {i}: {v} != {want}")
        # Interpreter frames shown: the 2 ms under parse are no longer its self.
        st, a = fetch(srv, app="svc", fn="parse", interp="shown", **{"from": base, "to": base + H, "step": H})
        want = sum(want_ms("parse", "self", m >= DEPLOY_MIN, hidden=False) for m in range(H // 60))
        check(st == 200 and abs(a["self_cores"][0] * H * 1e9 - want * 1e6) < 1e3, f"shown: {a} != {want} ms")
        st, a = fetch(srv, app="svc", fn="python3+0x10", **{"from": base, "to": base + H, "step": H})
        check(st == 200 and a["total_cores"] == [0], f"a hidden frame counted: {a}")
        st, a = fetch(srv, app="svc", fn="python3+0x10", interp="shown", **{"from": base, "to": base + H, "step": H})
        check(st == 200 and a["self_cores"][0] > 0, f"a shown interpreter frame: {a}")
        st, a = fetch(srv, app="svc", fn="no_such_fn", **{"from": base, "to": base + H, "step": step})
        check(st == 200 and a["total_cores"] == [0] * (H // step), f"unknown function: {a}")
        for q, why in (({"fn": ""}, "fn"), ({"fn": "parse", "group_by": "host"}, "fn"),
                       ({"fn": "parse", "interp": "no"}, "interp")):
            st, a = fetch(srv, app="svc", **q)
            check(st == 400 and why in a["error"], f"{q}: {st} {a}")
        print(f"    parse self per 10 min {before * 600:.3f} -> {after * 600:.3f} core-seconds at the deploy;"
              " rollups equal raw")
    finally:
        srv.stop()


TESTS = [test_server_fn_timeline]
