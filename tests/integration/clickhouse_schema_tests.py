"""The ClickHouse store's schema on the local two-shard cluster
(clickhouse_cluster.py): tables made ON CLUSTER through one URL (with a
ZooKeeper for ClickHouse's distributed DDL), and the schema version kept in
the database, which makes a server refuse a database of another schema."""
import os
import shutil
import subprocess
import threading
import time

import clickhouse_cluster
import server_tests as st
from clickhouse_tests import shard_rows
from server_tests import Server, check, good_profile

TABLES = ("meta", "functions", "stacks", "profiles", "psamples", "rollups", "rollup_buckets")
_dbs = 0


def new_db(what):
    global _dbs
    _dbs += 1
    return f"cx_{os.getpid()}_{what}{_dbs}"


class SlowServer(Server):
    """A server whose start may take long: through one URL its tables are
    made ON CLUSTER, a round through ZooKeeper and every node per table.
    Up once /healthz answers, within 60 s, while it runs. binary: another
    build's server (None: this one's)."""
    binary = None

    def start(self):
        self.log = open(os.path.join(os.path.dirname(self.data), f"server-{self.port}.log"), "a")
        self.p = subprocess.Popen([self.binary or st.SERVER, "--listen", f"127.0.0.1:{self.port}", "--data-dir",
                                   self.data, *self.args], stderr=self.log)
        end = time.monotonic() + 60
        while time.monotonic() < end and self.p.poll() is None:
            try:
                if self.get("/healthz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.05)
        raise st.Failure(f"the server did not come up (exit {self.p.poll()})")


def tables_on(node, db):
    return set(node.query(f"SELECT name FROM system.tables WHERE database = '{db}'").split())


def refused(tmp, *args, binary=None):
    """Runs a server expected to refuse to start: its exit code (None when
    it did start) and log."""
    try:
        p = subprocess.run([binary or st.SERVER, "--listen", f"127.0.0.1:{st.free_port()}", "--data-dir",
                            os.path.join(tmp, "refused-data"), *args], capture_output=True,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired as e:
        return None, e.stderr.decode() if e.stderr else ""
    for line in p.stderr.splitlines():
        if " store: " in line:
            print("    refused:", line.split(" store: ", 1)[1][:400])
    return p.returncode, p.stderr


def version_of(node, db):
    return node.query(f"SELECT v FROM {db}.meta WHERE k = 'schema_version'").split()


def test_ch_on_cluster(tmp):
    """One URL and the cluster's name: the tables are made ON CLUSTER on
    both nodes; a server through the other node answers with the same
    merged profile; rows lie on both shards; the size and retention
    through one URL cover both nodes; with a node down, the server refuses
    to start and says what failed."""
    t0 = time.monotonic()
    nodes = clickhouse_cluster.cluster(ddl=True)
    print(f"    ZooKeeper answered in {clickhouse_cluster.zookeeper_start_s():.1f} s, "
          f"the cluster had distributed DDL after {time.monotonic() - t0:.1f} s")
    db = new_db("oncluster")

    def args(node):
        return ["--clickhouse", node.url, "--clickhouse-cluster", clickhouse_cluster.CLUSTER,
                "--clickhouse-database", db, "--retention", "1d"]
    a_srv = SlowServer(tmp, *args(nodes[0]))
    b_srv = None
    try:
        want = {f"{t}{s}" for t in TABLES for s in ("", "_local")}
        for i, n in enumerate(nodes):
            got = tables_on(n, db)
            check(got == want, f"node {i}: tables {sorted(got)}")
        check(version_of(nodes[1], db) == ["4"], f"version {version_of(nodes[1], db)}")
        # Profiles of 16 processes (samples are sharded by profile), and 8 of
        # three days ago, each of its own app and function.
        for pid in range(100, 116):
            body = good_profile("onc", fn=f"work_{pid % 3}")
            check(a_srv.post(f"/api/v1/profiles?pid={pid}", body)[0] == 202, "post")
        old = time.time_ns() - 3 * 86400 * 10**9
        for i in range(8):
            body = st.profile(["", "samples", "count", "cpu", "nanoseconds", f"old_{i}", "service",
                               f"old{i}"], [(1, 2), (3, 4)], [([1], [5, 50000000], [(6, 7)])],
                              locations=[(1, 1)], functions=[(1, 5)], time_ns=old)
            r = a_srv.post(f"/api/v1/profiles?pid={i + 1}", body)
            check(r[0] == 202, f"post old: {r}")
        want_stacks = {"work_0": 25, "work_1": 30, "work_2": 25}
        got_a = st.stacks_of(a_srv, "app=onc&from=now-10m")
        check(got_a == want_stacks, f"through node 0: {got_a}")
        # The size through one URL counts every node's parts (read again
        # while background merges change them).
        for _ in range(20):
            by_node = [int(n.query(f"SELECT sum(bytes_on_disk) FROM system.parts WHERE active "
                                   f"AND database = '{db}'")) for n in nodes]
            size = st.metric(a_srv, "codexray_store_bytes")
            if by_node == [int(n.query(f"SELECT sum(bytes_on_disk) FROM system.parts WHERE "
                                       f"active AND database = '{db}'")) for n in nodes]:
                break
        print(f"    bytes per node {by_node}, the server's codexray_store_bytes {size:.0f}")
        check(all(by_node) and size == sum(by_node), f"size {size}, nodes {by_node}")
        rows = shard_rows(db, "psamples")
        print(f"    sample rows per shard {rows}")
        check(all(r > 0 for r in rows), f"rows not on both shards: {rows}")
        old_day = old // (86400 * 10**9)

        def old_rows(n):
            return sum(int(n.query(f"SELECT count() FROM {db}.{t}_local WHERE {w}").strip())
                       for t, w in (("stacks", f"day = {old_day}"),
                                    ("functions", f"day = {old_day}"),
                                    ("psamples", f"intDiv(time_ns, 86400000000000) = {old_day}"),
                                    ("profiles", f"intDiv(time_ns, 86400000000000) = {old_day}")))
        before = [old_rows(n) for n in nodes]
        check(all(before), f"the old day's rows not on both nodes: {before}")
        # Through the other node: the same profile; its retention (as it
        # starts) drops the old day on both nodes.
        b_srv = SlowServer(tmp, *args(nodes[1]))
        got_b = st.stacks_of(b_srv, "app=onc&from=now-10m")
        check(got_b == want_stacks, f"through node 1: {got_b}")
        deadline = time.time() + 30
        while any(old_rows(n) for n in nodes) and time.time() < deadline:
            time.sleep(0.3)
        after = [old_rows(n) for n in nodes]
        print(f"    the old day's rows per node {before} -> {after}")
        check(after == [0, 0], f"retention left {after}")
        check(st.stacks_of(b_srv, "app=onc&from=now-10m") == want_stacks, "kept day after")
        check("(stored now)" not in open(os.path.join(tmp, f"server-{b_srv.port}.log")).read(),
              "the second server stored the version again")
    finally:
        a_srv.stop()
        if b_srv:
            b_srv.stop()
    # A node down (crashed): the DDL cannot run on it, and the server says so.
    nodes[1].stop(kill=True)
    try:
        t = time.monotonic()
        db = new_db("down")
        rc, log = refused(tmp, "--clickhouse", nodes[0].url, "--clickhouse-cluster",
                          clickhouse_cluster.CLUSTER, "--clickhouse-database", db,
                          "--clickhouse-timeout-ms", "4000")
        print(f"    refused in {time.monotonic() - t:.1f} s with a node down")
        check(rc not in (0, None), f"started with a node down: {rc}")
        check("cannot create the tables ON CLUSTER cx through " + nodes[0].url in log and
              "every node of the cluster must be up" in log, f"the refusal: {log[-800:]}")
    finally:
        nodes[1].start()


V1 = (("meta", "draw UInt64, k String, v UInt64", "MergeTree ORDER BY (draw, k)", "draw"),
      ("functions", "key_a UInt64, key_b UInt64, name String, file String",
       "ReplacingMergeTree ORDER BY (key_a, key_b)", "key_a"),
      ("stacks", "key_a UInt64, key_b UInt64, fa Array(UInt64), fb Array(UInt64)",
       "ReplacingMergeTree ORDER BY (key_a, key_b)", "key_a"),
      ("samples", "app String, time_ns Int64, host String, pid Int64, labels String, "
       "stack_a UInt64, stack_b UInt64, labelset String, samples Int64, cpu_ns Int64",
       "ReplacingMergeTree PARTITION BY intDiv(time_ns, 86400000000000) "
       "ORDER BY (app, time_ns, host, pid, stack_a, stack_b, labelset)",
       "cityHash64(app, stack_a)"))


def make_tables(db, defs):
    """Tables made by hand on both nodes, as the server makes them on a cluster."""
    for n in clickhouse_cluster.cluster():
        n.query(f"CREATE DATABASE {db}")
        for name, cols, engine, shard in defs:
            n.query(f"CREATE TABLE {db}.{name}_local ({cols}) ENGINE = {engine}")
            n.query(f"CREATE TABLE {db}.{name} AS {db}.{name}_local ENGINE = "
                    f"Distributed({clickhouse_cluster.CLUSTER}, {db}, {name}_local, {shard})")


def test_ch_schema_version(tmp):
    """A new database gets the schema version; a server meeting one of an
    older schema (the first, with no version, or with version 2's row), or
    of a newer version refuses to start, names the database and what to
    do, and changes nothing in it (version 2 is upgraded:
    test_ch_schema_upgrade);
    a database made before versions were kept, with this schema's tables,
    is taken and gets its version."""
    nodes = clickhouse_cluster.cluster()
    urls = ",".join(n.url for n in nodes)

    def args(db):
        return ["--clickhouse", urls, "--clickhouse-cluster", clickhouse_cluster.CLUSTER,
                "--clickhouse-database", db]
    # The first schema's tables, no version row.
    db1 = new_db("v1")
    make_tables(db1, V1)
    before = [tables_on(n, db1) for n in nodes]
    rc, log = refused(tmp, *args(db1))
    check(rc not in (0, None), f"started on the first schema: {rc}")
    check(f"database {db1} at {nodes[0].url}" in log and "version 1" in log and
          "new --clickhouse-database" in log, f"the refusal: {log[-800:]}")
    check([tables_on(n, db1) for n in nodes] == before, "tables changed in the refused database")
    # A newer schema's version row; version 2's row over tables that are
    # not version 2's (the first schema's): not upgraded.
    for v, tabs, text in ((5, V1[:1], "holds schema version 5, newer than this server's 4"),
                          (2, V1, "holds schema version 2, but its tables are neither that "
                           "version's nor this server's (4), so it cannot be upgraded")):
        db3 = new_db(f"v{v}")
        make_tables(db3, tabs)
        before = [tables_on(n, db3) for n in nodes]
        nodes[0].query(f"INSERT INTO {db3}.meta_local VALUES (0, 'schema_version', {v})")
        rc, log = refused(tmp, *args(db3))
        check(rc not in (0, None), f"started on schema {v}: {rc}")
        check(f"database {db3} at {nodes[0].url} {text}" in log and "--clickhouse-database" in log,
              f"the refusal: {log[-800:]}")
        check([tables_on(n, db3) for n in nodes] == before, "tables made in a refused database")
    # A new database: version 4 stored, and taken again at the next start.
    db2 = new_db("v4")
    srv = Server(tmp, *args(db2))
    try:
        check(version_of(nodes[0], db2) == ["4"], f"version {version_of(nodes[0], db2)}")
        check(srv.post("/api/v1/profiles", good_profile("ver"))[0] == 202, "post")
        srv.stop()
        # Made before versions were kept: the same tables, no version row.
        for n in nodes:
            n.query(f"ALTER TABLE {db2}.meta_local DELETE WHERE k = 'schema_version'")
        deadline = time.time() + 30
        while version_of(nodes[0], db2) and time.time() < deadline:
            time.sleep(0.2)
        check(version_of(nodes[0], db2) == [], "the version row not deleted")
        srv.start()
        check(version_of(nodes[0], db2) == ["4"], "the version not stored in the old database")
        check(st.stacks_of(srv, "app=ver&from=now-10m") == {"work": 5}, "its profile")
        log = open(os.path.join(tmp, f"server-{srv.port}.log")).read()
        check(log.count("schema version 4 (stored now)") == 2, f"log: {log[-600:]}")
    finally:
        srv.stop()


# The last commit whose server makes schema version 2 (before off-CPU
# time), and one that makes version 3 (a samples row a stack).
V2_COMMIT = "eb3d955"
V3_COMMIT = "00a427b"


def old_server(tmp, commit):
    """codexray-server of git commit, built in a temporary clone of this
    repository, once: kept in build/."""
    out = os.path.join(st.ROOT, "build", f"server-{commit}", "codexray-server")
    if os.path.exists(out):
        return out
    src = os.path.join(tmp, f"src-{commit}")
    t = time.monotonic()
    subprocess.run(["git", "clone", "-q", "--no-checkout", st.ROOT, src], check=True)
    subprocess.run(["git", "-C", src, "checkout", "-q", commit], check=True)
    r = subprocess.run(["make", "-C", src, "-j2", "build/codexray-server"], capture_output=True,
                       text=True)
    check(r.returncode == 0, f"building the {commit} server: {r.stderr[-800:]}")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    shutil.copy(os.path.join(src, "build", "codexray-server"), out + ".tmp")
    os.rename(out + ".tmp", out)
    shutil.rmtree(src)
    print(f"    the {commit} server built in {time.monotonic() - t:.0f} s")
    return out


def v2_server(tmp):
    return old_server(tmp, V2_COMMIT)


class V2Server(SlowServer):
    binary = None  # set by the test: v2_server()


class V3Server(SlowServer):
    binary = None  # set by the test: old_server(tmp, V3_COMMIT)


# Version 2's tables that hold off_cpu_ns Int64 after the upgrade (samples
# is copied into psamples, whose off_cpu_ns is an array, and dropped).
UPGRADED = ("profiles", "rollups")


def versions_of(node, db):
    """The distinct schema versions in meta (servers starting at once may
    each store the same row)."""
    return node.query(f"SELECT DISTINCT v FROM {db}.meta WHERE k = 'schema_version' "
                      "ORDER BY v").split()


def off_cpu_on(node, db):
    """The tables (T and T_local) holding off_cpu_ns on node."""
    return set(node.query(f"SELECT table FROM system.columns WHERE database = '{db}' AND "
                          f"name = 'off_cpu_ns' AND type = 'Int64'").split())


def start_together(mk, n=2):
    """n servers started at once (mk(i) makes one): the list, or Failure."""
    out, errs = [None] * n, []

    def one(i):
        try:
            out[i] = mk(i)
        except Exception as e:  # noqa: BLE001 (reported below)
            errs.append(f"server {i}: {e}")
    ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errs:
        for s in out:
            if s:
                s.stop()
        raise st.Failure("; ".join(errs))
    return out


def upgrade_case(tmp, nodes, db, urls, half, old_cls=V2Server, from_version=2):
    """A version 2 database made by the V2_COMMIT server (from_version 3:
    version 3's, old_cls V3Server) through urls,
    holding profiles; half(db) alters some tables by hand (an upgrade
    interrupted half-way); two servers of this build started at once
    upgrade it: off_cpu_ns on every node's tables, the samples copied
    into psamples (rows on both shards) and samples dropped, version 4
    alone in meta once ClickHouse has run the deletion, the old profiles
    read (off-CPU 0), new off-CPU profiles stored, and the V2_COMMIT server
    refuses the database as newer."""
    import offcpu_server_tests as oc

    def args(url_list):
        return ["--clickhouse", url_list, "--clickhouse-cluster", clickhouse_cluster.CLUSTER,
                "--clickhouse-database", db]
    for d in ("v2", "new0", "new1"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    old = old_cls(os.path.join(tmp, "v2"), *args(urls))
    try:
        for pid in range(100, 108):
            r = old.post(f"/api/v1/profiles?pid={pid}", good_profile("upg", fn=f"old_{pid % 2}"))
            check(r[0] == 202, f"post to the v2 server: {r}")
        want_old = {"old_0": 20, "old_1": 20}
        check(st.stacks_of(old, "app=upg&from=now-10m") == want_old, "the v2 server's profile")
    finally:
        old.stop()
    check(versions_of(nodes[0], db) == [str(from_version)],
          f"old version {versions_of(nodes[0], db)}")
    check(from_version == 3 or not any(off_cpu_on(n, db) for n in nodes),
          "off_cpu_ns in a v2 database")
    half(db)
    before = [off_cpu_on(n, db) for n in nodes]
    print(f"    off_cpu_ns before the upgrade: {[sorted(b) for b in before]}")

    dirs = [os.path.join(tmp, f"new{i}") for i in range(2)]
    srvs = start_together(lambda i: SlowServer(dirs[i], *args(urls)))
    try:
        want = {f"{t}{s}" for t in UPGRADED for s in ("", "_local")}
        for i, n in enumerate(nodes):
            check(off_cpu_on(n, db) == want, f"node {i}: off_cpu_ns on {sorted(off_cpu_on(n, db))}")
        for i, n in enumerate(nodes):
            check(int(n.query(f"SELECT count() FROM {db}.psamples_local")) > 0, f"node {i} empty")
            left = n.query(f"SELECT name FROM system.tables WHERE database = '{db}' AND "
                           "name IN ('samples', 'samples_local')").split()
            check(not left, f"node {i}: version 3's samples not dropped: {left}")
        deadline = time.time() + 30
        while versions_of(nodes[0], db) != ["4"] and time.time() < deadline:
            time.sleep(0.2)
        check(versions_of(nodes[0], db) == ["4"], f"versions {versions_of(nodes[0], db)}")
        logs = "".join(open(os.path.join(d, f"server-{s.port}.log")).read()
                       for d, s in zip(dirs, srvs))
        added = [l.split(" store: ", 1)[1] for l in logs.splitlines()
                 if " store: " in l and "column off_cpu_ns " in l]
        for l in added:
            print("    ", l[:200])
        check((added or from_version == 3) and "(upgraded now)" in logs and
              "copied into psamples" in logs,
              f"the upgrade not logged: {logs[-1500:]}")
        for s in srvs:
            check(st.stacks_of(s, "app=upg&from=now-10m") == want_old, "the old profiles")
            check(st.stacks_of(s, "app=upg&from=now-10m&type=off_cpu") == {},
                  "the old profiles' off-CPU time is not 0")
        now = time.time_ns()
        r = srvs[0].post("/api/v1/profiles?pid=7", oc.offcpu_profile("upgoff", now))
        check(r[0] == 202, f"post an off-CPU profile: {r}")
        got = st.stacks_of(srvs[1], "app=upgoff&from=now-10m&type=off_cpu")
        check(got == {";".join(s): off for s, _, _, off in oc.STACKS if off}, f"off-CPU: {got}")
    finally:
        for s in srvs:
            s.stop()
    rc, log = refused(tmp, *args(urls), binary=old_cls.binary)
    check(rc not in (0, None) and
          f"holds schema version 4, newer than this server's {from_version}" in log,
          f"the v2 server on the upgraded database: {rc} {log[-600:]}")


def test_ch_schema_upgrade(tmp):
    """Version 2 to 4 in place (issues 32 and 34): through every node's URL, and
    through one URL ON CLUSTER; each with an upgrade interrupted half-way
    and two servers starting at once (upgrade_case)."""
    V2Server.binary = v2_server(tmp)
    nodes = clickhouse_cluster.cluster(ddl=True)

    def node1_samples(db):
        for t in ("samples_local", "samples"):
            nodes[1].query(f"ALTER TABLE {db}.{t} ADD COLUMN off_cpu_ns Int64 DEFAULT 0 "
                           "AFTER cpu_ns")

    def node0_profiles_and_row(db):
        nodes[0].query(f"ALTER TABLE {db}.profiles_local ADD COLUMN off_cpu_ns Int64 DEFAULT 0 "
                       "AFTER labels")
        nodes[0].query(f"INSERT INTO {db}.meta VALUES (0, 'schema_version', 3)")
    urls = ",".join(n.url for n in nodes)
    print("    every node's URL:")
    upgrade_case(tmp, nodes, new_db("upg"), urls, node1_samples)
    print("    one URL, ON CLUSTER:")
    upgrade_case(os.path.join(tmp, "oc"), nodes, new_db("upgoc"), nodes[0].url,
                 node0_profiles_and_row)


def test_ch_schema_upgrade_v3(tmp):
    """Version 3 to 4 in place (issue 34): version 3's samples (a row a
    stack, made by the V3_COMMIT server) copied into psamples and
    dropped, by two servers starting at once, through every node's URL and
    through one URL ON CLUSTER; the old profiles read the same."""
    V3Server.binary = old_server(tmp, V3_COMMIT)
    nodes = clickhouse_cluster.cluster(ddl=True)
    urls = ",".join(n.url for n in nodes)
    print("    every node's URL:")
    upgrade_case(tmp, nodes, new_db("upg3"), urls, lambda db: None, V3Server, 3)
    print("    one URL, ON CLUSTER:")
    upgrade_case(os.path.join(tmp, "oc"), nodes, new_db("upg3oc"), nodes[0].url,
                 lambda db: None, V3Server, 3)


TESTS = [test_ch_on_cluster, test_ch_schema_version, test_ch_schema_upgrade,
         test_ch_schema_upgrade_v3]
