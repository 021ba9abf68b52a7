"""What the benchmarks share: a uvicorn server in a subprocess, and a client light enough that the
server, not the client, is the bottleneck.

The client is raw asyncio over keep-alive HTTP/1.1 connections: it writes pre-built request
bytes and reads `Content-Length` or chunked bodies (the official SDK's servers answer with
chunked SSE). Server CPU is read from `/proc/<pid>/stat` (all threads; it does not count time
spent waiting for a CPU, so it is the least noisy figure on a shared machine), RSS from
`/proc/<pid>/status`.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

HOST: Final = "127.0.0.1"
STOP_TIMEOUT_S: Final = 10.0
# Longer than any idle gap between two batches on one connection (uvicorn's default is 5 s).
KEEP_ALIVE_S: Final = 600
CLOCK_TICKS: Final = os.sysconf("SC_CLK_TCK")  # the unit of utime and stime in /proc/<pid>/stat
PAGE_BYTES: Final = os.sysconf("SC_PAGE_SIZE")


class BenchmarkError(Exception):
    """The benchmark cannot go on: a server did not start or answered wrongly."""


# -- the server ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Process:
    """One uvicorn worker in a subprocess."""

    popen: subprocess.Popen[bytes]
    port: int
    label: str

    def cpu_seconds(self) -> float:
        """User plus system CPU time of the whole server process (all threads) so far."""
        with open(f"/proc/{self.popen.pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

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
                return
            except OSError:
                time.sleep(0.01)
        raise BenchmarkError(f"the {self.label} server did not listen in time")


def free_port() -> int:
    # The port is free when this returns; nothing else on a benchmark machine races for it.
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def uvicorn_process(
    python: str | Path, factory: str, app_dir: Path, env: Mapping[str, str], label: str
) -> Iterator[Process]:
    """Start `uvicorn --factory factory` with this interpreter and environment; stop it after."""
    port = free_port()
    command: Sequence[str] = [
        *(str(python), "-m", "uvicorn", factory, "--factory", "--app-dir", str(app_dir)),
        *("--host", HOST, "--port", str(port), "--no-access-log", "--log-level", "warning"),
        *("--timeout-keep-alive", str(KEEP_ALIVE_S)),
    ]
    popen = subprocess.Popen(command, env={**os.environ, **env}, stdout=subprocess.DEVNULL)
    try:
        yield Process(popen, port, label)
    finally:
        popen.terminate()
        try:
            popen.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(STOP_TIMEOUT_S)


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
        chunks = []
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
    return Batch(latencies, process.cpu_seconds() - cpu_before, time.perf_counter() - started, body_bytes)
