"""A redis-server of the benchmark's own, or a Redis Cluster of three, and what they tell of
the work they did.

Each listens on a free 127.0.0.1 port (never 6379, where a Redis would be someone else's) and
keeps nothing on disk; `redis_process` and `cluster_processes` stop them. Their CPU is read
like a server's (`Process`); a Cluster's is its nodes' together (`ClusterNodes`).
"""

from __future__ import annotations

import importlib.metadata
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Final

from _http import HOST, BenchmarkError, Process, free_port, server_process

REDIS_FOLDERS: Final = ("/usr/bin", "/usr/sbin", "/usr/local/bin")  # where packages put redis-server
UNTOUCHABLE_REDIS_PORT: Final = 6379
START_TIMEOUT_S: Final = 60.0
REDIS_TIMEOUT_S: Final = 5.0
# What the library's RedisStore sends: a script by its digest (the script source once), or a
# PUBLISH. The commands a script runs inside are counted by Redis too, but are no round trip.
ROUND_TRIP_COMMANDS: Final = frozenset(
    {"evalsha", "eval", "evalsha_ro", "eval_ro", "script|load", "publish", "spublish"}
)


def redis_binary() -> str:
    candidates = (os.path.join(folder, "redis-server") for folder in REDIS_FOLDERS)
    found = shutil.which("redis-server") or next((p for p in candidates if os.access(p, os.X_OK)), None)
    if found is None:
        raise BenchmarkError(f"no redis-server on PATH nor in {', '.join(REDIS_FOLDERS)}: apt install redis-server")
    return found


@contextmanager
def redis_process(binary: str) -> Iterator[Process]:
    """A redis-server of our own on a free 127.0.0.1 port, keeping nothing on disk."""
    port = free_port()
    if port == UNTOUCHABLE_REDIS_PORT:  # outside the ephemeral range free_port draws from
        raise BenchmarkError(f"the free port drawn was {port}, the usual Redis port; run again")
    command = [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"]
    with server_process(command, port, {}, "redis-server") as process:
        process.wait_listening(time.monotonic() + START_TIMEOUT_S)
        yield process


CLUSTER_NODES: Final = 3
BUS_PORT_OFFSET: Final = 10000  # a Cluster node talks to its peers on its port + 10000
_CLUSTER_PORTS: Final = (20000, 50000)  # low enough that the bus port is a port too


@dataclass(frozen=True, slots=True)
class ClusterNodes:
    """The primaries of a Redis Cluster, measured together."""

    nodes: tuple[Process, ...]

    @property
    def url(self) -> str:
        """The URL `RedisStore.from_url` takes for the Cluster, naming every node."""
        return "redis+cluster://" + ",".join(f"{HOST}:{node.port}" for node in self.nodes)

    def cpu_seconds(self) -> float:
        return sum(node.cpu_seconds() for node in self.nodes)


def _cluster_port() -> int:
    def free(port: int) -> bool:
        with socket.socket() as probe:
            try:
                probe.bind((HOST, port))
            except OSError:
                return False
            return True

    while True:
        port = random.randint(*_CLUSTER_PORTS)
        if free(port) and free(port + BUS_PORT_OFFSET):
            return port


def _cluster_ok(port: int) -> bool:
    return "cluster_state:ok" in _command(port, b"CLUSTER INFO")


@contextmanager
def cluster_processes(binary: str) -> Iterator[ClusterNodes]:
    """Three Cluster primaries of our own on free 127.0.0.1 ports, joined by `redis-cli
    --cluster create`, keeping nothing on disk but their nodes.conf."""
    cli = shutil.which("redis-cli")
    if cli is None:
        raise BenchmarkError("no redis-cli on PATH to join a Redis Cluster: apt install redis-tools")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as directory, ExitStack() as stack:
        nodes = []
        for _ in range(CLUSTER_NODES):
            port = _cluster_port()
            command = [binary, "--port", str(port), "--bind", HOST, "--save", "", "--appendonly", "no"]
            command += ["--dir", directory, "--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
            node = stack.enter_context(server_process(command, port, {}, f"cluster node {port}"))
            node.wait_listening(time.monotonic() + START_TIMEOUT_S)
            nodes.append(node)
        addresses = [f"{HOST}:{node.port}" for node in nodes]
        create = [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"]
        created = subprocess.run(create, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False)
        if created.returncode != 0:
            raise BenchmarkError(f"redis-cli --cluster create failed: {created.stdout}{created.stderr}")
        deadline = time.monotonic() + START_TIMEOUT_S
        while not all(_cluster_ok(node.port) for node in nodes):  # nothing tells when it is whole
            if time.monotonic() > deadline:
                raise BenchmarkError("the Redis Cluster did not reach cluster_state:ok in time")
            time.sleep(0.1)
        yield ClusterNodes(tuple(nodes))


def _command(port: int, command: bytes) -> str:
    """The bulk-string reply of an inline command (INFO, CLUSTER INFO) to the Redis on `port`."""
    with socket.create_connection((HOST, port), timeout=REDIS_TIMEOUT_S) as connection:
        connection.sendall(command + b"\r\n")
        reader = connection.makefile("rb")
        length = int(reader.readline()[1:])  # a bulk string: $<length>\r\n<text>\r\n
        return reader.read(length).decode()


def redis_round_trips(redis: Process | ClusterNodes) -> int:
    """How many commands clients have sent the Redis (every node of a Cluster) so far, counting
    scripts and publishes but not the commands a script runs inside (INFO's
    total_commands_processed counts those)."""
    nodes = redis.nodes if isinstance(redis, ClusterNodes) else (redis,)
    text = "\n".join(_command(node.port, b"INFO commandstats") for node in nodes)
    calls = 0
    for line in text.splitlines():  # cmdstat_evalsha:calls=12,usec=...
        name, _, stats = line.removeprefix("cmdstat_").partition(":")
        if name in ROUND_TRIP_COMMANDS:
            calls += int(stats.split(",")[0].removeprefix("calls="))
    return calls


def redis_versions(binary: str) -> str:
    found = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10, check=False)
    server = next((word for word in found.stdout.split() if word.startswith("v=")), "v=unknown")[2:]
    return f"redis-server {server}, redis-py {importlib.metadata.version('redis')}"
