"""What the benchmarks share: a uvicorn server in a subprocess, and a client light enough that the
server, not the client, is the bottleneck.

The client is raw asyncio over keep-alive HTTP/1.1 connections: it writes pre-built request
bytes and reads `Content-Length` or chunked bodies (the official SDK's servers answer with
chunked SSE). Server CPU is read from `/proc/<pid>/stat` of the server's process and every
process under it (`uvicorn --workers N` runs its workers under a supervisor; all threads of
each; it does not count time spent waiting for a CPU, so it is the least noisy figure on a
shared machine), RSS from `/proc/<pid>/status`.

uvicorn runs h11 on asyncio unless a caller asks for another parser or loop: both are passed
explicitly, since uvicorn's `auto` picks httptools and uvloop wherever they are installed (the
`bench` extra installs them, through `uvicorn[standard]`). A server can be pinned to one CPU.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

HOST: Final = "127.0.0.1"
STOP_TIMEOUT_S: Final = 10.0
# Longer than any idle gap between two batches on one connection (uvicorn's default is 5 s).
KEEP_ALIVE_S: Final = 600
SPREAD_RETRY_S: Final = 0.01  # between connections that landed on a worker with its share
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")  # the unit of utime and stime in /proc/<pid>/stat
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")
TCP_LAUNCHER: Final = Path(__file__).resolve().parent / "uvicorn_tcp.py"
DEFAULT_HTTP: Final = "h11"
DEFAULT_LOOP: Final = "asyncio"
DEFAULT_STACK: Final = f"{DEFAULT_HTTP} + {DEFAULT_LOOP}"  # what the scripts say they measured


class BenchmarkError(Exception):
    """The benchmark cannot go on: a server did not start or answered wrongly."""


# -- the server ------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[bytes]:
    """The fields of `/proc/<pid>/stat` after the command name (which may hold spaces): the
    state is [0], the parent's pid [1], utime [11] and stime [12]."""
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return stat.read().rsplit(b")", 1)[1].split()


def process_tree(pid: int) -> list[int]:
    """`pid` and every process below it. Found by each process's parent in /proc, since
    `/proc/<pid>/task/<tid>/children` needs a kernel option many kernels lack."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                children.setdefault(int(_stat_fields(int(entry))[1]), []).append(int(entry))
            except (OSError, IndexError):
                continue  # it exited while the scan ran
    tree, index = [pid], 0
    while index < len(tree):
        tree += children.get(tree[index], [])
        index += 1
    return tree


def tree_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of `pid` and every process below it (all threads) so far."""
    ticks = 0
    for member in process_tree(pid):
        try:
            fields = _stat_fields(member)
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / CLOCK_TICKS


def can_pin() -> bool:
    """Whether this platform can pin a process to a CPU (Linux can)."""
    return hasattr(os, "sched_setaffinity")


def pin_tree(pid: int, cpu: int) -> None:
    """Run `pid`, every process below it and every thread of each on `cpu` alone. What they
    start afterwards inherits it. Where the platform cannot pin, say so and leave them be."""
    if not can_pin():
        print(f"note: this platform cannot pin processes to a CPU; process {pid} runs unpinned", file=sys.stderr)
        return
    for member in process_tree(pid):
        try:
            threads = os.listdir(f"/proc/{member}/task")
        except OSError:
            continue  # it exited
        for thread in threads:
            with suppress(ProcessLookupError):
                os.sched_setaffinity(int(thread), {cpu})


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    with os.scandir(f"/proc/{pid}/fd") as entries:
        for entry in entries:
            try:
                target = os.readlink(entry.path)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(int(target[8:-1]))
    return inodes


@dataclass(frozen=True, slots=True)
class Process:
    """A server in a subprocess: one uvicorn worker, a uvicorn supervisor and its workers, or
    another program (a Redis)."""

    popen: subprocess.Popen[bytes]
    port: int
    label: str
    cpu: int | None = None  # the CPU it is pinned to, if any

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the whole server (every process, all threads) so far."""
        return tree_cpu_seconds(self.popen.pid)

    def holders(self, client_ports: Sequence[int]) -> dict[int, int]:
        """Which process of the server holds the server's end of each client connection (by the
        client's port): the worker serving it. Ports not found (not accepted yet) are left out."""
        wanted = set(client_ports)
        inode_port: dict[int, int] = {}
        with open("/proc/net/tcp") as table:  # local, remote (hex ip:port), ..., inode [9]
            for line in table.readlines()[1:]:
                fields = line.split()
                local_port, remote_port = (int(address.split(":")[1], 16) for address in fields[1:3])
                if local_port == self.port and remote_port in wanted:
                    inode_port[int(fields[9])] = remote_port
        found: dict[int, int] = {}
        for pid in process_tree(self.popen.pid):
            try:
                inodes = _socket_inodes(pid)
            except OSError:
                continue
            found |= {inode_port[inode]: pid for inode in inodes & inode_port.keys()}
        return found

    def rss_bytes(self) -> int:
        """The resident set size now."""
        with open(f"/proc/{self.popen.pid}/statm", "rb") as statm:
            return int(statm.read().split()[1]) * PAGE_BYTES

    def wait_listening(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.popen.poll() is not None:
                raise BenchmarkError(f"the {self.label} server exited with {self.popen.returncode}")
            try:
                socket.create_connection((HOST, self.port), timeout=1.0).close()
            except OSError:
                time.sleep(0.01)
                continue
            if self.cpu is not None:
                pin_tree(self.popen.pid, self.cpu)  # any thread or worker started before the pin
            return
        raise BenchmarkError(f"the {self.label} server did not listen in time")


def free_port() -> int:
    # The port is free when this returns; nothing else on a benchmark machine races for it.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


def uvicorn_process(
    python: str | Path,
    factory: str,
    app_dir: Path,
    env: Mapping[str, str],
    label: str,
    workers: int = 1,
    tcp_nodelay: bool = True,
    http: str = DEFAULT_HTTP,
    loop: str = DEFAULT_LOOP,
    cpu: int | None = None,
) -> AbstractContextManager[Process]:
    """Start `uvicorn --factory factory` with this interpreter and environment; stop it after.

    With `workers` above 1, `uvicorn --workers`: a supervisor and its worker processes, run by
    `uvicorn_tcp.py` unless `tcp_nodelay` is false, so that its connections get TCP_NODELAY as
    one process's do (uvicorn issue #3149; that module says why). `http` and `loop` are
    uvicorn's `--http` and `--loop` (h11 on asyncio unless given); with `cpu`, the server and
    everything under it run on that CPU alone (`pin_tree`)."""
    port = free_port()
    launcher = (str(TCP_LAUNCHER),) if workers > 1 and tcp_nodelay else ("-m", "uvicorn")
    command: Sequence[str] = [
        *(str(python), *launcher, factory, "--factory", "--app-dir", str(app_dir)),
        *("--host", HOST, "--port", str(port), "--no-access-log", "--log-level", "warning"),
        *("--timeout-keep-alive", str(KEEP_ALIVE_S), "--http", http, "--loop", loop),
        *(("--workers", str(workers)) if workers > 1 else ()),
    ]
    return server_process(command, port, env, label, cpu)


@contextmanager
def server_process(
    command: Sequence[str], port: int, env: Mapping[str, str], label: str, cpu: int | None = None
) -> Iterator[Process]:
    """Start `command`, a server that will listen on `port`, with this environment added to
    ours, pinned to `cpu` if given; stop it and every process it started after."""
    popen = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    try:
        if cpu is not None:
            pin_tree(popen.pid, cpu)  # at once, so that what it starts inherits the pin
        yield Process(popen, port, label, cpu if can_pin() else None)
    finally:
        # uvicorn's supervisor stops its workers on SIGTERM; any left behind (it was killed)
        # are stopped by pid, checked against their start time so a reused pid is never hit.
        below = {pid: _start_time(pid) for pid in process_tree(popen.pid)[1:]}
        popen.terminate()
        try:
            popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(STOP_TIMEOUT_S)
        _stop_leftovers(below)


def _start_time(pid: int) -> bytes | None:
    try:
        return _stat_fields(pid)[19]
    except (OSError, IndexError):
        return None


def _stop_leftovers(started: Mapping[int, bytes | None]) -> None:
    """SIGTERM each process still running as it started, SIGKILL it if it is still there
    after a second; bounded by `STOP_TIMEOUT_S` in all."""
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for pid, start_time in started.items():
        for stop in (signal.SIGTERM, signal.SIGKILL):
            if start_time is None or _start_time(pid) != start_time:
                break
            with suppress(ProcessLookupError):
                os.kill(pid, stop)
            until = min(deadline, time.monotonic() + 1.0)
            while _start_time(pid) == start_time and time.monotonic() < until:
                time.sleep(0.02)


# -- the client ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The JSON body; for an SSE body, the last JSON-RPC response or error it carries."""
        if not self.headers.get("content-type", "").startswith("text/event-stream"):
            return json.loads(self.body)
        messages = [json.loads(line[5:]) for line in self.body.splitlines() if line.startswith(b"data:")]
        answers = [m for m in messages if isinstance(m, dict) and ("result" in m or "error" in m)]
        if not answers:
            raise BenchmarkError(f"an SSE answer carried no response: {self.body[:200]!r}")
        return answers[-1]


class Connection:
    """One keep-alive HTTP/1.1 connection carrying one request at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, port: int, address: str = HOST) -> Connection:
        """Connect to the server from `address` (any of 127/8 on Linux)."""
        reader, writer = await asyncio.open_connection(HOST, port, local_addr=(address, 0))
        return cls(reader, writer)

    @property
    def local_port(self) -> int:
        """The client's port: what tells this connection apart on the server's side."""
        port: int = self._writer.get_extra_info("sockname")[1]
        return port

    async def send(self, request: bytes) -> Reply:
        self.write(request)
        return await self.receive()

    def write(self, request: bytes) -> None:
        """Send a request without reading its answer (`receive` reads it)."""
        self._writer.write(request)

    async def receive(self) -> Reply:
        status, headers = await self.receive_head()
        return Reply(status, headers, await self.receive_body(status, headers))

    async def receive_head(self) -> tuple[int, dict[str, str]]:
        """The status and headers of the next answer; its body is left to read."""
        head = (await self._reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        status_line, *lines = head.split("\r\n")
        headers = {}
        for line in lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return int(status_line.split(" ", 2)[1]), headers

    async def receive_body(self, status: int, headers: Mapping[str, str]) -> bytes:
        length = headers.get("content-length")
        if length is not None:
            return await self._reader.readexactly(int(length))
        if headers.get("transfer-encoding", "").lower() == "chunked":
            return await self._read_chunked()
        raise BenchmarkError(f"the server answered HTTP {status} with neither Content-Length nor chunks")

    async def read_until(self, marker: bytes) -> bytes:
        """The raw bytes up to and including `marker` (chunk framing and all)."""
        return await self._reader.readuntil(marker)

    async def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")  # no trailers are sent here
                return b"".join(chunks)
            chunks.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)

    def close(self) -> None:
        self._writer.close()


def http_request(
    port: int, method: str, target: str, headers: Mapping[str, str] | None = None, body: Any = None
) -> bytes:
    """The bytes of one HTTP/1.1 request; `body` is sent as JSON."""
    lines = [f"{method} {target} HTTP/1.1", f"host: {HOST}:{port}", *(f"{k}: {v}" for k, v in (headers or {}).items())]
    payload = b""
    if body is not None:
        payload = json.dumps(body, separators=(",", ":")).encode()
        lines += ["content-type: application/json", f"content-length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


class Listening(Protocol):
    @property
    def port(self) -> int: ...


class Pools:
    """Keep-alive connections per server, opened on first use and reused by every batch."""

    def __init__(self) -> None:
        self._pools: dict[int, list[Connection]] = {}

    async def get(self, server: Listening, count: int) -> list[Connection]:
        pool = self._pools.setdefault(server.port, [])
        while len(pool) < count:
            pool.append(await Connection.open(server.port))
        return pool[:count]

    def close(self) -> None:
        for pool in self._pools.values():
            for connection in pool:
                connection.close()


@dataclass(frozen=True, slots=True)
class Batch:
    """What one batch of requests took."""

    latencies_ns: list[int]
    cpu_s: float  # the server's CPU time over the batch
    elapsed_s: float
    body_bytes: int  # the size of the last answer


async def send_batch(
    process: Process,
    connections: Sequence[Connection],
    requests: Sequence[bytes],
    count: int,
    status: int,
    label: str,
    timeout_s: float,
) -> Batch:
    """Send `count` requests over the connections, each one request at a time; the i-th
    connection sends `requests[i]`. An answer with another status, or an `isError` result
    (a byte search, cheap on the client), fails the batch."""
    remaining = count
    latencies: list[int] = []
    body_bytes = 0

    async def worker(connection: Connection, request: bytes) -> None:
        nonlocal remaining, body_bytes
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter_ns()
            reply = await connection.send(request)
            latencies.append(time.perf_counter_ns() - started)
            if reply.status != status or b'"isError":true' in reply.body:
                raise BenchmarkError(f"{label} answered HTTP {reply.status}: {reply.body[:200]!r}")
            body_bytes = len(reply.body)

    cpu_before = process.cpu_seconds()
    started = time.perf_counter()
    try:
        async with asyncio.timeout(timeout_s), asyncio.TaskGroup() as group:
            for connection, request in zip(connections, requests, strict=False):
                group.create_task(worker(connection, request))
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None  # the first worker's failure says it all
    elapsed = time.perf_counter() - started  # before reading the CPU, which scans /proc
    return Batch(latencies, process.cpu_seconds() - cpu_before, elapsed, body_bytes)


async def spread_connections(
    process: Process, workers: int, count: int, probe: bytes, timeout_s: float
) -> tuple[list[Connection], list[int]]:
    """`count` connections to a server of `workers` processes, `count / workers` held by each,
    in turn (the first by one worker, the second by the next...); and how many each holds.

    The kernel gives a new connection to whichever worker accepts first, unevenly (14 of 16 went
    to one of two workers in a trial), and a keep-alive connection stays there. So each is sent
    `probe` (once answered, a worker has accepted it), its worker is found in /proc, and a
    connection beyond its worker's share is closed and another opened."""
    share = math.ceil(count / workers)
    kept: dict[int, list[Connection]] = {}
    deadline = time.monotonic() + timeout_s
    for _ in range(int(timeout_s / SPREAD_RETRY_S) + count):
        if sum(map(len, kept.values())) == count or time.monotonic() > deadline:
            break
        connection = await Connection.open(process.port)
        async with asyncio.timeout(timeout_s):
            await connection.send(probe)
        holder = process.holders([connection.local_port]).get(connection.local_port)
        if holder is None or len(kept.get(holder, ())) >= share:
            connection.close()
            await asyncio.sleep(SPREAD_RETRY_S)  # the other worker may still be starting
            continue
        kept.setdefault(holder, []).append(connection)
    split = [len(held) for held in kept.values()]
    if sum(split) != count:
        raise BenchmarkError(f"{process.label}: could not spread {count} connections over {workers} workers: {split}")
    by_worker = list(kept.values())
    return [held[index] for index in range(share) for held in by_worker if index < len(held)], split
