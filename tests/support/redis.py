"""A real Redis to test against (a redis-server of the test run's own, or one the environment
names), and a link to it that a test can cut or slow down."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from tests.support.machine import HOST, free_port
from tests.support.processes import start_process
from tests.support.waits import START_TIMEOUT_S

# A Redis to test against when no redis-server can be started here.
REDIS_URL_VARIABLE = "FASTAPI_MCP_ROUTES_TEST_REDIS_URL"
_REDIS_FOLDERS = ("/usr/bin", "/usr/sbin", "/usr/local/bin")  # where packages put redis-server


class RedisMissing(LookupError):
    """Neither a redis-server to start nor a Redis URL to test against."""


def _redis_binary() -> str | None:
    found = shutil.which("redis-server")
    if found is not None:
        return found
    candidates = (os.path.join(folder, "redis-server") for folder in _REDIS_FOLDERS)
    return next((path for path in candidates if os.access(path, os.X_OK)), None)


def redis_missing() -> str | None:
    """Why `redis_server` has no Redis to give here, and how to get one; `None` when it has."""
    if _redis_binary() is not None or os.environ.get(REDIS_URL_VARIABLE):
        return None
    return (
        "The Redis tests need a Redis: install redis-server (apt install redis-server), "
        f"or set {REDIS_URL_VARIABLE} to the URL of one they may write to (redis://host:port/db)."
    )


def gone_redis_url() -> str:
    """The URL of a Redis that is gone: a 127.0.0.1 port nothing listens on."""
    return f"redis://127.0.0.1:{free_port()}/0"


@contextmanager
def redis_server(port: int | None = None) -> Iterator[str]:
    """A Redis to test against; yields its URL. A redis-server of its own (on PATH, or in
    /usr/bin, /usr/sbin, /usr/local/bin) on a free 127.0.0.1 port (or on `port`, say to start
    it again where it was), keeping nothing on disk, stopped at the end; without the binary, the
    Redis that `FASTAPI_MCP_ROUTES_TEST_REDIS_URL` names. `RedisMissing` when there is neither."""
    binary = _redis_binary()
    if binary is None and port is not None:
        raise RedisMissing("a Redis on a port of the test's choosing needs redis-server: apt install redis-server")
    if binary is None:
        missing = redis_missing()
        if missing is not None:
            raise RedisMissing(missing)
        yield os.environ[REDIS_URL_VARIABLE]
        return
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="fastapi-mcp-routes-redis-") as directory:
        command = [binary, "--bind", HOST, "--port", str(port), "--save", "", "--appendonly", "no"]
        with start_process([*command, "--dir", directory]) as running:
            running.wait_until(lambda _: redis_pings(port), f"redis-server on port {port}")
            yield f"redis://{HOST}:{port}/0"


def redis_pings(port: int, host: str = HOST) -> bool:
    """Whether a Redis server on `host`:`port` answers PING."""
    try:
        with socket.create_connection((host, port), timeout=1) as connection:
            connection.sendall(b"*1\r\n$4\r\nPING\r\n")
            return connection.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisLink:
    """A TCP relay to a Redis (a thread of its own), which a test can cut: every connection
    through it drops and new ones are refused until it is restored, as when a network between
    one process and Redis fails while the others still reach it. With `latency_s`, each write
    that crosses it is held that long, in order, as over a link to a Redis far away. A test can
    also `hold` every write until it `release`s them, and wait until a write it expects is
    held (`wait_held`): a Redis that answers late, without a clock. `url` is the Redis URL
    through the relay."""

    def __init__(self, redis_url: str, latency_s: float = 0.0) -> None:
        target = httpx.URL(redis_url)
        self._target = (target.host, target.port or 6379)
        self._latency_s = latency_s
        self._cut = False
        self._connections: set[Any] = set()
        self._released: asyncio.Event | None = None
        self._held: list[bytes] = []
        self._held_changed = threading.Condition()
        self._relays: set[asyncio.Task[None]] = set()
        self._loop = asyncio.new_event_loop()
        self._closing: asyncio.Event | None = None
        listening = threading.Event()
        self.port = 0

        async def serve_relay() -> None:
            closing = self._closing = asyncio.Event()
            self._released = asyncio.Event()
            self._released.set()
            server = await asyncio.start_server(self._relay, HOST, 0)
            self.port = server.sockets[0].getsockname()[1]
            listening.set()
            async with server:
                await closing.wait()
            # Every relay ends before the loop does (their connections were cut), rather than be
            # left pending for the garbage collector to complain about.
            if self._relays:
                await asyncio.wait(self._relays, timeout=START_TIMEOUT_S)

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(serve_relay(),), daemon=True)
        self._thread.start()
        if not listening.wait(START_TIMEOUT_S):
            raise RuntimeError("the relay to Redis did not start listening")
        self.url = f"redis://{HOST}:{self.port}{target.path or '/0'}"

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._relays.add(task)
            task.add_done_callback(self._relays.discard)
        if self._cut:
            writer.transport.abort()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        ends = {writer, upstream_writer}
        self._connections |= ends

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    if self._latency_s:  # the link's delay, not synchronisation
                        await asyncio.sleep(self._latency_s)
                    await self._pass(data)
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
        self._connections -= ends

    async def _pass(self, data: bytes) -> None:
        """Let `data` cross now, or once released if the link holds writes."""
        released = self._released
        if released is None or released.is_set():
            return
        with self._held_changed:
            self._held.append(data)
            self._held_changed.notify_all()
        await released.wait()

    def hold(self) -> None:
        """Hold every write from now on, in either direction, until `release`."""
        done = threading.Event()

        def clear() -> None:
            if self._released is not None:
                self._released.clear()
            done.set()

        self._loop.call_soon_threadsafe(clear)
        done.wait(START_TIMEOUT_S)

    def wait_held(self, expected: bytes, timeout_s: float) -> bool:
        """Whether a held write that contains `expected` came within `timeout_s` seconds."""
        with self._held_changed:
            return self._held_changed.wait_for(lambda: any(expected in data for data in self._held), timeout_s)

    def release(self) -> None:
        """Let the held writes through, in order, and every write after them."""
        if self._released is not None:
            self._loop.call_soon_threadsafe(self._released.set)
        with self._held_changed:
            self._held.clear()

    def cut(self) -> None:
        """Drop every connection through the relay, and refuse new ones."""
        done = threading.Event()

        def drop() -> None:
            self._cut = True
            for end in list(self._connections):
                end.transport.abort()
            done.set()

        self._loop.call_soon_threadsafe(drop)
        done.wait(START_TIMEOUT_S)

    def restore(self) -> None:
        """Let connections through again."""
        self._cut = False

    def close(self) -> None:
        """Cut every connection and stop the relay."""
        self.cut()
        self.release()
        if self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        self._thread.join(START_TIMEOUT_S)


@contextmanager
def redis_link(redis_url: str, latency_s: float = 0.0) -> Iterator[RedisLink]:
    """A `RedisLink` to the Redis at `redis_url` (`latency_s` each way), closed at the end."""
    link = RedisLink(redis_url, latency_s)
    try:
        yield link
    finally:
        link.close()
