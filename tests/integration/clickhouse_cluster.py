"""Two local clickhouse-server processes (Debian's, tools/deps.sh) as a
two-shard cluster named `cx`, started once per test run on loopback ports,
each with its own data directory, removed at exit. With ddl=True (the
ON CLUSTER test), a local ZooKeeper (Debian's `zookeeper`, run with java)
is started too and the nodes get ClickHouse's distributed DDL."""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

CLUSTER = "cx"

CONFIG = """<?xml version="1.0"?>
<yandex>
  <logger><level>warning</level><log>{d}/server.log</log><errorlog>{d}/error.log</errorlog></logger>
  <http_port>{http}</http_port>
  <tcp_port>{tcp}</tcp_port>
  <listen_host>127.0.0.1</listen_host>
  <path>{d}/data/</path>
  <tmp_path>{d}/tmp/</tmp_path>
  <user_files_path>{d}/user_files/</user_files_path>
  <format_schema_path>{d}/format_schemas/</format_schema_path>
  <mark_cache_size>67108864</mark_cache_size>
  <uncompressed_cache_size>67108864</uncompressed_cache_size>
  <max_concurrent_queries>50</max_concurrent_queries>
  <users>
    <default><password></password><networks><ip>127.0.0.1</ip></networks>
      <profile>default</profile><quota>default</quota></default>
  </users>
  <profiles><default><max_memory_usage>2000000000</max_memory_usage>
    <log_queries>1</log_queries></default></profiles>
  <quotas><default></default></quotas>
  <remote_servers><{cluster}>{shards}</{cluster}></remote_servers>
{ddl}</yandex>
"""


# ClickHouse's distributed DDL (ON CLUSTER): a queue in ZooKeeper.
DDL = """  <zookeeper><node><host>127.0.0.1</host><port>{zk}</port></node>
    <session_timeout_ms>30000</session_timeout_ms></zookeeper>
  <distributed_ddl><path>/clickhouse/task_queue/ddl</path></distributed_ddl>
"""


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def end_process(p, sig):
    """Sends sig to p if it still runs and waits for it: 30 s, then SIGKILL."""
    if p and p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


class Node:
    def __init__(self, root, i, tcp_ports, zk_port=None):
        self.dir = os.path.join(root, f"node{i}")
        self.http, self.tcp = _free_port(), tcp_ports[i]
        self.tcp_ports = tcp_ports
        os.makedirs(self.dir)
        self.configure(zk_port)
        self.p = None
        self.start()

    def configure(self, zk_port, weights=None):
        """Writes the node's config: with zk_port, distributed DDL over that
        ZooKeeper (taken at the next start); with weights, the cluster's
        shards given those weights (ClickHouse rereads its clusters from
        the file while running)."""
        weights = weights or [1] * len(self.tcp_ports)
        shards = "".join(f"<shard><weight>{w}</weight><replica><host>127.0.0.1</host>"
                         f"<port>{p}</port></replica></shard>"
                         for p, w in zip(self.tcp_ports, weights))
        with open(os.path.join(self.dir, "config.xml"), "w") as f:
            f.write(CONFIG.format(d=self.dir, http=self.http, tcp=self.tcp, cluster=CLUSTER,
                                  shards=shards, ddl=DDL.format(zk=zk_port) if zk_port else ""))
        self.zk_port = zk_port

    def cluster_weights(self):
        """The weights of the cluster's shards as this node has them now."""
        return [int(w) for w in self.query(
            f"SELECT shard_weight FROM system.clusters WHERE cluster = '{CLUSTER}' "
            "ORDER BY shard_num").split()]

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http}"

    def start(self):
        self.out = open(os.path.join(self.dir, "stdout.log"), "a")
        self.p = subprocess.Popen(["clickhouse-server", "--config-file",
                                   os.path.join(self.dir, "config.xml")],
                                  stdout=self.out, stderr=subprocess.STDOUT)
        end = time.monotonic() + 60
        while time.monotonic() < end:
            try:
                if self.query("SELECT 1").strip() == "1":
                    return
            except OSError:
                pass
            if self.p.poll() is not None:
                break
            time.sleep(0.1)
        raise RuntimeError(f"clickhouse-server did not start; see {self.dir}")

    def query(self, sql):
        req = urllib.request.Request(self.url + "/", data=sql.encode(), method="POST")
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.read().decode()

    def stop(self, kill=False):
        """Stops the node: by SIGTERM (it waits for its connections to end,
        which takes seconds once other nodes have queried it), or, with
        kill, at once by SIGKILL, as a node that crashed."""
        end_process(self.p, signal.SIGKILL if kill else signal.SIGTERM)
        self.p = None
        self.out.close()


class ZooKeeper:
    """A standalone ZooKeeper on a loopback port with its own data directory:
    Debian's jar run with java directly (no systemd, no /etc/zookeeper)."""
    JAR = "/usr/share/java/zookeeper.jar"

    def __init__(self, root):
        if not os.path.exists(self.JAR):
            raise RuntimeError(f"{self.JAR} missing: Debian's zookeeper package (make deps)")
        self.dir = os.path.join(root, "zookeeper")
        os.makedirs(os.path.join(self.dir, "data"))
        self.port = _free_port()
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write(f"tickTime=500\ndataDir={self.dir}/data\nclientPort={self.port}\n"
                    "clientPortAddress=127.0.0.1\nmaxClientCnxns=0\n"
                    "admin.enableServer=false\n4lw.commands.whitelist=srvr\n"
                    # a test's queue of a few DDL tasks: no fsync per write
                    "forceSync=no\n")
        self.out = open(os.path.join(self.dir, "zookeeper.log"), "w")
        t0 = time.monotonic()
        # A small heap and the client JIT only: it serves a few DDL tasks.
        self.p = subprocess.Popen(["java", "-Xmx128m", "-XX:+UseSerialGC",
                                   "-XX:TieredStopAtLevel=1", "-Dzookeeper.admin.enableServer=false",
                                   "-cp", self.JAR, "org.apache.zookeeper.server.ZooKeeperServerMain",
                                   cfg], stdout=self.out, stderr=subprocess.STDOUT)
        # Ready once it answers `srvr` as a server in a mode (standalone).
        end = time.monotonic() + 60
        while time.monotonic() < end and self.p.poll() is None:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                    s.sendall(b"srvr")
                    if b"Mode:" in s.recv(4096):
                        self.start_s = time.monotonic() - t0
                        return
            except OSError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"zookeeper did not start; see {self.dir}/zookeeper.log")

    def stop(self):
        end_process(self.p, signal.SIGTERM)
        self.p = None
        self.out.close()


_cluster = None
_root = None
_zk = None


def cluster(ddl=False):
    """The two nodes, started on first use; stopped and removed at exit.
    ddl: the nodes have distributed DDL (ON CLUSTER) over a ZooKeeper,
    started (and the nodes restarted) on the first such call."""
    global _cluster, _root, _zk
    if _cluster is None:
        _root = root = tempfile.mkdtemp(prefix="cx-clickhouse-")
        tcp = [_free_port(), _free_port()]
        nodes = []

        def cleanup():
            for n in nodes:
                n.stop()
            if _zk:
                _zk.stop()
            shutil.rmtree(root, ignore_errors=True)
        atexit.register(cleanup)
        if ddl:
            _zk = ZooKeeper(root)
        for i in range(2):
            nodes.append(Node(root, i, tcp, _zk.port if _zk else None))
        _cluster = nodes
    elif ddl and _zk is None:
        _zk = ZooKeeper(_root)
        # Both stopped at once: each waits seconds for its connections.
        stops = [threading.Thread(target=n.stop) for n in _cluster]
        for t in stops:
            t.start()
        for t in stops:
            t.join()
        for n in _cluster:
            n.configure(_zk.port)
            n.start()
    return _cluster


def zookeeper_start_s():
    """How long the ZooKeeper took to answer (None when not started)."""
    return _zk.start_s if _zk else None


_dbs = 0


def server_args():
    """codexray-server flags for a fresh database over the cluster."""
    global _dbs
    _dbs += 1
    nodes = cluster()
    # Written as people paste them: a space after the comma, the last URL with
    # a browser's trailing slash (which once hung the server, issue 30).
    return ["--clickhouse", ", ".join(n.url for n in nodes) + "/", "--clickhouse-cluster", CLUSTER,
            "--clickhouse-database", f"cx_{os.getpid()}_{_dbs}"]


def single_server_args():
    """The same for one ClickHouse server (the first node), no cluster."""
    global _dbs
    _dbs += 1
    return ["--clickhouse", cluster()[0].url, "--clickhouse-database", f"cx_{os.getpid()}_{_dbs}"]
