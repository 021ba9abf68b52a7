"""The event loop's lag under a flood of rate-limited requests, with Redis a few milliseconds
away: the library before a change and after it, side by side in one run.

    .venv/bin/python benchmarks/loop_lag.py                 # about a minute on 2 cores
    .venv/bin/python benchmarks/loop_lag.py --quick         # a smoke run, seconds
    .venv/bin/python benchmarks/loop_lag.py --before d84815d --latency-ms 2

Deliberate choices:
- Four servers of `loop_lag_app` run at once, one uvicorn process each (h11 on asyncio): the
  code at `--before` (extracted with `git archive` into a temporary folder, put first on
  PYTHONPATH) and this checkout, each with the endpoint's budget in the app's slowapi storage
  (`slowapi`) and in the store's Redis (`store`, a `RedisStore`). Each server says which copy of
  the library it imported, and the script checks it.
- Redis is a redis-server of the script's own, reached through a relay of the script's own that
  holds every write `--latency-ms` (each way, in order), as a Redis in another zone would.
- A flood: `--requests` tools/list requests to `/mcp` over `--clients` keep-alive connections,
  every one of them counted in Redis (the budget is never reached). Meanwhile a probe inside
  the server sleeps 5 ms again and again and records how late it wakes (the loop's lag), and a
  client asks for a plain route (`GET /plain`) one request at a time, timing each answer.
- Every server runs once per round, the order flipping every round; figures are medians of the
  rounds' figures. Every loop is bounded by a count and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from _http import HOST, BenchmarkError, Connection, Process, http_request, send_batch, uvicorn_process
from _redis import redis_binary, redis_process

HERE: Final = Path(__file__).resolve().parent
ROOT: Final = HERE.parent
APP_FACTORY: Final = "loop_lag_app:create_app"
BEFORE: Final = "d84815d"  # main before the limiter moved off the event loop
START_TIMEOUT_S: Final = 60.0
FLOOD_TIMEOUT_S: Final = 300.0
PLAIN_PAUSE_S: Final = 0.01  # between two plain requests: a user's request now and then
ARMS: Final = ("slowapi", "store")


# -- Redis a few milliseconds away --------------------------------------------------------------


class DelayedLink:
    """A TCP relay to Redis on a thread of its own, holding each write `latency_s` in order."""

    def __init__(self, target_port: int, latency_s: float) -> None:
        self._target_port = target_port
        self._latency_s = latency_s
        self._loop = asyncio.new_event_loop()
        self._stop: asyncio.Event | None = None
        listening = threading.Event()
        self.port = 0

        async def serve() -> None:
            self._stop = asyncio.Event()
            server = await asyncio.start_server(self._relay, HOST, 0)
            self.port = server.sockets[0].getsockname()[1]
            listening.set()
            async with server:
                await self._stop.wait()

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(serve(),), daemon=True)
        self._thread.start()
        if not listening.wait(START_TIMEOUT_S):
            raise BenchmarkError("the relay to Redis did not start listening")

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(HOST, self._target_port)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with suppress(OSError):
                while data := await source.read(65536):
                    await asyncio.sleep(self._latency_s)  # the link's delay
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    def close(self) -> None:
        if self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(START_TIMEOUT_S)


@contextmanager
def delayed_link(target_port: int, latency_s: float) -> Iterator[DelayedLink]:
    link = DelayedLink(target_port, latency_s)
    try:
        yield link
    finally:
        link.close()


# -- the code before and after ------------------------------------------------------------------


@contextmanager
def library_at(commit: str) -> Iterator[Path]:
    """A folder holding the package as it was at `commit` (`git archive`), removed after."""
    with tempfile.TemporaryDirectory(prefix="loop-lag-") as folder:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", commit, "fastapi_mcp_routes"], capture_output=True, check=False
        )
        if archive.returncode != 0:
            raise BenchmarkError(f"git archive {commit} failed: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
        yield Path(folder)


@dataclass(frozen=True, slots=True)
class Server:
    code: str  # "before" or "after"
    arm: str
    library: Path  # the folder PYTHONPATH names first
    process: Process

    @property
    def label(self) -> str:
        return f"{self.code}, budget in {self.arm}"


@contextmanager
def running_servers(before: Path, redis_url: str) -> Iterator[list[Server]]:
    with ExitStack() as stack:
        servers = []
        for code, library in (("before", before), ("after", ROOT)):
            for arm in ARMS:
                env = {"PYTHONPATH": str(library), "LOOP_LAG_REDIS_URL": redis_url, "LOOP_LAG_ARM": arm}
                process = stack.enter_context(uvicorn_process(sys.executable, APP_FACTORY, HERE, env, f"{code} {arm}"))
                servers.append(Server(code, arm, library, process))
        deadline = time.monotonic() + START_TIMEOUT_S
        for server in servers:
            server.process.wait_listening(deadline)
        yield servers


# -- one flood --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Flood:
    throughput: float  # limited requests a second
    lag_p50_ms: float
    lag_p99_ms: float
    lag_max_ms: float
    plain_p50_ms: float
    plain_max_ms: float


def list_tools(port: int) -> bytes:
    headers = {"accept": "application/json", "mcp-protocol-version": "2025-11-25"}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return http_request(port, "POST", "/mcp", headers, body)


async def read_json(connection: Connection, request: bytes) -> Any:
    reply = await connection.send(request)
    if reply.status != 200:
        raise BenchmarkError(f"HTTP {reply.status}: {reply.body[:200]!r}")
    return reply.json()


async def check_library(server: Server, control: Connection) -> None:
    """The server imported the copy of the library it was meant to."""
    found = (await read_json(control, http_request(server.process.port, "GET", "/lag")))["library"]
    if not Path(found).resolve().is_relative_to(server.library.resolve()):
        raise BenchmarkError(f"the {server.label} server imported the library from {found}, not {server.library}")


async def flood(server: Server, clients: list[Connection], control: Connection, requests: int) -> Flood:
    port = server.process.port
    await read_json(control, http_request(port, "POST", "/lag/reset"))
    plain_ns: list[int] = []
    done = asyncio.Event()

    async def plain_probe() -> None:
        request = http_request(port, "GET", "/plain")
        while not done.is_set():
            started = time.perf_counter_ns()
            await read_json(control, request)
            plain_ns.append(time.perf_counter_ns() - started)
            await asyncio.sleep(PLAIN_PAUSE_S)

    probe = asyncio.create_task(plain_probe())
    try:
        batch = await send_batch(
            server.process, clients, [list_tools(port)] * len(clients), requests, 200, server.label, FLOOD_TIMEOUT_S
        )
    finally:
        done.set()
        await asyncio.wait_for(probe, FLOOD_TIMEOUT_S)
    lag = await read_json(control, http_request(port, "GET", "/lag"))
    plain_ms = sorted(ns / 1e6 for ns in plain_ns) or [0.0]
    return Flood(
        throughput=requests / batch.elapsed_s,
        lag_p50_ms=lag["p50_ms"],
        lag_p99_ms=lag["p99_ms"],
        lag_max_ms=lag["max_ms"],
        plain_p50_ms=statistics.median(plain_ms),
        plain_max_ms=plain_ms[-1],
    )


# -- the run ------------------------------------------------------------------------------------


async def measure(servers: list[Server], rounds: int, requests: int, clients: int) -> dict[str, list[Flood]]:
    pools = {server.label: [await Connection.open(server.process.port) for _ in range(clients)] for server in servers}
    controls = {server.label: await Connection.open(server.process.port) for server in servers}
    try:
        for server in servers:
            await check_library(server, controls[server.label])
            await flood(server, pools[server.label], controls[server.label], clients)  # warm up
        results: dict[str, list[Flood]] = {server.label: [] for server in servers}
        for turn in range(rounds):
            order = servers if turn % 2 == 0 else servers[::-1]
            for server in order:
                results[server.label].append(await flood(server, pools[server.label], controls[server.label], requests))
        return results
    finally:
        for connection in [*controls.values(), *(c for pool in pools.values() for c in pool)]:
            connection.close()


def median_of(floods: list[Flood], field: str) -> float:
    return statistics.median(getattr(flood, field) for flood in floods)


def print_table(results: dict[str, list[Flood]]) -> None:
    columns = [
        ("limited req/s", "throughput", "{:.0f}"),
        ("loop lag p50 ms", "lag_p50_ms", "{:.2f}"),
        ("p99 ms", "lag_p99_ms", "{:.1f}"),
        ("max ms", "lag_max_ms", "{:.1f}"),
        ("GET /plain p50 ms", "plain_p50_ms", "{:.1f}"),
        ("max ms", "plain_max_ms", "{:.1f}"),
    ]
    width = max(len(label) for label in results)
    print(f"| {'server':<{width}} | " + " | ".join(name for name, _, _ in columns) + " |")
    print(f"| {'-' * width} | " + " | ".join("-" * len(name) for name, _, _ in columns) + " |")
    for label, floods in results.items():
        cells = [form.format(median_of(floods, field)).rjust(len(name)) for name, field, form in columns]
        print(f"| {label:<{width}} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=BEFORE, help=f"the commit measured as before (default {BEFORE})")
    parser.add_argument("--latency-ms", type=float, default=2.0, help="added to each write to or from Redis")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000, help="limited requests per flood")
    parser.add_argument("--clients", type=int, default=32, help="connections the flood is sent over")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 round of 200 requests")
    args = parser.parse_args()
    rounds, requests = (1, 200) if args.quick else (args.rounds, args.requests)
    # `python -m uvicorn` puts its working folder first on sys.path: from the project's root, the
    # checkout's package would shadow the one PYTHONPATH names.
    os.chdir(HERE)
    with ExitStack() as stack:
        before = stack.enter_context(library_at(args.before))
        redis = stack.enter_context(redis_process(redis_binary()))
        link = stack.enter_context(delayed_link(redis.port, args.latency_ms / 1000))
        servers = stack.enter_context(running_servers(before, f"redis://{HOST}:{link.port}/0"))
        print(
            f"Redis {args.latency_ms:g} ms away each way; {requests} tools/list over {args.clients} connections "
            f"per flood, {rounds} round(s); before = {args.before}, after = this checkout; h11 + asyncio\n"
        )
        print_table(asyncio.run(measure(servers, rounds, requests, args.clients)))


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as error:
        sys.exit(f"loop_lag: {error}")
