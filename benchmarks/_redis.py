"""A redis-server of the benchmark's own, and what it tells of the work it did.

It listens on a free 127.0.0.1 port (never 6379, where a Redis would be someone else's) and
keeps nothing on disk; `redis_process` stops it. Its CPU is read like a server's (`Process`).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from _http import HOST, BenchmarkError, Process, free_port, server_process

REDIS_FOLDERS: Final = ("/usr/bin", "/usr/sbin", "/usr/local/bin")  # where packages put redis-server
UNTOUCHABLE_REDIS_PORT: Final = 6379
START_TIMEOUT_S: Final = 60.0
REDIS_TIMEOUT_S: Final = 5.0
# What the library's RedisStore sends: a script by its digest (the script source once), or a
# PUBLISH. The commands a script runs inside are counted by Redis too, but are no round trip.
ROUND_TRIP_COMMANDS: Final = frozenset({"evalsha", "eval", "evalsha_ro", "eval_ro", "script|load", "publish"})


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


def redis_round_trips(redis: Process) -> int:
    """How many commands clients have sent the Redis so far, counting scripts and publishes but
    not the commands a script runs inside (INFO's total_commands_processed counts those)."""
    with socket.create_connection((HOST, redis.port), timeout=REDIS_TIMEOUT_S) as connection:
        connection.sendall(b"INFO commandstats\r\n")
        reader = connection.makefile("rb")
        length = int(reader.readline()[1:])  # a bulk string: $<length>\r\n<text>\r\n
        text = reader.read(length).decode()
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
