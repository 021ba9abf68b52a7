"""A real Redis Cluster to test against: three primaries of the test run's own on 127.0.0.1,
joined with `redis-cli --cluster create`, and a handle that can take down and bring back the
node that owns a key's slot, as when a Cluster node restarts."""

from __future__ import annotations

import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from redis.crc import key_slot

from tests.support.machine import HOST
from tests.support.processes import PROCESS_START_S, Running, start_process
from tests.support.redis import redis_pings
from tests.support.waits import WAIT_S

PRIMARIES = 3
BUS_PORT_OFFSET = 10000  # a Cluster node talks to its peers on its port + 10000
# Ports low enough that the bus port is a valid one too, and clear of the usual services.
_PORT_RANGE = (20000, 50000)
# How long a node may be unreachable before its peers call it failed (and, with no replica to
# take its slots, the Cluster says cluster_state:fail): long enough that a node stalled on a busy
# machine is not taken for dead, short enough for a test to see it within its bounded wait.
NODE_TIMEOUT_MS = 5000
_MISSING = "The Redis Cluster tests need redis-server and redis-cli: apt install redis-server redis-tools"


class ClusterMissing(LookupError):
    """No redis-server or redis-cli to start a Cluster with."""


def cluster_missing() -> str | None:
    """Why `redis_cluster` cannot start a Cluster here, and how to fix it; `None` when it can."""
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        return _MISSING
    return None


def _port_is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((HOST, port))
        except OSError:
            return False
        return True


def cluster_port() -> int:
    """A free 127.0.0.1 port whose Cluster bus port (port + 10000) is free too."""
    while True:
        port = random.randint(*_PORT_RANGE)
        if _port_is_free(port) and _port_is_free(port + BUS_PORT_OFFSET):
            return port


def _cli(port: int, *arguments: str) -> str:
    """What `redis-cli` prints for one command to the node on `port` (empty if it is down)."""
    done = subprocess.run(
        ["redis-cli", "-h", HOST, "-p", str(port), *arguments],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        check=False,
    )
    return done.stdout


def _cluster_ok(port: int) -> bool:
    return "cluster_state:ok" in _cli(port, "CLUSTER", "INFO")


@dataclass(slots=True)
class _Node:
    port: int
    directory: Path
    node_timeout_ms: int
    stack: ExitStack = field(default_factory=ExitStack)
    running: Running | None = None

    def start(self) -> None:
        """Start the node; its nodes.conf, kept in its folder, makes a restarted node rejoin."""
        command = ["redis-server", "--bind", HOST, "--port", str(self.port), "--dir", str(self.directory)]
        command += [
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(self.directory / f"nodes-{self.port}.conf"),
        ]
        command += ["--cluster-node-timeout", str(self.node_timeout_ms), "--save", "", "--appendonly", "no"]
        self.running = self.stack.enter_context(start_process(command))
        self.running.wait_until(lambda _: redis_pings(self.port), f"Cluster node on port {self.port}")

    def stop(self) -> None:
        self.stack.close()
        self.running = None


class RedisCluster:
    """Three running Cluster primaries. `url` is a seed URL for a Cluster client (any node leads
    it to all), `store_url` the URL `RedisStore.from_url` takes for the Cluster (every node
    named), `ports` the nodes' ports."""

    def __init__(self, nodes: list[_Node]) -> None:
        self._nodes = nodes
        self.ports = [node.port for node in nodes]
        self.url = f"redis://{HOST}:{self.ports[0]}/0"
        self.store_url = "redis+cluster://" + ",".join(f"{HOST}:{port}" for port in self.ports)

    def owner_port(self, key: str) -> int:
        """The port of the primary that owns `key`'s slot now."""
        slot = key_slot(key.encode())
        for line in _cli(self.ports[0], "CLUSTER", "NODES").splitlines():
            fields = line.split()
            port = int(fields[1].split("@")[0].rsplit(":", 1)[1])
            for held in fields[8:]:
                first, _, last = held.partition("-")
                if held[0].isdigit() and int(first) <= slot <= int(last or first):
                    return port
        raise LookupError(f"no node of the Cluster owns slot {slot} (key {key!r})")

    def _node(self, port: int) -> _Node:
        return next(node for node in self._nodes if node.port == port)

    def stop_owner_of(self, key: str) -> int:
        """Stop the primary that owns `key`'s slot; returns its port."""
        port = self.owner_port(key)
        self._node(port).stop()
        return port

    def start(self, port: int) -> None:
        """Start the stopped node on `port` again; returns once the Cluster is whole again."""
        self._node(port).start()
        self.wait_ok()

    @contextmanager
    def owner_down(self, key: str) -> Iterator[int]:
        """The primary that owns `key`'s slot stopped for the block (yields its port), then
        started again, rejoined, and the Cluster whole again."""
        port = self.stop_owner_of(key)
        try:
            yield port
        finally:
            self.start(port)

    def restart_owner_of(self, key: str) -> int:
        """Stop and start the primary that owns `key`'s slot; returns its port."""
        with self.owner_down(key) as port:
            return port

    def wait_ok(self) -> None:
        """Wait until every node says `cluster_state:ok`."""
        deadline = time.monotonic() + PROCESS_START_S
        for port in self.ports:
            while not _cluster_ok(port):  # nothing tells another process when its state changes
                if time.monotonic() > deadline:
                    raise RuntimeError(f"Cluster node {port} did not say cluster_state:ok within {PROCESS_START_S} s")
                time.sleep(0.1)


@contextmanager
def redis_cluster(node_timeout_ms: int = NODE_TIMEOUT_MS) -> Iterator[RedisCluster]:
    """A Redis Cluster of three primaries (no replicas) on free 127.0.0.1 ports, keeping nothing
    on disk but their nodes.conf, stopped at the end; fails saying how to get redis-server and
    redis-cli when they are missing. `node_timeout_ms`: how long a node may be unreachable
    before the others call it failed."""
    missing = cluster_missing()
    if missing is not None:
        raise ClusterMissing(missing)
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-cluster-") as directory:
        nodes = []
        with ExitStack() as stack:
            for _ in range(PRIMARIES):
                port = cluster_port()
                node = _Node(port, Path(directory) / str(port), node_timeout_ms)
                node.directory.mkdir()
                stack.callback(node.stop)
                node.start()
                nodes.append(node)
            addresses = [f"{HOST}:{node.port}" for node in nodes]
            created = subprocess.run(
                ["redis-cli", "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"],
                capture_output=True,
                text=True,
                timeout=PROCESS_START_S,
                check=False,
            )
            if created.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed:\n{created.stdout}{created.stderr}")
            cluster = RedisCluster(nodes)
            cluster.wait_ok()
            yield cluster


def main() -> None:
    """Run a Cluster until stopped (SIGTERM or SIGINT), for a script: its seed URL, as
    `RedisStore.from_url` takes it, is the one line printed once the Cluster is whole."""
    stopped = threading.Event()
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, lambda *_: stopped.set())
    with redis_cluster() as cluster:
        print(cluster.url.replace("redis://", "redis+cluster://"), flush=True)
        stopped.wait()


if __name__ == "__main__":
    main()
