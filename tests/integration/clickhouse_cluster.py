"""Two local clickhouse-server processes (Debian's, tools/deps.sh) as a
two-shard cluster named `cx`, started once per test run on loopback ports,
each with its own data directory, removed at exit."""
import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
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
  <profiles><default><max_memory_usage>2000000000</max_memory_usage></default></profiles>
  <quotas><default></default></quotas>
  <remote_servers><{cluster}>{shards}</{cluster}></remote_servers>
</yandex>
"""


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Node:
    def __init__(self, root, i, tcp_ports):
        self.dir = os.path.join(root, f"node{i}")
        self.http, self.tcp = _free_port(), tcp_ports[i]
        os.makedirs(self.dir)
        shards = "".join(f"<shard><replica><host>127.0.0.1</host><port>{p}</port></replica></shard>"
                         for p in tcp_ports)
        with open(os.path.join(self.dir, "config.xml"), "w") as f:
            f.write(CONFIG.format(d=self.dir, http=self.http, tcp=self.tcp, cluster=CLUSTER,
                                  shards=shards))
        self.p = None
        self.start()

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

    def stop(self):
        if self.p and self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p = None
        self.out.close()


_cluster = None


def cluster():
    """The two nodes, started on first use; stopped and removed at exit."""
    global _cluster
    if _cluster is None:
        root = tempfile.mkdtemp(prefix="cx-clickhouse-")
        tcp = [_free_port(), _free_port()]
        nodes = []

        def cleanup():
            for n in nodes:
                n.stop()
            shutil.rmtree(root, ignore_errors=True)
        atexit.register(cleanup)
        for i in range(2):
            nodes.append(Node(root, i, tcp))
        _cluster = nodes
    return _cluster


_dbs = 0


def server_args():
    """codexray-server flags for a fresh database over the cluster."""
    global _dbs
    _dbs += 1
    nodes = cluster()
    return ["--clickhouse", ",".join(n.url for n in nodes), "--clickhouse-cluster", CLUSTER,
            "--clickhouse-database", f"cx_{os.getpid()}_{_dbs}"]


def single_server_args():
    """The same for one ClickHouse server (the first node), no cluster."""
    global _dbs
    _dbs += 1
    return ["--clickhouse", cluster()[0].url, "--clickhouse-database", f"cx_{os.getpid()}_{_dbs}"]
