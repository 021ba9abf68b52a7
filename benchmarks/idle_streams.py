"""What idle listen streams cost the server, and a legitimate client beside them.

    .venv/bin/python benchmarks/idle_streams.py                       # about a minute on 2 cores
    .venv/bin/python benchmarks/idle_streams.py --streams 200 --quick  # a smoke run, seconds

Deliberate choices:
- The server is one uvicorn worker in a subprocess (`bench_app`, 12 tools) and the client runs
  here, so they never share a GIL. Server CPU is utime + stime from /proc/<pid>/stat. uvicorn
  runs h11 on asyncio, named explicitly (`_http.uvicorn_process`), even where httptools and
  uvloop are installed (the `bench` extra).
- The idle streams are 2026-07-28 `subscriptions/listen` streams, each on its own connection
  from its own loopback address with its own `x-api-key` (a key the endpoint cannot check
  counts per address), so the per-caller bound (`Limits.max_streams_per_caller`) does not
  refuse them: what is measured is what an open idle stream costs, up to the share of the total
  bound callers without a verified principal may hold (three quarters of `Limits.max_streams`,
  750 by default). Streams past it are counted as refused.
- Every round measures both arms back to back on the same server, with the streams opened for
  one arm and closed after it; which arm goes first flips every round, so drift on a shared
  machine cancels. Idle CPU is the server's CPU time over a quiet window divided by its length;
  throughput is a fixed number of `tools/call` requests (2026-07-28, `get_item`) from a few
  keep-alive connections. Figures are medians over rounds.
- Every loop is bounded by a count and every wait by a timeout.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from _http import (
    DEFAULT_STACK,
    BenchmarkError,
    Connection,
    Pools,
    Process,
    http_request,
    send_batch,
    uvicorn_process,
)

STATELESS_VERSION: Final = "2026-07-28"
APP_FACTORY: Final = "bench_app:create_app"
START_TIMEOUT_S: Final = 60.0
OPEN_TIMEOUT_S: Final = 120.0  # to open every stream of one round
BATCH_TIMEOUT_S: Final = 120.0
OPENING_AT_ONCE: Final = 64  # streams being opened concurrently (the listen backlog is 2048)
CLIENTS: Final = 4  # the legitimate client's keep-alive connections
# After opening or closing the streams, before measuring: the server's own work on them ends.
SETTLE_S: Final = 1.0
HERE: Final = Path(__file__).resolve().parent
META: Final = {
    "io.modelcontextprotocol/protocolVersion": STATELESS_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
}


def stateless(port: int, method: str, params: dict[str, Any], extra: dict[str, str] | None = None) -> bytes:
    """A 2026-07-28 request with its routing headers."""
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": STATELESS_VERSION,
        "mcp-method": method,
        **(extra or {}),
    }
    if "name" in params:
        headers["mcp-name"] = params["name"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    return http_request(port, "POST", "/mcp", headers, message)


# -- the idle streams ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Opened:
    """How many streams one round opened, and what the server refused."""

    count: int
    refused: dict[int, int]  # status -> count


@dataclass(slots=True)
class Streams:
    """Idle listen streams held open, and how many the server refused."""

    open: list[asyncio.StreamWriter] = field(default_factory=list)
    refused: dict[int, int] = field(default_factory=dict)  # status -> count

    def close(self) -> None:
        for writer in self.open:
            writer.close()
        self.open.clear()


async def open_streams(port: int, count: int) -> Streams:
    """Open `count` listen streams, each as another caller; read only their response headers."""
    streams = Streams()
    gate = asyncio.Semaphore(OPENING_AT_ONCE)
    listen = {"notifications": {"toolsListChanged": True}}

    async def open_one(index: int) -> None:
        async with gate:
            address = f"127.2.{index // 250}.{index % 250 + 1}"
            reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
            writer.write(stateless(port, "subscriptions/listen", listen, {"x-api-key": f"caller-{index}"}))
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head.split(b" ", 2)[1])
            if status == 200:
                streams.open.append(writer)  # never read again: the stream stays idle
            else:
                streams.refused[status] = streams.refused.get(status, 0) + 1
                writer.close()

    async with asyncio.timeout(OPEN_TIMEOUT_S), asyncio.TaskGroup() as group:
        for index in range(count):
            group.create_task(open_one(index))
    return streams


# -- the measures ----------------------------------------------------------------------------


@dataclass(slots=True)
class Arm:
    """What one arm measured, one value per round."""

    idle_cpu: list[float] = field(default_factory=list)  # % of one core
    throughput: list[float] = field(default_factory=list)  # tool calls per second
    cpu_per_call: list[float] = field(default_factory=list)  # µs of server CPU


async def idle_cpu(process: Process, window_s: float) -> float:
    """The server's CPU use over a quiet window, in % of one core."""
    before, started = process.cpu_seconds(), time.perf_counter()
    await asyncio.sleep(window_s)  # the quiet window itself: nothing is sent
    return 100 * (process.cpu_seconds() - before) / (time.perf_counter() - started)


async def measure_arm(arm: Arm, process: Process, connections: list[Connection], options: argparse.Namespace) -> None:
    call = stateless(process.port, "tools/call", {"name": "get_item", "arguments": {"item_id": 42, "q": "hello"}})
    arm.idle_cpu.append(await idle_cpu(process, options.idle_seconds))
    batch = await send_batch(process, connections, [call] * CLIENTS, options.requests, 200, "get_item", BATCH_TIMEOUT_S)
    arm.throughput.append(options.requests / batch.elapsed_s)
    arm.cpu_per_call.append(1e6 * batch.cpu_s / options.requests)


async def measure(process: Process, options: argparse.Namespace) -> tuple[Arm, Arm, Opened]:
    pools = Pools()
    without, with_streams = Arm(), Arm()
    opened = Opened(0, {})
    try:
        connections = await pools.get(process, CLIENTS)
        call = stateless(process.port, "tools/call", {"name": "get_item", "arguments": {"item_id": 1}})
        await send_batch(process, connections, [call] * CLIENTS, options.warmup, 200, "warm-up", BATCH_TIMEOUT_S)
        for round_number in range(options.rounds):
            streams_first = round_number % 2 == 1  # the order flips every round, so drift cancels
            if not streams_first:
                await measure_arm(without, process, connections, options)
            streams = await open_streams(process.port, options.streams)
            opened = Opened(len(streams.open), dict(streams.refused))
            await asyncio.sleep(SETTLE_S)
            await measure_arm(with_streams, process, connections, options)
            streams.close()
            await asyncio.sleep(SETTLE_S)
            if streams_first:
                await measure_arm(without, process, connections, options)
    finally:
        pools.close()
    return without, with_streams, opened


# -- the report ------------------------------------------------------------------------------


def render(without: Arm, with_streams: Arm, opened: Opened, options: argparse.Namespace) -> str:
    refused = ", ".join(f"{count} x HTTP {status}" for status, count in sorted(opened.refused.items())) or "none"
    header = f"| Measure | no streams | {opened.count} idle listen streams | ratio |"
    lines = [header, "|---|--:|--:|--:|"]
    for what, a, b, unit in (
        ("server CPU while idle", without.idle_cpu, with_streams.idle_cpu, "% of a core"),
        ("tools/call throughput, 4 clients", without.throughput, with_streams.throughput, "calls/s"),
        ("server CPU per tools/call", without.cpu_per_call, with_streams.cpu_per_call, "µs"),
    ):
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:.2f}x" if ma > 0 else "-"
        lines.append(f"| {what} | {ma:,.1f} {unit} | {mb:,.1f} {unit} | {ratio} |")
    lines.append(f"\nStreams asked for: {options.streams}; opened: {opened.count}; refused: {refused}.")
    return "\n".join(lines)


def commit() -> str:
    command = ["git", "rev-parse", "--short", "HEAD"]
    done = subprocess.run(command, cwd=HERE.parent, capture_output=True, text=True, timeout=10, check=False)
    return done.stdout.strip() or "unknown"


def parse_options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0] if __doc__ else None)
    parser.add_argument("--streams", type=int, help="idle listen streams to open (default 1000)")
    parser.add_argument("--rounds", type=int, help="measured rounds (default 4; 1 with --quick)")
    parser.add_argument("--requests", type=int, help="tool calls per arm and round (default 3000; 300 with --quick)")
    parser.add_argument("--idle-seconds", type=float, help="the quiet window per arm (default 5; 2 with --quick)")
    parser.add_argument("--warmup", type=int, default=300, help="warm-up tool calls")
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    options = parser.parse_args(argv)
    quick = options.quick
    options.streams = options.streams if options.streams is not None else 1000
    options.rounds = options.rounds if options.rounds is not None else (1 if quick else 4)
    options.requests = options.requests if options.requests is not None else (300 if quick else 3000)
    options.idle_seconds = options.idle_seconds if options.idle_seconds is not None else (2.0 if quick else 5.0)
    if options.streams < 1 or options.rounds < 1 or options.requests < CLIENTS or options.idle_seconds <= 0:
        parser.error(f"--streams and --rounds must be at least 1, --requests at least {CLIENTS}, --idle-seconds > 0")
    return options


def main(argv: Sequence[str] | None = None) -> int:
    options = parse_options(argv)
    started = time.monotonic()
    try:
        with uvicorn_process(sys.executable, APP_FACTORY, HERE, {}, "idle-streams") as process:
            process.wait_listening(time.monotonic() + START_TIMEOUT_S)
            without, with_streams, opened = asyncio.run(measure(process, options))
    except (BenchmarkError, OSError, EOFError, TimeoutError) as error:
        print(f"benchmark failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    command = " ".join([os.path.relpath(sys.executable), os.path.relpath(__file__), *(argv or sys.argv[1:])])
    print(f"`{command}`: {options.rounds} rounds; medians over rounds; uvicorn {DEFAULT_STACK}.\n")
    print(render(without, with_streams, opened, options))
    print(f"fastapi-mcp-routes {commit()}; {os.cpu_count()} CPUs; total run time {time.monotonic() - started:.0f} s.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
